"""Storm's test components (storm-client's ``org.apache.storm.testing``), which storm-starter and
Storm's own tests build topologies from: `TestWordSpout`, `TestWordCounter`, `TestGlobalCount`,
`TestAggregatesCounter`, `TestPlannerSpout`, `TestPlannerBolt`, `TestConfBolt`,
`AckEveryOtherBolt` and the grouping `NGrouping`."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._components import BasicBolt, Bolt, Spout
from .._config import Config
from .._fields import Fields
from .._grouping import CustomStreamGrouping

WORDS = ("nathan", "mike", "jackson", "golda", "bertels")
"""What `TestWordSpout` emits."""


class TestWordSpout(Spout):
    """Emits a random word of `WORDS` (field ``word``) every 100 ms, unanchored (Storm's sleeps
    100 ms in ``next_tuple``; this one emits nothing until the time has come, so the other
    executors of its worker go on). ``is_distributed`` False caps it at one task (Storm's
    ``topology.max.task.parallelism`` 1). ``seed``: the same words in every run (each task
    its own); ``interval_secs``: the time between two words."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, is_distributed: bool = True, seed: int | None = None, interval_secs: float = 0.1) -> None:
        self.is_distributed = is_distributed
        self.seed = seed
        self.interval_secs = interval_secs

    def open(self, conf, context, collector) -> None:
        """Seeds the word choice (with the task id: each task its own words)."""
        super().open(conf, context, collector)
        self._rand = random.Random(None if self.seed is None else f"{self.seed}/{context.get_this_task_id()}")
        self._next = time.monotonic()

    def next_tuple(self) -> None:
        """One word, once its 100 ms have passed."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval_secs
        self.collector.emit([self._rand.choice(WORDS)])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``word``."""
        declarer.declare(Fields("word"))

    def get_component_configuration(self) -> dict[str, Any] | None:
        """One task when not distributed."""
        return None if self.is_distributed else {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}


class TestWordCounter(BasicBolt):
    """Counts each word it gets (its first value) in this task and emits ``[word, count]``; a
    word in bytes is decoded first (Storm's ``TestWordBytesCounter``)."""

    __test__ = False

    def prepare(self, conf, context) -> None:
        """A fresh count."""
        super().prepare(conf, context)
        self.counts: Counter[Any] = Counter()

    def execute(self, tup, collector) -> None:
        """Counts the word; emits it with its count."""
        word = tup.get_value(0)
        if isinstance(word, bytes):
            word = word.decode()
        self.counts[word] += 1
        collector.emit([word, self.counts[word]])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``word``, ``count``."""
        declarer.declare(Fields("word", "count"))


class TestGlobalCount(Bolt):
    """Counts every tuple it gets and emits the running count (``global-count``), anchored; acks."""

    __test__ = False

    def prepare(self, conf, context, collector) -> None:
        """A fresh count."""
        super().prepare(conf, context, collector)
        self.count = 0

    def execute(self, tup) -> None:
        """One more."""
        self.count += 1
        self.collector.emit([self.count], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``global-count``."""
        declarer.declare(Fields("global-count"))


class TestAggregatesCounter(Bolt):
    """Keeps the latest count of each word (inputs ``[word, count]``) and emits their sum
    (``agg-global``), anchored; acks."""

    __test__ = False

    def prepare(self, conf, context, collector) -> None:
        """No counts yet."""
        super().prepare(conf, context, collector)
        self.counts: dict[Any, int] = {}

    def execute(self, tup) -> None:
        """The word's count replaced; the sum emitted."""
        self.counts[tup.get_value(0)] = tup.get_value(1)
        self.collector.emit([sum(self.counts.values())], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``agg-global``."""
        declarer.declare(Fields("agg-global"))


class TestPlannerSpout(Spout):
    """Emits nothing, declaring ``fields`` (default ``field1``, ``field2``): a spout to plan a
    topology around. ``is_distributed`` False caps it at one task."""

    __test__ = False

    def __init__(self, fields: Fields | list[str] | bool | None = None, is_distributed: bool = True) -> None:
        if isinstance(fields, bool):  # Storm's TestPlannerSpout(boolean isDistributed)
            self.is_distributed, names = fields, None
        else:
            self.is_distributed, names = is_distributed, fields
        self.fields = names if isinstance(names, Fields) else Fields(names or ["field1", "field2"])

    def next_tuple(self) -> None:
        """Nothing."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The fields given."""
        declarer.declare(self.fields)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """One task when not distributed."""
        return None if self.is_distributed else {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}


class TestPlannerBolt(Bolt):
    """Does nothing and declares nothing: a bolt to plan a topology around (it acks nothing)."""

    __test__ = False

    def execute(self, tup) -> None:
        """Nothing."""


class TestConfBolt(BasicBolt):
    """For an input ``[name]``, emits ``[name, value]``: the value of configuration key ``name``
    in this component's configuration (``conf``, ``value``). ``component_conf``: this
    component's own configuration (Storm's constructor argument)."""

    __test__ = False

    def __init__(self, component_conf: dict[str, Any] | None = None) -> None:
        self.component_conf = component_conf

    def prepare(self, conf, context) -> None:
        """Keeps the configuration."""
        super().prepare(conf, context)
        self.conf = conf

    def execute(self, tup, collector) -> None:
        """The key's value."""
        name = tup.get_value(0)
        collector.emit([name, self.conf.get(name)])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``conf``, ``value``."""
        declarer.declare(Fields("conf", "value"))

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The configuration given."""
        return self.component_conf


class AckEveryOtherBolt(Bolt):
    """Acks its first, third, fifth ... input and neither acks nor fails the others (they time
    out): a bolt for tests of replays."""

    def prepare(self, conf, context, collector) -> None:
        """The first input is acked."""
        super().prepare(conf, context, collector)
        self.state = True

    def execute(self, tup) -> None:
        """Ack every other input."""
        if self.state:
            self.collector.ack(tup)
        self.state = not self.state


class NGrouping(CustomStreamGrouping):
    """Sends every tuple to the ``n`` lowest task ids of the subscriber (Storm's test grouping)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def prepare(self, context, stream, target_tasks) -> None:
        """The ``n`` lowest targets."""
        super().prepare(context, stream, target_tasks)
        self.chosen = sorted(target_tasks)[:self.n]

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        """The same ``n`` tasks every time."""
        return self.chosen
