"""A persistent window's results joined with a spout's tuples before a sink that writes in the
background, for the lineage tests (shipped to the workers by value):

`ReplayingSpout` (ids; an id is acked when the window holding it commits) -> `IdWindows` (a
persistent tumbling window of ``window_ms``; each window's ids as one result, unanchored as
Storm's) -> `Enrich` (keeps each result un-acked until the next tuple of `Pulse`, a reliable
spout, then emits the result anchored to both and acks them: the result's child is in the
pulse's tree) -> `LaterSink` (queues each input; its own thread writes the queue's ids to
``written-<task>.txt`` under ``test.out.dir`` ``delay`` seconds later, then acks them; or fails the first
``fail_first`` of them, as a write to a server that is down fails).

Every id acked by the spout was in a window the topology committed as fired; at-least-once
means each such id reaches ``written-*.txt``, however a worker dies."""

import threading
import time
from pathlib import Path

from squall import BaseStatefulWindowedBolt, Bolt, Duration, Fields, Spout, TopologyBuilder

from .counting import ReplayingSpout


class IdWindows(BaseStatefulWindowedBolt):
    """Emits each window's ids as one result (a persistent window: unanchored)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("ids"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        ids = sorted(t[0] for t in window.get())
        if ids:
            self.collector.emit([ids])


class Pulse(Spout):
    """A reliable spout of numbered pulses, one every ``every`` seconds."""

    def __init__(self, every=0.02):
        self.every = every

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("pulse"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.k, self.last = 0, 0.0

    def next_tuple(self):
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.k += 1
            self.collector.emit([self.k], self.k)


ANCHORS_AS = {
    "list": lambda result, pulse: [result, pulse],
    "set": lambda result, pulse: {result, pulse},
    "generator": lambda result, pulse: (a for a in (result, pulse)),
}
"""How `Enrich` may pass its two anchors: the engine takes any iterable of inputs."""


class Enrich(Bolt):
    """Keeps each window result until the next pulse, then emits it anchored to the result and
    the pulse (a join of a window's results with a spout's stream; the anchors passed as
    ``anchors_as``, a key of `ANCHORS_AS`) and acks both."""

    def __init__(self, anchors_as="list"):
        self.anchors_as = anchors_as

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("ids"))

    def prepare(self, conf, context, collector):
        self.collector, self.results = collector, []

    def execute(self, tup):
        if tup.source_component != "pulse":
            self.results.append(tup)
            return
        results, self.results = self.results, []
        anchored = ANCHORS_AS[self.anchors_as]
        for r in results:
            self.collector.emit([r[0]], anchored(r, tup))
        for r in results:
            self.collector.ack(r)
        self.collector.ack(tup)


class LaterSink(Bolt):
    """Writes each input's ids ``delay`` seconds after it came, from a thread of its own (a sink
    that batches its writes), and acks it once written."""

    def __init__(self, delay=1.0, fail_first=0):
        self.delay, self.fail_first = delay, fail_first  # fail_first: so many inputs fail to be written

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.queue: list = []
        self.lock = threading.Lock()
        self.file = open(Path(conf["test.out.dir"]) / f"written-{context.get_this_task_id()}.txt", "a")  # noqa: SIM115
        threading.Thread(target=self._write, daemon=True).start()

    def execute(self, tup):
        with self.lock:
            self.queue.append((time.monotonic(), tup))

    def _write(self):
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            with self.lock:
                due = [t for at, t in self.queue if now - at >= self.delay]
                self.queue = [(at, t) for at, t in self.queue if now - at < self.delay]
            failed, due = due[:self.fail_first], due[self.fail_first:]
            self.fail_first -= len(failed)
            for t in due:
                self.file.write("".join(f"{i}\n" for i in t[0]))
            self.file.flush()
            for t in failed:  # the write failed (its server down): nothing written
                self.collector.fail(t)
            for t in due:
                self.collector.ack(t)


def written(out: Path) -> set:
    """The ids `LaterSink` wrote under ``out``."""
    ids = set()
    for f in out.glob("written-*.txt"):
        ids.update(int(x) for x in f.read_text().split())
    return ids


def lineage_topology(n=None, window_ms=300, delay=1.0, fail_first=0, anchors_as="list"):
    """The topology of the module docstring (``n`` None: an endless id spout; the sink fails
    its first ``fail_first`` inputs; `Enrich` passes its anchors as ``anchors_as``)."""
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(n), 1)
    b.set_spout("pulse", Pulse(), 1)
    b.set_bolt("windows", IdWindows().with_tumbling_window(Duration.of(window_ms)).with_persistence(), 1) \
        .shuffle_grouping("source")
    b.set_bolt("enrich", Enrich(anchors_as), 1).shuffle_grouping("windows").all_grouping("pulse")
    b.set_bolt("sink", LaterSink(delay, fail_first), 1).shuffle_grouping("enrich")
    return b.create_topology()
