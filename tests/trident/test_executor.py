"""The Trident bolt executor: the pure `BatchTracker`, and `TridentBoltExecutor` driven by hand
with a recording collector (the whole topology runs in tests/trident/test_spout.py)."""

from __future__ import annotations

from typing import Any

import pytest

from squall import FailedException, Fields, TopologyBuilder
from squall._errors import EmitError
from squall._system import SYSTEM_COMPONENT, TICK_STREAM
from squall._tuple import Source, Tuple
from squall.engine.clock import SimulatedClock
from squall.trident.coordinator import TransactionAttempt
from squall.trident.executor import (
    BatchBody,
    BatchInfo,
    BatchOutput,
    BatchTracker,
    BoltSpec,
    Decision,
    InputSpec,
    TridentBoltExecutor,
    wire,
)

A1 = TransactionAttempt(1, 0)


# --- BatchTracker ------------------------------------------------------------------------------

def test_a_batch_finishes_when_every_upstream_task_reported_and_every_counted_tuple_arrived() -> None:
    tracker = BatchTracker(expected_reports=2, committer=False, timeout_secs=30)
    batch, replaced = tracker.open(A1, now=0.0)
    assert batch is not None and replaced is None
    assert tracker.data(batch) == Decision(ack_input=True)
    assert tracker.coord(batch, 2, "coord-a") == Decision(ack_input=True)  # nothing held
    assert batch.held is None
    assert tracker.data(batch) == Decision(ack_input=True)
    assert tracker.coord(batch, 0, "coord-b") == Decision(finish=True, ack_input=True)
    assert tracker.finished(batch) is None
    assert tracker.batches == {}


def test_a_bolt_after_a_committer_acks_the_reports_it_got_before_the_commit() -> None:
    """A DRPC stream's end hears from the return-info's bolt within the $batch tree, and from
    the state_query's bolt (a committer) only after the $commit, which the master emits once
    the $batch tree completed: the first report must not hold that tree open."""
    tracker = BatchTracker(expected_reports=2, committer=False, timeout_secs=30)
    batch, _ = tracker.open(A1, now=0.0)
    tracker.data(batch)
    assert tracker.coord(batch, 1, "from-return-info") == Decision(ack_input=True)
    assert tracker.batches[1] is batch and batch.held is None  # waits, holding no tuple of the tree
    tracker.data(batch)
    assert tracker.coord(batch, 1, "from-committer") == Decision(finish=True, ack_input=True)


def test_the_last_report_may_come_before_the_tuples_of_other_tasks_only_by_count() -> None:
    tracker = BatchTracker(expected_reports=1, committer=False, timeout_secs=30)
    batch, _ = tracker.open(A1, 0.0)
    tracker.data(batch)
    # the report says 2 but only 1 arrived: tuples of a task come before its report, so one was lost
    assert tracker.coord(batch, 2, "coord") == Decision(fail_input=True, reason=(
        "Trident batch txid 1 attempt 0: its upstream tasks reported 2 tuples sent to this task, 1 arrived"))
    assert batch.failed
    assert tracker.data(batch) == Decision(fail_input=True)  # later inputs of the attempt fail too


def test_a_committer_finishes_only_on_commit_and_holds_the_commit_not_the_reports() -> None:
    tracker = BatchTracker(expected_reports=1, committer=True, timeout_secs=30)
    batch, _ = tracker.open(A1, 0.0)
    tracker.data(batch)
    assert tracker.coord(batch, 1, "coord") == Decision(ack_input=True)  # the $batch tree may complete
    assert tracker.commit(batch, "commit") == Decision(finish=True, ack_input=False)
    assert tracker.finished(batch) == "commit"


def test_a_commit_before_the_counts_waits_for_them() -> None:
    tracker = BatchTracker(expected_reports=1, committer=True, timeout_secs=30)
    batch, _ = tracker.open(A1, 0.0)
    assert tracker.commit(batch, "commit") == Decision()
    tracker.data(batch)
    assert tracker.coord(batch, 1, "coord") == Decision(finish=True, ack_input=True)
    assert tracker.finished(batch) == "commit"


def test_a_task_without_upstream_trident_bolts_finishes_at_its_input() -> None:
    tracker = BatchTracker(expected_reports=0, committer=False, timeout_secs=30)
    batch, _ = tracker.open(A1, 0.0)
    assert tracker.data(batch) == Decision(finish=True, ack_input=True)


def test_a_newer_attempt_replaces_the_older_and_an_older_one_is_refused() -> None:
    tracker = BatchTracker(expected_reports=2, committer=True, timeout_secs=30)
    old, _ = tracker.open(A1, 0.0)
    tracker.data(old)
    tracker.coord(old, 1, "old-coord")
    tracker.commit(old, "old-commit")
    new, replaced = tracker.open(TransactionAttempt(1, 1), 1.0)
    assert replaced == "old-commit"  # to fail: its tree is dead
    assert new is not old and new.received_tuples == 0 and new.reported_tasks == 0
    assert tracker.open(A1, 2.0) == (None, None)
    assert tracker.open(TransactionAttempt(1, 1), 2.0)[0] is new


def test_batches_untouched_for_the_message_timeout_are_dropped() -> None:
    tracker = BatchTracker(expected_reports=2, committer=True, timeout_secs=30)
    b1, _ = tracker.open(A1, 0.0)
    tracker.commit(b1, "held-1")
    b2, _ = tracker.open(TransactionAttempt(2, 0), 20.0)
    assert tracker.expire(30.0) == []
    assert tracker.expire(30.5) == ["held-1"]
    assert list(tracker.batches) == [2]
    tracker.open(TransactionAttempt(2, 0), 40.0)  # touched
    assert tracker.expire(60.0) == []


def test_counts_of_emitted_tuples_are_kept_per_task_and_a_stale_batch_is_refused() -> None:
    tracker = BatchTracker(expected_reports=1, committer=False, timeout_secs=30)
    batch, _ = tracker.open(A1, 0.0)
    tracker.count_emitted(A1, [7, 8])
    tracker.count_emitted(A1, [7])
    assert batch.emitted == {7: 2, 8: 1}
    with pytest.raises(ValueError, match=r"TransactionAttempt\(txid=2"):
        tracker.count_emitted(TransactionAttempt(2, 0), [7])


# --- TridentBoltExecutor, by hand ------------------------------------------------------------------

class Recorder:
    """A collector recording what the executor does; data tuples go to tasks 21 and 22 in turn."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, list, Any]] = []
        self.direct: list[tuple[int, str, list, Any]] = []
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self.errors: list[Any] = []
        self._next = 0

    def emit(self, values, anchors=None, stream="default"):
        self.emitted.append((stream, values, anchors))
        self._next += 1
        return [21 if self._next % 2 else 22]

    def emit_direct(self, task_id, values, anchors=None, stream="default"):
        self.direct.append((task_id, stream, values, anchors))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(error)


class Context:
    """Tasks: upstream 'up' 1-2, this bolt 10, downstream 'down' 21-22."""

    def get_component_tasks(self, component):
        return {"up": [1, 2], "b": [10], "down": [21, 22]}.get(component, [])

    def get_this_targets(self):
        return {"$coord-bg0": {"down": object()}, "s2": {"down": object()}}

    def get_this_component_id(self):
        return "b"

    def get_this_task_id(self):
        return 10


class Doubler(BatchBody):
    """Emits each value twice on s2 at the end of the batch; fails the batch on 'bad'."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def prepare(self, conf, context, output: BatchOutput) -> None:
        self.output = output

    def init_batch(self, batch: BatchInfo) -> None:
        self.calls.append(("init", batch.attempt))
        batch.state["seen"] = []

    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        if values == ["bad"]:
            raise FailedException("bad value")
        batch.state["seen"].append(values[0])

    def finish_batch(self, batch: BatchInfo) -> None:
        self.calls.append(("finish", batch.attempt, list(batch.state["seen"])))
        for v in batch.state["seen"]:
            self.output.emit(batch, "s2", [v])
            self.output.emit(batch, "s2", [v])


SPEC = BoltSpec(inputs=(InputSpec("up", "s1", Fields("word")),), outputs=(("s2", Fields("word")),),
                committer=False)


def data(attempt, value, task=1):
    return Tuple([attempt, value], Source("up", "s1", task, Fields("$tx", "word")))


def coord(attempt, count, task=1):
    return Tuple([attempt, count], Source("up", "$coord-bg0", task, Fields("id", "count")))


def running(spec=SPEC, body=None):
    body = body or Doubler()
    bolt = TridentBoltExecutor(spec, body)
    rec = Recorder()
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    return bolt, body, rec


def test_the_executor_runs_a_batch_and_reports_per_task_counts_anchored_to_the_finishing_tuple() -> None:
    bolt, body, rec = running()
    d1, d2, c1, c2 = data(A1, "a"), data(A1, "b", task=2), coord(A1, 1), coord(A1, 1, task=2)
    for t in (d1, c1, d2, c2):
        bolt.execute(t)
    assert body.calls == [("init", A1), ("finish", A1, ["a", "b"])]
    assert [(s, v) for s, v, _ in rec.emitted] == [("s2", [A1, "a"])] * 2 + [("s2", [A1, "b"])] * 2
    assert all(anchor is c2 for _, _, anchor in rec.emitted)  # emitted in finish: the finishing tuple
    assert rec.direct == [(21, "$coord-bg0", [A1, 2], c2), (22, "$coord-bg0", [A1, 2], c2)]
    assert rec.acked == [d1, c1, d2, c2]  # each as it came: only a committer holds (its $commit)
    assert rec.failed == []
    assert rec.failed == []


def test_a_failed_exception_from_the_body_fails_the_batch() -> None:
    bolt, body, rec = running()
    c1, bad, d = coord(A1, 2), data(A1, "bad", task=2), data(A1, "x", task=2)
    bolt.execute(c1)
    bolt.execute(bad)
    assert rec.acked == [c1] and rec.failed == [bad]
    bolt.execute(d)
    assert rec.failed == [bad, d]
    assert not any(c[0] == "finish" for c in body.calls)
    # the replay, a new attempt, starts clean
    a2 = TransactionAttempt(1, 1)
    for t in (data(a2, "x"), coord(a2, 1), coord(a2, 0, task=2)):
        bolt.execute(t)
    assert body.calls[-1] == ("finish", a2, ["x"])


def test_a_committer_holds_the_commit_until_the_batch_finished() -> None:
    spec = BoltSpec(inputs=SPEC.inputs, outputs=SPEC.outputs, committer=True)
    bolt, body, rec = running(spec)
    commit = Tuple([A1], Source("$mastercoord-bg0", "$commit", 5, Fields("tx")))
    c1, c2 = coord(A1, 0), coord(A1, 0, task=2)
    bolt.execute(c1)
    bolt.execute(c2)
    assert rec.acked == [c1, c2] and body.calls == [("init", A1)]
    bolt.execute(commit)
    assert body.calls[-1] == ("finish", A1, [])
    assert rec.acked == [c1, c2, commit]
    assert [d[3] for d in rec.direct] == [commit, commit]


def test_a_batch_expires_on_the_engines_clock_not_on_real_time() -> None:
    """A committer's batch waiting for an upstream task that never reports, its $commit held, is dropped
    (the $commit failed, saying why) at the first tick once it was untouched past the message
    timeout, as the engine's clock reads it: a simulated clock moved 31 s expires it at once
    (it read time.monotonic(), which a simulated clock does not move: never, in a test)."""
    spec = BoltSpec(inputs=SPEC.inputs, outputs=SPEC.outputs, committer=True)
    bolt, body, rec = running(spec)
    clock = SimulatedClock()
    assert bolt.squall_timers(clock) == []
    causes: list[Any] = []
    rec.fail_with = lambda tup, cause: (causes.append(cause), rec.fail(tup))
    tick = Tuple([], Source(SYSTEM_COMPONENT, TICK_STREAM, -1, Fields([])))
    commit = Tuple([A1], Source("$mastercoord-bg0", "$commit", 5, Fields("tx")))
    clock.advance(100)
    for t in (coord(A1, 0), commit):  # upstream task 2 never reports
        bolt.execute(t)
    assert rec.failed == [] and list(bolt.tracker.batches) == [1]
    clock.advance(30)
    bolt.execute(tick)  # untouched for exactly the timeout: kept
    assert rec.failed == [] and list(bolt.tracker.batches) == [1]
    clock.advance(1)
    bolt.execute(tick)
    assert rec.failed == [commit] and bolt.tracker.batches == {}
    assert [c.message for c in causes] == [("Trident batch txid 1 attempt 0: untouched here for longer than "
                                            "topology.message.timeout.secs (30 s)")]
    assert ("finish", A1, []) not in body.calls


def test_an_old_attempt_arriving_after_a_newer_one_is_failed_unprocessed() -> None:
    bolt, body, rec = running()
    bolt.execute(data(TransactionAttempt(1, 1), "new"))
    old = data(A1, "old")
    bolt.execute(old)
    assert rec.failed == [old]
    assert body.calls == [("init", TransactionAttempt(1, 1))]


def test_the_spout_executor_bolt_finishes_each_batch_at_its_coordinator_tuple_and_hears_success() -> None:
    successes = []

    class Emitting(Doubler):
        def execute(self, batch, stream, values):
            assert stream == "$batch"
            for w in values[0]:
                self.output.emit(batch, "s2", [w])

        def finish_batch(self, batch):
            self.calls.append(("finish", batch.attempt))

        def success(self, attempt):
            successes.append(attempt)

    spec = BoltSpec(inputs=(InputSpec("$spoutcoord-spout", "$batch", Fields("metadata")),),
                    outputs=(("s2", Fields("word")),), committer=False)
    bolt, body, rec = running(spec, Emitting())
    start = Tuple([A1, ["a", "b", "c"]], Source("$spoutcoord-spout", "$batch", 3, Fields("tx", "metadata")))
    bolt.execute(start)
    assert body.calls == [("init", A1), ("finish", A1)]
    assert [v for _, v, _ in rec.emitted] == [[A1, "a"], [A1, "b"], [A1, "c"]]
    assert all(anchor is start for _, _, anchor in rec.emitted)
    assert rec.direct == [(21, "$coord-bg0", [A1, 2], start), (22, "$coord-bg0", [A1, 1], start)]
    assert rec.acked == [start]
    success = Tuple([A1], Source("$mastercoord-bg0", "$success", 5, Fields("tx")))
    bolt.execute(success)
    assert successes == [A1] and rec.acked == [start, success]


def test_wire_subscribes_the_system_streams() -> None:
    builder = TopologyBuilder()
    spout_spec = BoltSpec(inputs=(InputSpec("$spoutcoord-sp", "$batch", Fields("metadata")),),
                          outputs=(("s1", Fields("word")),), committer=False)
    committer = BoltSpec(inputs=(InputSpec("sp", "s1", Fields("word")),), outputs=(), committer=True)
    d1 = wire(builder.set_bolt("sp", TridentBoltExecutor(spout_spec, Doubler())), spout_spec, [])
    d2 = builder.set_bolt("b-0", TridentBoltExecutor(committer, Doubler())).shuffle_grouping("sp", "s1")
    wire(d2, committer, ["sp"])

    def subscriptions(declarer):
        return {tuple(stream): grouping.kind for stream, grouping in declarer._spec.inputs.items()}

    assert subscriptions(d1) == {("$spoutcoord-sp", "$batch"): "all", ("$mastercoord-bg0", "$success"): "all"}
    assert subscriptions(d2) == {("sp", "s1"): "shuffle", ("sp", "$coord-bg0"): "direct",
                                 ("sp", "$pack-s1"): "direct", ("$mastercoord-bg0", "$commit"): "all"}


# --- packs: a call's tuples for one task as one engine tuple ------------------------------------

class Router:
    """What the executor reads of the engine's router of one stream (squall.engine.routing)."""

    def __init__(self, direct_targets: dict[int, bool], choose=None) -> None:
        self.direct_targets = direct_targets
        self.choose = choose
        self.silent = not direct_targets
        self.nfields = 2
        self.emitted = 0
        self.transferred = 0


class PackingRecorder(Recorder):
    """A collector whose s2 goes to 'down' (tasks 21, 22 in turn) and which 'down' also reads packed."""

    def __init__(self) -> None:
        super().__init__()
        self.routers = {"s2": Router({21: False, 22: False}, self.emit_choice),
                        "$pack-s2": Router({21: True, 22: True})}

    def emit_choice(self, values):
        self._next += 1
        return [21 if self._next % 2 else 22]


def test_a_finish_sends_each_task_its_tuples_in_packs_of_at_most_1000() -> None:
    bolt, rec = TridentBoltExecutor(SPEC, Doubler()), PackingRecorder()
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    inputs = [data(A1, i) for i in range(1250)] + [coord(A1, 1250), coord(A1, 0, task=2)]
    for t in inputs:
        bolt.execute(t)
    last = inputs[-1]
    assert rec.emitted == []  # nothing went out tuple by tuple
    packs = [(task, stream, len(v[1]), anchor) for task, stream, v, anchor in rec.direct if stream == "$pack-s2"]
    # 2,500 tuples, alternating: each task gets 1,250 in two packs, anchored to the finishing tuple
    assert packs == [(21, "$pack-s2", 1000, last), (21, "$pack-s2", 250, last),
                     (22, "$pack-s2", 1000, last), (22, "$pack-s2", 250, last)]
    task21 = [w for task, stream, v, _ in rec.direct if stream == "$pack-s2" and task == 21 for w in v[1]]
    assert task21 == [[i] for i in range(1250)]  # each value twice, in turn: one copy to each task
    assert all(v[0] == A1 for _, _, v, _ in rec.direct)
    # the counts are of tuples, sent after the packs; the stream counts tuples too
    assert [d for d in rec.direct if d[1] == "$coord-bg0"] == [(21, "$coord-bg0", [A1, 1250], last),
                                                               (22, "$coord-bg0", [A1, 1250], last)]
    assert rec.routers["s2"].emitted == 2500 and rec.routers["s2"].transferred == 2500


def test_a_pack_counts_as_its_tuples_and_each_reaches_the_body() -> None:
    bolt, body, rec = running()
    pack = Tuple([A1, [["a"], ["b"], ["c"]]], Source("up", "$pack-s1", 1, Fields("$tx", "$values")))
    for t in (pack, coord(A1, 3), coord(A1, 0, task=2)):
        bolt.execute(t)
    assert body.calls[-1] == ("finish", A1, ["a", "b", "c"])
    # a count short of the pack's tuples fails the batch
    a2 = TransactionAttempt(2, 0)
    short = Tuple([a2, [["a"], ["b"]]], Source("up", "$pack-s1", 1, Fields("$tx", "$values")))
    for t in (short, coord(a2, 1), coord(a2, 0, task=2)):
        bolt.execute(t)
    assert not any(c[0] == "finish" and c[1] == a2 for c in body.calls) and rec.failed


class ManyDoubler(Doubler):
    """Doubler emitting its rows with one `BatchOutput.emit_many` call."""

    def finish_batch(self, batch: BatchInfo) -> None:
        self.calls.append(("finish", batch.attempt, list(batch.state["seen"])))
        self.output.emit_many(batch, "s2", [[v] for v in batch.state["seen"] for _ in range(2)])


def test_emit_many_packs_and_counts_its_rows_as_emit_does_each() -> None:
    """The same packs (tasks chosen row by row by the stream's router), $coord counts and stream
    counts from one emit_many call as from an emit per row; a row of the wrong width fails."""
    sent = {}
    for body in (Doubler(), ManyDoubler()):
        bolt, rec = TridentBoltExecutor(SPEC, body), PackingRecorder()
        bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
        for t in [data(A1, i) for i in range(1250)] + [coord(A1, 1250), coord(A1, 0, task=2)]:
            bolt.execute(t)
        sent[type(body).__name__] = ([d[:3] for d in rec.direct], rec.routers["s2"].emitted,
                                     rec.routers["s2"].transferred)
    assert sent["ManyDoubler"] == sent["Doubler"]
    assert sent["Doubler"][1:] == (2500, 2500)

    class Wrong(ManyDoubler):
        def finish_batch(self, batch: BatchInfo) -> None:
            self.output.emit_many(batch, "s2", [["a"], ["b", "c"]])

    bolt, rec = TridentBoltExecutor(SPEC, Wrong()), PackingRecorder()
    rec.routers["s2"].src = Source("b-1", "s2", 1, Fields("$tx", "word"))  # what the error names
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    with pytest.raises(EmitError, match=r"Expected 2 fields but got 3 fields \(component \[b-1\]"):
        for t in (data(A1, 1), coord(A1, 1), coord(A1, 0, task=2)):
            bolt.execute(t)
