"""Storm's StatefulTopology (storm-starter): running sums kept in checkpointed state.

    spout (RandomIntegerSpout) --shuffle--> partialsum (StatefulSumBolt, 1)
        --shuffle--> printer (PrinterBolt, 2) --shuffle--> total (StatefulSumBolt, 1)

``partialsum`` adds up the values and emits its running sum; ``total`` adds up those sums. Each
sum is kept in the bolt's `KeyValueState` under ``"sum"``: squall checkpoints it every
``topology.state.checkpoint.interval.ms`` and hands it back to ``init_state`` after a restart, so
the sums go on where the last commit left them (docs/state.md). Inputs are acked at the commit
after them, so a crash replays what was not committed: a sum never misses a value, and may count
one twice (Storm's at-least-once state).

Run it for forty seconds on a local cluster, as Storm's does::

    python examples/stateful_topology.py

or through the command line (``squall local examples/stateful_topology.py``), which uses `build`
and `conf`.
"""

from __future__ import annotations

import logging
import random
import time

from squall import BaseStatefulBolt, BasicBolt, Config, Fields, LocalCluster, Spout, StormTopology, TopologyBuilder

log = logging.getLogger("stateful_topology")


class RandomIntegerSpout(Spout):
    """Emits ``(value, ts, msgid)``: a random integer below 1000, a time stamp a day ago, and a
    message id counting up (Storm's ``RandomIntegerSpout``); at most one every ``interval_secs``.
    Storm's sleeps 100 ms in ``nextTuple``; this one checks the clock, so it never blocks."""

    def __init__(self, interval_secs: float = 0.1) -> None:
        self.interval_secs = interval_secs

    def declare_output_fields(self, declarer) -> None:
        """Fields ``value``, ``ts``, ``msgid``."""
        declarer.declare(Fields("value", "ts", "msgid"))

    def open(self, conf, context, collector) -> None:
        """Start the message ids at 0."""
        super().open(conf, context, collector)
        self.msg_id = 0
        self.next_emit = time.monotonic()
        self.rand = random.Random()

    def next_tuple(self) -> None:
        """Emit one value if ``interval_secs`` passed since the last one."""
        now = time.monotonic()
        if now < self.next_emit:
            return
        self.next_emit = now + self.interval_secs
        self.msg_id += 1
        ts = int(time.time() * 1000) - 24 * 60 * 60 * 1000
        self.collector.emit([self.rand.randrange(1000), ts, self.msg_id], self.msg_id)


class PrinterBolt(BasicBolt):
    """Logs each tuple and passes its values on (Storm's ``PrinterBolt``)."""

    def declare_output_fields(self, declarer) -> None:
        """One field, ``value``."""
        declarer.declare(Fields("value"))

    def execute(self, tup, collector) -> None:
        """Log ``tup``, emit its values (anchored: it is a `BasicBolt`)."""
        log.info("printer got %s", tup.values)
        collector.emit(list(tup.values))


class StatefulSumBolt(BaseStatefulBolt):
    """Adds up field ``value``; keeps the sum in its state under ``"sum"`` and emits it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def declare_output_fields(self, declarer) -> None:
        """One field, ``value``: the running sum."""
        declarer.declare(Fields("value"))

    def init_state(self, state) -> None:
        """Take the sum from the last commit (0 the first time)."""
        self.kv_state = state
        self.sum = state.get("sum", 0)
        log.info("%s: init_state, sum from saved state = %s", self.name, self.sum)

    def execute(self, tup) -> None:
        """Add the value, save the sum, emit it anchored, ack (it counts at the next commit)."""
        self.sum += tup["value"]
        self.kv_state.put("sum", self.sum)
        self.collector.emit([self.sum], tup)
        self.collector.ack(tup)


def build(spout: Spout | None = None) -> StormTopology:
    """The stateful topology; ``spout`` replaces `RandomIntegerSpout` (it must declare ``value``)."""
    builder = TopologyBuilder()
    builder.set_spout("spout", spout if spout is not None else RandomIntegerSpout())
    builder.set_bolt("partialsum", StatefulSumBolt("partial"), 1).shuffle_grouping("spout")
    builder.set_bolt("printer", PrinterBolt(), 2).shuffle_grouping("partialsum")
    builder.set_bolt("total", StatefulSumBolt("total"), 1).shuffle_grouping("printer")
    return builder.create_topology()


conf = Config()
"""Storm's example sets only ``debug`` off; the defaults checkpoint every second in memory."""
conf.set_debug(False)


def main(run_secs: float = 40.0) -> None:
    """Run on a `LocalCluster` for ``run_secs`` seconds, as Storm's does."""
    logging.basicConfig(level=logging.INFO)
    with LocalCluster() as cluster:
        cluster.submit_topology("test", conf, build())
        time.sleep(run_secs)
        cluster.kill_topology("test", wait_secs=0)


if __name__ == "__main__":
    main()
