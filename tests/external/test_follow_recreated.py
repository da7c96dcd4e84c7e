"""DeltaTableSpout: a table deleted and created again at the same path (a new table: its own id,
versions from 0) is not followed from the old table's mark. Before, the spout kept no table id
and listed the new table from the old mark on: the new table's first versions were silently
never emitted. Now the progress keeps the table's id, and another id (or a mark above the
table's latest version) stops the spout with an error naming the table and what to do, as
Spark's Delta streaming source fails with "Delta table ID changed".

The spout task is driven directly (open, next_tuple, ack); every row emitted is counted."""

from __future__ import annotations

import json
import shutil

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from squall.external.files import dump_progress  # noqa: E402
from squall.external.follow import DeltaTableSpout  # noqa: E402

from tests.external.test_file_progress import Context  # noqa: E402


class Collector:
    """Keeps what the spout emits, (first value, message id), and the errors it reports."""

    def __init__(self) -> None:
        self.emitted: list = []
        self.errors: list[str] = []

    def emit(self, values, msg_id, stream):
        self.emitted.append((values[0], msg_id))

    def report_error(self, message):
        self.errors.append(str(message))


def rows(lo, hi):
    return pa.table({"event": [f"e-{i:03d}" for i in range(lo, hi)], "n": list(range(lo, hi))})


def events(lo, hi):
    return [f"e-{i:03d}" for i in range(lo, hi)]


def run(table, local) -> tuple[list[str], list[str]]:
    """Opens a spout task, emits and acks until nothing more comes, closes it: (events, errors)."""
    spout = DeltaTableSpout(table, ["event", "n"], commit_every=1, poll_secs=0, progress_dir=local)
    out = Collector()
    spout.open({}, Context(0, 1), out)
    while True:
        seen = len(out.emitted)
        for _ in range(50):
            spout.next_tuple()
        for _, msg_id in out.emitted[seen:]:
            spout.ack(msg_id)
        if len(out.emitted) == seen:
            break
    spout.close()
    return sorted(v for v, _ in out.emitted), out.errors


def progress_file(local):
    return local / "deltaspout" / "lines" / "task-0.json"


def test_a_table_created_again_at_the_same_path_stops_the_spout_naming_it_until_its_progress_is_removed(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    for lo in (0, 5, 10):
        deltalake.write_deltalake(table, rows(lo, lo + 5), mode="append")
    assert run(table, local) == (events(0, 15), [])
    old_id = deltalake.DeltaTable(table).metadata().id
    shutil.rmtree(table)  # dropped and created anew: versions 0 and 1 of another table
    deltalake.write_deltalake(table, rows(100, 105))
    deltalake.write_deltalake(table, rows(105, 110), mode="append")
    new_id = deltalake.DeltaTable(table).metadata().id
    for _ in range(2):  # and again after a restart: the progress still names the old table
        got, errors = run(table, local)
        assert got == []
        [error] = errors
        assert table in error and "Delta table ID changed" in error and old_id in error and new_id in error
        assert str(progress_file(local).parent) in error and "remove the progress files" in error
    shutil.rmtree(local / "deltaspout" / "lines")  # what the error says to do
    assert run(table, local) == (events(100, 110), [])
    assert json.loads(progress_file(local).read_text())["table_id"] == new_id


def test_a_progress_written_before_the_table_id_was_kept_goes_on_and_keeps_the_id(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    for lo in (0, 5, 10):
        deltalake.write_deltalake(table, rows(lo, lo + 5), mode="append")
    # an older squall's progress: every version through 1 done, no table id
    progress_file(local).parent.mkdir(parents=True)
    progress_file(local).write_bytes(dump_progress("lines", table, {}, mark=1, tasks=1))
    progress_file(local).chmod(0o600)
    assert run(table, local) == (events(10, 15), [])
    assert json.loads(progress_file(local).read_text())["table_id"] == deltalake.DeltaTable(table).metadata().id


def test_an_older_progress_whose_mark_is_above_the_tables_versions_stops_the_spout(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    deltalake.write_deltalake(table, rows(0, 5))
    progress_file(local).parent.mkdir(parents=True)
    progress_file(local).write_bytes(dump_progress("lines", table, {}, mark=7, tasks=1))
    progress_file(local).chmod(0o600)
    got, errors = run(table, local)
    assert got == []
    [error] = errors
    assert table in error and "at version 0" in error and "progress is at version 7" in error
