"""The Trident bolt executor fails a batch's tuples saying why where it knows: tuples of the
batch that did not all arrive, an attempt that a newer one replaced. Before, these were plain
fails: the batch's spout (a DRPC caller) heard only ``failed in [b] task 10``."""

from __future__ import annotations

from squall.trident.coordinator import TransactionAttempt
from squall.trident.executor import TridentBoltExecutor

from .test_executor import A1, SPEC, Context, Doubler, Recorder, coord, data


class Causes(Recorder):
    """The executor tests' collector, keeping each failure's cause."""

    def __init__(self) -> None:
        super().__init__()
        self.causes: list = []

    def fail_with(self, tup, cause) -> None:
        self.failed.append(tup)
        self.causes.append(cause)


def running() -> tuple[TridentBoltExecutor, Causes]:
    bolt, rec = TridentBoltExecutor(SPEC, Doubler()), Causes()
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    return bolt, rec


def test_a_batch_whose_tuples_did_not_all_arrive_fails_saying_how_many():
    bolt, rec = running()
    d1, c1, c2 = data(A1, "a"), coord(A1, 1), coord(A1, 2, task=2)  # task 2 says 2 came: none did
    for t in (d1, c1, c2):
        bolt.execute(t)
    assert rec.failed == [c2] and len(rec.causes) == 1  # main: a plain fail, no cause
    (cause,) = rec.causes
    assert (cause.kind, cause.component, cause.task) == ("fail", "b", 10)
    assert cause.message == ("Trident batch txid 1 attempt 0: its upstream tasks reported 3 tuples sent to this "
                             "task, 1 arrived")


def test_an_attempt_a_newer_one_replaced_fails_saying_so():
    bolt, rec = running()
    bolt.execute(data(TransactionAttempt(1, 1), "new"))
    old = data(A1, "old")
    bolt.execute(old)
    assert rec.failed == [old]
    assert rec.causes[0].message == "Trident batch txid 1 attempt 0: a newer attempt of it is under way here"


class Counting(Context):
    """The executor tests' context, counting the look-ups of who this task is."""

    def __init__(self) -> None:
        self.lookups = 0

    def get_this_component_id(self):
        self.lookups += 1
        return super().get_this_component_id()

    def get_this_task_id(self):
        self.lookups += 1
        return super().get_this_task_id()


def test_a_reason_is_built_only_when_the_executor_fails_something():
    """Every input of a Trident bolt looked up its component and task for a failure's reason
    (two calls and a tuple, about 150 ns an input), whether or not anything failed."""
    bolt, rec, context = TridentBoltExecutor(SPEC, Doubler()), Causes(), Counting()
    bolt.prepare({"topology.message.timeout.secs": 30}, context, rec)
    context.lookups = 0
    inputs = [data(A1, "a"), data(A1, "b", task=2), coord(A1, 1), coord(A1, 1, task=2)]
    for t in inputs:
        bolt.execute(t)
    assert rec.acked == inputs and rec.failed == []
    assert context.lookups == 0  # main: 2 a tuple
    bolt.execute(data(TransactionAttempt(2, 1), "new"))
    old = data(TransactionAttempt(2, 0), "old")
    bolt.execute(old)  # a failure still names who failed it
    assert rec.failed == [old] and (rec.causes[0].component, rec.causes[0].task) == ("b", 10)


class RaisesAtFinish(Doubler):
    """The executor tests' body, whose finish_batch raises (a user's bug, not a FailedException)."""

    def finish_batch(self, batch) -> None:
        raise ValueError("no such key: 'x'")


def test_a_held_commit_fails_with_the_exception_that_failed_its_batch():
    """A committer holds its $commit until its batch can finish. When finishing it raised (not a
    FailedException), the held $commit was failed plain, before the engine failed the raising
    input with the exception: the $commit's tree (and the replay the master coordinator makes of
    it) said only ``failed in [b] task 10``. Now it says the exception, as a FailedException's
    batch does."""
    from squall import Fields
    from squall._tuple import Source, Tuple
    from squall.trident.executor import BoltSpec

    spec = BoltSpec(inputs=SPEC.inputs, outputs=SPEC.outputs, committer=True)
    bolt, rec = TridentBoltExecutor(spec, RaisesAtFinish()), Causes()
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    commit = Tuple([A1], Source("$mastercoord-bg0", "$commit", 5, Fields("tx")))
    bolt.execute(commit)  # before the counts: held
    bolt.execute(coord(A1, 0))
    try:
        bolt.execute(coord(A1, 0, task=2))  # the batch can finish: finish_batch raises
        raise AssertionError("finish_batch did not raise")
    except ValueError:
        pass  # the engine reports it and fails this input with it
    assert rec.failed == [commit]
    (cause,) = rec.causes  # main: a plain fail, no cause
    assert (cause.kind, cause.component, cause.task, cause.error, cause.message) == \
        ("exception", "b", 10, "ValueError", "no such key: 'x'")
