"""`squall.trident.spark.restart.run_restarting`, with fake queries (no Spark): a query is started
again only when it failed because Spark's Python source process missed its connect-back, at most
``retries`` times, and then the last error is raised naming the query; any other error of the
run, or of the start itself, propagates at once; every query started is stopped."""

from __future__ import annotations

import pytest

from squall.trident.spark.restart import PYTHON_CONNECT_TIMEOUT, ConnectBackMissed, run_restarting

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
