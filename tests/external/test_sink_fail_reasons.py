"""The file, Parquet and Delta sinks fail a record for a reason they know, and that reason
reaches the record's dead letter: a formatter that raised on it, a row that does not fit the
schema (``on_bad_row="fail"``), a batch whose write failed. Before, each was a plain fail: the
dead letter said only ``failed 4 times; last: failed in [sink] task 3``.

Each live test reads N lines of which K are bad through a `FileSpout` (max_retries 3) and
counts every one: K dead letters, each with its reason, and N-K rows in the sink."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from squall import Fields, LocalCluster, TopologyBuilder
from squall.external.files import FileSinkBolt, FileSpout
from squall.external.parquet import ParquetSinkBolt
from tests.conftest import wait_until

LINES = ["1", "2", "x", "4", "y", "6"]  # N = 6 lines, K = 2 bad ("x", "y")
GOOD = ["1", "2", "4", "6"]
CONF = {"topology.message.timeout.secs": 30}


def as_number(tup) -> bytes:
    """A formatter that refuses what is no number (as a user's that parses its input)."""
    return f"{int(tup.values[0])}\n".encode()


def id_and_n(record: bytes) -> list:
    """``[id, n]`` of a line: its number, and the number or the text as it is."""
    text = record.decode().rstrip("\n")
    return [int(text) if text.isdigit() else abs(hash(text)) % 1000 + 1000,
            int(text) if text.isdigit() else text]


def run(tmp_path: Path, spout: FileSpout, sink, grouping: str = "shuffle") -> list[dict]:
    """``LINES`` in ``in/a.txt`` read by ``spout`` into ``sink`` on a LocalCluster until the file
    is done (every line acked or dead-lettered); returns the dead-letter entries."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("".join(f"{x}\n" for x in LINES))
    b = TopologyBuilder()
    b.set_spout("lines", spout)
    declarer = b.set_bolt("sink", sink)
    if grouping == "shuffle":
        declarer.shuffle_grouping("lines")
    else:
        declarer.fields_grouping("lines", Fields(grouping))
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("sinks", CONF, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=30), "the file was not finished"
        cluster.kill_topology("sinks", wait_secs=0)
    dead = tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead"
    return [json.loads(x) for x in dead.read_text().splitlines()]


def test_a_record_the_file_sinks_formatter_refuses_is_dead_lettered_saying_why(tmp_path):
    spout = FileSpout(tmp_path / "in", quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=tmp_path / "local")
    sink = FileSinkBolt(tmp_path / "out", formatter=as_number, max_records=1)
    dead = run(tmp_path, spout, sink)
    assert sorted(json.loads(d["record"])[0] for d in dead) == ["x", "y"]  # K = 2, each once
    for d in dead:
        value = json.loads(d["record"])[0]
        why = (f"FileSinkBolt: formatter raised ValueError: invalid literal for int() with base 10: "
               f"{value!r} on a tuple from 'lines' stream 'default'")
        # main: "failed 4 times; last: failed in [sink] task N", no reason
        assert d["reason"].startswith("failed 4 times; last: failed in [sink] task ") and why in d["reason"], d
        assert (d["cause"]["kind"], d["cause"]["component"]) == ("fail", "sink") and why in d["cause"]["message"]
    written = sorted(line for f in (tmp_path / "out").glob("part-*") for line in f.read_text().splitlines())
    assert written == GOOD  # N - K = 4, each once


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_row_that_does_not_fit_the_schema_is_dead_lettered_saying_why(tmp_path, kind):
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    if kind == "parquet":
        sink = ParquetSinkBolt(tmp_path / "pq", schema, "id", batch_size=1, on_bad_row="fail")
    else:
        delta = pytest.importorskip("squall.external.delta", reason="needs deltalake")
        sink = delta.DeltaSinkBolt(tmp_path / "delta", schema, "id", batch_size=1, on_bad_row="fail")
    spout = FileSpout(tmp_path / "in", ["id", "n"], translator=id_and_n, quiet_secs=0, commit_every=1, poll_secs=0.05,
                      progress_dir=tmp_path / "local")
    dead = run(tmp_path, spout, sink, grouping="id")
    assert sorted(json.loads(d["record"])[1] for d in dead) == ["x", "y"]
    for d in dead:
        value = json.loads(d["record"])[1]
        why = f"sink 'sink': field 'n' = {value!r} does not fit column type int64"
        assert d["reason"].startswith("failed 4 times; last: failed in [sink] task ") and why in d["reason"], d
        assert why in d["cause"]["message"]
    if kind == "parquet":
        rows = [r for f in sorted((tmp_path / "pq").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    else:
        import deltalake
        rows = deltalake.DeltaTable(str(tmp_path / "delta")).to_pyarrow_table().to_pylist()
    assert sorted(r["n"] for r in rows) == [1, 2, 4, 6]


# --- a failed write: every tuple of it fails saying which file could not be written ----------------

class Recorder:
    """A collector that keeps each failure's cause."""

    def __init__(self) -> None:
        self.acked: list = []
        self.causes: list = []
        self.errors: list = []

    def ack(self, t) -> None:
        self.acked.append(t.values[0])

    def fail(self, t) -> None:
        self.causes.append((t.values[0], None))

    def fail_with(self, t, cause) -> None:
        self.causes.append((t.values[0], cause))

    def emit(self, *args, **kwargs) -> list:
        return []

    def report_error(self, e) -> None:
        self.errors.append(e)


class Context:
    def get_this_component_id(self):
        return "sink"

    def get_this_task_id(self):
        return 3

    def get_this_task_index(self):
        return 0

    def get_this_targets(self):
        return {}  # no bolt reads the sink's streams

    def get_component_tasks(self, component):
        return [3]


def tuples(n: int):
    from squall._tuple import Source, Tuple
    return [Tuple([i, i * 10], Source("src", "default", 1, Fields(["id", "n"]))) for i in range(1, n + 1)]


def test_a_file_sink_whose_directory_is_gone_fails_each_tuple_naming_the_file(tmp_path):
    out = Recorder()
    sink = FileSinkBolt(tmp_path / "out", max_records=3)
    sink.prepare({}, Context(), out)
    shutil.rmtree(tmp_path / "out")  # the directory removed under the running sink
    for t in tuples(2):
        sink.execute(t)
    assert [i for i, _ in out.causes] == [1, 2] and not out.acked  # each one's open failed
    for _i, cause in out.causes:
        assert cause is not None and (cause.kind, cause.component, cause.task) == ("unavailable", "sink", 3), cause  # the disk's fault: not charged
        assert cause.message.startswith(f"FileSinkBolt: cannot write {tmp_path / 'out'}/.part-0-") and \
            "(the file being written)" in cause.message, cause.message


def test_a_parquet_batch_that_cannot_be_written_fails_each_tuple_saying_why(tmp_path):
    out = Recorder()
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    sink = ParquetSinkBolt(tmp_path / "pq", schema, "id", batch_size=3)
    sink.prepare({}, Context(), out)
    shutil.rmtree(tmp_path / "pq")
    (tmp_path / "pq").write_text("a file where the sink's directory was")
    for t in tuples(3):
        sink.execute(t)
    assert sorted(i for i, _ in out.causes) == [1, 2, 3] and not out.acked
    for _i, cause in out.causes:
        assert cause is not None and (cause.kind, cause.component) == ("unavailable", "sink"), cause  # the store's fault: not charged
        assert cause.message.startswith(f"sink 'sink': batch sink-3#0 of 3 rows was not written to {tmp_path / 'pq'} "
                                        "(NotADirectoryError"), cause.message


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_batch_on_a_full_disk_fails_naming_the_sinks_place_and_what_to_do(tmp_path, monkeypatch, kind):
    """A batch the full disk refused said only "No space left on device (os error 28)" (Delta) or
    "[Errno 28] No space left on device" (Parquet): neither the directory nor the table the sink
    writes, nor that space must be freed there. Now it names both, as the file sink's error does."""
    import errno
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    if kind == "parquet":
        from squall.external import parquet

        def full(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(parquet.pq, "write_table", full)
        sink = ParquetSinkBolt(tmp_path / "t", schema, "id", batch_size=3)
    else:
        delta = pytest.importorskip("squall.external.delta", reason="needs deltalake")
        from deltalake.exceptions import DeltaError

        def full(*args, **kwargs):  # as delta-rs says it, a Rust I/O error in a DeltaError
            raise DeltaError("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to copy "
                             "data to file: No space left on device (os error 28)")
        monkeypatch.setattr(delta, "write_deltalake", full)
        sink = delta.DeltaSinkBolt(tmp_path / "t", schema, "id", batch_size=3)
    out = Recorder()
    sink.prepare({}, Context(), out)
    for t in tuples(3):
        sink.execute(t)
    assert sorted(i for i, _ in out.causes) == [1, 2, 3] and not out.acked
    argument = "path" if kind == "parquet" else "table_uri"
    for _i, cause in out.causes:
        assert cause.kind == "unavailable", cause  # the disk's fault: not charged
        assert cause.message.startswith(f"sink 'sink': batch sink-3#0 of 3 rows was not written to {tmp_path / 't'} ("), \
            cause.message
        assert f"no space is left on the device (ENOSPC). To go on: free space on the file system that holds " \
               f"{tmp_path / 't'}" in cause.message and f"point the {type(sink).__name__}'s {argument} at" in cause.message, \
            cause.message
    assert [str(e) for e in out.errors] == [out.causes[0][1].message]  # reported once, saying the same


def test_a_delta_table_a_full_disk_keeps_from_being_created_is_an_error_naming_the_sink_and_table(tmp_path, monkeypatch):
    """A DeltaSinkBolt whose table a full disk kept from being created raised deltalake's own
    error out of prepare, which killed the worker at every restart saying "OSError: Generic
    LocalFileSystem error" and two lines of red-arrowed causes (terminal color codes in the log
    and the UI), naming neither the sink nor the table."""
    delta = pytest.importorskip("squall.external.delta", reason="needs deltalake")
    from squall.external._sink_batch import SinkWriteError

    def full(*args, **kwargs):  # as deltalake 1.x raises it
        raise OSError("Generic LocalFileSystem error\n  \x1b[31m↳\x1b[0m Unable to copy data to file\n"
                      "   \x1b[31m↳\x1b[0m No space left on device (os error 28)")
    monkeypatch.setattr(delta.DeltaTable, "create", full)
    sink = delta.DeltaSinkBolt(tmp_path / "t", pa.schema([("id", pa.int64(), False)]), "id")
    with pytest.raises(SinkWriteError) as e:
        sink.prepare({}, Context(), Recorder())
    assert str(e.value) == (
        f"sink 'sink' task 3: cannot open {tmp_path / 't'} (OSError: Generic LocalFileSystem error ↳ Unable to copy data "
        f"to file ↳ No space left on device (os error 28)): no space is left on the device (ENOSPC). To go on: free "
        f"space on the file system that holds {tmp_path / 't'} (see `df -h {tmp_path / 't'}`), or point the "
        f"DeltaSinkBolt's table_uri at a directory on another file system")


def test_a_batch_that_cannot_be_written_builds_its_reason_once(tmp_path, monkeypatch):
    """Every tuple of a batch whose write failed fails for one reason, which was masked and cut
    again for each (some 25 us a tuple: a quarter of a second for a batch of 10,000, on the
    sink's thread). Now the cause is made once and each tuple fails with it."""
    from squall._failure import FailureCause

    made: list[str] = []
    real = FailureCause.of_reason.__func__
    monkeypatch.setattr(FailureCause, "of_reason",
                        classmethod(lambda cls, component, task, reason, *kind: made.append(reason) or
                                    real(cls, component, task, reason, *kind)))
    out = Recorder()
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    sink = ParquetSinkBolt(tmp_path / "pq", schema, "id", batch_size=500)
    sink.prepare({}, Context(), out)
    shutil.rmtree(tmp_path / "pq")
    (tmp_path / "pq").write_text("a file where the sink's directory was")
    for t in tuples(500):
        sink.execute(t)
    assert sorted(i for i, _ in out.causes) == list(range(1, 501)) and not out.acked  # each of the 500 failed
    assert len({cause for _, cause in out.causes}) == 1
    assert len(made) == 1, len(made)  # main: 500


def test_a_huge_value_that_does_not_fit_is_cut_in_the_error_and_the_reason(tmp_path):
    """The schema error quoted the value whole, and is reported (so logged), and is the reason of
    the tuple's failure: a 1 MB text in an int64 column made a 1 MB log line and error record
    (and masking it for the reason read all of it). The value is cut to 200 characters, saying
    how long it was; a dead_letter row carries the values whole beside the error anyway."""
    from squall._tuple import Source, Tuple

    out = Recorder()
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    sink = ParquetSinkBolt(tmp_path / "pq", schema, "id", batch_size=1, on_bad_row="fail")
    sink.prepare({}, Context(), out)
    huge = "9" * 999_999 + "x"
    sink.execute(Tuple([1, huge], Source("src", "default", 1, Fields(["id", "n"]))))
    (error,), ((_, cause),) = out.errors, out.causes
    assert len(str(error)) < 1000, len(str(error))  # main: 1,000,344
    assert str(error).startswith(f"sink 'sink': field 'n' = '{'9' * 199}... (1000002 characters) does not fit "
                                 "column type int64"), str(error)[:300]
    assert cause.message == str(error)
    sink.cleanup()
