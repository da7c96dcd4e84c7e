"""Storm's SlidingWindowTopology: a sliding-window sum, then a tumbling-window average of it.

    integer (RandomIntegerSpout) --shuffle--> slidingsum (SlidingWindowSumBolt, the last 30
        tuples every 10) --shuffle--> tumblingavg (TumblingWindowAvgBolt, every 3 sums)
        --shuffle--> printer (PrinterBolt)

``slidingsum`` keeps a running sum: each window adds its new tuples and subtracts the expired
ones, instead of summing the whole window. Its inputs are acked when they leave their last
window, and its sums are anchored to every tuple of their window, so a spout tuple completes
only when every sum it went into has left ``tumblingavg``'s window too: about 70 tuples are in
flight, hence ``topology.max.spout.pending`` 200 (squall checks it covers each count window).

`RandomIntegerSpout`, `SlidingWindowSumBolt` and `PrinterBolt` are storm-starter's, shared with
``sliding_tuple_ts.py`` (which imports them from here).

Run it for ten seconds on a local cluster::

    python examples/sliding_window.py

or through the command line (``squall local examples/sliding_window.py``), which uses `build`
and `conf`.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from typing import Any, TextIO

from squall import (BaseWindowedBolt, BasicBolt, Config, Count, Fields, LocalCluster, Spout, StormTopology,
                    TopologyBuilder)

DAY_MS = 24 * 60 * 60 * 1000


class RandomIntegerSpout(Spout):
    """Emits ``[value, ts, msgid]``: a random integer below 1000, the time in epoch ms minus
    one day (so event time is visibly not processing time), and a sequence number that is also
    the message id (storm-starter's ``RandomIntegerSpout``).

    Storm's sleeps 100 ms per tuple; this one checks the clock instead, so ``next_tuple``
    never blocks.

    Args:
        interval_secs: least time between two tuples of one task.
        seed: seed of the values (default: random).
    """

    def __init__(self, interval_secs: float = 0.1, seed: int | None = None) -> None:
        self.interval_secs = interval_secs
        self.seed = seed

    def declare_output_fields(self, declarer) -> None:
        """Fields ``value``, ``ts``, ``msgid``."""
        declarer.declare(Fields("value", "ts", "msgid"))

    def open(self, conf, context, collector) -> None:
        """Seed this task's values; the first tuple goes out at once."""
        super().open(conf, context, collector)
        self._rand = random.Random(None if self.seed is None else f"{self.seed}/{context.get_this_task_id()}")
        self._ids = itertools.count(1)
        self._next_emit = time.monotonic()

    def next_tuple(self) -> None:
        """Emit one tuple if ``interval_secs`` passed since the last one; else return at once."""
        now = time.monotonic()
        if now < self._next_emit:
            return
        self._next_emit = now + self.interval_secs
        msg_id = next(self._ids)
        self.collector.emit([self._rand.randrange(1000), int(time.time() * 1000) - DAY_MS, msg_id], msg_id)


class SlidingWindowSumBolt(BaseWindowedBolt):
    """Emits ``[sum]`` of the window's first field on each activation, kept incrementally from
    the new and expired tuples (storm-starter's ``SlidingWindowSumBolt``). The window is set by
    whoever makes it (``with_window``)."""

    def prepare(self, conf, context, collector) -> None:
        """Start the sum at 0."""
        super().prepare(conf, context, collector)
        self.sum = 0

    def execute(self, window) -> None:
        """Add the new values, subtract the expired ones, emit the sum (anchored to the window)."""
        self.sum += sum(t.get_value(0) for t in window.get_new())
        self.sum -= sum(t.get_value(0) for t in window.get_expired())
        self.collector.emit([self.sum])

    def declare_output_fields(self, declarer) -> None:
        """One field, ``sum``."""
        declarer.declare(Fields("sum"))


class TumblingWindowAvgBolt(BaseWindowedBolt):
    """Emits ``[avg]``, the integer mean of the window's first field (a tumbling window: every
    tuple counts once)."""

    def execute(self, window) -> None:
        """Average the whole window."""
        tuples = window.get()
        self.collector.emit([sum(t.get_value(0) for t in tuples) // len(tuples)])

    def declare_output_fields(self, declarer) -> None:
        """One field, ``avg``."""
        declarer.declare(Fields("avg"))


class PrinterBolt(BasicBolt):
    """Prints each input's values (storm-starter's ``PrinterBolt``)."""

    def execute(self, tup, collector) -> None:
        """Print ``tup``'s values and the component that sent it."""
        print(f"{tup.source_component}: {tup.values}", flush=True)


def make_builder(spout: Spout | None = None) -> TopologyBuilder:
    """The topology's builder, so a test can add components before creating it.

    Args:
        spout: the ``integer`` spout (default: a `RandomIntegerSpout`); its first field is summed.
    """
    builder = TopologyBuilder()
    builder.set_spout("integer", spout if spout is not None else RandomIntegerSpout(), 1)
    builder.set_bolt("slidingsum", SlidingWindowSumBolt().with_window(Count.of(30), Count.of(10)), 1) \
        .shuffle_grouping("integer")
    builder.set_bolt("tumblingavg", TumblingWindowAvgBolt().with_tumbling_window(Count.of(3)), 1) \
        .shuffle_grouping("slidingsum")
    builder.set_bolt("printer", PrinterBolt(), 1).shuffle_grouping("tumblingavg")
    return builder


def build(spout: Spout | None = None) -> StormTopology:
    """The sliding window topology (see `make_builder`)."""
    return make_builder(spout).create_topology()


conf = Config()
"""One worker, as Storm's; 200 tuples in flight per spout task (see the module docstring)."""
conf.set_num_workers(1)
conf.set_max_spout_pending(200)


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


def run(name: str, topology: StormTopology, topology_conf: Config, run_secs: float) -> None:
    """Run ``topology`` on a `LocalCluster` for ``run_secs`` seconds and print its counts."""
    with LocalCluster() as cluster:
        cluster.submit_topology(name, topology_conf, topology)
        time.sleep(run_secs)
        print_counts(cluster.get_topology_info(name))
        cluster.kill_topology(name, wait_secs=0)


def main(run_secs: float = 10.0) -> None:
    """Run the topology for ``run_secs`` seconds (a tuple per 100 ms: an average per 3 s)."""
    run("sliding-window", build(), conf, run_secs)


if __name__ == "__main__":
    main()
