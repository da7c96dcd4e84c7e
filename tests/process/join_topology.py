"""Components for the process-host JoinBolt test (shipped to the workers by value). They record
what they do in files under ``test.out.dir``."""

import json
import os
from pathlib import Path

from squall import Bolt, Fields, JoinBolt, Spout
from tests.written import finished_lines

K = 15  # uids
USERS = [[i % K, f"u{i}"] for i in range(45)]  # (uid, name): 3 users per uid
ORDERS = [[1000 + i, (i * 7) % (K + 3), i % 10] for i in range(72)]  # (oid, uid, price): uids 15..17 have no user


def pairs():
    """Every (uid, name, oid, price) of users joined to orders on uid."""
    return {(u, n, o, p) for u, n in USERS for o, ou, p in ORDERS if ou == u}


def _append(path: Path):
    return open(path, "a")


def lines(out: Path, pattern: str) -> list[str]:
    return [line for f in out.glob(pattern) for line in finished_lines(f)]


def acked(out: Path, kind: str) -> set[int]:
    """The row indexes of spout ``kind`` acked so far."""
    return {int(x) for x in lines(out, f"acked-{kind}.txt")}


class RowSpout(Spout):
    """Emits the rows of ``kind`` ("users" or "orders") with their index as message id, like a
    replayable source: a failed row is emitted again, an acked one is written to
    ``acked-<kind>.txt`` and never emitted again, even by a restarted instance. Each emit (a
    replay too) is written to ``emits-<kind>.txt``."""

    def __init__(self, kind):
        self.kind = kind
        self.rows = USERS if kind == "users" else ORDERS

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["uid", "name"] if self.kind == "users" else ["oid", "uid", "price"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        out = Path(conf["test.out.dir"])
        done = acked(out, self.kind)
        self.todo = [i for i in range(len(self.rows)) if i not in done]
        self.acks = _append(out / f"acked-{self.kind}.txt")
        self.emits = _append(out / f"emits-{self.kind}.txt")

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop(0)
            self.emits.write(f"{i}\n")
            self.emits.flush()
            self.collector.emit(list(self.rows[i]), i)

    def ack(self, msg_id):
        self.acks.write(f"{msg_id}\n")
        self.acks.flush()

    def fail(self, msg_id):
        self.todo.append(msg_id)


class RecordingJoin(JoinBolt):
    """A JoinBolt that writes its process id (``join-<task>.pid``) and each window's size
    (``windows-<task>.txt``)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        out = Path(conf["test.out.dir"])
        task = context.get_this_task_id()
        (out / f"join-{task}.pid").write_text(str(os.getpid()))
        self.windows = _append(out / f"windows-{task}.txt")

    def execute(self, window):
        self.windows.write(f"{os.getpid()} {len(window.get())}\n")
        self.windows.flush()
        super().execute(window)


class Sink(Bolt):
    """Writes each joined tuple it gets to ``joined-<task>.jsonl`` (flushed), then acks it."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.out = _append(Path(conf["test.out.dir"]) / f"joined-{context.get_this_task_id()}.jsonl")

    def execute(self, tup):
        self.out.write(json.dumps(tup.values) + "\n")
        self.out.flush()
        self.collector.ack(tup)
