"""FileTridentSpout: a new file that reuses a finished file's name is read from its start. Before,
its batches resumed at the old file's end offset (a partition keeps the last metadata of a file
that left the directory, so that one that comes back goes on): the new file's first bytes were
silently skipped. The batch metadata now names the file (inode, hash of its first bytes), and a
replay reads the same range of the same file or says that the file changed."""

from __future__ import annotations

import json
import logging
import os

import pytest

from squall import Fields, LocalCluster
from squall.external.files import FileConnectorError
from squall.external.trident_files import FileTridentSpout
from squall.testing._registry import SharedLog
from squall.trident import BaseFunction, TridentTopology
from squall.trident.coordinator import TransactionAttempt

from tests.conftest import wait_until


class Rows:
    def __init__(self) -> None:
        self.values: list = []

    def emit(self, values) -> None:
        self.values.append(values)


def put(path, lines: list[str]) -> None:
    """Puts a complete file at ``path``, as a producer should: written aside, renamed in."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines))
    os.rename(tmp, path)


class Batches:
    """The emitter of a FileTridentSpout over ``directory``, one file, txid after txid."""

    def __init__(self, directory, name: str) -> None:
        self.emitter = FileTridentSpout(directory, max_batch_records=100).get_emitter({}, None)
        [self.partition] = self.emitter.get_ordered_partitions([name])
        self.txid, self.last = 0, {}

    def next(self) -> tuple[list, dict]:
        self.txid += 1
        rows = Rows()
        meta = self.emitter.emit_batch_new(TransactionAttempt(self.txid, 0), rows, {self.partition},
                                           self.last)[self.partition]
        self.last = {self.partition: meta}
        return [v[0] for v in rows.values], meta

    def replay(self, txid: int, meta: dict) -> list:
        rows = Rows()
        self.emitter.re_emit_partition_batch(TransactionAttempt(txid, 1), rows, self.partition, meta)
        return [v[0] for v in rows.values]


def test_a_new_file_put_in_place_of_a_finished_one_is_read_from_its_start(tmp_path, caplog):
    done = tmp_path / "done"
    done.mkdir()
    put(tmp_path / "events.log", [f"old-{i}" for i in range(3)])
    b = Batches(tmp_path, "events.log")
    assert b.next()[0] == ["old-0", "old-1", "old-2"]
    os.rename(tmp_path / "events.log", done / "events.log.1")  # finished: moved out
    put(tmp_path / "events.log", [f"new-{i}" for i in range(5)])  # longer than the old one
    with caplog.at_level(logging.WARNING, "squall.external.trident_files"):
        got, meta = b.next()
    assert got == [f"new-{i}" for i in range(5)]
    assert meta["start"] == 0
    assert any(str(tmp_path / "events.log") in r.getMessage() and "from its start" in r.getMessage()
               and "replaced" in r.getMessage() for r in caplog.records)


def test_a_file_rewritten_under_its_inode_is_read_from_its_start(tmp_path, caplog):
    path = tmp_path / "a.log"
    path.write_text("aaaa\nbbbb\n")
    b = Batches(tmp_path, "a.log")
    assert b.next()[0] == ["aaaa", "bbbb"]
    with open(path, "r+") as f:  # the same inode, other first bytes, longer
        f.write("cccc\ndddd\neeee\n")
    with caplog.at_level(logging.WARNING, "squall.external.trident_files"):
        assert b.next()[0] == ["cccc", "dddd", "eeee"]
    assert any("first 10 bytes" in r.getMessage() for r in caplog.records)


def test_a_file_that_grew_goes_on_after_the_batch_before_and_replays_exactly(tmp_path):
    path = tmp_path / "a.log"
    put(path, ["one", "two"])
    b = Batches(tmp_path, "a.log")
    got1, meta1 = b.next()
    with open(path, "a") as f:
        f.write("three\n")
    got2, meta2 = b.next()
    assert (got1, got2) == (["one", "two"], ["three"])
    assert b.next()[0] == []
    assert b.replay(1, meta1) == got1 and b.replay(2, meta2) == got2
    assert json.loads(json.dumps(meta2)) == meta2  # plain values: Trident on Spark keeps it as JSON
    assert set(meta2) == {"start", "end", "sha256", "ino", "head"}


def test_a_replay_of_a_batch_of_a_file_since_replaced_says_so(tmp_path):
    put(tmp_path / "a.log", ["one", "two"])
    b = Batches(tmp_path, "a.log")
    _, meta = b.next()
    os.unlink(tmp_path / "a.log")
    with pytest.raises(FileConnectorError, match=r"replaying txid 1: .*a\.log cannot be read"):
        b.replay(1, meta)
    put(tmp_path / "a.log", ["ONE", "TWO", "three"])  # longer, but another file (maybe of the same inode)
    with pytest.raises(FileConnectorError, match=r"replaying txid 1: .*a\.log is not the file the batch read "
                                                 r"bytes 0\.\.8 of: (it is another file|its first 8 bytes)"):
        b.replay(1, meta)


def test_metadata_of_an_older_squall_without_identity_restarts_a_shorter_file(tmp_path):
    put(tmp_path / "a.log", ["short"])
    b = Batches(tmp_path, "a.log")
    b.last = {b.partition: {"start": 0, "end": 40, "sha256": "x"}}  # no ino, no head
    got, meta = b.next()
    assert got == ["short"] and meta["start"] == 0


class Record(BaseFunction):
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tuple, collector):  # noqa: A002
        self.log.append(tuple.values[0])


def test_on_a_cluster_a_new_file_with_a_reused_name_is_read_whole(tmp_path):
    data, done = tmp_path / "in", tmp_path / "done"
    data.mkdir()
    done.mkdir()
    log = SharedLog()
    topo = TridentTopology()
    topo.new_stream("src", FileTridentSpout(data, max_batch_records=100)).each(Fields("line"), Record(log), Fields())
    put(data / "events.log", [f"old-{i}" for i in range(3)])
    put(data / "other.log", ["other-0"])
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.max.spout.pending": 1}, topo.build())
        assert wait_until(lambda: len(log.items()) == 4, timeout=60)
        os.rename(data / "events.log", done / "events.log.1")  # finished: moved out, as the docs ask
        with open(data / "other.log", "a") as f:
            f.write("other-1\n")
        # a batch listed the directory without events.log (its partition keeps its last metadata)
        assert wait_until(lambda: "other-1" in log.items(), timeout=60)
        put(data / "events.log", [f"new-{i}" for i in range(5)])  # a new file of the same name
        assert wait_until(lambda: len(log.items()) >= 10, timeout=60)
        with open(data / "other.log", "a") as f:
            f.write("other-2\n")
        assert wait_until(lambda: "other-2" in log.items(), timeout=60)  # later batches add nothing
        got = sorted(log.items())
        cluster.kill_topology("t", wait_secs=0)
    # every line of both files and of other.log, once each
    assert got == sorted([f"old-{i}" for i in range(3)] + [f"new-{i}" for i in range(5)]
                         + ["other-0", "other-1", "other-2"])
