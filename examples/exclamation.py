"""Storm's ExclamationTopology: words get "!!!" appended, twice.

    word (TestWordSpout, 10) --shuffle--> exclaim1 (ExclamationBolt, 3)
        --shuffle--> exclaim2 (ExclamationBolt, 2)

``nathan`` comes out of ``exclaim2`` as ``nathan!!!!!!``. The bolts anchor what they emit to
their input and ack it, so every word the spout emits is tracked through both bolts.

Run it for ten seconds on a local cluster::

    python examples/exclamation.py

or through the command line (``squall local examples/exclamation.py``), which uses `build` and
`conf`.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from typing import Any, TextIO

from squall import Bolt, Config, Fields, LocalCluster, Spout, StormTopology, TopologyBuilder

WORDS = ("nathan", "mike", "jackson", "golda", "bertels")
"""The words `TestWordSpout` picks from, as in Storm's."""


class TestWordSpout(Spout):
    """Emits a random word from `WORDS` every ``interval_secs`` (Storm's ``TestWordSpout``).

    Storm's sleeps 100 ms inside ``nextTuple``; this one checks the clock instead, so
    ``next_tuple`` never blocks the loop it shares with other executors. Each word is emitted
    with a message id so the topology's acking can be seen in its counts.

    Args:
        interval_secs: least time between two words of one task (0: one per ``next_tuple``).
        seed: seed of the word choice (default: random).
    """

    __test__ = False  # its name starts with "Test", but it is not a pytest test class

    def __init__(self, interval_secs: float = 0.1, seed: int | None = None) -> None:
        self.interval_secs = interval_secs
        self.seed = seed

    def declare_output_fields(self, declarer) -> None:
        """One field, ``word``."""
        declarer.declare(Fields("word"))

    def open(self, conf, context, collector) -> None:
        """Seed this task's word choice and emit the first word at once."""
        super().open(conf, context, collector)
        # Tasks of one seeded spout would otherwise emit the same sequence.
        self._rand = random.Random(None if self.seed is None else f"{self.seed}/{context.get_this_task_id()}")
        self._ids = itertools.count()
        self._next_emit = time.monotonic()

    def next_tuple(self) -> None:
        """Emit one word if ``interval_secs`` passed since the last one; else return at once."""
        now = time.monotonic()
        if now < self._next_emit:
            return
        self._next_emit = now + self.interval_secs
        self.collector.emit([self._rand.choice(WORDS)], next(self._ids))


class ExclamationBolt(Bolt):
    """Appends ``"!!!"`` to the word it receives; the emit is anchored to the input, then acked."""

    def declare_output_fields(self, declarer) -> None:
        """One field, ``word``."""
        declarer.declare(Fields("word"))

    def execute(self, tup) -> None:
        """Emit ``word + "!!!"`` anchored to ``tup``, and ack ``tup``."""
        self.collector.emit([tup.get_value(0) + "!!!"], tup)
        self.collector.ack(tup)


def build(spout: Spout | None = None) -> StormTopology:
    """The exclamation topology; ``spout`` replaces the ``word`` spout (default `TestWordSpout`)."""
    builder = TopologyBuilder()
    builder.set_spout("word", spout if spout is not None else TestWordSpout(), 10)
    builder.set_bolt("exclaim1", ExclamationBolt(), 3).shuffle_grouping("word")
    builder.set_bolt("exclaim2", ExclamationBolt(), 2).shuffle_grouping("exclaim1")
    return builder.create_topology()


conf = Config()
"""The topology's configuration: 3 workers, as Storm's example asks for, and a bound on words
in flight per spout task, which matters when ``interval_secs`` is 0."""
conf.set_num_workers(3)
conf.set_max_spout_pending(100)


def print_counts(info: dict[str, Any], out: TextIO | None = None) -> None:
    """Print the per-component counts of a `LocalCluster.get_topology_info` dict to ``out``
    (default: the current ``sys.stdout``)."""
    out = out if out is not None else sys.stdout
    cols = ("type", "executors", "tasks", "emitted", "transferred", "acked", "failed", "executed")
    print(f"topology {info['name']} ({info['status']}, up {info['uptime_secs']:.1f}s)", file=out)
    print(f"{'component':<20}" + "".join(f"{c:>12}" for c in cols), file=out)
    for cid, comp in sorted(info["components"].items()):
        print(f"{cid:<20}" + "".join(f"{comp[c]!s:>12}" for c in cols), file=out)
    for err in info.get("errors", []):
        print(f"error in {err['component']}: {err['error']}", file=out)


def main(run_secs: float = 10.0) -> None:
    """Run the topology on a `LocalCluster` for ``run_secs`` seconds and print its counts."""
    with LocalCluster() as cluster:
        cluster.submit_topology("exclamation", conf, build())
        time.sleep(run_secs)
        print_counts(cluster.get_topology_info("exclamation"))
        cluster.kill_topology("exclamation", wait_secs=0)


if __name__ == "__main__":
    main()
