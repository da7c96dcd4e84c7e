"""DeltaSinkBolt: two live writers of one Delta application id (two topologies whose sinks share
a component id and a table, as the default ``app_id`` has them, or a zombie copy of a task). A
write that raised was judged by the app id's ``txn`` version alone: the other writer's commit
made a failed batch look landed (its rows acked, never written), and a landed one look failed
(its rows written again by the replay)."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from squall.external import delta
from squall.external.delta import DeltaSinkBolt

from .test_delta import SCHEMA, FakeCollector, FakeContext, read_ids, row, tup


def sink(tmp_path) -> tuple[DeltaSinkBolt, FakeCollector]:
    out = FakeCollector()
    bolt = DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", batch_size=2)
    bolt.prepare({}, FakeContext(), out)  # component "sink" task 1: app id "squall-sink-1"
    return bolt, out


def write(bolt, *ids) -> None:
    for i in ids:
        bolt.execute(tup(row(i)))


def other_writer_commits_in_the_write(monkeypatch, other, ids, landed: bool) -> None:
    """Makes the next write raise, after it committed (``landed``) or without committing, with
    ``other`` committing ``ids`` in between."""
    real = delta.write_deltalake

    def write_then_raise(*args, **kw):
        monkeypatch.setattr(delta, "write_deltalake", real)
        if landed:
            real(*args, **kw)
        write(other, *ids)
        raise OSError("the reply was lost" if landed else "no space left on the device")

    monkeypatch.setattr(delta, "write_deltalake", write_then_raise)


def test_a_write_that_failed_is_not_taken_as_landed_for_the_other_writers_commit(tmp_path, monkeypatch):
    a, out_a = sink(tmp_path)
    b, out_b = sink(tmp_path)
    other_writer_commits_in_the_write(monkeypatch, b, (101, 102), landed=False)
    write(a, 1, 2)  # a's batch 0 fails; b commits its batch 0 meanwhile
    assert out_b.acked == [101, 102]
    assert not out_a.acked and sorted(out_a.failed) == [1, 2]  # main: acked, and never written
    write(a, 1, 2)  # the replay
    assert sorted(out_a.acked) == [1, 2]
    assert read_ids(a) == [1, 2, 101, 102]


def test_a_write_that_landed_is_not_taken_as_failed_for_the_other_writers_earlier_batch(tmp_path, monkeypatch):
    a, out_a = sink(tmp_path)
    b, out_b = sink(tmp_path)  # started before a committed: its next batch is 0
    write(a, 1, 2, 3, 4)  # a's batches 0 and 1
    other_writer_commits_in_the_write(monkeypatch, b, (101, 102), landed=True)
    write(a, 5, 6)  # a's batch 2 lands and its write raises; b commits its batch 0 meanwhile
    assert out_b.acked == [101, 102]
    assert sorted(out_a.acked) == [1, 2, 3, 4, 5, 6] and not out_a.failed  # main: 5 and 6 failed
    write(a, 5, 6)  # a replay (from upstream) is acked from the committed ids
    assert read_ids(a) == [1, 2, 3, 4, 5, 6, 101, 102]  # main: 5 and 6 twice
