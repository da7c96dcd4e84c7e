"""A self-paced spout behind a batching bolt before a stateful bolt, for the stall tests:
`PacedSpout` (ids 0..n-1, or endless as `ReplayingSpout`; at most ``window`` ids un-acked at a
time, a source that emits its next record only once earlier ones are acked) -> `Batcher` (a
plain bolt that keeps its inputs un-acked until it has ``size`` of them, or until a tick with
``on_tick``, then emits each anchored to its input and acks them all) -> `CountIds` (a stateful
bolt counting each id in its `KeyValueState`; `NotedCountIds` also writes each commit's txid
under ``test.out.dir``)."""

from pathlib import Path

from squall import Bolt, Config, Fields, TopologyBuilder, is_tick_tuple

from ..process.recovery_topology import STOP
from .counting import CountIds, ReplayingSpout


class PacedSpout(ReplayingSpout):
    """`ReplayingSpout` that keeps at most ``window`` ids in flight: it emits the next only once
    an earlier one was acked or failed."""

    def __init__(self, n=None, window=60):
        super().__init__(n)
        self.window = window

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.in_flight = 0

    def next_tuple(self):
        if self.in_flight < self.window:
            i = self.next_id()
            if i is not None:
                self.in_flight += 1
                self.emits.write(f"{i}\n")
                self.emits.flush()
                self.collector.emit([i], i)

    def ack(self, msg_id):
        self.in_flight -= 1
        super().ack(msg_id)

    def fail(self, msg_id):
        self.in_flight -= 1
        super().fail(msg_id)


class Batcher(Bolt):
    """Keeps its inputs un-acked until it has ``size`` of them (``on_tick``: until a tick tuple,
    every ``tick_secs``), then emits each id anchored to its input and acks the batch.

    ``drain_at_stop``: also flushes what it holds at a tick once the endless spout was told to
    stop (`STOP` under ``test.out.dir``), as a batching bolt flushes at the end of its input:
    else the last batch, short of ``size``, would wait for good."""

    def __init__(self, size=50, on_tick=False, tick_secs=1, drain_at_stop=False):
        self.size, self.on_tick, self.tick_secs, self.drain_at_stop = size, on_tick, tick_secs, drain_at_stop

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def get_component_configuration(self):
        ticks = self.on_tick or self.drain_at_stop
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.tick_secs} if ticks else None

    def prepare(self, conf, context, collector):
        self.collector, self.batch = collector, []
        self.stop = Path(conf["test.out.dir"]) / STOP

    def execute(self, tup):
        if is_tick_tuple(tup):
            if self.on_tick or self.stop.exists():
                self._flush()
            return
        self.batch.append(tup)
        if not self.on_tick and len(self.batch) >= self.size:
            self._flush()

    def _flush(self):
        batch, self.batch = self.batch, []
        for t in batch:
            self.collector.emit([t[0]], t)
        for t in batch:
            self.collector.ack(t)


class NotedCountIds(CountIds):
    """`CountIds` that appends each txid it commits to ``commits-<task>.txt`` under ``test.out.dir``."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        path = Path(conf["test.out.dir"]) / f"commits-{context.get_this_task_id()}.txt"
        self.commits = open(path, "a")  # noqa: SIM115 - open for the task's life, as the spouts' files

    def pre_commit(self, txid):
        self.commits.write(f"{txid}\n")
        self.commits.flush()


def commits(out: Path) -> int:
    """How many commits the `NotedCountIds` tasks writing under ``out`` made, all tasks together."""
    return sum(len(f.read_text().split()) for f in out.glob("commits-*.txt"))


def batching_topology(n, size=50, window=60, on_tick=False, counters=1):
    """The topology of the module docstring, ``counters`` `NotedCountIds` tasks as ``count``
    (``n`` None: an endless spout, whose last batch `Batcher` drains once it stopped)."""
    b = TopologyBuilder()
    b.set_spout("source", PacedSpout(n, window), 1)
    b.set_bolt("batch", Batcher(size, on_tick, drain_at_stop=n is None), 1).shuffle_grouping("source")
    b.set_bolt("count", NotedCountIds(), counters).fields_grouping("batch", ["id"])
    return b.create_topology()
