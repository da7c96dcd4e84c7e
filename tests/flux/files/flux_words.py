"""Storm's flux-examples word count as Python classes, for the Flux files beside this module.

Each topology counts into a sink named by the YAML (module-level, so every task of an
in-process LocalCluster shares it): the words counted and the sentence ids acked."""

from __future__ import annotations

import threading
from collections import Counter

from squall import (
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    CustomStreamGrouping,
    Fields,
    Spout,
    StormTopology,
    TopologyBuilder,
)

_lock = threading.RLock()
COUNTS: dict[str, Counter] = {}
ACKED: dict[str, set] = {}
FAILED: dict[str, set] = {}
TASKS: dict[str, set] = {}


def reset(sink: str) -> None:
    """Empty ``sink`` (also made at a component's first use)."""
    with _lock:
        COUNTS[sink], ACKED[sink], FAILED[sink], TASKS[sink] = Counter(), set(), set(), set()


def _sink(sink: str) -> None:
    with _lock:
        if sink not in COUNTS:
            reset(sink)


class Sentences:
    """A component: a list of sentences (constructor argument), maybe repeated (property)."""

    def __init__(self, sentences):
        self.sentences = list(sentences)
        self.repeat = 1

    def all(self):
        """The sentences, repeated."""
        return self.sentences * self.repeat


class StopWords:
    """A component made by a factory method (Flux's ``factory``/``factoryArgs``)."""

    def __init__(self, words):
        self.words = frozenset(words)

    @classmethod
    def of(cls, words):
        """The factory."""
        return cls(words)


class SentenceSpout(Spout):
    """Emits each sentence of its sources once, its index as message id; records acks in ``sink``."""

    def __init__(self, sources, sink):
        self.sources = sources
        self.sink = sink

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("sentence"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.pending = [s for source in self.sources for s in source.all()]
        _sink(self.sink)
        self.next_id = 0

    def next_tuple(self):
        if self.next_id < len(self.pending):
            self.collector.emit([self.pending[self.next_id]], msg_id=self.next_id)
            self.next_id += 1

    def ack(self, msg_id):
        with _lock:
            ACKED[self.sink].add(msg_id)

    def fail(self, msg_id):
        with _lock:
            FAILED[self.sink].add(msg_id)


class SplitSentence(BasicBolt):
    """Splits at its separator (a config method), lower-cases if told (a property), drops stop words (a ref)."""

    def __init__(self, stop_words=None):
        self.stop_words = stop_words.words if stop_words is not None else frozenset()
        self.separator = " "
        self.lowercase = False

    def with_separator(self, separator):
        """``configMethods: withSeparator``."""
        self.separator = separator

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for word in tup.get_value(0).split(self.separator):
            word = word.lower() if self.lowercase else word
            if word and word not in self.stop_words:
                collector.emit([word])


class WordCounter(BasicBolt):
    """Counts words into ``sink``; records which task saw each word's key."""

    def __init__(self, sink):
        self.sink = sink

    def prepare(self, conf, context):
        self.task = context.get_this_task_id()
        _sink(self.sink)

    def execute(self, tup, collector):
        word = tup.get_value(0)
        with _lock:
            COUNTS[self.sink][word] += 1
            TASKS[self.sink].add((word, self.task))


class Unused(Bolt):
    """Not a BasicBolt nor a Spout: what a spout definition must not name."""


class FirstTask(CustomStreamGrouping):
    """A custom grouping: every tuple to the lowest target task (Storm's NGrouping with n = 1)."""

    def __init__(self, n):
        self.n = n

    def prepare(self, context, stream, target_tasks):
        self.targets = sorted(target_tasks)[:self.n]

    def choose_tasks(self, task_id, values):
        return self.targets


class ExistingTopology:
    """A topologySource: its getTopology(config) builds the word count in code."""

    def __init__(self, sink):
        self.sink = sink

    def get_topology(self, config) -> StormTopology:
        builder = TopologyBuilder()
        sentences = Sentences(config["sentences"])
        builder.set_spout("spout", SentenceSpout([sentences], self.sink))
        builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("spout")
        builder.set_bolt("count", WordCounter(self.sink), 2).fields_grouping("split", ["word"])
        return builder.create_topology()


WINDOWS: dict[str, list] = {}


class WindowSizes(BaseWindowedBolt):
    """Storm's flux-examples TestWindowBolt: records the size of each window it is given."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def execute(self, window):
        with _lock:
            WINDOWS.setdefault(self.sink, []).append([t.get_value(0) for t in window.get()])


JOINED: dict[str, list] = {}


class Rows(Spout):
    """Emits ``rows`` (lists of values) once each, under ``fields``, with message ids."""

    def __init__(self, fields, rows):
        self.fields, self.rows = list(fields), [list(r) for r in rows]

    def open(self, conf, context, collector):
        self.collector, self.i = collector, 0

    def next_tuple(self):
        if self.i < len(self.rows):
            self.collector.emit(self.rows[self.i], msg_id=self.i)
            self.i += 1

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(self.fields))


class RecordJoined(BasicBolt):
    """Records every tuple it gets (field name -> value) into ``JOINED[sink]``."""

    def __init__(self, sink):
        self.sink = sink

    def execute(self, tup, collector):
        with _lock:
            JOINED.setdefault(self.sink, []).append(dict(zip(tup.get_fields(), tup.get_values())))

    def declare_output_fields(self, declarer):
        pass
