"""Storm's LinearDRPCTopologyBuilder, CoordinatedBolt and batch bolts (squall.drpc,
squall.coordination): storm-starter's ReachTopology ported line by line answers many concurrent
calls, each right (checked against the tables directly); a batch that fails, raises or times out
fails its call with DRPCExecutionException, never a hang; and CoordinatedBolt's counting, driven
tuple by tuple, finishes an id only when every upstream task has reported and every tuple was
acked."""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import ClassVar

import pytest

import squall
from squall import BaseBatchBolt, BasicBolt, Bolt, Config, FailedException, Fields, LocalCluster
from squall._failure import TIMEOUT
from squall._tuple import Source, Tuple
from squall.coordination import (
    COORDINATED_STREAM_ID,
    BatchBoltExecutor,
    CoordinatedBolt,
    FinishedCallback,
    IdStreamSpec,
    SourceArgs,
    TimeoutCallback,
)
from squall.drpc import DRPCExceptionType, DRPCExecutionException, LinearDRPCTopologyBuilder, LocalDRPC
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from ..examples.conftest import load_example
from .calls import HANG_GUARD, guarded


@pytest.fixture(scope="module")
def reach():
    return load_example("storm_starter/reach")


def test_names_are_where_a_storm_user_looks():
    import squall.coordination
    import squall.drpc

    assert squall.BaseBatchBolt is squall.coordination.BaseBatchBolt
    assert squall.IBatchBolt is squall.coordination.IBatchBolt
    assert squall.FinishedCallback is squall.coordination.FinishedCallback
    assert squall.BatchOutputCollector is squall.coordination.BatchOutputCollector
    assert issubclass(squall.BaseBatchBolt, squall.IBatchBolt)
    assert {"LinearDRPCTopologyBuilder", "LinearDRPCInputDeclarer", "PrepareRequest", "JoinResult"} <= \
        set(squall.drpc.__all__)


def test_the_topology_is_storms(reach):
    """Storm's component ids and wiring: spout, prepare-request, bolt0..3 (coordinated), bolt4
    (JoinResult), bolt5 (ReturnResults); only the last bolt, a batch bolt, waits for the id stream."""
    topology = reach.construct().create_local_topology(LocalDRPC())
    comps = topology.components
    assert sorted(comps) == ["bolt0", "bolt1", "bolt2", "bolt3", "bolt4", "bolt5", "prepare-request", "spout"]
    inputs = {cid: {(src, stream): g.kind for (src, stream), g in spec.inputs.items()} for cid, spec in comps.items()}
    kinds = {c: {k: str(v) for k, v in i.items()} for c, i in inputs.items()}
    assert kinds["bolt0"] == {("prepare-request", "default"): "none"}
    assert kinds["bolt1"] == {("bolt0", "default"): "shuffle", ("bolt0", COORDINATED_STREAM_ID): "direct"}
    assert kinds["bolt3"] == {("bolt2", "default"): "fields", ("bolt2", COORDINATED_STREAM_ID): "direct",
                              ("prepare-request", "id"): "fields"}
    assert kinds["bolt4"] == {("bolt3", "default"): "fields", ("prepare-request", "ret"): "fields"}
    assert kinds["bolt5"] == {("bolt4", "default"): "none"}
    assert comps["bolt3"].obj.id_stream_spec.id == ("prepare-request", "id")
    assert comps["bolt2"].obj.id_stream_spec is None


def test_reach_answers_many_concurrent_calls_each_with_its_urls_reach(reach):
    """8 threads x 30 calls over the table's URLs and one it lacks (answers 16, 14, 7 and 0), on
    two workers: every call answered with its own URL's reach, as the tables give it."""
    urls = [*reach.TWEETERS_DB, "notaurl.com"]
    expected = {url: str(reach.reach(url)) for url in urls}
    assert expected == {"foo.com/blog/1": "16", "engineering.twitter.com/blog/5": "14",
                        "tech.backtype.com/blog/123": "7", "notaurl.com": "0"}
    threads, n = 8, 30
    answers: list[tuple[str, str]] = []
    lock = threading.Lock()
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        conf = Config()
        conf.set_num_workers(2)
        cluster.submit_topology("reach-drpc", conf, reach.construct().create_local_topology(drpc))

        def run(t):
            for i in range(n):
                url = urls[(t + i) % len(urls)]
                answer = drpc.execute("reach", url)
                with lock:
                    answers.append((url, answer))
        workers = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(HANG_GUARD)
        stats = drpc.stats()
    assert len(answers) == threads * n
    wrong = [(url, answer) for url, answer in answers if answer != expected[url]]
    assert wrong == []
    assert Counter(url for url, _ in answers) == {url: threads * n // len(urls) for url in urls}
    assert (stats.executed, stats.returned, stats.failed, stats.timed_out, stats.outstanding) == \
        (threads * n, threads * n, 0, 0, 0)


def test_reach_main_prints_storms_answers(reach, capsys):
    assert reach.main() == 0
    assert capsys.readouterr().out.splitlines() == [
        "Reach of foo.com/blog/1: 16", "Reach of engineering.twitter.com/blog/5: 14", "Reach of notaurl.com: 0"]


# --- failures: a batch that fails, raises or times out fails its call -------------------------


class Letters(BasicBolt):
    """[id, word] -> one [id, letter] per letter."""

    def execute(self, tup, collector):
        for letter in tup.get_string(1):
            collector.emit([tup.get_value(0), letter])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "letter"]))


class Distinct(BaseBatchBolt):
    """Per task: its distinct letters, as one sorted string. Fails the tuple of letter "F"
    (FailedException), raises on "R" in execute and on "Z" in finish_batch."""

    def __init__(self):
        self.letters = set()

    def prepare(self, conf, context, collector, id):
        self.collector, self.id = collector, id

    def execute(self, tup):
        letter = tup.get_string(1)
        if letter == "F":
            raise FailedException("no F")
        if letter == "R":
            raise RuntimeError("cannot take R")
        self.letters.add(letter)

    def finish_batch(self):
        if "Z" in self.letters:
            raise ValueError("Z in the batch")
        self.collector.emit([self.id, "".join(sorted(self.letters))])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "letters"]))


class Join(BaseBatchBolt):
    """The union of the partial strings; raises in finish_batch when it holds "Q"."""

    def __init__(self):
        self.letters = set()

    def prepare(self, conf, context, collector, id):
        self.collector, self.id = collector, id

    def execute(self, tup):
        self.letters |= set(tup.get_string(1))

    def finish_batch(self):
        if "Q" in self.letters:
            raise FailedException("no Q in the result")
        self.collector.emit([self.id, "".join(sorted(self.letters))])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "letters"]))


class HoldsH(Bolt):
    """A plain bolt (Storm's deprecated ``addBolt(IRichBolt)``): passes [id, letter] on,
    anchored, and never acks an "H": its request times out."""

    def execute(self, tup):
        if tup.get_string(1) == "H":
            return
        self.collector.emit(list(tup.values), tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "letter"]))


@pytest.fixture(scope="module")
def letters():
    """A linear DRPC topology: word -> letters -> (holds H) -> distinct per task -> joined."""
    builder = LinearDRPCTopologyBuilder("letters")
    builder.add_bolt(Letters(), 2)
    builder.add_bolt(HoldsH(), 2).shuffle_grouping()
    builder.add_bolt(Distinct(), 3).fields_grouping(Fields(["id", "letter"]))
    builder.add_bolt(Join(), 2).fields_grouping(Fields(["id"]))
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        conf = Config()
        conf.set_num_workers(2)
        conf.set_message_timeout_secs(2)  # the held tuple fails 2 to 4 s after its call
        cluster.submit_topology("letters", conf, builder.create_local_topology(drpc))
        yield drpc


def test_a_batch_bolt_answers_with_all_of_its_requests_tuples(letters):
    assert letters.execute("letters", "squall") == "alqsu"
    assert letters.execute("letters", "") == ""  # no tuple at all: every task finishes empty


@pytest.mark.parametrize("word, why", [
    ("aFb", "failed in [bolt2] task {}: FailedException: no F"),           # FailedException from execute
    ("aRb", "exception in [bolt2] task {}: RuntimeError: cannot take R"),  # another exception from execute
    ("aZb", "exception in [bolt2] task {}: ValueError: Z in the batch"),   # from finish_batch, a middle bolt
    ("aQb", "failed in [bolt3] task {}: FailedException: no Q in the result"),  # from the last finish_batch
    ("aHb", "timed out (topology.message.timeout.secs)"),                  # a tuple never acked
])
def test_a_failing_batch_fails_its_call_with_a_drpc_error_and_the_topology_goes_on(letters, word, why):
    """LocalDRPC's request timeout is 600 s: each error is the request's tree failing (at once, or
    at the 2 s message timeout for the held tuple), never a hang."""
    before = letters.stats()
    result, error = guarded(letters.execute, "letters", word)
    assert result is None and isinstance(error, DRPCExecutionException), (result, error)
    assert error.type is DRPCExceptionType.FAILED_REQUEST
    assert re.search(re.escape(why).replace(r"\{\}", r"\d+"), str(error)), str(error)  # why, from the bolt task
    assert letters.execute("letters", "abc") == "abc"  # the next call is answered
    after = letters.stats()
    assert (after.failed - before.failed, after.returned - before.returned, after.timed_out) == (1, 1, 0)


def test_the_last_bolt_must_declare_one_stream_of_two_fields():
    class Three(BasicBolt):
        def declare_output_fields(self, declarer):
            declarer.declare(Fields(["id", "a", "b"]))

    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(Three())
    with pytest.raises(squall.InvalidTopologyException, match="exactly two fields"):
        builder.create_remote_topology()
    with pytest.raises(squall.InvalidTopologyException, match="has no bolts"):
        LinearDRPCTopologyBuilder("f").create_remote_topology()


# --- CoordinatedBolt's counting, tuple by tuple ---------------------------------------------


class Context:
    def __init__(self, conf=None):
        self.tasks = {"up": [1, 2, 3], "next": [10, 11], "me": [5]}

    def get_this_targets(self):
        return {"default": {"next": None}, COORDINATED_STREAM_ID: {"next": None}}

    def get_component_tasks(self, component):
        return list(self.tasks.get(component, []))

    def get_this_component_id(self):
        return "me"

    def get_this_task_id(self):
        return 5


class Collector:
    """Records what the bolt did; a default-stream emit goes to task 10 or 11 by the count's parity."""

    def __init__(self):
        self.emitted, self.direct, self.acked, self.failed = [], [], [], []

    def emit(self, values, anchors=None, stream="default"):
        self.emitted.append((stream, values))
        return [10 + values[-1] % 2]

    def emit_direct(self, task, values, anchors=None, stream="default"):
        self.direct.append((task, stream, values))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        pass


class Summer(BaseBatchBolt):
    finished: ClassVar[list] = []  # what finish_batch saw, per id (the test's own process)

    def __init__(self):
        self.seen = []

    def prepare(self, conf, context, collector, id):
        self.collector, self.id = collector, id

    def execute(self, tup):
        self.seen.append(tup.get_value(1))

    def finish_batch(self):
        Summer.finished.append((self.id, sorted(self.seen)))
        self.collector.emit([self.id, len(self.seen)])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "n"]))


def data(task, id_, value):
    return Tuple([id_, value], Source("up", "default", task, Fields(["id", "v"])))


def coord(task, id_, count):
    return Tuple([id_, count], Source("up", COORDINATED_STREAM_ID, task, Fields(["id", "count"])))


def id_tuple(id_):
    return Tuple([id_], Source("prep", "id", 7, Fields(["request"])))


def coordinated(id_spec=None, timeout=30):
    Summer.finished = []
    bolt = CoordinatedBolt(BatchBoltExecutor(Summer()), {"up": SourceArgs.all()}, id_spec)
    out = Collector()
    bolt.prepare({"topology.message.timeout.secs": timeout}, Context(), out)
    return bolt, out


def test_an_id_finishes_when_every_upstream_task_reported_and_every_tuple_was_acked():
    bolt, out = coordinated()
    reports = [coord(1, 9, 2), coord(2, 9, 0)]
    for t in (data(1, 9, "a"), data(1, 9, "b"), *reports):
        bolt.execute(t)
    assert Summer.finished == []  # task 3 has not reported
    late = data(3, 9, "c")
    last = coord(3, 9, 1)
    bolt.execute(last)  # its count before its tuple (an ack after execute may finish an id)
    assert Summer.finished == [] and out.acked == [t for t in out.acked if t.source_stream == "default"]
    bolt.execute(late)
    assert Summer.finished == [(9, ["a", "b", "c"])]
    assert out.emitted == [("default", [9, 3])]
    # its own count per next task (the emit went to task 11), on the direct stream, anchored
    assert sorted(out.direct) == [(10, COORDINATED_STREAM_ID, [9, 0]), (11, COORDINATED_STREAM_ID, [9, 1])]
    assert {id(t) for t in [*reports, last]} <= {id(t) for t in out.acked}  # the held reports, acked
    assert len(out.acked) == 6 and out.failed == []


def test_the_last_bolt_waits_for_the_id_and_holds_it_not_the_counts():
    bolt, out = coordinated(IdStreamSpec.make_detect_spec("prep", "id"))
    for t in (data(1, 4, "x"), coord(1, 4, 1), coord(2, 4, 0), coord(3, 4, 0)):
        bolt.execute(t)
    assert Summer.finished == [] and len(out.acked) == 4  # counts acked at once here
    the_id = id_tuple(4)
    bolt.execute(the_id)
    assert Summer.finished == [(4, ["x"])]
    assert out.acked[-1] is the_id and out.failed == []


def test_a_failed_tuple_fails_the_held_reports_and_drops_the_batch():
    class FailsB(Summer):
        def execute(self, tup):
            if tup.get_value(1) == "b":
                raise FailedException("b")
            super().execute(tup)

    Summer.finished = []
    bolt = CoordinatedBolt(BatchBoltExecutor(FailsB()), {"up": SourceArgs.all()})
    out = Collector()
    bolt.prepare({}, Context(), out)
    held = coord(2, 3, 0)
    bolt.execute(held)
    bolt.execute(data(1, 3, "b"))
    assert held in out.failed and out.failed[-1].get_value(1) == "b"
    assert bolt.delegate._open == {}  # the failed batch is dropped
    later = coord(1, 3, 1)
    bolt.execute(later)  # as Storm's: a new track holds it (the request has failed already)
    assert later not in out.acked and Summer.finished == []


def test_an_unfinished_id_is_dropped_after_the_message_timeout():
    bolt, _ = coordinated(timeout=0.05)
    bolt.execute(data(1, 8, "a"))
    assert 8 in bolt.delegate._open
    # the expiry is checked as tuples come: keep one coming until id 8's batch is gone
    assert wait_until(lambda: bolt.execute(data(2, 99, "z")) or 8 not in bolt.delegate._open, 10)
    assert Summer.finished == []


class Causes(Collector):
    """A `Collector` that also records why it failed a tuple (squall's ``fail_with``)."""

    def __init__(self):
        super().__init__()
        self.causes = []

    def fail_with(self, tup, cause):
        self.failed.append(tup)
        self.causes.append(cause.kind)


def test_an_unfinished_id_expires_on_the_engines_clock_without_another_tuple():
    """Storm's TimeCacheMap expires on a cleaner thread of its own; here the engine's timer
    (squall_timers, on the clock it is handed) drops the id when no tuple ever comes again:
    its held report fails as a timeout and its batch is dropped, between the timeout (10 s)
    and 1.5 times it."""
    Summer.finished = []
    bolt = CoordinatedBolt(BatchBoltExecutor(Summer()), {"up": SourceArgs.all()})
    out = Causes()
    bolt.prepare({"topology.message.timeout.secs": 10}, Context(), out)
    clock = SimulatedClock(1000.0)
    [(period, expire)] = bolt.squall_timers(clock)
    assert period == 5.0  # Storm's: the expiration over (buckets - 1)
    held = coord(2, 8, 0)
    bolt.execute(data(1, 8, "a"))
    bolt.execute(held)
    clock.advance(9.9)
    expire()
    assert 8 in bolt.delegate._open and out.failed == []  # not yet due
    clock.advance(5.1)
    expire()  # 15 s after: no tuple came, the timer alone drops it
    assert 8 not in bolt.delegate._open
    assert out.failed == [held] and out.causes == [TIMEOUT]
    assert [t.values for t in out.acked] == [[8, "a"]]  # its data tuple, acked as it was executed
    assert Summer.finished == []
    bolt.execute(data(1, 9, "b"))  # a later id is tracked as before
    assert 9 in bolt.delegate._open


class HoldsAndHearsTimeouts(Bolt, TimeoutCallback):
    """Never acks (so its ids never finish); records each id it hears timed out in ``log``."""

    def __init__(self, log):
        self.log = log

    def execute(self, tup):
        pass

    def timeout_id(self, id):
        self.log.append(id)


def test_a_local_cluster_times_out_an_id_when_no_tuple_comes_after_it():
    """On a simulated clock: one request id, then nothing. Past 1.5 message timeouts the
    CoordinatedBolt's task has dropped it and told its bolt, on the engine's timer (before, the
    expiry waited for the task's next tuple, which never came)."""
    timed_out = SharedLog()
    feeder = FeederSpout(Fields(["id", "v"]))
    builder = squall.TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("coordinated", CoordinatedBolt(HoldsAndHearsTimeouts(timed_out))).shuffle_grouping("feed")
    conf = Config()
    conf.set_message_timeout_secs(30)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("expiry", conf, builder.create_topology())
        feeder.feed([77, "x"])
        assert wait_until(lambda: cluster.get_topology_info("expiry")["components"]["coordinated"]["executed"] == 1)
        cluster.advance_cluster_time(29)
        assert timed_out.items() == []
        cluster.advance_cluster_time(17)  # 46 s > 45 s: due (advance_cluster_time runs due timers)
        assert timed_out.items() == [77]


def test_join_result_expires_halves_on_the_engines_clock_without_another_tuple():
    from squall.drpc.linear import JoinResult

    bolt = JoinResult("prepare-request")
    out = Collector()
    bolt.prepare({"topology.message.timeout.secs": 4}, Context(), out)
    clock = SimulatedClock()
    [(period, expire)] = bolt.squall_timers(clock)
    assert period == 2.0
    orphan = Tuple([3, {"id": "3"}], Source("prepare-request", "ret", 7, Fields(["request", "return"])))
    bolt.execute(orphan)
    clock.advance(3.9)
    expire()
    assert out.failed == []
    clock.advance(2.1)
    expire()
    assert out.failed == [orphan] and len(bolt._returns) == 0


def test_finished_callback_is_called_for_a_plain_bolt_that_is_one():
    class Calls(Bolt, FinishedCallback):
        def prepare(self, conf, context, collector):
            super().prepare(conf, context, collector)
            self.finished = []

        def execute(self, tup):
            self.collector.ack(tup)

        def finished_id(self, id):
            self.finished.append(id)

    bolt = CoordinatedBolt(Calls())
    out = Collector()
    bolt.prepare({}, Context(), out)
    bolt.execute(data(1, 5, "a"))  # no sources: finished as soon as its tuple is acked
    assert bolt.delegate.finished == [5]
    assert sorted(out.direct) == [(10, COORDINATED_STREAM_ID, [5, 0]), (11, COORDINATED_STREAM_ID, [5, 0])]


def test_join_result_fails_and_drops_a_half_whose_other_half_never_comes():
    """A request that failed upstream sends JoinResult its return info but never its result:
    the half is failed and dropped once the message timeout has passed (Storm's JoinResult
    holds it for ever, a tuple leaked per failed request); a request whose halves both come is
    joined and both acked."""
    from squall.drpc.linear import JoinResult

    class Out(Collector):
        def emit(self, values, anchors=None, stream="default"):
            self.emitted.append((stream, values))
            return [12]
    bolt = JoinResult("prepare-request")
    out = Out()
    bolt.prepare({"topology.message.timeout.secs": 0.05}, Context(), out)

    def ret(id_):
        return Tuple([id_, {"host": "h", "port": 1, "id": str(id_)}],
                     Source("prepare-request", "ret", 7, Fields(["request", "return"])))

    def result(id_, value):
        return Tuple([id_, value], Source("bolt3", "default", 9, Fields(["id", "result"])))
    orphans = [ret(i) for i in range(100)]  # their results never come
    for t in orphans:
        bolt.execute(t)
    joined_ret, joined_result = ret(500), result(500, 42)
    bolt.execute(joined_ret)
    bolt.execute(joined_result)
    assert out.emitted == [("default", ["42", joined_ret.values[1]])]
    # the expiry is checked as tuples come: keep one coming until every orphan was failed
    assert wait_until(lambda: bolt.execute(ret(1000)) or all(any(f is t for f in out.failed) for t in orphans), 10)
    assert len(bolt._returns) <= 3 and len(bolt._results) == 0
    assert joined_ret in out.acked and joined_result in out.acked
    assert not any(f is joined_ret or f is joined_result for f in out.failed)
