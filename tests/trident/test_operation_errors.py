"""What an operation that raises is reported as (`squall.trident.failures`): the operation (its
kind, the user's class and the name given with ``Stream.name``), the tuple it was given (values
cut to 200 characters, credentials masked), the batch's txid (not its attempt: each attempt's
error is the same text, one record counted by the engine); and the master coordinator's one report
that the topology is stalled once a txid failed three times in a row. Before, the error was the bare exception of the fused bolt
(``ValueError: invalid literal for int() with base 10: 'x'``) and nothing said it stalled."""

from __future__ import annotations

import pickle

import pytest

from squall import Fields
from squall._failure import EXCEPTION, FailureCause
from squall.trident import (
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    BaseQueryFunction,
    CombinerAggregator,
    FeederBatchSpout,
    MapFunction,
    TridentTopology,
)
from squall.trident.builtin import Count
from squall.trident.coordinator import BATCH_STREAM, COMMIT_STREAM, TransactionAttempt
from squall.trident.executor import BatchInfo, TridentBoltExecutor
from squall.trident.failures import STALL_FAILURES, TridentOperationError, operation_failed
from squall.trident.planner import plan
from squall.trident.state import MemoryMapState
from squall.trident.state.api import BaseStateUpdater

from .test_coordinator import RecordingCollector, open_master
from .test_executor import A1, SPEC, Context, Recorder, data
from .test_processors import Context as BodyContext
from .test_processors import Output


class Parse(BaseFunction):
    def execute(self, tuple, collector) -> None:
        collector.emit([int(tuple["text"])])


class Positive(BaseFilter):
    def is_keep(self, tuple) -> bool:
        return int(tuple["text"]) > 0


class Halve(MapFunction):
    def execute(self, tuple):
        return [tuple["id"], 10 // int(tuple["text"])]


class Longest(BaseAggregator):
    def init(self, batch_id, collector):
        return [""]

    def aggregate(self, state, tuple, collector) -> None:
        state[0] = max(state[0], tuple["text"], key=len)

    def complete(self, state, collector) -> None:
        if state[0] == "x":
            raise KeyError("no longest")
        collector.emit([state[0]])


class Concat(CombinerAggregator):
    def init(self, tuple):
        return tuple["text"]

    def combine(self, val1, val2):
        return val1 + val2  # None + a string raises

    def zero(self):
        return None


def run_one(stream_of, values, fields=("id", "password", "text"), bolt: int = 0) -> TridentOperationError:
    """``stream_of(stream)`` built on a spout of ``fields``, its bolt ``bolt`` (the first; -1 the
    last) run on one tuple ``values`` (or ``values(n)``, given how many fields the bolt takes)
    and the batch finished; the error it raised."""
    topo = TridentTopology()
    stream_of(topo.new_stream("s", FeederBatchSpout(list(fields))))
    body = plan(topo).bolts[bolt].body
    body.prepare({}, BodyContext(), Output())
    (stream,) = body.input_fields
    if callable(values):
        values = values(len(body.input_fields[stream]))
    batch = BatchInfo(TransactionAttempt(3, 1))
    with pytest.raises(TridentOperationError) as raised:
        body.init_batch(batch)
        body.execute(batch, stream, values)
        body.finish_batch(batch)
    return raised.value


URL = "redis://:hunter2@cache:6379/0"
RECORD = "fields ['id', 'password', 'text'] values [7, '***', 'x']"


@pytest.mark.parametrize("stream_of, values, expected", [
    (lambda s: s.name("parse").each(Fields("text"), Parse(), Fields("n")), [7, "pw", "x"],
     f"each(Parse) named 'parse' raised ValueError: invalid literal for int() with base 10: 'x'; its input: {RECORD}"),
    (lambda s: s.each(Fields("text"), Positive()), [7, "pw", "x"],
     f"each(Positive) raised ValueError: invalid literal for int() with base 10: 'x'; its input: {RECORD}"),
    (lambda s: s.name("halves").map(Halve(), Fields("id", "half")), [7, "pw", "0"],
     ("map(Halve) named 'halves' raised ZeroDivisionError: integer division or modulo by zero; its input: "
      "fields ['id', 'password', 'text'] values [7, '***', '0']")),
    (lambda s: s.partition_aggregate(Fields("text"), Longest(), Fields("longest")), [7, "pw", "x"],
     "partition_aggregate(Longest) raised KeyError: 'no longest'; at the end of the batch"),
    # the combiner's partial step (its init fused into the grouped combine), per tuple
    (lambda s: s.group_by(Fields("id")).persistent_aggregate(MemoryMapState.factory(), Fields("text"), Concat(),
                                                             Fields("all")), [7, "pw", "x"],
     (f"persistent_aggregate(Concat) raised TypeError: unsupported operand type(s) for +: 'NoneType' and 'str'; "
      f"its input: {RECORD}")),
])
def test_an_operation_that_raises_is_named_with_the_tuple_it_was_given(stream_of, values, expected):
    error = run_one(stream_of, values)
    assert str(error) == expected
    assert error.__cause__ is error.error


ADDED = "raised TypeError: unsupported operand type(s) for +: 'NoneType' and 'str'; its input:"


@pytest.mark.parametrize("stream_of, bolt, values, expected", [
    (lambda s: s.aggregate(Fields("text"), Concat(), Fields("all")), 0, [7, "pw", "x"],
     f"aggregate(Concat) {ADDED} fields ['id', 'password', 'text', 'all'] values [7, '***', 'x', 'x']"),
    (lambda s: s.group_by(Fields("id")).aggregate(Fields("text"), Concat(), Fields("all")), -1, [7, "x"],
     f"aggregate(Concat) {ADDED} fields ['id', 'all'] values [7, 'x']"),
    (lambda s: s.group_by(Fields("id")).persistent_aggregate(MemoryMapState.factory(), Fields("text"), Concat(),
                                                             Fields("all")), -1, [7, "x"],
     f"persistent_aggregate(Concat) {ADDED} fields ['id', 'all'] values [7, 'x']"),
    (lambda s: s.chained_agg().aggregate(Count(), Fields("n")).aggregate(Fields("text"), Concat(), Fields("all"))
     .chain_end(), 0, lambda n: [7, "pw", "x", 1, "x"][:n],
     (f"chained_agg.aggregate(Count, Concat) {ADDED} fields ['id', 'password', 'text', 'n', 'all'] "
      f"values [7, '***', 'x', 1, 'x']")),
], ids=["aggregate-partial", "group_by-aggregate-combine", "group_by-persistent_aggregate-combine", "chained_agg"])
def test_a_step_of_an_aggregation_that_raises_is_named_as_the_user_called_it(stream_of, bolt, values, expected):
    """Each step squall splits an aggregation into (a combiner's partial combine before the
    repartition, its combine after it, a chain's) is named by the call the user wrote. The
    partial and grouped steps said partition_aggregate(Concat), a call not in the user's code,
    and a chain's said partition_aggregate(ChainedAggregator), a class not in it either."""
    assert str(run_one(stream_of, values, bolt=bolt)) == expected


class Lookup(BaseQueryFunction):
    def batch_retrieve(self, state, tuples):
        raise KeyError(f"no such key {tuples[0][0]!r}")

    def execute(self, tuple, result, collector) -> None:
        collector.emit([result])


def test_a_query_function_whose_batch_retrieve_raises_is_named_with_the_tuples_it_was_given():
    """A state_query's batch_retrieve (one call for the partition's tuples of the batch: a DRPC
    call's arguments) that raises names the query and its first tuple. The error said "at the
    end of the batch (the state's update and commit, for a state)": no tuple, and a state
    update the query never made."""
    def query(s):
        table = s._topology.new_static_state(MemoryMapState.factory())
        return s.state_query(table, Fields("text"), Lookup(), Fields("found"))

    assert str(run_one(query, [7, "pw", "x"])) == (
        "state_query(Lookup) raised KeyError: \"no such key 'x'\"; in batch_retrieve over the batch's one tuple "
        f"in this partition, {RECORD}")


class LookupByText(BaseQueryFunction):
    def batch_retrieve(self, state, tuples):
        raise KeyError(f"no such key {tuples[-1][0]!r}")   # the last tuple's: not the one quoted

    def execute(self, tuple, result, collector) -> None:
        collector.emit([result])


def test_a_credential_a_batch_retrieve_quotes_is_masked_whichever_tuple_it_is_of():
    """A query over a credential field whose batch_retrieve quotes a value (a KeyError of the
    key it looked up) showed the credential in the error: masked in the quoted first tuple, but
    not in the exception's message, as every other operation's is, for any of the tuples."""
    topo = TridentTopology()
    table = topo.new_static_state(MemoryMapState.factory())
    topo.new_stream("s", FeederBatchSpout(["user", "token"])).state_query(
        table, Fields("token"), LookupByText(), Fields("found"))
    body = plan(topo).bolts[-1].body
    body.prepare({}, BodyContext(), Output())
    (stream,) = body.input_fields
    batch = BatchInfo(TransactionAttempt(3, 1))
    body.init_batch(batch)
    for values in (["ann", "ghp_firstT0ken"], ["bob", "ghp_s3cr3tT0ken"]):
        body.execute(batch, stream, values)
    with pytest.raises(TridentOperationError) as raised:
        body.finish_batch(batch)
    assert str(raised.value) == (
        "state_query(LookupByText) raised KeyError: \"no such key ***\"; in batch_retrieve over the batch's "
        "2 tuples in this partition, the first: fields ['user', 'token'] values ['ann', '***']")


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("__str__ raised")


class RaisesUnprintable(BaseFunction):
    def execute(self, tuple, collector) -> None:
        raise Unprintable()


@pytest.mark.parametrize("values", [[7, "pw", "x"], [7, "hunter2secret", "x"]])  # with a credential: masked
def test_an_operation_raising_an_exception_whose_str_raises_is_named_with_it(values):
    """The error's text read str() of the user's exception: its __str__'s RuntimeError replaced
    the TridentOperationError, naming neither the operation nor the user's exception."""
    error = run_one(lambda s: s.each(Fields("text"), RaisesUnprintable(), Fields("n")), values)
    assert str(error).startswith(
        "each(RaisesUnprintable) raised Unprintable: <str() of Unprintable raised RuntimeError>; its input: ")
    assert isinstance(error.error, Unprintable)


class _CommitFails:
    """A map state whose ``commit`` raises after the inner state's (a store that went away)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def commit(self, txid):
        self.inner.commit(txid)
        raise ConnectionError("the store went away")

    def __getattr__(self, name):
        return getattr(self.inner, name)


class CommitFailsFactory:
    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _CommitFails(MemoryMapState.factory().make_state(conf, metrics, partition_index, num_partitions))


@pytest.mark.parametrize("persist, expected", [
    (lambda s: s.group_by(Fields("id")).persistent_aggregate(CommitFailsFactory(), Count(), Fields("count")),
     "persistent_aggregate(Count) named 'counts'"),
    (lambda s: s.persistent_aggregate(CommitFailsFactory(), Count(), Fields("count")),
     "persistent_aggregate(Count) named 'counts'"),
    (lambda s: s.partition_persist(CommitFailsFactory(), Fields("id", "text"), RecordUpdater()),
     "partition_persist(RecordUpdater) named 'counts'"),
])
def test_a_state_that_fails_is_named_as_the_operation_the_user_wrote(persist, expected):
    """A ``persistent_aggregate``'s state step (Trident builds it as a ``partition_persist``) is
    named as the ``persistent_aggregate`` it is; before: ``partition_persist(Count)``."""
    error = run_one(lambda s: persist(s.name("counts")), lambda n: [7, 1] if n == 2 else [7], ("id", "text"),
                    bolt=-1)  # the state's
    assert str(error) == (f"{expected} raised ConnectionError: the store went away; at the end of the batch "
                                 "(the state's update and commit, for a state)")


class RecordUpdater(BaseStateUpdater):
    def update_state(self, state, tuples, collector) -> None:
        pass


def test_the_values_are_masked_then_cut_to_200_characters():
    long = f"{URL} " + "y" * 500
    error = run_one(lambda s: s.each(Fields("text"), Parse(), Fields("n")), [URL, "pw", long])
    shown = repr(long.replace("hunter2", "***"))
    assert error.record == (f"fields ['id', 'password', 'text'] values ['redis://:***@cache:6379/0', '***', "
                            f"{shown[:200]}... ({len(shown)} characters)]")
    assert "hunter2" not in str(error)
    # the exception's own message is masked and cut too (to 500 characters)
    assert str(error).startswith("each(Parse) raised ValueError: invalid literal for int() with base 10: "
                                 "'redis://:***@cache")


def test_a_failed_exception_fails_the_batch_as_it_is():
    """`FailedException` is the operation's own way to fail a batch, with its own message."""
    from squall.trident import FailedException

    with pytest.raises(FailedException, match="^no$"):
        operation_failed("each(X)", FailedException("no"), ["a"], [1])


class RaisingBody:
    """A body whose every input raises as ``each(Parse)`` does on it."""

    def prepare(self, conf, context, output) -> None:
        pass

    def init_batch(self, batch) -> None:
        pass

    def execute(self, batch, stream, values) -> None:
        operation_failed("each(Parse) named 'parse'", ValueError("bad"), ["word"], values)

    def execute_many(self, batch, stream, rows) -> None:
        for values in rows:
            self.execute(batch, stream, values)

    def finish_batch(self, batch) -> None:
        pass

    def get_component_configuration(self):
        return None

    def cleanup(self) -> None:
        pass


def test_the_executor_says_which_txid_in_the_same_words_at_each_attempt():
    bolt, rec = TridentBoltExecutor(SPEC, RaisingBody()), Recorder()  # type: ignore[arg-type]
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    with pytest.raises(TridentOperationError) as first:
        bolt.execute(data(A1, "x"))
    assert str(first.value) == ("each(Parse) named 'parse' raised ValueError: bad; Trident batch txid 1; "
                                "its input: fields ['word'] values ['x']")
    assert str(pickle.loads(pickle.dumps(first.value))) == str(first.value)  # the batch travels with it
    with pytest.raises(TridentOperationError) as second:
        bolt.execute(data(TransactionAttempt(1, 1), "x"))
    assert str(second.value) == str(first.value)  # the replay's: the same words, folded into one record
    with pytest.raises(TridentOperationError) as other:
        bolt.execute(data(TransactionAttempt(2, 0), "y"))
    assert str(other.value) == ("each(Parse) named 'parse' raised ValueError: bad; Trident batch txid 2; "
                                "its input: fields ['word'] values ['y']")


class ReportingCollector(RecordingCollector):
    def __init__(self) -> None:
        super().__init__()
        self.errors: list = []

    def report_error(self, error) -> None:
        self.errors.append(error)


def test_the_master_coordinator_reports_once_that_a_txid_failing_again_and_again_stalls_the_topology():
    from squall._transactional import MemoryBackend

    master, _ = open_master(MemoryBackend())
    collector = ReportingCollector()
    master.collector = collector
    cause = FailureCause(EXCEPTION, "b-0-parse", 4, "TridentOperationError",
                         "each(Parse) named 'parse' raised ValueError: bad; its input: fields ['word'] values ['x']")
    master.next_tuple()
    for attempt in range(STALL_FAILURES + 2):
        assert master.core.is_running(TransactionAttempt(1, attempt))
        master.fail_with(("batch", 1, attempt), cause)
        assert len(collector.errors) == (0 if attempt + 1 < STALL_FAILURES else 1)
        master.next_tuple()  # the replay
    (stall,) = collector.errors
    assert stall.startswith(
        "Trident topology stalled at txid 1 (spout 'spout0'): its batch failed 3 times in a row, the last time: "
        "exception in [b-0-parse] task 4: TridentOperationError: each(Parse) named 'parse' raised ValueError: bad; "
        "its input: fields ['word'] values ['x']. Trident replays a failed batch with the same txid until it "
        "succeeds, and no later batch commits meanwhile; as in Storm, there is no way to skip a batch or a record. "
        "To get out, fix the operation so that it handles this record")
    # once it commits, a later stall of it (another run of failures) would be news again
    attempt = STALL_FAILURES + 2
    master.ack(("batch", 1, attempt))
    master.ack(("commit", 1, attempt))
    assert master.core.current_txid == 2 and master._stalls.failures == {}
    assert (BATCH_STREAM, TransactionAttempt(2, 0)) in collector.emitted
    assert COMMIT_STREAM in {s for s, _ in collector.emitted}


def test_a_count_after_a_function_names_the_function_not_the_count():
    """The fused path the review met (each(Parse) then a grouped Count: the function's emits are
    counted by its collector in C) names the function."""
    error = run_one(lambda s: s.name("parse").each(Fields("text"), Parse(), Fields("n")).group_by(Fields("n"))
                    .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")), [7, "pw", "x"])
    assert str(error) == ("each(Parse) named 'parse' raised ValueError: invalid literal for int() with base 10: 'x'; "
                          f"its input: {RECORD}")


def test_a_drpc_streams_failing_requests_are_not_reported_as_a_stall():
    """A DRPC request an operation raises on fails to its caller and is not replayed: the txid's
    replay carries the requests after it, and the stream goes on. Three bad requests in a row
    (30 concurrent bad calls on LocalCluster) were reported as ``Trident topology stalled at txid
    2 (spout '_drpc.check')`` with the advice to fix the operation and resubmit, while the next
    good call was answered. A topology's batch spout beside it is still watched."""
    from squall import TopologyBuilder, TopologyContext
    from squall._transactional import MemoryBackend
    from squall.trident.coordinator import MasterBatchCoordinator
    from squall.trident.drpc import DRPCSpout
    from squall.trident.spout import BatchSpoutAdapter, FixedBatchSpout, RichSpoutAdapter

    def opened(spouts: list) -> tuple[MasterBatchCoordinator, ReportingCollector]:
        master = MasterBatchCoordinator([f"spout{i}" for i in range(len(spouts))], spouts)
        b = TopologyBuilder()
        b.set_spout("$mastercoord-bg0", master)
        conf = {"topology.name": "t", "topology.max.spout.pending": 1,
                "topology.trident.batch.emit.interval.millis": 0}
        context = TopologyContext(b.create_topology(), "t-1-2", {1: "$mastercoord-bg0"}, 1, 6700, [1], conf,
                                  transactional_home=MemoryBackend())
        collector = ReportingCollector()
        master.open(conf, context, collector)
        return master, collector

    cause = FailureCause(EXCEPTION, "b-0", 4, "TridentOperationError",
                         "each(Checked) raised ValueError: cannot read 'bad'; its input: fields ['args'] values ['bad']")
    drpc = RichSpoutAdapter(DRPCSpout("check"), 1)
    batch = BatchSpoutAdapter(FixedBatchSpout(Fields("w"), 1, ["a"]))
    for spouts, stalls in (([drpc], 0), ([batch], 1)):
        master, collector = opened(spouts)
        master.next_tuple()
        for attempt in range(STALL_FAILURES + 2):
            assert master.core.is_running(TransactionAttempt(1, attempt))
            master.fail_with(("batch", 1, attempt), cause)
            master.next_tuple()  # the replay
        assert len(collector.errors) == stalls, collector.errors
        attempt = STALL_FAILURES + 2
        master.ack(("batch", 1, attempt))
        master.ack(("commit", 1, attempt))
        assert master.core.current_txid == 2  # the txid went on


class ParseToken(BaseFunction):
    def execute(self, tuple, collector) -> None:
        collector.emit([int(tuple["token"])])


class Quoting(Exception):
    """An exception whose text is its own (not its arguments)."""

    def __init__(self, value) -> None:
        super().__init__()
        self.value = value

    def __str__(self) -> str:
        return f"cannot use {self.value}"


class UseToken(BaseFunction):
    def execute(self, tuple, collector) -> None:
        raise Quoting(tuple["token"])


@pytest.mark.parametrize("operation, message", [
    (ParseToken(), "ValueError: invalid literal for int() with base 10: ***"),
    (UseToken(), "Quoting: cannot use ***"),
])
def test_a_credential_fields_value_quoted_by_the_exception_is_masked_in_its_text_and_traceback(operation, message):
    """A field named like a credential showed ``***`` in the tuple, but the exception's own
    message quoted its value (``invalid literal for int() with base 10: 'ghp_...'``) in the
    error's text and in the traceback the engine records and logs."""
    import traceback

    from squall.engine.executor import error_record

    token = "ghp_s3cr3tT0ken"
    topo = TridentTopology()
    topo.new_stream("s", FeederBatchSpout(["user", "token"])).each(Fields("token"), operation, Fields("n"))
    body = plan(topo).bolts[0].body
    body.prepare({}, BodyContext(), Output())
    (stream,) = body.input_fields
    batch = BatchInfo(TransactionAttempt(3, 1))
    body.init_batch(batch)
    with pytest.raises(TridentOperationError) as raised:
        body.execute(batch, stream, ["bob", token])
    error = raised.value
    assert str(error) == (f"each({type(operation).__name__}) raised {message}; its input: "
                          "fields ['user', 'token'] values ['bob', '***']")
    if isinstance(operation, ParseToken):  # (Quoting's own arguments do not pickle)
        assert str(pickle.loads(pickle.dumps(error))) == str(error)
    shown = "".join(traceback.format_exception(error))
    assert token not in shown, shown
    assert "in execute" in shown  # the operation's own frame is still in the traceback
    record = error_record("b-0", 4, error)  # the topology's error, its traceback, the worker's log
    assert token not in record.error and record.traceback and token not in record.traceback, record


FOLD_RECORDS = 30
FOLD_PER_BATCH = 5
FLAKY, BAD = 7, 17  # txids 2 and 4
BAD_ATTEMPTS = 5
_seen: dict[int, int] = {}  # this process's (LocalCluster's tasks run here): how often each record came


class FailsAtFirst(BaseFunction):
    """Raises a KeyError at the first sight of record `FLAKY` and the same ValueError at the first
    `BAD_ATTEMPTS` sights of record `BAD`; emits each record's key (its id mod 3) otherwise."""

    def execute(self, tuple, collector) -> None:
        i = tuple["id"]
        seen = _seen[i] = _seen.get(i, 0) + 1
        if i == FLAKY and seen == 1:
            raise KeyError("flaky")
        if i == BAD and seen <= BAD_ATTEMPTS:
            raise ValueError(f"cannot read {tuple['text']!r}")
        collector.emit([i % 3])


def test_a_batch_failing_again_and_again_on_one_record_is_one_error_record_counted_and_keeps_the_others():
    """Each attempt's error named its attempt id and how many attempts raised (``Trident batch
    txid 4 attempt 2 (attempts of txid 4 that raised here: 3)``), so the engine (`add_error`)
    folded none of them: 5 failed attempts made 5 records of count 1, and a stall filled the
    bolt's 10 kept records, pushing its other errors out. Now they are one record counted 5, in
    `get_topology_info` and in the UI REST topology page's errorCount, and the bolt's different
    error before them is still there; every record is counted once in the end."""
    import collections

    from starlette.testclient import TestClient

    from squall import Config, LocalCluster
    from squall.trident.spout import FixedBatchSpout
    from squall.ui.server import local_app

    from .test_trident_local import record
    from .trident_ops import Recorded, latest

    _seen.clear()
    spout = FixedBatchSpout(Fields("id", "text"), FOLD_PER_BATCH,
                            *[[i, "bad" if i == BAD else str(i)] for i in range(FOLD_RECORDS)])
    topo = TridentTopology()
    counts = topo.new_stream("records", spout).name("parse") \
        .each(Fields("id", "text"), FailsAtFirst(), Fields("key")) \
        .group_by(Fields("key")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    record(counts.new_values_stream(), "folded-errors")
    conf = Config()
    conf["topology.max.spout.pending"] = 1  # one batch at a time: the errors come in txid order
    conf["topology.max.error.report.per.interval"] = 100  # Storm's throttle (5 per 5 s) would drop some
    expected = dict(collections.Counter(i % 3 for i in range(FOLD_RECORDS)))

    bad = (f"TridentOperationError: each(FailsAtFirst) named 'parse' raised ValueError: cannot read 'bad'; "
           f"Trident batch txid {BAD // FOLD_PER_BATCH + 1}; its input: fields ['id', 'text'] values [{BAD}, 'bad']")
    flaky = (f"TridentOperationError: each(FailsAtFirst) named 'parse' raised KeyError: 'flaky'; "
             f"Trident batch txid {FLAKY // FOLD_PER_BATCH + 1}; its input: fields ['id', 'text'] "
             f"values [{FLAKY}, '{FLAKY}']")
    with LocalCluster() as cluster:
        cluster.submit_topology("fold", conf, topo.build())
        # every record counted once: the running counts after the last batch
        Recorded.wait_for("folded-errors", lambda r: latest(r) == expected)
        assert _seen[BAD] == BAD_ATTEMPTS + 1 and _seen[FLAKY] == 2, _seen
        errors = cluster.get_topology_info("fold")["errors"]
        (component,) = {e["component"] for e in errors if e["error"].startswith("TridentOperationError: ")}
        mine = [(e["error"], e["count"]) for e in errors if e["component"] == component]
        assert mine == [(flaky, 1), (bad, BAD_ATTEMPTS)], mine
        # the master coordinator said once that txid 4 stalled (3 failures in a row), quoting the error
        (stall,) = [e for e in errors if e["component"] == "$mastercoord-bg0"]
        assert stall["count"] == 1 and bad in stall["error"], stall
        with TestClient(local_app(cluster), base_url="http://127.0.0.1") as api:
            sid = cluster.get_topology_info("fold")["id"]
            page = api.get(f"/api/v1/topology/{sid}").json()
            (row,) = [b for b in page["bolts"] if b["boltId"] == component]
            assert row["errorCount"] == BAD_ATTEMPTS and row["lastError"].startswith(bad), row
            shown = api.get(f"/api/v1/topology/{sid}/component/{component}").json()["componentErrors"]
            assert sorted((e["error"].splitlines()[0], e["errorCount"]) for e in shown) == \
                sorted([(flaky, 1), (bad, BAD_ATTEMPTS)]), shown


class StoreDownBody(RaisingBody):
    """A body whose every input finds its Redis down, as a `RedisMapState`'s read does."""

    def execute(self, batch, stream, values) -> None:
        from squall.external.trident_redis import call_or_fail_batch
        call_or_fail_batch("Redis map state at redis://127.0.0.1:1/0", "read", _refused)


def _refused():
    import redis
    raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")


class CauseRecorder(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.causes: list[FailureCause] = []

    def fail_with(self, tup, cause) -> None:
        self.failed.append(tup)
        self.causes.append(cause)


def test_a_batch_a_store_that_is_down_fails_again_and_again_is_reported_waiting_not_stalled_by_an_operation():
    """A Redis server down (or SIGSTOPped) for a few seconds fails a txid's attempts three times
    in a row. Before, the master coordinator reported it as an operation's stall: "Trident topology
    stalled at txid 85 ... To get out, fix the operation so that it handles this record ... and
    submit the topology again" (a chaos run on the process host, a Redis pause of 6 s), when the
    batch went through on its own once Redis answered. Now the batch's cause is of kind
    ``unavailable`` and the report says it waits for the store, with nothing to change."""
    pytest.importorskip("redis")
    from squall._transactional import MemoryBackend

    bolt, rec = TridentBoltExecutor(SPEC, StoreDownBody()), CauseRecorder()  # type: ignore[arg-type]
    bolt.prepare({"topology.message.timeout.secs": 30}, Context(), rec)
    bolt.execute(data(A1, "x"))
    (cause,) = rec.causes
    assert (cause.kind, cause.error) == ("unavailable", "StoreUnavailableException"), cause
    assert [str(e) for e in rec.errors] == [(
        "Redis map state at redis://127.0.0.1:1/0 could not read: ConnectionError: Error 111 connecting to "
        "127.0.0.1:1. Connection refused. (the batch fails: a stream's batch replays until it is back, a DRPC "
        "request fails to its caller)")]

    master, _ = open_master(MemoryBackend())
    collector = ReportingCollector()
    master.collector = collector
    master.next_tuple()
    for attempt in range(STALL_FAILURES + 2):
        master.fail_with(("batch", 1, attempt), cause)
        master.next_tuple()  # the replay
    (said,) = collector.errors
    assert said.startswith(
        "Trident topology waits at txid 1 (spout 'spout0'): its batch failed 3 times in a row, the last time: "
        "store unavailable in [") and "A store or source did not answer" in said, said
    assert "stalled" not in said and "fix the operation" not in said
