"""In a stateful topology, squall's wrappers fail tuples saying why: a `BasicBolt`'s
`FailedException` keeps its message (the `CheckpointTupleForwarder` dropped it: the dead letter
said only ``last: failed in [parse] task 2``), and the tuples a rollback fails say that the
state, or a window, rolled back (before: a plain fail, charged to the record with no word)."""

from __future__ import annotations

import json
import re

import pytest

from squall import BaseStatefulBolt, BasicBolt, Count, FailedException, Fields, LocalCluster, TopologyBuilder
from squall._tuple import Source, Tuple
from squall.external.files import FileSpout
from squall.state._bolt import StatefulBoltExecutor
from squall.state._windowed import StatefulWindowedBoltExecutor
from squall.state.checkpoint import COMMIT, INITSTATE, PREPARE, ROLLBACK
from squall.state.memory import HostMemory
from squall.testing._registry import SharedLog
from tests.conftest import wait_until
from tests.state.test_core import BoltCtx, Counter, cp
from tests.state.test_core import Recorder as PlainRecorder
from tests.state.test_windowed import WindowSums

LINES = ["1", "x", "3", "4", "y", "6", "7"]  # N = 7, K = 2 ("x", "y")


class Parse(BasicBolt):
    """The line as a number; one that is none fails, saying so."""

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields(["n"]))

    def execute(self, tup, collector) -> None:
        value = tup.values[0]
        if not value.isdigit():
            raise FailedException(f"not a number: {value!r}")
        collector.emit([int(value)])


class Keep(BaseStatefulBolt):
    """Adds each number to its state's total, and keeps it in ``log``."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def init_state(self, state) -> None:
        self.state = state

    def execute(self, tup) -> None:
        self.state.put("total", self.state.get("total", 0) + tup.values[0])
        self.log.append(tup.values[0])
        self.collector.ack(tup)


def test_a_basic_bolts_failed_exception_in_a_stateful_topology_reaches_the_dead_letter(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("".join(f"{x}\n" for x in LINES))
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=tmp_path / "local"))
    b.set_bolt("parse", Parse()).shuffle_grouping("lines")
    b.set_bolt("keep", Keep(log)).shuffle_grouping("parse")
    conf = {"topology.message.timeout.secs": 30, "topology.state.checkpoint.interval.ms": 100}
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("stateful", conf, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=30), "the file was not finished"
        cluster.kill_topology("stateful", wait_secs=0)
    assert sorted(set(log.items())) == [1, 3, 4, 6, 7]  # N - K (at least once: a rollback replays)
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert sorted(json.loads(d["record"])[0] for d in dead) == ["x", "y"]  # K, each once
    for d in dead:
        value = json.loads(d["record"])[0]
        # main: "failed 4 times; last: failed in [parse] task 2", the exception's message dropped
        assert re.fullmatch(rf"failed 4 times; last: failed in \[parse\] task \d+: FailedException: not a number: "
                            rf"'{value}'", d["reason"]), d["reason"]
        assert (d["cause"]["error"], d["cause"]["message"]) == ("FailedException", f"not a number: {value!r}")


class Recorder(PlainRecorder):
    """The state tests' collector, keeping each failure's cause too."""

    def __init__(self) -> None:
        super().__init__()
        self.causes: list = []

    def fail_with(self, t, cause) -> None:
        self.failed.append(t)
        self.causes.append(cause)


DATA = Source("spout", "default", 1, Fields("w"))


def test_the_tuples_a_rollback_fails_say_that_the_state_rolled_back():
    ex, rec = StatefulBoltExecutor(Counter()), Recorder()
    ex.prepare({"topology.name": "t"}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(cp(-1, INITSTATE))
    a, b = Tuple(["a"], DATA), Tuple(["b"], DATA)
    ex.execute(a)
    ex.execute(cp(0, PREPARE))
    ex.execute(b)
    ex.execute(cp(0, ROLLBACK))
    assert rec.failed == [a, b] and len(rec.causes) == 2  # main: plain fails, no cause
    for cause in rec.causes:
        # a rollback, not charged to the records' retry budgets (it was "fail", which is)
        assert (cause.kind, cause.component, cause.task, cause.record_caused) == ("rollback", "count", 3, False)
        assert cause.message == ("the state of [count] task 3 rolled back to its last commit (checkpoint "
                                 "rollback at txid 0): what this tuple changed in it was dropped, so it replays")


def test_a_prepare_before_the_state_is_initialized_fails_saying_so():
    ex, rec = StatefulBoltExecutor(Counter()), Recorder()
    ex.prepare({"topology.name": "t"}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(cp(3, PREPARE))
    (cause,) = rec.causes
    assert cause.message.startswith("checkpoint prepare at txid 3 before this task's state was initialized")


def test_the_tuples_a_stateful_windows_rollback_fails_say_that_the_windows_were_dropped():
    bolt = WindowSums().with_tumbling_window(Count(3))
    ex, rec = StatefulBoltExecutor(StatefulWindowedBoltExecutor(bolt)), Recorder()
    ex.prepare(dict(bolt.get_component_configuration()), BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    src = Source("values", "default", 1, Fields("v"))
    ex.execute(cp(-1, INITSTATE))
    held = [Tuple([i], src) for i in (4, 5)]
    for t in held:
        ex.execute(t)
    ex.execute(cp(0, ROLLBACK))
    assert rec.failed == held and len(rec.causes) == 2
    for cause in rec.causes:
        assert (cause.kind, cause.component, cause.task, cause.record_caused) == ("rollback", "count", 3, False)
        assert cause.message == ("the windows of [count] task 3 were dropped with its state's rollback to its last "
                                 "commit; the tuple replays to fill them again")


class RaisesOnX(Counter):
    """`Counter` that raises on the word "x", after counting it (as a parse that comes late)."""

    def execute(self, tup) -> None:
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        if tup[0] == "x":
            raise ValueError("not a word: 'x'")
        self.collector.emit([tup[0]], tup)
        self.collector.ack(tup)


@pytest.mark.parametrize("fail_fast", [False, True])
def test_an_input_that_waited_for_initstate_and_raises_fails_with_its_cause_not_the_checkpoint(fail_fast):
    """Inputs that arrive before INITSTATE wait, and INITSTATE's handler executes them. One that
    raises there was taken for the checkpoint's failure (Storm's processCheckpoint does the
    same): on main the checkpoint failed with "ValueError in [count] task 3", the input was
    neither failed nor charged (a timeout at best: never dead-lettered), and the inputs after it
    were never executed, to wait out the message timeout. Now it fails as an exception with its
    cause, INITSTATE is passed on, and the inputs after it are executed (or, fail-fast, the
    worker crashes once INITSTATE is passed on)."""
    ex, rec = StatefulBoltExecutor(RaisesOnX()), Recorder()
    ex.prepare({"topology.name": "t", "topology.bolt.fail.fast": fail_fast},
               BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    a, x, b = (Tuple([w], DATA) for w in ("a", "x", "b"))
    for t in (a, x, b):
        ex.execute(t)
    init = cp(-1, INITSTATE)
    if fail_fast:
        with pytest.raises(ValueError, match="not a word"):
            ex.execute(init)
    else:
        ex.execute(init)
    assert rec.failed == [x]
    (cause,) = rec.causes
    assert (cause.kind, cause.component, cause.task, cause.error, cause.message) == \
        ("exception", "count", 3, "ValueError", "not a word: 'x'")
    assert ("$checkpoint", [-1, INITSTATE], init) in rec.emitted and init in rec.acked  # passed on
    data = [values for stream, values, _ in rec.emitted if stream == "default"]
    if fail_fast:
        assert data == [["a"]] and rec.errors == []  # b fails with the worker; the crash is the report
    else:
        assert data == [["a"], ["b"]] and [str(e) for e in rec.errors] == ["not a word: 'x'"]


def test_an_execute_that_raises_leaves_the_state_as_before_it_and_the_bolt_goes_on():
    """What a raising ``execute`` changed is undone (a savepoint per call), what the inputs
    before it changed is kept, and the bolt is not fail-fast (on main it was: the crash's
    rollback was the only undo, and it dropped every other input's changes too)."""
    ex, rec = StatefulBoltExecutor(RaisesOnX()), Recorder()
    ex.prepare({"topology.name": "t"}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(cp(-1, INITSTATE))
    a, x, b = (Tuple([w], DATA) for w in ("a", "x", "b"))
    ex.execute(a)
    with pytest.raises(ValueError, match="not a word"):  # the engine fails x with its cause, reports it
        ex.execute(x)
    assert not ex.squall_fail_fast
    ex.execute(b)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    assert dict(ex.state.committed()) == {"a": 1, "b": 1}
    assert a in rec.acked and b in rec.acked and rec.failed == []


class CommitsThenRaises(BaseStatefulBolt):
    """Puts its word, commits the state itself (Storm's ``State.commit()``), puts ``after``,
    then raises on ``x``."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        word = tup.values[0]
        self.state.put(word, 1)
        self.state.commit()
        self.state.put(("after", word), 1)
        if word == "x":
            raise ValueError(f"not a word: {word!r}")
        self.collector.ack(tup)


def test_what_an_execute_changed_after_committing_the_state_itself_is_undone_when_it_raises():
    """A bolt's own ``state.commit()`` writes the pending changes to the store at once: the
    savepoint cannot undo those, but must go on recording the changes after it. On main the
    commit closed the savepoint, so what the raising ``execute`` put after it stayed, to be
    committed at the next checkpoint and put again by the input's replay."""
    ex, rec = StatefulBoltExecutor(CommitsThenRaises()), Recorder()
    ex.prepare({"topology.name": "t"}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(cp(-1, INITSTATE))
    a, x = Tuple(["a"], DATA), Tuple(["x"], DATA)
    ex.execute(a)
    with pytest.raises(ValueError, match="not a word"):
        ex.execute(x)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    assert dict(ex.state.committed()) == {"a": 1, ("after", "a"): 1, "x": 1}  # x's own commit stays
    assert rec.acked.count(a) == 1 and rec.failed == []  # (the engine fails x)
