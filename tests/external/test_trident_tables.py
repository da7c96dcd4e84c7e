"""The Delta table and Parquet directory Trident spouts (issue 36 item 2) on squall's engine: a
replayed txid re-emits exactly the same rows (also from a restarted task, after the source grew
and was compacted), every row is in exactly one txid, a word count over each on LocalCluster is
exact under batches failed before and after the state's write, and bad input is an error naming
the path and what is wrong."""

from __future__ import annotations

import os

import pytest

from squall import LocalCluster
from squall.trident import TridentTopology
from squall.trident.partitioned import PartitionedTridentSpoutExecutor

from ..conftest import wait_until
from ..trident.partition_fakes import Driver

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
deltalake = pytest.importorskip("deltalake")

from squall.external.trident_delta import DeltaMapState
from squall.external.trident_tables import DeltaTridentSpout, ParquetTridentSpout, TableSourceError

from .test_trident_connectors_local import conf, counted, lines, word_count


def append_delta(uri, text, **kwargs):
    deltalake.write_deltalake(str(uri), pa.table({"text": text, "n": list(range(len(text)))}), mode="append", **kwargs)


def write_parquet(path, text):
    """A Parquet file put in place whole, as a Spark job's commit or ParquetSinkBolt does."""
    tmp = path.with_name("." + path.name)
    pq.write_table(pa.table({"text": text}), tmp)
    tmp.rename(path)


def texts(batch):
    return [v[0] for v in batch]


def test_delta_spout_batches_are_version_ranges_replayed_exactly(tmp_path):
    uri = tmp_path / "t"
    append_delta(uri, ["a0", "a1"])                           # version 0
    append_delta(uri, ["b0"])                                 # version 1
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(uri, ["text", "n"], max_batch_files=1)), num_tasks=2)
    first = {1: d.emit(1), 2: d.emit(2)}
    assert first == {1: [["a0", 0], ["a1", 1]], 2: [["b0", 0]]}
    append_delta(uri, ["c0"])                                 # version 2
    deltalake.DeltaTable(str(uri)).optimize.compact()         # version 3: the same rows in new files
    assert d.emit(2) == first[2]                              # a replay: the range it had
    d.restart()
    assert d.emit(1) == first[1] and d.emit(2) == first[2]
    assert d.emit(3) == [["c0", 0]]                           # versions 2..3: OPTIMIZE adds nothing
    assert d.emit(4) == []
    append_delta(uri, ["e0"])                                 # version 4
    deltalake.DeltaTable(str(uri)).delete("text = 'a0'")      # version 5
    assert d.emit(5) == [["e0", 0]]                           # the appends before it come first
    with pytest.raises(TableSourceError, match=rf"table {uri} version 5 \(DELETE\) removes data .*append-only"):
        d.emit(6)
    assert d.emit(3) == [["c0", 0]]                           # what was read stays replayable


def test_delta_spout_reads_partition_columns_typed_and_starts_at_a_version(tmp_path):
    uri = tmp_path / "t"
    append_delta(uri, ["x"])
    append_delta(uri, ["y", "z"])
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(uri, ["n", "text"], starting_version=1)))
    assert sorted(d.emit(1)) == [[0, "y"], [1, "z"]]
    parted = tmp_path / "p"
    deltalake.write_deltalake(str(parted), pa.table({"text": ["p", "q"], "day": [7, 8]}), partition_by=["day"])
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(parted, ["text", "day"])))
    assert sorted(d.emit(1)) == [["p", 7], ["q", 8]]          # the partition column as its int64 type


def test_delta_spout_refuses_what_it_cannot_read_naming_it(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableSourceError, match=rf"{tmp_path / 'plain'} is not a Delta table"):
        Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(tmp_path / "plain", ["text"])))
    append_delta(tmp_path / "t", ["a"])
    with pytest.raises(TableSourceError, match=rf"table {tmp_path / 't'} has no column 'sentence' \(its columns: text, n\)"):
        Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(tmp_path / "t", ["sentence"])))
    append_delta(tmp_path / "o", ["a"])
    deltalake.write_deltalake(str(tmp_path / "o"), pa.table({"text": ["b"], "n": [0]}), mode="overwrite")
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(tmp_path / "o", ["text"])))
    assert d.emit(1) == [["a"]]                               # version 0, before the overwrite
    with pytest.raises(TableSourceError, match=r"version 1 \(WRITE\) removes data"):
        d.emit(2)


_COMMIT_FILE = f"_delta_log/{1:020d}.json"


@pytest.mark.parametrize("commit,says", [
    (b"not json\n", rf"{_COMMIT_FILE}: line 1 is not JSON \(JSONDecodeError"),
    (b"[" * 100_000 + b"\n", rf"{_COMMIT_FILE}: line 1 is not JSON \(RecursionError"),  # deeper than json recurses
    (b"\xff\xfe\n", rf"{_COMMIT_FILE} is not UTF-8 text"),
    (b'{"commitInfo": {}}\n[1]\n', rf"{_COMMIT_FILE}: line 2 is not a Delta action"),
    (b'{"commitInfo": 5}\n', rf"{_COMMIT_FILE}: line 1: its 'commitInfo' action is not a JSON object"),
    (b'{"remove": 1}\n', rf"{_COMMIT_FILE}: line 1: its 'remove' action is not a JSON object"),
    (b'{"add": {"partitionValues": {}}}\n', rf"{_COMMIT_FILE}: line 1: its 'add' action is not a JSON object, path a str"),
    (b'{"metaData": {"schemaString": "{"}}\n', r"version 1: its metaData's schemaString is not a Delta schema"),
], ids=["garbage", "nested", "not-utf8", "not-an-object", "commitInfo", "remove", "add", "schema"])
def test_delta_spout_names_the_commit_file_it_cannot_read(tmp_path, commit, says):
    """A commit of the log that is not what Delta writes (garbage, another tool's) is an error
    naming the table and the file: it was a bare JSONDecodeError, AttributeError or KeyError."""
    append_delta(tmp_path / "t", ["a"])
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(tmp_path / "t", ["text"])))
    assert d.emit(1) == [["a"]]
    (tmp_path / "t" / _COMMIT_FILE).write_bytes(commit)
    with pytest.raises(TableSourceError, match=rf"^DeltaTridentSpout: table {tmp_path / 't'}\b.*{says}"):
        d.emit(2)


@pytest.mark.parametrize("path", ["../private.parquet", "part/../../private.parquet", "/private.parquet"])
def test_delta_spout_reads_no_file_out_of_the_tables_directory(tmp_path, path):
    """An add whose path leads out of the table (a log written by hand, or by whoever may write
    it) was read: "../private.parquet" emitted the rows of a Parquet file beside the table."""
    import json

    append_delta(tmp_path / "t", ["a"])
    pq.write_table(pa.table({"text": ["private-row"]}), tmp_path / "private.parquet")
    d = Driver(PartitionedTridentSpoutExecutor(DeltaTridentSpout(tmp_path / "t", ["text"])))
    assert d.emit(1) == [["a"]]
    add = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
    (tmp_path / "t" / _COMMIT_FILE).write_text(json.dumps({"add": add}) + "\n")
    with pytest.raises(TableSourceError, match=rf"version 1 adds {path}, a path out of the table's directory"):
        d.emit(2)


def test_parquet_spout_reads_each_complete_file_once_and_replays_it(tmp_path):
    write_parquet(tmp_path / "f1.parquet", ["a", "b"])
    write_parquet(tmp_path / "f2.parquet", ["c"])
    write_parquet(tmp_path / "f3.parquet", ["d"])
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".f9.parquet").write_bytes(b"PAR1 half")
    (tmp_path / "f0.parquet").write_bytes(b"PAR1 still being written")  # no footer yet: waits
    d = Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(tmp_path, ["text"], max_batch_files=2)))
    assert texts(d.emit(1)) == ["a", "b", "c"]                           # two files a batch, by name
    d.restart()
    assert texts(d.emit(1)) == ["a", "b", "c"]                           # a replay: the same files
    write_parquet(tmp_path / "f0.parquet", ["z"])                        # now complete
    assert texts(d.emit(2)) == ["z", "d"]                                # each file once, whatever its name
    assert d.emit(3) == []


def test_parquet_spout_errors_name_the_file(tmp_path):
    write_parquet(tmp_path / "f1.parquet", ["a"])
    d = Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(tmp_path, ["sentence"])))
    with pytest.raises(TableSourceError, match=rf"{tmp_path / 'f1.parquet'} has no column 'sentence' \(its columns: text\)"):
        d.emit(1)
    d = Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(tmp_path, ["text"])))
    assert d.emit(1) == [["a"]]
    write_parquet(tmp_path / "f1.parquet", ["a", "b"])                   # replaced
    with pytest.raises(TableSourceError, match=rf"replaying txid 1: {tmp_path / 'f1.parquet'} was .* files must not change"):
        d.emit(1)
    with pytest.raises(TableSourceError, match=rf"{tmp_path / 'missing'} is not a directory"):
        Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(tmp_path / "missing", ["text"])))


def test_parquet_spout_reads_no_symbolic_link(tmp_path):
    """A link in the directory to a Parquet file only the workers' user may read was listed and
    read (pyarrow follows links): its rows went out as tuples. As FileSpout, no link is read."""
    src = tmp_path / "in"
    src.mkdir()
    write_parquet(src / "f1.parquet", ["a"])
    write_parquet(tmp_path / "private.parquet", ["private-row"])
    (src / "f2.parquet").symlink_to(tmp_path / "private.parquet")
    d = Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(src, ["text"])))
    assert d.emit(1) == [["a"]]
    (src / "f1.parquet").unlink()
    (src / "f1.parquet").symlink_to(tmp_path / "private.parquet")  # in a read file's place: its replay is refused
    with pytest.raises(TableSourceError, match=rf"{src / 'f1.parquet'} is a symbolic link, which the spout does not"):
        d.emit(1)


def test_parquet_spout_refuses_a_link_put_in_a_files_place_after_it_was_checked(tmp_path, monkeypatch):
    """The link was looked for by name (``os.path.islink``) and the file then opened by pyarrow,
    which follows one: a link put in place between the two was read. The open refuses it now."""
    src = tmp_path / "in"
    src.mkdir()
    write_parquet(tmp_path / "private.parquet", ["private-row"])
    (src / "f1.parquet").symlink_to(tmp_path / "private.parquet")
    monkeypatch.setattr(os.path, "islink", lambda path: False)  # every check saw the regular file it replaced
    d = Driver(PartitionedTridentSpoutExecutor(ParquetTridentSpout(src, ["text"])))
    with pytest.raises(TableSourceError, match=rf"{src / 'f1.parquet'} is a symbolic link, which the spout does not"):
        d.emit(1)


@pytest.mark.parametrize("source", ["delta", "parquet"])
def test_a_word_count_over_a_table_on_local_cluster_is_exact_under_failed_batches(tmp_path, source):
    data, counts = tmp_path / "in", tmp_path / "counts"
    text = lines(0, 60)
    if source == "delta":
        for i in range(0, 60, 12):
            append_delta(data, text[i:i + 12])
        spout = DeltaTridentSpout(data, ["text"], max_batch_files=2)
    else:
        data.mkdir()
        for i in range(0, 60, 12):
            write_parquet(data / f"part-{i:03d}.parquet", text[i:i + 12])
        spout = ParquetTridentSpout(data, ["text"], max_batch_files=1)
    factory = DeltaMapState.transactional(counts, pa.schema([("word", pa.string())]), pa.int64(),
                                          value_field="count", local_cache_size=0)
    topo = TridentTopology()
    word_count(topo, spout, "text", factory)

    def stored():
        if not deltalake.DeltaTable.is_deltatable(str(counts)):
            return {}
        return {r["word"]: r["count"] for r in deltalake.DeltaTable(str(counts)).to_pyarrow_table().to_pylist()}

    expected = counted(text)
    with LocalCluster() as cluster:
        cluster.submit_topology(f"{source}-counts", conf(), topo.build())
        assert wait_until(lambda: stored() == dict(expected), timeout=180), (stored(), expected)
        more = lines(500, 20)
        if source == "delta":
            append_delta(data, more)
        else:
            write_parquet(data / "part-900.parquet", more)
        expected += counted(more)
        assert wait_until(lambda: stored() == dict(expected), timeout=180), (stored(), expected)
