"""LocalDRPC with Storm's manual DRPC topology (DRPCSpout -> a bolt -> ReturnResults) on a
LocalCluster: every request answered with its own result, failures and timeouts raised as
DRPCExecutionException of the right type, and the server's bookkeeping (RequestBook) with time
passed in."""

from __future__ import annotations

import pickle
import re
import threading

import pytest

import squall
import squall.trident.drpc
from squall import Bolt, Fields, LocalCluster, TopologyBuilder
from squall.drpc import DRPCExceptionType, DRPCExecutionException, DRPCSpout, LocalDRPC, ReturnResults
from squall.drpc.core import RequestBook, ReturnInfo

from ..conftest import wait_until
from .calls import HANG_GUARD, concurrent_answers, guarded



class Exclaim(Bolt):
    """``args + "!"``; fails the tuple of args starting with "fail", raises on "raise", and emits
    a non-string result for "number" (Storm's ManualDRPC's bolt, plus the failure cases)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["result", "return-info"]))

    def execute(self, tup):
        args, info = tup.values
        if args.startswith("fail"):
            self.collector.fail(tup)
            return
        if args.startswith("raise"):
            raise RuntimeError(f"cannot take {args}")
        result = 42 if args == "number" else args + "!"
        self.collector.emit([result, info], anchors=tup)
        self.collector.ack(tup)


class TickAwareExclaim(Exclaim):
    """`Exclaim` that counts the tick tuples it gets (in shared state) and skips them."""

    def __init__(self) -> None:
        from squall.testing._registry import SharedCounter
        self.ticks = SharedCounter()

    def execute(self, tup):
        if squall.is_tick_tuple(tup):
            self.ticks.incr()
            return
        super().execute(tup)


def manual_topology(drpc: LocalDRPC, spout_tasks: int = 1, bolt_tasks: int = 2):
    builder = TopologyBuilder()
    builder.set_spout("drpc", DRPCSpout("exclamation", drpc), spout_tasks)
    builder.set_bolt("exclaim", Exclaim(), bolt_tasks).shuffle_grouping("drpc")
    builder.set_bolt("return", ReturnResults(), 2).shuffle_grouping("exclaim")
    return builder.create_topology()


@pytest.fixture
def running():
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("manual-drpc", {"topology.workers": 2}, manual_topology(drpc, spout_tasks=2))
        yield drpc


def test_names_are_exported_where_api_md_says():
    assert squall.LocalDRPC is LocalDRPC and squall.DRPCExecutionException is DRPCExecutionException
    assert squall.trident.drpc.LocalDRPC is LocalDRPC
    assert squall.DRPCClient is squall.trident.drpc.DRPCClient


def test_every_request_gets_its_own_result(running):
    drpc = running
    n = 50
    results = [drpc.execute("exclamation", f"hello-{i}") for i in range(n)]
    assert results == [f"hello-{i}!" for i in range(n)]
    stats = drpc.stats()
    assert (stats.executed, stats.fetched, stats.returned, stats.failed, stats.timed_out, stats.outstanding) == \
        (n, n, n, 0, 0, 0)


def test_concurrent_requests_each_get_their_own_answer(running):
    drpc = running
    threads, n = 8, 25
    answers = concurrent_answers(lambda: drpc.execute, "exclamation", threads, n)
    assert len(answers) == threads * n
    assert all(result == args + "!" for args, result in answers.items())
    stats = drpc.stats()
    assert (stats.executed, stats.returned, stats.failed, stats.timed_out) == (threads * n, threads * n, 0, 0)


@pytest.mark.parametrize("args, why", [("fail-me", "failed"), ("raise-me", "cannot take raise-me"),
                                       ("number", "failed in [return]")])
def test_a_failed_tuple_fails_the_request_at_once(running, args, why):
    """The request's default timeout is 600 s: a FAILED_REQUEST (not SERVER_TIMEOUT) shows the
    spout's fail reached the server; the message says why the tuple failed."""
    drpc = running
    result, error = guarded(drpc.execute, "exclamation", args)
    assert result is None and isinstance(error, DRPCExecutionException)
    assert error.type is DRPCExceptionType.FAILED_REQUEST
    assert why in str(error)
    assert drpc.execute("exclamation", "after") == "after!"  # the topology goes on
    assert (drpc.stats().failed, drpc.stats().returned, drpc.stats().timed_out) == (1, 1, 0)


class BrokenModel(Exclaim):
    """`Exclaim` that cannot load what it needs: raises in ``prepare``."""

    def prepare(self, conf, context, collector):
        raise RuntimeError("cannot load the model file /models/x.bin")


class DeadFeed(squall.Spout):
    """A spout whose source is gone: raises in ``open``."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def open(self, conf, context, collector):
        raise OSError("the feed at /dev/feed is gone")

    def next_tuple(self):
        pass


@pytest.mark.parametrize("broken, where, says", [
    ("bolt", "[exclaim] task ", "RuntimeError: cannot load the model file /models/x.bin"),
    ("spout", "[feed] task ", "OSError: the feed at /dev/feed is gone")])
def test_a_request_to_a_crash_looping_topology_fails_soon_naming_the_component_and_error(broken, where, says):
    """A bolt that raises in prepare, or a spout of the topology that dies in open, kills its
    worker at each restart. execute waited out the whole drpc.request.timeout.secs (600 s by
    default) and then said no spout had asked for the function. It now fails as soon as the
    cluster saw the crash (FAILED_REQUEST, not SERVER_TIMEOUT), with the component and its error."""
    with LocalDRPC(request_timeout_secs=60) as drpc, LocalCluster() as cluster:
        builder = TopologyBuilder()
        builder.set_spout("drpc", DRPCSpout("exclamation", drpc))
        builder.set_bolt("exclaim", BrokenModel() if broken == "bolt" else Exclaim()).shuffle_grouping("drpc")
        builder.set_bolt("return", ReturnResults()).shuffle_grouping("exclaim")
        if broken == "spout":
            builder.set_spout("feed", DeadFeed())
        cluster.submit_topology("crashing", {}, builder.create_topology())
        for _ in range(2):  # one waiting for the crash, one while its worker is held (a crash loop)
            result, error = guarded(drpc.execute, "exclamation", "hello")
            assert result is None and isinstance(error, DRPCExecutionException)
            assert error.type is DRPCExceptionType.FAILED_REQUEST, error
            assert f"topology 'crashing', which serves it on this LocalCluster, crashed: {where}" in str(error)
            assert says in str(error)
        assert (drpc.stats().failed, drpc.stats().timed_out) == (2, 0)


def test_a_request_nobody_answers_times_out():
    with LocalDRPC(request_timeout_secs=0.2) as drpc:
        result, error = guarded(drpc.execute, "nobody-serves-this", "x")
        assert isinstance(error, DRPCExecutionException) and error.type is DRPCExceptionType.SERVER_TIMEOUT
        assert "drpc.request.timeout.secs" in str(error)
        assert drpc.stats().timed_out == 1 and drpc.stats().outstanding == 0


class Hold(Bolt):
    """A bolt waiting on a slow service: it holds every request's tuple, acking none."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["result", "return-info"]))

    def execute(self, tup):
        pass


def test_a_request_a_spout_took_and_the_topology_holds_times_out_saying_so():
    """Every call timed out saying only "Timed Out: 'slow' had no result within 1 s
    (drpc.request.timeout.secs)", whether or not a spout had taken it: a caller could not tell a
    topology holding the request (a slow bolt: it may still run) from one that never took it. Now
    the message names the spout task that took it and when, still SERVER_TIMEOUT."""
    n = 4
    with LocalDRPC(request_timeout_secs=1) as drpc, LocalCluster() as cluster:
        builder = TopologyBuilder()
        builder.set_spout("drpc", DRPCSpout("slow", drpc), 1)
        builder.set_bolt("hold", Hold(), 1).shuffle_grouping("drpc")
        builder.set_bolt("return", ReturnResults(), 1).shuffle_grouping("hold")
        cluster.submit_topology("slow", {"topology.message.timeout.secs": 60}, builder.create_topology())
        # the spout is up once it took a call (each warm-up call times out after 1 s)
        assert wait_until(lambda: guarded(drpc.execute, "slow", "warm-up")[1] is not None and
                          drpc.stats().fetched >= 1, 20)
        before = drpc.stats()
        errors = [guarded(drpc.execute, "slow", f"call {i}")[1] for i in range(n)]
        after = drpc.stats()
        assert (after.executed - before.executed, after.fetched - before.fetched,
                after.timed_out - before.timed_out, after.outstanding) == (n, n, n, 0)
    assert all(isinstance(e, DRPCExecutionException) and e.type is DRPCExceptionType.SERVER_TIMEOUT for e in errors)
    for error in errors:
        assert re.fullmatch(
            r"Timed Out: 'slow' had no result within 1 s \(drpc\.request\.timeout\.secs\): DRPC spout \[drpc\] "
            r"task \d+ took it (within 0\.01 s of|\d+\.\d\d s after) the call, and its topology neither returned a "
            r"result nor failed the request since \(a bolt still holds its tuple, whose tree fails at the "
            r"topology's topology\.message\.timeout\.secs; the topology may still run it\)", str(error)), str(error)


def test_shutdown_fails_waiting_requests_and_refuses_new_ones():
    drpc = LocalDRPC()
    out: list = []
    started = threading.Event()

    def run():
        started.set()
        try:
            drpc.execute("f", "x")
        except DRPCExecutionException as e:
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    started.wait()
    while drpc.stats().executed == 0:
        t.join(0.001)
    drpc.shutdown()
    t.join(HANG_GUARD)
    assert out and out[0].type is DRPCExceptionType.SERVER_SHUTDOWN
    with pytest.raises(DRPCExecutionException, match="Shutting Down"):
        drpc.execute("f", "y")


def test_a_copy_of_a_local_drpc_is_the_same_server():
    with LocalDRPC() as drpc:
        assert pickle.loads(pickle.dumps(drpc)) is drpc
    with pytest.raises(LookupError, match="not running"):
        pickle.loads(pickle.dumps(drpc))


def test_bad_arguments_are_named():
    with LocalDRPC() as drpc:
        with pytest.raises(TypeError, match="args of 'f' must be a string"):
            drpc.execute("f", 3)
        with pytest.raises(ValueError, match="must not be empty"):
            drpc.execute("", "x")
    with pytest.raises(ValueError, match="DRPCSpout"):
        DRPCSpout("")


# --- the book, with time passed in --------------------------------------------------------------------
class Heard:
    def __init__(self):
        self.outcomes = []

    def __call__(self, outcome):
        self.outcomes.append(outcome)


def test_book_fetches_each_function_in_order_and_answers_once():
    book = RequestBook(timeout_secs=10)
    heard = [Heard() for _ in range(3)]
    a1 = book.submit("a", "1", 0.0, heard[0])
    b1 = book.submit("b", "1", 0.0, heard[1])
    a2 = book.submit("a", "2", 0.0, heard[2])
    assert book.fetch("a") == a1 and book.fetch("a") == a2 and book.fetch("a") is None
    assert book.fetch("b") == b1
    assert book.result(a2.request_id, "two") and not book.result(a2.request_id, "again")
    assert book.fail(a1.request_id, "boom") and not book.result(a1.request_id, "late")
    assert heard[2].outcomes == [("two", None)]
    assert heard[0].outcomes[0].error.type is DRPCExceptionType.FAILED_REQUEST
    assert "boom" in str(heard[0].outcomes[0].error)
    assert not book.result("no-such-id", "x")
    with pytest.raises(TypeError, match="result must be a string"):
        book.result(b1.request_id, 4)


def test_book_times_out_at_the_deadline_and_forgets_unfetched_requests():
    book = RequestBook(timeout_secs=10)
    early, late = Heard(), Heard()
    r1 = book.submit("f", "1", 0.0, early)
    book.submit("f", "2", 5.0, late)
    assert book.deadline(r1.request_id) == 10.0
    assert book.expire(9.999) == 0 and early.outcomes == []
    assert book.expire(10.0) == 1
    assert early.outcomes[0].error.type is DRPCExceptionType.SERVER_TIMEOUT
    assert book.fetch("f").args == "2"  # the timed-out request left its queue
    assert book.expire(15.0) == 1 and late.outcomes[0].error.type is DRPCExceptionType.SERVER_TIMEOUT
    assert book.fetch("f") is None
    assert book.stats() == (2, 1, 0, 0, 2, 0)


def test_book_fails_what_a_spout_took_when_it_went_and_did_not_come_back():
    """A DRPC spout's worker killed: its connection closes (`detach`), and the requests it took
    fail a grace later (FAILED_REQUEST, naming the spout), not at drpc.request.timeout.secs; a
    spout that connects again within the grace (`attach`) keeps them, and requests of other
    spouts are not touched. Every request counted."""
    book = RequestBook(timeout_secs=600)
    heard = [Heard() for _ in range(5)]
    requests = [book.submit("f", str(i), 0.0, heard[i]) for i in range(5)]
    book.attach("spout A", grace=10.0)
    book.attach("spout B", grace=10.0)
    assert book.fetch("f", "spout A") == requests[0] and book.fetch("f", "spout A") == requests[1]
    assert book.fetch("f", "spout B") == requests[2]
    assert book.fetch("f", "spout C") == requests[3]  # a holder never attached: kept as before (no holder)
    assert book.result(requests[1].request_id, "one")  # A answered one of its two
    assert book.detach("spout A", now=100.0) == 110.0
    assert book.deadline(requests[0].request_id) == 110.0 and book.deadline(requests[2].request_id) == 600.0
    assert book.expire(109.9) == 0 and heard[0].outcomes == []
    assert book.expire(110.0) == 1
    error = heard[0].outcomes[0].error
    assert error.type is DRPCExceptionType.FAILED_REQUEST
    assert "lost with the DRPC spout that took it (spout A)" in str(error) and "within 10 s" in str(error)
    assert not book.result(requests[0].request_id, "too late")  # the spout's late answer is ignored
    # B goes and comes back within the grace: its request is still its own, answered
    assert book.detach("spout B", now=200.0) == 210.0
    book.attach("spout B", grace=10.0)
    assert book.expire(300.0) == 0 and book.result(requests[2].request_id, "two")
    # a spout with two connections goes only when both closed; one that took nothing leaves no trace
    book.attach("spout D", grace=10.0)
    book.attach("spout D", grace=10.0)
    assert book.fetch("f", "spout D") == requests[4]
    assert book.detach("spout D", now=400.0) is None
    assert book.deadline(requests[4].request_id) == 600.0
    assert book.detach("spout D", now=401.0) == 411.0
    assert book.expire(411.0) == 1 and heard[4].outcomes[0].error.type is DRPCExceptionType.FAILED_REQUEST
    book.attach("spout E")  # the default grace: Storm's message timeout
    assert book.detach("spout E", now=500.0) is None  # it took nothing: forgotten
    assert book._holders == {"spout B": book._holders["spout B"]}  # A, D, E forgotten; B still connected
    assert [len(h.outcomes) for h in heard] == [1, 1, 1, 0, 1]  # C's request waits for its answer or timeout
    assert book.stats() == (5, 5, 2, 2, 0, 1)


def test_return_info_is_storms_json_and_bad_ones_are_named():
    info = ReturnInfo("7", "drpc1.example", 3773)
    assert ReturnInfo.from_json(info.to_json()) == info
    for bad, why in [("{", "not JSON"), ("[1]", "JSON map"), ('{"id": 7, "host": "h", "port": 1}', "string id"),
                     (None, "JSON string")]:
        with pytest.raises(ValueError, match=why):
            ReturnInfo.from_json(bad)


def test_a_spout_without_local_drpc_on_a_local_cluster_says_what_to_do():
    builder = TopologyBuilder()
    builder.set_spout("drpc", DRPCSpout("f"))
    builder.set_bolt("return", ReturnResults()).shuffle_grouping("drpc")
    with LocalCluster() as cluster:
        cluster.submit_topology("no-drpc", {}, builder.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("no-drpc")["errors"], HANG_GUARD, 0.05)
        error = cluster.get_topology_info("no-drpc")["errors"][0]
    assert error["component"] == "drpc"
    assert "no LocalDRPC was given" in error["error"] and "pass a LocalDRPC to the DRPC spout" in error["error"]


def test_a_restarted_server_takes_no_result_meant_for_its_previous_run():
    # a topology still holds return-infos of the previous run's requests; their ids must not name
    # the new run's requests, or a late result answers a stranger's call
    before = RequestBook(timeout_secs=10)
    old = before.submit("f", "old caller's args", 0.0, Heard())
    after, stranger = RequestBook(timeout_secs=10), Heard()
    new = after.submit("f", "stranger's args", 0.0, stranger)
    assert new.request_id != old.request_id
    assert not after.result(old.request_id, "the old caller's result")
    assert stranger.outcomes == []


def test_return_results_skips_tick_tuples():
    """With ``topology.tick.tuple.freq.secs`` set for the whole topology, ReturnResults gets
    ticks too: it skips them (a tick is no result), instead of reporting an error and failing
    a tuple each tick; requests are answered as before."""
    exclaim = TickAwareExclaim()
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        builder = TopologyBuilder()
        builder.set_spout("drpc", DRPCSpout("exclamation", drpc))
        builder.set_bolt("exclaim", exclaim, 2).shuffle_grouping("drpc")
        builder.set_bolt("return", ReturnResults(), 2).shuffle_grouping("exclaim")
        # one worker: the return bolt's ticks fire in the same rounds of its loop as exclaim's
        cluster.submit_topology("ticking-drpc", {"topology.tick.tuple.freq.secs": 0.05}, builder.create_topology())
        assert [drpc.execute("exclamation", f"a{i}") for i in range(5)] == [f"a{i}!" for i in range(5)]
        assert wait_until(lambda: exclaim.ticks.value >= 10, 20)
        assert wait_until(lambda: cluster.is_idle("ticking-drpc"), 10, 0.001)  # their ticks drained
        info = cluster.get_topology_info("ticking-drpc")
        assert [drpc.execute("exclamation", f"b{i}") for i in range(5)] == [f"b{i}!" for i in range(5)]
    assert info["errors"] == []
    assert info["components"]["return"]["failed"] == 0
    assert (drpc.stats().returned, drpc.stats().failed) == (10, 0)
