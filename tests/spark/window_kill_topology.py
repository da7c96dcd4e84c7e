"""A topology for killing the Spark task's Python worker of a persistent window's task between a
window's fire and the next checkpoint (tests/spark/test_spark_host.py): a reliable spout of
numbered records (`Numbers`: id ``i`` at event time ``i * STEP`` ms, one every `STEP` ms, so
that every window has records whenever it ends), three persistent windows
(`WINDOWS`: event time, an event-time count, processing time) and a sink (`Rows`) that writes
each result before it acks it. Every window task notes each of its fires and checkpoint hooks,
with its pid, in ``fires-<component>.jsonl``; the processing-time window's task (``arrival``)
kills its own Spark task's Python worker (its parent) 20 ms after a fire that came 0.12 to 0.5 s
after a COMMIT (one of its fires, 300 ms apart, always does): before the next PREPARE (the
test's checkpoint interval is 0.8 s), once the spout's acks of that commit are through, and
only once the event-time window's task (in the same worker) has fired since its own last
PREPARE (`fired_since_prepare`). That one fires every 100 ms of watermark, but its first
window only a lag (1 s) after the spout's first record, and its checkpoints reach it at
their own time: timed from the `arrival` task's commit alone, a kill that came before it had
fired since its PREPARE (the first commit came early, or its task ran late under load) left
the test nothing to check in event time."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from squall import BaseStatefulWindowedBolt, Bolt, Count, Duration, Fields, Spout, TopologyBuilder
from tests.written import finished_lines

STEP = 2  # ms of event time between two ids
N = 1500
KILLED = "killed"  # the file the `arrival` task writes before it kills its worker
CLOSED = "closed"  # the file the spout writes when it emitted the record that closes the windows
WINDOWS = {
    "event": lambda b: b.with_tumbling_window(Duration.of(100)).with_timestamp_field("ts")
    .with_lag(Duration.of(1000)).with_watermark_interval(Duration.of(100)),
    "count": lambda b: b.with_tumbling_window(Count(50)).with_timestamp_field("ts")
    .with_lag(Duration.of(1000)).with_watermark_interval(Duration.of(100)),
    "arrival": lambda b: b.with_tumbling_window(Duration.of(300)),
}


def acked(out: Path) -> set[int]:
    """The ids the spout was told were acked."""
    return {int(x) for f in out.glob("acked-*.txt") for x in f.read_text().split()}


def rows(out: Path, prefix: str) -> list[dict]:
    """The JSON lines of ``<prefix>*.jsonl`` under ``out``."""
    return [json.loads(line) for f in out.glob(f"{prefix}*.jsonl") for line in finished_lines(f)]


def fired_since_prepare(out: Path, window: str, pid: int) -> bool:
    """Whether ``window``'s task in process ``pid`` has noted a COMMIT, and a fire since its last
    PREPARE (whose state no commit holds yet: killed now, it fires again)."""
    notes = [r for r in rows(out, f"fires-{window}") if r["pid"] == pid]
    hooks = [i for i, r in enumerate(notes) if r.get("hook") == "prepare"]
    return any(r.get("hook") == "commit" for r in notes) and bool(hooks) and \
        any("ids" in r for r in notes[hooks[-1]:])


class Numbers(Spout):
    """Emits ids 0 .. n-1 (``[id, id * STEP]``, message id ``id``), one every `STEP` ms, a failed
    one again, an acked one never (a restarted instance emits what was not acked); once all are
    acked, id ``n`` at a far timestamp, which closes every event-time window."""

    def __init__(self, n: int) -> None:
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        done = acked(self.dir)
        self.todo = [i for i in range(self.n) if i not in done][::-1]
        self.acked = len(done)
        self.out = open(self.dir / f"acked-{context.get_this_task_id()}.txt", "a")  # noqa: SIM115 (for the task's life)
        self.emits = open(self.dir / f"emitted-{context.get_this_task_id()}.txt", "a")  # noqa: SIM115
        self.closed = (self.dir / CLOSED).exists()
        self.started, self.sent = time.monotonic(), 0

    def next_tuple(self):
        if self.todo:
            if (time.monotonic() - self.started) * 1000 < self.sent * STEP:
                return
            self.sent += 1
            i = self.todo.pop()
            self.emits.write(f"{i}\n")
            self.emits.flush()
            self.collector.emit([i, i * STEP], i)
        elif not self.closed and self.acked >= self.n:
            self.closed = True
            (self.dir / CLOSED).write_text("")
            self.collector.emit([self.n, 10**9], self.n)

    def ack(self, msg_id):
        if msg_id < self.n:
            self.acked += 1
        self.out.write(f"{msg_id}\n")
        self.out.flush()

    def fail(self, msg_id):
        self.todo.append(msg_id)


class Ids(BaseStatefulWindowedBolt):
    """Emits ``[component, window end, ids]``; notes each fire and checkpoint hook (`_note`)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("window", "end", "ids"))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        self.name = context.get_this_component_id()
        self.log = open(self.dir / f"fires-{self.name}.jsonl", "a")  # noqa: SIM115 (for the task's life)
        self.fires = 0
        self.committed_at = None

    def _note(self, **row):
        self.log.write(json.dumps({"pid": os.getpid(), **row}) + "\n")
        self.log.flush()

    def init_state(self, state):
        self._note(hook="init")

    def pre_prepare(self, txid):
        self.committed_at = None
        self._note(hook="prepare", txid=txid)

    def pre_commit(self, txid):
        self.committed_at = time.monotonic()
        self._note(hook="commit", txid=txid)

    def execute(self, window):
        ids = [t[0] for t in window.get()]
        self._note(end=window.get_end_timestamp(), ids=ids)
        self.collector.emit([self.name, window.get_end_timestamp(), ids])
        self.fires += 1
        if self.name != "arrival" or self.fires < 2 or self.committed_at is None:
            return
        if not 0.12 <= time.monotonic() - self.committed_at <= 0.5:
            return
        if not fired_since_prepare(self.dir, "event", os.getpid()):
            return
        try:
            fd = os.open(self.dir / KILLED, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        parent = os.getppid()  # the Spark task's Python worker (squall.cluster.spark_task.run_watched)
        if b"pyspark" not in Path(f"/proc/{parent}/cmdline").read_bytes():
            raise RuntimeError(f"not in a Spark task's Python worker: parent {parent} left alone")
        threading.Timer(0.02, os.kill, (parent, signal.SIGKILL)).start()


class Rows(Bolt):
    """Writes each result to ``sink-<pid>.jsonl`` (flushed), then acks it."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.out = open(Path(conf["test.out.dir"]) / f"sink-{os.getpid()}.jsonl", "a")  # noqa: SIM115

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup):
        self.out.write(json.dumps({"window": tup[0], "end": tup[1], "ids": tup[2]}) + "\n")
        self.out.flush()
        self.collector.ack(tup)


def window_kill_topology(n: int = N):
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(n))
    sink = b.set_bolt("sink", Rows())
    for name, window in WINDOWS.items():
        b.set_bolt(name, window(Ids()).with_persistence()).global_grouping("numbers")
        sink.shuffle_grouping(name)
    return b.create_topology()
