"""`squall.trident.spark.restart.run_restarting`, with fake queries (no Spark): a query is started
again only when it failed because Spark's Python source process missed its connect-back, at most
``retries`` times, and then the last error is raised naming the query; any other error of the
run, or of the start itself, propagates at once; every query started is stopped. One whose Python
source process ended (SIGKILLed) is started again up to 3 times in a row without progress, then
`SourceProcessDied` names it (the real kill: test_source_process_kill.py). And, on the
package's Spark session and a real redis-server, a Redis map state whose server restarts while
the query runs: the query stops at the batch's txid saying it is the store's doing, is started
again, and counts every word once."""

from __future__ import annotations

import json

import pytest

from squall.trident.spark.restart import (
    PYTHON_CONNECT_TIMEOUT,
    ConnectBackMissed,
    SourceProcessDied,
    run_restarting,
    source_process_died,
)

from ..external.conftest import redis_server  # noqa: F401 (its fixture: a redis-server on loopback)

MISSED = f"[STREAM_FAILED] ... java.net.SocketTimeoutException: {PYTHON_CONNECT_TIMEOUT}"


class FakeQuery:
    """A query whose run raises ``failure`` (None: it runs to its end)."""

    def __init__(self, failure: Exception | None) -> None:
        self.failure, self.stopped = failure, False

    def stop(self) -> None:
        self.stopped = True


class Starts:
    """``start()`` hands out one `FakeQuery` per failure given, in order, and keeps them."""

    def __init__(self, *failures: Exception | None) -> None:
        self.failures, self.started = list(failures), []

    def __call__(self) -> FakeQuery:
        self.started.append(FakeQuery(self.failures[len(self.started)]))
        return self.started[-1]


def run(query: FakeQuery) -> str:
    if query.failure is not None:
        raise query.failure
    return "ran"


def test_a_missed_connect_back_is_started_again_and_the_run_of_the_new_start_is_returned():
    starts, told = Starts(RuntimeError(MISSED), RuntimeError(MISSED), None), []
    assert run_restarting(starts, run, name="wc", on_restart=told.append) == "ran"
    assert len(starts.started) == 3 and all(q.stopped for q in starts.started)
    assert told == [f"query 'wc': Spark's Python source process did not connect back within Spark's fixed 10 s "
                    f"(a starved machine); starting the query again from its checkpoint ({i} of 3)" for i in (1, 2)]


def test_at_most_retries_restarts_then_the_last_error_is_raised_naming_the_query():
    last = RuntimeError(MISSED + " (the third)")
    starts = Starts(RuntimeError(MISSED), RuntimeError(MISSED), last, None)
    with pytest.raises(ConnectBackMissed, match=r"query 'kafka wc': .* at any of 3 starts .*\(the third\)") as e:
        run_restarting(starts, run, name="kafka wc", retries=2, on_restart=lambda line: None)
    assert e.value.__cause__ is last and e.value.query_name == "kafka wc" and e.value.starts == 3
    assert len(starts.started) == 3 and all(q.stopped for q in starts.started)


def test_no_retries_runs_once():
    starts = Starts(RuntimeError(MISSED), None)
    with pytest.raises(ConnectBackMissed, match="at any of 1 starts"):
        run_restarting(starts, run, name="wc", retries=0)
    assert len(starts.started) == 1


@pytest.mark.parametrize("failure", [ZeroDivisionError("division by zero"), AssertionError("counts differ"),
                                     RuntimeError("Timed out while waiting for the batch")])
def test_any_other_error_propagates_at_once_as_it_was_raised(failure):
    starts, told = Starts(failure, None), []
    with pytest.raises(type(failure)) as e:
        run_restarting(starts, run, name="wc", on_restart=told.append)
    assert e.value is failure and len(starts.started) == 1 and starts.started[0].stopped and told == []


def test_an_error_of_the_start_itself_is_not_retried():
    def start():
        raise RuntimeError(MISSED)  # say, a SparkSession that cannot start a query at all

    with pytest.raises(RuntimeError, match=PYTHON_CONNECT_TIMEOUT) as e:
        run_restarting(start, run, name="wc")
    assert not isinstance(e.value, ConnectBackMissed)


def test_a_missed_connect_back_after_an_other_failure_is_not_reached():
    starts = Starts(ValueError("bad offset"), RuntimeError(MISSED), None)
    with pytest.raises(ValueError, match="bad offset"):
        run_restarting(starts, run, name="wc")
    assert len(starts.started) == 1


def test_negative_retries_are_refused():
    with pytest.raises(ValueError, match="retries must be 0 or more, got -1"):
        run_restarting(Starts(None), run, name="wc", retries=-1)


STORE = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] ... squall.trident.spark.runner.TridentStoreUnavailable: Trident query "
         "stopped at txid {txid} (micro-batch {batch}): a state's store did not answer on the driver ...")


def _store_away(txid: int) -> RuntimeError:
    return RuntimeError(STORE.format(txid=txid, batch=txid - 1))


def test_a_store_that_did_not_answer_is_waited_for_while_it_does_not_at_the_same_txid():
    waits: list[float] = []
    starts = Starts(_store_away(3), _store_away(3), _store_away(3), _store_away(5), None)
    assert run_restarting(starts, run, name="wc", on_restart=lambda line: None,
                          wait=lambda s: waits.append(s) or False) == "ran"
    assert waits == [1.0, 2.0, 4.0, 1.0]  # doubled at the same txid; a later txid starts again at the first wait
    assert len(starts.started) == 5 and all(q.stopped for q in starts.started)

    last = _store_away(3)
    starts = Starts(_store_away(3), _store_away(3), last, None)
    with pytest.raises(RuntimeError) as e:
        run_restarting(starts, run, name="wc", store_restarts=2, wait=lambda s: False)
    assert e.value is last and len(starts.started) == 3  # 2 restarts in a row, then the store's error

    stopping = Starts(_store_away(3), None)
    with pytest.raises(RuntimeError, match="TridentStoreUnavailable"):
        run_restarting(stopping, run, name="wc", wait=lambda s: True)  # SIGTERM while waiting: no restart
    assert len(stopping.started) == 1


class _Captured(Exception):
    """pyspark's shape of a query's failure: ``str`` its description, ``_stackTrace`` the JVM's
    stack trace, ``_cause`` the converted Java cause (`CapturedException`)."""

    def __init__(self, desc: str, stack: str = "", cause: BaseException | None = None) -> None:
        super().__init__(desc)
        self._stackTrace, self._cause = stack, cause


EOF_IN_THE_SOURCE = """java.io.EOFException
\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)
\tat org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner.commit(PythonStreamingSourceRunner.scala:303)
\tat org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStreamBase.commit(PythonMicroBatchStream.scala:91)
"""


def _source_gone(committed_txid: int, stack: str = EOF_IN_THE_SOURCE) -> _Captured:
    """A query's failure when its Python source process was SIGKILLed (Spark 4.3's, as pyspark
    gives it: the class and the frame only in the cause's stack trace)."""
    return _Captured("[STREAM_FAILED] Query wc [id = 1, runId = 2] terminated with exception:  SQLSTATE: XXKST "
                     "(no cause message)\n=== Streaming Query ===\nCurrent Committed Offsets: {source: "
                     f'{{"txid": {committed_txid}, "spout": "sentences"}}}}\nCurrent State: ACTIVE',
                     "org.apache.spark.sql.execution.streaming.runtime.StreamExecution.runStream(...)",
                     _Captured("", stack))


def test_a_source_process_that_ended_is_named_from_the_java_cause():
    assert source_process_died(_source_gone(3)) == "java.io.EOFException in PythonStreamingSourceRunner.commit"
    broken = "java.net.SocketException: Broken pipe\n\tat x.y.PythonStreamingSourceRunner.latestOffset(a.scala:1)\n"
    assert source_process_died(RuntimeError("driver")) is None
    wrapped = RuntimeError("the query failed")
    wrapped.__cause__ = _source_gone(3, broken)  # as squall trident's _Failed carries it
    assert source_process_died(wrapped) == "java.net.SocketException in PythonStreamingSourceRunner.latestOffset"
    # an EOF elsewhere (a Spark task's Python worker: Spark retries the task) is not the source's
    in_a_task = "java.io.EOFException\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(x:1)\n"
    assert source_process_died(_source_gone(3, in_a_task)) is None


def test_sparks_own_connect_back_failure_is_recognised_through_its_java_cause():
    """Spark's failure when its Python source process does not connect back (seen on a standalone
    cluster under ``squall trident``, the process SIGKILLed as it started) says only "Python worker
    failed to connect back."; the timeout is its Java cause's message, which pyspark keeps in the
    converted cause. Before, the query was not started again and ``squall trident`` exited 1."""
    failure = _Captured("Python worker failed to connect back.\n=== Streaming Query ===\nIdentifier: wc\n"
                        "Current Committed Offsets: {}\nCurrent State: INITIALIZING",
                        "org.apache.spark.sql.execution.streaming.runtime.StreamExecution.runStream(...)",
                        _Captured(PYTHON_CONNECT_TIMEOUT, f"java.net.SocketTimeoutException: {PYTHON_CONNECT_TIMEOUT}\n"
                                  "\tat java.base/sun.nio.ch.NioSocketImpl.timedAccept(NioSocketImpl.java:701)\n"))
    assert PYTHON_CONNECT_TIMEOUT not in str(failure)
    as_squall_trident_raises_it = RuntimeError(str(failure))
    as_squall_trident_raises_it.__cause__ = failure
    starts, told = Starts(as_squall_trident_raises_it, None), []
    assert run_restarting(starts, run, name="wc", on_restart=told.append) == "ran"
    assert len(starts.started) == 2 and told == [
        ("query 'wc': Spark's Python source process did not connect back within Spark's fixed 10 s (a starved "
         "machine); starting the query again from its checkpoint (1 of 3)")]


def test_a_query_whose_source_process_ended_is_started_again_up_to_three_times_in_a_row_without_progress():
    told: list[str] = []
    waits: list[float] = []
    # progress between the deaths (txid 3, then 5) starts the count again
    starts = Starts(_source_gone(3), _source_gone(3), _source_gone(5), _source_gone(5), _source_gone(5), None)
    assert run_restarting(starts, run, name="wc", on_restart=told.append,
                          wait=lambda s: waits.append(s) or False) == "ran"
    assert len(starts.started) == 6 and all(q.stopped for q in starts.started)
    assert waits == [1.0] * 5
    assert told[0] == ("query 'wc': Spark's Python source process, which plans the spouts' batches on the driver, "
                       "ended while the query ran (java.io.EOFException in PythonStreamingSourceRunner.commit: "
                       "killed, or out of memory?); starting the query again from its checkpoint in 1 s (1 of 3 in "
                       "a row); a transactional or opaque state takes each batch once")
    assert ["1 of 3", "2 of 3", "1 of 3", "2 of 3", "3 of 3"] == [line.split("in 1 s (")[1][:6] for line in told]

    last = _source_gone(5)
    starts = Starts(_source_gone(5), _source_gone(5), last, None)
    with pytest.raises(SourceProcessDied, match=r"query 'wc': Spark's Python source process, .* ended while the query "
                                                r"ran \(java.io.EOFException in PythonStreamingSourceRunner.commit: "
                                                r"killed, or out of memory\?\), at 3 starts in a row with no batch "
                                                r"committed in between") as e:
        run_restarting(starts, run, name="wc", source_restarts=2, on_restart=lambda line: None, wait=lambda s: False)
    assert e.value.__cause__ is last and len(starts.started) == 3

    stopping = Starts(_source_gone(3), None)  # the group's SIGTERM ended it too: no restart
    with pytest.raises(_Captured):
        run_restarting(stopping, run, name="wc", wait=lambda s: True)
    assert len(stopping.started) == 1


def test_a_source_process_that_dies_at_every_start_at_the_same_offsets_is_the_querys_failure():
    # Spark names each source in its report by the Java object's identity hash, a new one at
    # every start of the query (PythonMicroBatchStreamWithAdmissionControl@35cbc082, then @47bb39b9
    # ...: a real query's report, its source process SIGKILLed at txid 4 six times in a row); the
    # committed offsets are the same all along, so the fourth death is the query's failure
    def at_start(identity: str) -> _Captured:
        gone = _source_gone(3)
        gone.args = (str(gone).replace("{source: ", "{org.apache.spark.sql.execution.datasources.v2.python."
                                                    f"PythonMicroBatchStreamWithAdmissionControl@{identity}: "),)
        return gone

    deaths = [at_start(h) for h in ("35cbc082", "47bb39b9", "337594de", "397f0786", "77cbc74f", "3d5dc58e")]
    starts = Starts(*deaths, None)
    told: list[str] = []
    with pytest.raises(SourceProcessDied, match=r"query 'wc': .* at 4 starts in a row with no batch committed"
                                                r" in between; not started again") as e:
        run_restarting(starts, run, name="wc", on_restart=told.append, wait=lambda s: False)
    assert e.value.__cause__ is deaths[3] and len(starts.started) == 4 and all(q.stopped for q in starts.started)
    assert [line.split("in 1 s (")[1][:6] for line in told] == ["1 of 3", "2 of 3", "3 of 3"]


@pytest.mark.timeout(240)
def test_a_redis_restart_while_the_query_runs_stops_it_at_the_txid_then_a_restart_counts_every_word_once(
        spark, tmp_path, redis_server):  # noqa: F811 (the fixture imported below)
    """Before, the driver's state raised Redis's ``StoreUnavailableException`` out of
    ``foreachBatch`` as it was, saying "a stream's batch replays until it is back", and the query
    (and ``squall trident``) stopped for good."""
    from squall.external.trident_redis import RedisMapState
    from squall.trident.spark import start

    from .conftest import expected_counts, sentences, write_lines
    from .ops import word_count

    data = tmp_path / "in"
    data.mkdir()
    first, more = sentences(6, seed=11), sentences(6, seed=12)
    write_lines(data / "a.txt", first)
    topology = word_count(str(data), RedisMapState.transactional(redis_server.url), max_batch_records=100)
    failures: list[str] = []
    told: list[str] = []

    def run_query(query):
        try:
            query.processAllAvailable()
            if not failures:  # txid 1 counted: Redis goes away (saved), and the next batch's words arrive
                redis_server.stop()
                write_lines(data / "b.txt", more)
                query.processAllAvailable()
        except Exception as e:
            failures.append(str(e))
            raise
        return query.lastProgress

    def back(line: str) -> None:
        told.append(line)
        redis_server.start()

    run_restarting(lambda: start(topology, spark, str(tmp_path / "checkpoint")), run_query, name="wc",
                   on_restart=back)
    assert len(failures) == 1 and len(told) == 1, (failures, told)
    assert "TridentStoreUnavailable: Trident query stopped at txid 2 (micro-batch 1): a state's store did not " \
           "answer on the driver" in failures[0], failures[0][:3000]
    assert told[0].startswith("query 'wc': a state's store did not answer at txid 2; starting the query again"), told
    client = redis_server.client()
    counts = {json.loads(k)[0] if k.startswith("[") else k: json.loads(client.get(k))[1]
              for k in client.keys("*") if not k.startswith("$")}
    assert counts == expected_counts(first + more), "a word counted other than once across the Redis restart"
