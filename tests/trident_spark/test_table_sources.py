"""A Delta table and a directory of Parquet files that other jobs write, as the sources of a
Trident word count compiled to Spark (issue 36 item 2): every sentence counted once, including
when the query died between its state's commit and Spark's (the point test_driver_kill SIGKILLs
its driver at) and is started again from its checkpoint while the table grew meanwhile: the
re-run batch reads exactly the files its offset names. The Parquet files are written by Spark
jobs of the shared session, the Delta commits by deltalake (delta-spark's jars are not reachable
here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squall.trident.spark import start
from squall.trident.state import State, StateFactory

from .conftest import delta_counts, expected_counts, sentences
from .ops import Split, delta_counts_factory

pytestmark = pytest.mark.timeout(300)  # the first test may pay the cold SparkSession


class _DiesAfterCommit(State):
    """The inner state; at commit of ``txid``, once (``<marker>`` absent), after the inner
    state committed, it raises: the query fails there as a driver killed there would stop."""

    def __init__(self, inner, marker: Path, txid: int) -> None:
        self.inner, self.marker, self.txid = inner, marker, txid

    def begin_commit(self, txid):
        self.inner.begin_commit(txid)

    def commit(self, txid):
        self.inner.commit(txid)
        if txid == self.txid and not self.marker.exists():
            self.marker.write_text(str(txid))
            raise RuntimeError(f"the driver dies after the state committed txid {txid}")

    def __getattr__(self, name):
        return getattr(self.inner, name)


class DiesAfterCommit(StateFactory):
    """``factory``'s states, failing the query once after committing ``txid``."""

    def __init__(self, factory, marker: Path, txid: int) -> None:
        self.factory, self.marker, self.txid = factory, marker, txid

    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _DiesAfterCommit(self.factory.make_state(conf, metrics, partition_index, num_partitions),
                                self.marker, self.txid)


def _word_count(spout, factory):
    from squall import Fields
    from squall.trident import TridentTopology
    from squall.trident.builtin import Count

    topology = TridentTopology()
    topology.new_stream("table", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    return topology


def _offset(checkpoint: Path, batch_id: int) -> dict:
    return json.loads((checkpoint / "offsets" / str(batch_id)).read_text().splitlines()[-1])


def _dies_at_txid_2_then_restarts(spark, tmp_path: Path, spout, meanwhile) -> Path:
    """Run the word count of ``spout`` into a Delta map until it dies after committing txid 2;
    call ``meanwhile`` (the table grows); start it again from the checkpoint and run it until
    it has read everything. Returns the checkpoint."""
    table, checkpoint = tmp_path / "counts", tmp_path / "checkpoint"
    factory = DiesAfterCommit(delta_counts_factory(str(table)), tmp_path / "died", 2)
    query = start(_word_count(spout, factory), spark, str(checkpoint))
    try:
        with pytest.raises(Exception, match="the driver dies after the state committed txid 2"):
            query.awaitTermination()
    finally:
        query.stop()
    # as a driver killed there leaves it: batch 1 (txid 2) planned and in the state, not committed
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    meanwhile()
    query = start(_word_count(spout, factory), spark, str(checkpoint))
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert (checkpoint / "commits" / "1").exists()
    return checkpoint


def test_a_delta_tables_appends_are_counted_once_across_a_restart_from_the_checkpoint(spark, tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from squall.external.trident_tables import DeltaTridentSpout

    source = tmp_path / "sentences"
    lines = sentences(40, seed=11)
    chunks = [lines[:10], lines[10:18], lines[18:]]

    def append(chunk):
        write_deltalake(str(source), pa.table({"sentence": chunk}), mode="append")

    append(chunks[0])   # version 0
    append(chunks[1])   # version 1
    spout = DeltaTridentSpout(str(source), ["sentence"], max_batch_files=1)  # a commit a batch

    def meanwhile():
        append(chunks[2])                        # version 2
        DeltaTable(str(source)).optimize.compact()  # version 3: rewrites every file, adds no data

    checkpoint = _dies_at_txid_2_then_restarts(spark, tmp_path, spout, meanwhile)
    assert DeltaTable(str(source)).history(1)[0]["operation"] == "OPTIMIZE"
    assert delta_counts(tmp_path / "counts") == expected_counts(lines)
    # the re-run batch read the range its offset named, which the new commits did not change
    assert _offset(checkpoint, 1)["parts"][str(source)] == {"first_version": 1, "last_version": 1, "files": 1,
                                                            "rows": len(chunks[1])}
    assert _offset(checkpoint, 2)["parts"][str(source)] == {"first_version": 2, "last_version": 3, "files": 1,
                                                            "rows": len(chunks[2])}
    assert not (checkpoint / "offsets" / "3").exists()


def test_a_parquet_directory_that_spark_jobs_write_is_counted_once_across_a_restart_from_the_checkpoint(spark, tmp_path):
    from squall.external.trident_tables import ParquetTridentSpout

    source = tmp_path / "sentences"
    lines = sentences(36, seed=12)

    def spark_job(chunk):
        # a Spark job: two tasks, two part files, moved into place at the job's commit (_SUCCESS,
        # .crc files and _temporary/ beside them)
        spark.createDataFrame([(s,) for s in chunk], "sentence string").repartition(2) \
            .write.mode("append").parquet(str(source))

    spark_job(lines[:12])
    spark_job(lines[12:20])
    files = sorted(p.name for p in source.iterdir() if p.name.endswith(".parquet") and not p.name.startswith("."))
    assert len(files) == 4
    spout = ParquetTridentSpout(str(source), ["sentence"], max_batch_files=2)  # two files a batch (by name)

    checkpoint = _dies_at_txid_2_then_restarts(spark, tmp_path, spout, lambda: spark_job(lines[20:]))
    assert delta_counts(tmp_path / "counts") == expected_counts(lines)
    # the batch re-run after the restart read the files its offset names, the new ones came after
    assert _offset(checkpoint, 1)["batch"] == files[2:]
    later = sorted(p.name for p in source.iterdir() if p.name.endswith(".parquet") and p.name not in files)
    assert sorted(_offset(checkpoint, 2)["batch"]) == later


def test_a_table_the_source_cannot_read_fails_its_planning_naming_it(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from squall.external.trident_tables import DeltaTridentSpout, TableSourceError
    from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec

    (tmp_path / "plain").mkdir()
    reader = PartitionedSpoutReader(SpoutSpec("table", DeltaTridentSpout(str(tmp_path / "plain"), ["sentence"]), {}))
    with pytest.raises(TableSourceError, match=rf"{tmp_path / 'plain'} is not a Delta table"):
        reader.latestOffset(reader.initialOffset(), None)
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"sentence": ["a b", "c"]}))
    reader = PartitionedSpoutReader(SpoutSpec("table", DeltaTridentSpout(str(table), ["sentence"]), {}))
    first = reader.latestOffset(reader.initialOffset(), None)
    DeltaTable(str(table)).update({"sentence": "'d'"})  # version 1 rewrites a file: not an append
    with pytest.raises(TableSourceError, match=rf"table {table} version 1 \(UPDATE\) removes data"):
        reader.latestOffset(first, None)
