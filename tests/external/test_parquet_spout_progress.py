"""ParquetDirectorySpout's progress over a long run: the files a Spark job writes, read, and then
removed by the job's retention. Driven directly (open, next_tuple, ack)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from squall.external.follow import ParquetDirectorySpout


class _Context:
    def get_this_component_id(self):
        return "follow"

    def get_this_task_index(self):
        return 0

    def get_component_tasks(self, _):
        return [0]


class _Collector:
    def __init__(self) -> None:
        self.emitted: list[tuple[list, object]] = []

    def emit(self, values, msg_id, stream):
        self.emitted.append((list(values), msg_id))

    def report_error(self, message):
        raise AssertionError(message)


def test_the_progress_forgets_the_files_that_left_the_directory(tmp_path):
    """Each file read stayed in the spout's progress file (rewritten whole at every commit) and
    in its memory after it left the directory: a job writing a few files a minute, with a
    retention that removes the old ones, made a progress file of every file ever written,
    rewritten and fsynced each second. Now a file that is gone is forgotten, as FileSpout
    forgets it; the files still there are not read again, and every row is emitted once."""
    out, local = tmp_path / "out", tmp_path / "local"
    out.mkdir()
    spout = ParquetDirectorySpout(str(out), ["event", "n"], require_success=False, commit_every=1,
                                  poll_secs=0, progress_dir=local)
    collector = _Collector()
    spout.open({}, _Context(), collector)
    rounds = 300
    for r in range(rounds):
        pq.write_table(pa.table({"event": [f"e-{r}-0", f"e-{r}-1"], "n": [2 * r, 2 * r + 1]}),
                       out / f"part-{r:05d}.parquet")
        (out / f"part-{r - 3:05d}.parquet").unlink(missing_ok=True)  # the job's retention
        seen = len(collector.emitted)
        for _ in range(10):
            spout.next_tuple()
        new = collector.emitted[seen:]
        assert [v[0] for v, _ in new] == [f"e-{r}-0", f"e-{r}-1"], r
        for _, msg_id in new:
            spout.ack(msg_id)
        spout.next_tuple()  # the file is finished, its progress committed
        doc = json.loads((Path(local) / "parquetspout" / "follow" / "task-0.json").read_text())
        assert len(doc["files"]) <= 4, (r, len(doc["files"]))
        assert len(spout.seen) <= 4, r
    events = [v[0] for v, _ in collector.emitted]
    assert len(events) == len(set(events)) == 2 * rounds
