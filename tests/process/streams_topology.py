"""Components for the process-host Streams API rebalance test. They record what they see in
files under ``test.out.dir`` (the test runs in another process than the workers)."""

import json
import os
import time
from pathlib import Path

from squall import Duration, Fields, Spout
from squall.streams import Pair, StreamBuilder, TumblingWindows, ValueMapper
from tests.written import finished_lines

from ..state.counting import ReplayingSpout

KEYS = 7
"""Ids are keyed by ``id % KEYS``."""


def _append_to(path):
    return open(path, "a")


class AppendTo:
    """A `for_each`/`peek` action writing each value as a JSON line to ``<test.out.dir>/<name>-<pid>.jsonl``
    (the directory given when the topology is built)."""

    def __init__(self, out: str, name: str) -> None:
        self.out = out
        self.name = name
        self.file = None

    def __call__(self, value) -> None:
        if self.file is None:
            self.file = _append_to(Path(self.out) / f"{self.name}-{os.getpid()}.jsonl")
        self.file.write(json.dumps(list(value)) + "\n")
        self.file.flush()

    def __getstate__(self):
        return {"out": self.out, "name": self.name, "file": None}


def lines(out: Path, name: str) -> list:
    """Every value the `AppendTo` actions of ``name`` wrote under ``out``."""
    return [json.loads(line) for f in sorted(out.glob(f"{name}-*.jsonl")) for line in finished_lines(f)]


class QuerySpout(Spout):
    """Once ``<test.out.dir>/query`` exists, emits each key 0 .. KEYS-1 once, reliably (a failed
    key is emitted again); records its acks in ``queries-acked-<task>.txt``."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("key"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        self.todo = None
        self.acks = _append_to(self.dir / f"queries-acked-{context.get_this_task_id()}.txt")

    def next_tuple(self):
        if self.todo is None and (self.dir / "query").exists():
            self.todo = list(range(KEYS))
        if self.todo:
            k = self.todo.pop()
            self.collector.emit([k], k)

    def ack(self, msg_id):
        self.acks.write(f"{msg_id}\n")
        self.acks.flush()

    def fail(self, msg_id):
        self.todo.append(msg_id)


class TimedIds(ReplayingSpout):
    """`ReplayingSpout` (an endless source of ids, a failed id emitted again, every emit in
    ``emitted-<task>.txt``) that also writes ``<id> <epoch secs>`` of each emit to
    ``emit-times-<task>.txt`` and of each ack to ``ack-times-<task>.txt`` (`times`). Once
    stopped, it emits the ids up to the number in ``<test.out.dir>/more`` (`emit_up_to`), if
    the test writes one, and stops again there."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        task = context.get_this_task_id()
        self.more = Path(conf["test.out.dir"]) / "more"
        self.emit_times = _append_to(Path(conf["test.out.dir"]) / f"emit-times-{task}.txt")
        self.ack_times = _append_to(Path(conf["test.out.dir"]) / f"ack-times-{task}.txt")

    def next_tuple(self):
        i = self.next_id()
        if i is not None:
            self.emits.write(f"{i}\n")
            self.emits.flush()
            self.emit_times.write(f"{i} {time.time()}\n")
            self.emit_times.flush()
            self.collector.emit([i], i)

    def next_id(self):
        i = super().next_id()
        if i is None and self.limit is not None and self.more.exists() and int(self.more.read_text()) > self.limit:
            i = self.limit
            self.limit = self.next = i + 1
            tmp = self.count_file.with_suffix(".tmp")
            tmp.write_text(str(self.limit))
            tmp.replace(self.count_file)
        return i

    def ack(self, msg_id):
        super().ack(msg_id)
        self.ack_times.write(f"{msg_id} {time.time()}\n")
        self.ack_times.flush()


def emit_up_to(out: Path, n: int) -> None:
    """Have the stopped `TimedIds` under ``out`` emit the ids up to ``n`` - 1."""
    tmp = out / "more.tmp"
    tmp.write_text(str(n))
    tmp.replace(out / "more")


def times(out: Path, what: str) -> list[tuple[int, float]]:
    """(id, epoch secs) of every emit (``what`` "emit") or ack ("ack") of `TimedIds`, in time order."""
    rows = [line.split() for f in out.glob(f"{what}-times-*.txt") for line in finished_lines(f)]
    return sorted(((int(i), float(t)) for i, t in rows), key=lambda r: r[1])


def _key(i):
    return Pair(i % KEYS, i)


def _append(acc, i):
    return [*acc, i]


def _concat(a, b):
    return [*a, *b]


def _add_len(total, ids):
    return total + len(ids)


def windowed_ids(out: str):
    """Ids (an endless `TimedIds`) -> 2 tasks in tumbling windows of 400 ms -> each key's
    ids of the window (`aggregate_by_key`, merged on 2 tasks after regrouping by key), written to
    ``windows-*.jsonl`` -> each key's running number of ids (`update_state_by_key`, 2 tasks), a
    `StreamState` that `QuerySpout`'s keys query, the answers written to ``answers-*.jsonl``."""
    builder = StreamBuilder()
    windows = builder.new_stream(TimedIds(None), ValueMapper(0), 1) \
        .repartition(2) \
        .window(TumblingWindows.of(Duration.of(400))) \
        .map_to_pair(_key) \
        .aggregate_by_key([], _append, _concat) \
        .peek(AppendTo(out, "windows"))
    state = windows.update_state_by_key(0, _add_len)
    builder.new_stream(QuerySpout(), ValueMapper(0), 1).state_query(state).for_each(AppendTo(out, "answers"))
    return builder.build()
