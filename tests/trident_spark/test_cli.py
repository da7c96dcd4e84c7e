"""``squall trident`` refuses, before any JVM starts, what cannot run on Spark's engine, and a
FILE without a TridentTopology, in one line naming it (issue 36 item 1; the run itself is
test_driver_kill's)."""

from __future__ import annotations

import os

import pytest

from squall.cli import main

pytest.importorskip("pyspark.sql.datasource")

PLAIN = '''
from squall import Fields
from squall.trident import TridentTopology
from tests.trident_spark.ops import Split, plain_spout


def build():
    topology = TridentTopology()
    topology.new_stream("lines", plain_spout()).each(Fields("sentence"), Split(), Fields("word"))
    return topology
'''


def test_a_plain_spout_is_refused_in_one_line_naming_the_file_and_the_spout(tmp_path, capsys):
    path = tmp_path / "wc.py"
    path.write_text(PLAIN)
    assert main(["trident", str(path), "--host", "spark", "--checkpoint", str(tmp_path / "ckpt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("squall: error: wc.py: new_stream('lines', SentenceSpout): a plain Spout is at least once")
    assert not (tmp_path / "ckpt").exists()


def test_a_file_without_a_trident_topology_is_refused_naming_what_it_holds(tmp_path, capsys):
    path = tmp_path / "storm.py"
    path.write_text("topology = 42\n")
    assert main(["trident", str(path), "--checkpoint", str(tmp_path / "ckpt")]) == 1
    assert "squall: error: storm.py: topology is an int, expected a TridentTopology" in capsys.readouterr().err


class _Query:
    """A StreamingQuery that has already ended, with ``failure`` (None: stopped)."""

    def __init__(self, failure: str | None) -> None:
        self.failure, self.isActive, self.stopped = failure, False, False

    def awaitTermination(self, timeout):
        pass

    def exception(self):
        return None if self.failure is None else RuntimeError(self.failure)

    def stop(self):
        self.stopped = True


def _starts(*failures):
    queries = [_Query(f) for f in failures]
    started = []

    def start_query():
        started.append(queries[len(started)])
        return started[-1]

    return start_query, started


def test_a_query_whose_python_source_did_not_connect_back_in_time_is_started_again_from_its_checkpoint(capsys):
    from squall.cli._trident import _run_until_stopped
    from squall.trident.spark.restart import PYTHON_CONNECT_TIMEOUT

    start_query, started = _starts(f"[STREAM_FAILED] ... SocketTimeoutException: {PYTHON_CONNECT_TIMEOUT}", None)
    assert _run_until_stopped(start_query) == 0
    assert len(started) == 2 and started[-1].stopped
    assert "did not connect back within Spark's fixed 10 s" in capsys.readouterr().err


def test_a_query_that_failed_otherwise_or_too_often_is_not_started_again(capsys):
    from squall.cli._trident import _run_until_stopped
    from squall.trident.spark.restart import PYTHON_CONNECT_TIMEOUT

    start_query, started = _starts("division by zero")
    assert _run_until_stopped(start_query) == 1
    assert len(started) == 1 and "the query failed: division by zero" in capsys.readouterr().err
    start_query, started = _starts(*[PYTHON_CONNECT_TIMEOUT] * 3)
    assert _run_until_stopped(start_query, retries=2) == 1
    assert len(started) == 3


SPARK_REPORT = """An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/squall/external/trident_delta.py", line 225, in _write
    raise FailedException(f"DeltaMapState {self.f.table_uri}: MERGE of txid {txid} failed: "
squall._errors.FailedException: DeltaMapState /data/t: MERGE of txid 2 failed: DeltaError: Read-only file system (os error 30)

=== Streaming Query ===
Identifier: wc [id = 90e8859c, runId = 8ba5f79a]
Current State: ACTIVE
org.apache.spark.sql.AnalysisException: not the cause
"""


def test_a_failed_query_says_its_python_exception_first_then_sparks_report(capsys):
    """Spark's report of a failed batch opens with py4j's "An exception was raised by the Python
    Proxy. Return Message: Traceback", and the exception that failed it (a Delta state's table
    turned read-only) came some 40 lines down, above the query's plan: the first line said
    nothing of what failed or where. It now names the exception first; a one-line failure is
    said as it is."""
    from squall.cli._trident import _run_until_stopped

    start_query, _started = _starts(SPARK_REPORT)
    assert _run_until_stopped(start_query) == 1
    err = capsys.readouterr().err
    assert err.startswith("squall trident: the query failed: squall._errors.FailedException: DeltaMapState "
                          "/data/t: MERGE of txid 2 failed: DeltaError: Read-only file system (os error 30)\n"
                          "squall trident: Spark's report of it:\nAn exception was raised by the Python Proxy.")
    assert "=== Streaming Query ===" in err


def test_a_query_whose_checkpoint_cannot_be_written_says_so_naming_it(tmp_path, monkeypatch, capsys):
    """A full disk under the checkpoint stopped the query with Spark's one line, "No space left on
    device", naming no file (Spark's trace above it was Hadoop's writer): the checkpoint is now
    asked, and said next to the failure with what to do. One that can be written adds nothing."""
    import errno

    from squall.cli._trident import _run_until_stopped
    from squall.trident.spark import checkpoint

    def full(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    failure = "java.io.IOException: No space left on device\n=== Streaming Query ===\nIdentifier: wc"
    start_query, _ = _starts(failure)
    assert _run_until_stopped(start_query, checkpoint=str(tmp_path)) == 1
    assert "cannot be written" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # the probe removed
    monkeypatch.setattr(checkpoint, "_probe", full)
    start_query, _ = _starts(failure)
    assert _run_until_stopped(start_query, checkpoint=str(tmp_path)) == 1
    assert capsys.readouterr().err.splitlines()[:3] == [
        "squall trident: the query failed: java.io.IOException: No space left on device",
        (f"squall trident: the checkpoint {tmp_path} cannot be written (No space left on device): Spark keeps "
        "each batch's offsets and commit there. Make room there (or make it writable), then start the query "
        "again: it resumes after the last batch the checkpoint holds, and a batch Spark ran but could not "
        "commit runs again with the same txid, which the states take once"),
        "=== Streaming Query ==="]
