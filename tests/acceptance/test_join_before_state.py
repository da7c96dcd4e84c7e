"""A bolt that holds its inputs until more come (a join, Storm's ``SingleJoinBolt``; a bolt that
acks in batches) in front of a stateful bolt, under the default ``topology.max.spout.pending``
(null): the automatic limit must let enough tuples in flight for the first of them to complete,
although the stateful bolt acks only at its commits (docs/concepts.md#max-spout-pending).

Every record is counted: the ids each spout saw acked and failed (files under the test's
directory, so the process host's workers write them too), and the stateful bolt's committed
sum and count of the ids it got."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from squall import BaseStatefulBolt, Bolt, Config, Fields, Spout, TopologyBuilder

from ..conftest import wait_until

OUT_KEY = "test.out.dir"


class IdSpout(Spout):
    """Emits ids 0..n-1 (or n-1..0) with themselves as message ids; a failed id is emitted
    again. Appends each ack and fail to ``acked-<side>.txt`` and ``failed-<side>.txt``."""

    def __init__(self, side: str, n: int, reverse: bool = False) -> None:
        self.side, self.n, self.reverse = side, n, reverse

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", self.side]))

    def open(self, conf, context, collector):
        self.collector = collector
        out = Path(conf[OUT_KEY])
        # open for the spout's life (appends, flushed each): its worker may be another process
        self.acks = open(out / f"acked-{self.side}.txt", "a")  # noqa: SIM115
        self.fails = open(out / f"failed-{self.side}.txt", "a")  # noqa: SIM115
        ids = list(range(self.n))
        self.todo = ids if self.reverse else ids[::-1]  # popped from the end

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop()
            self.collector.emit([i, self.side], msg_id=i)

    def ack(self, msg_id):
        self.acks.write(f"{msg_id}\n")
        self.acks.flush()

    def fail(self, msg_id):
        self.fails.write(f"{msg_id}\n")
        self.fails.flush()
        self.todo.append(msg_id)


def _matched(held: dict[int, dict[str, object]], tup) -> list | None:
    """``tup`` kept in ``held`` until the other source's tuple of its id comes: then both, taken
    out of ``held`` (SingleJoinBolt's matching on ``id``); None while one side waits."""
    parts = held.setdefault(tup[0], {})
    parts[tup.get_source_component()] = tup
    if len(parts) < 2:
        return None
    del held[tup[0]]
    return list(parts.values())


class Join(Bolt):
    """Storm's SingleJoinBolt on ``id`` for two sources: keeps a side until the other side's
    tuple with the same id comes, then emits the id anchored to both and acks both."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held: dict[int, dict[str, object]] = {}

    def execute(self, tup):
        parts = _matched(self.held, tup)
        if parts:
            self.collector.emit([tup[0]], anchors=parts)
            for part in parts:
                self.collector.ack(part)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id"]))


class Batches(Bolt):
    """Holds its inputs and, once it has ``size``, emits each (anchored) and acks them all."""

    def __init__(self, size: int) -> None:
        self.size = size

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held: list = []

    def execute(self, tup):
        self.held.append(tup)
        if len(self.held) == self.size:
            for t in self.held:
                self.collector.emit([t[0]], anchors=[t])
                self.collector.ack(t)
            self.held = []

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id"]))


class SumIds(BaseStatefulBolt):
    """Sums and counts the ids it gets in its state; at each commit writes the committed
    ``sum count`` to ``committed-<task>.txt``."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.out = Path(conf[OUT_KEY]) / f"committed-{context.get_this_task_id()}.txt"
        self.prepared: tuple[int, int] | None = None

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.add(tup[0])
        self.collector.ack(tup)

    def add(self, id_):
        self.state.put("sum", self.state.get("sum", 0) + id_)
        self.state.put("count", self.state.get("count", 0) + 1)

    def pre_prepare(self, txid):
        self.prepared = (self.state.get("sum", 0), self.state.get("count", 0))

    def pre_commit(self, txid):
        if self.prepared is not None:
            tmp = self.out.with_suffix(".tmp")
            tmp.write_text(f"{self.prepared[0]} {self.prepared[1]}")
            tmp.replace(self.out)

    def declare_output_fields(self, declarer):
        pass


class StatefulJoin(SumIds):
    """A join that is itself the stateful bolt, fed by the spouts: holds each side until the
    other side's tuple with the same id comes, then adds the id to its state's ``sum`` and
    ``count`` and acks both; at each commit writes the committed ``sum count`` (as `SumIds`)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.held: dict[int, dict[str, object]] = {}

    def execute(self, tup):
        parts = _matched(self.held, tup)
        if parts:
            self.add(tup[0])
            for part in parts:
                self.collector.ack(part)


def _ids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _committed(out: Path) -> tuple[int, int]:
    """The stateful bolt's committed sum and count, over its tasks."""
    pairs = [tuple(int(x) for x in f.read_text().split()) for f in out.glob("committed-*.txt")]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def _worker_of(info: dict, component: str) -> set[str]:
    """The slots of the workers that run ``component``'s tasks."""
    tasks = {int(t) for t in info["components"][component]["task_stats"]}
    return {w["slot"] for w in info["workers"] for first, last in w["executors"]
            if tasks & set(range(first, last + 1))}


def _run(cluster, tmp_path: Path, name: str, builder: TopologyBuilder, sides: list[str], n: int,
         apart: tuple[str, str] | None = None) -> None:
    """Submits with the default max spout pending and asserts that every id of every side is
    acked once within 25 s (under the 30 s message timeout: before any could time out), none
    failed, and the state committed each id once. ``apart``: a spout and a stateful bolt that
    must run in two different workers (of 2)."""
    out = tmp_path / "out"
    out.mkdir()
    conf = Config()
    conf[OUT_KEY] = str(out)
    # commits every 250 ms (Storm's default is 1 s): the limit doubles after three intervals
    # without a completion or a stateful input, so each doubling waits 0.75 s, not 3 s
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 250
    if apart is not None:
        conf.set_num_workers(2)
    assert conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING) is None  # the default: automatic
    cluster.submit_topology(name, conf, builder.create_topology())
    if apart is not None:
        info = cluster.get_topology_info(name)
        spout, stateful = (_worker_of(info, c) for c in apart)
        assert len(spout) == len(stateful) == 1 and spout != stateful, (spout, stateful)

    def acked() -> int:
        return sum(len(set(_ids(out / f"acked-{s}.txt"))) for s in sides)
    done = wait_until(lambda: acked() == len(sides) * n and _committed(out)[1] == n, 25, 0.1)
    acks = {s: _ids(out / f"acked-{s}.txt") for s in sides}
    failed = {s: _ids(out / f"failed-{s}.txt") for s in sides}
    state = _committed(out)
    assert done, f"acked {acked()} of {len(sides) * n} ids, {sum(map(len, failed.values()))} failed, " \
                 f"committed (sum, count) {state}"
    for s in sides:
        assert sorted(acks[s]) == list(range(n)), s  # each id acked once
        assert failed[s] == [], s
    assert state == (sum(range(n)), n)


@pytest.mark.hosts("process")
def test_a_join_in_front_of_a_stateful_bolt_completes_under_the_default_max_spout_pending(cluster, tmp_path):
    """Two spouts of ids 0..299, one in the reverse order of the other, joined on the id before
    a stateful bolt. The join completes nothing until each side has more than half the ids in
    flight, and the automatic limit, which never doubled before a stateful bolt (its commits
    come on a timer), held each spout at 64: nothing acked, then every tuple timed out, and the
    limit dropped to 1 a task (1,000 ids a side: 0 of 2,000 acked in 100 s, 128 failed)."""
    n = 300  # each side needs more than 150 in flight: the limit doubles twice from 64
    builder = TopologyBuilder()
    builder.set_spout("left", IdSpout("left", n))
    builder.set_spout("right", IdSpout("right", n, reverse=True))
    builder.set_bolt("join", Join()).fields_grouping("left", Fields(["id"])).fields_grouping("right", Fields(["id"]))
    builder.set_bolt("sum", SumIds()).shuffle_grouping("join")
    _run(cluster, tmp_path, "join-state", builder, ["left", "right"], n)


def test_a_batching_bolt_in_front_of_a_stateful_bolt_completes_under_the_default_max_spout_pending(cluster, tmp_path):
    """A bolt that acks every 200 inputs before a stateful bolt: held at 64 tuples, it never
    had a batch (1,000 ids: 0 acked in 100 s, 64 failed)."""
    n = 400  # two batches: 256 in flight needed, two doublings from 64
    builder = TopologyBuilder()
    builder.set_spout("ids", IdSpout("ids", n))
    builder.set_bolt("batches", Batches(200)).shuffle_grouping("ids")
    builder.set_bolt("sum", SumIds()).shuffle_grouping("batches")
    _run(cluster, tmp_path, "batch-state", builder, ["ids"], n)


@pytest.mark.hosts("process")
def test_a_stateful_join_fed_by_the_spouts_completes_under_the_default_max_spout_pending(cluster, tmp_path):
    """The join is the stateful bolt itself, its inputs straight from two spouts of ids 0..299 in
    opposite orders. Checkpoints reach it every interval from the checkpoint spout, whatever
    the join waits for: counted among its inputs executed, they said that the stateful bolt was
    taking tuples, and the limit never doubled (500 ids a side: 0 of 1,000 acked in 25 s)."""
    n = 300
    builder = TopologyBuilder()
    builder.set_spout("left", IdSpout("left", n))
    builder.set_spout("right", IdSpout("right", n, reverse=True))
    builder.set_bolt("sum", StatefulJoin()).fields_grouping("left", Fields(["id"])) \
        .fields_grouping("right", Fields(["id"]))
    _run(cluster, tmp_path, "stateful-join", builder, ["left", "right"], n)


@pytest.mark.hosts("process")
def test_a_batching_bolt_in_front_of_a_stateful_bolt_in_another_worker_completes(cluster, tmp_path):
    """The same, with the stateful bolt in the other of 2 workers than the spout. Its spout's
    automatic limit did not know what the stateful bolt executed (`Worker.executed_by` saw only
    its own worker's tasks), never doubled, and held it at 64 tuples for good (30,000 ids on the
    process host: 0 acked in 90 s, 64 failed). The stateful bolts' workers now tell the others."""
    n = 400
    builder = TopologyBuilder()
    builder.set_spout("ids", IdSpout("ids", n))  # (the scheduler deals ids to one worker, batches and sum to the other)
    builder.set_bolt("batches", Batches(200)).shuffle_grouping("ids")
    builder.set_bolt("sum", SumIds()).shuffle_grouping("batches")
    _run(cluster, tmp_path, "batch-state-apart", builder, ["ids"], n, apart=("ids", "sum"))


class Chatter(Spout):
    """Emits ``[i, "chatter"]`` without a message id (unreliable, so no limit holds it), 200 a
    second, for as long as it runs."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "chatter"]))

    def open(self, conf, context, collector):
        self.collector = collector
        self.sent = 0
        self.start = time.monotonic()

    def next_tuple(self):
        if self.sent < 200 * (time.monotonic() - self.start):
            self.collector.emit([self.sent, "chatter"])
            self.sent += 1


class SumBatched(SumIds):
    """`SumIds` of the ids from ``batches`` only; the others it acks and leaves out."""

    def execute(self, tup):
        if tup.get_source_component() == "batches":
            self.add(tup[0])
        self.collector.ack(tup)


@pytest.mark.hosts("process")
def test_a_spout_behind_a_batching_bolt_completes_while_another_spout_feeds_the_stateful_bolt(cluster, tmp_path):
    """Two spouts into one stateful bolt, in one worker: ``chatter``'s straight, all along;
    ``ids``'s through a bolt that acks every 200. ``ids``'s limit looked at what the stateful
    bolt executed over all its inputs, which ``chatter`` kept moving: it never doubled, and
    ``ids`` was held at 64 for good (1,000 ids: 0 acked in 60 s, 64 failed, on LocalCluster and
    on the process host). Only the inputs that carry a spout's tuples count now (``batches``'s
    for ``ids``)."""
    n = 400
    builder = TopologyBuilder()
    builder.set_spout("chatter", Chatter())
    builder.set_spout("ids", IdSpout("ids", n))
    builder.set_bolt("batches", Batches(200)).shuffle_grouping("ids")
    builder.set_bolt("sum", SumBatched()).shuffle_grouping("chatter").shuffle_grouping("batches")
    _run(cluster, tmp_path, "chatter-state", builder, ["ids"], n)
