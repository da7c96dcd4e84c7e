"""A Delta table and a directory of Parquet files that other jobs write, as the two sources of a
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


def _word_count(factory, *spouts):
    from squall import Fields
    from squall.trident import TridentTopology
    from squall.trident.builtin import Count

    topology = TridentTopology()
    streams = [topology.new_stream(f"table{i}", spout) for i, spout in enumerate(spouts)]
    topology.merge(*streams).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    return topology


def _offset(checkpoint: Path, batch_id: int, partition: str) -> dict:
    """Batch ``batch_id``'s offset of the source that has ``partition`` (lines 3 on: a source each)."""
    sources = [json.loads(line) for line in (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()[2:]]
    [offset] = [o for o in sources if partition in o.get("parts", {})]
    return offset


def _run(spark, topology, checkpoint: Path, *, until_it_dies: bool) -> None:
    """Start ``topology`` on ``checkpoint`` and run it until it failed (``until_it_dies``: at the
    state's commit of txid 2) or has read everything; `run_restarting` starts it again when Spark's
    Python source process missed its connect-back (a starved machine), as ``squall trident`` does."""
    from pyspark.errors import StreamingQueryException

    from squall.trident.spark.restart import run_restarting

    def until_it_died(query) -> None:
        query.awaitTermination()
        pytest.fail("the query ended without failing")

    def start_query():
        return start(topology, spark, str(checkpoint))

    if not until_it_dies:
        run_restarting(start_query, lambda query: query.processAllAvailable(), name="table word count")
        return
    with pytest.raises(StreamingQueryException, match="the driver dies after the state committed txid 2"):
        run_restarting(start_query, until_it_died, name="table word count")


def test_a_delta_table_and_a_parquet_directory_are_counted_once_across_a_restart_from_the_checkpoint(spark, tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from squall.external.trident_tables import DeltaTridentSpout, ParquetTridentSpout

    delta, parquet = tmp_path / "delta", tmp_path / "parquet"
    delta_lines, parquet_lines = sentences(30, seed=11), sentences(36, seed=12)
    delta_chunks = [delta_lines[:10], delta_lines[10:18], delta_lines[18:]]

    def commit(chunk):
        write_deltalake(str(delta), pa.table({"sentence": chunk}), mode="append")

    def spark_job(chunk, tasks):
        # a Spark job: a part file per task, moved into place at the job's commit (_SUCCESS, .crc
        # files and _temporary/ beside them)
        spark.createDataFrame([(s,) for s in chunk], "sentence string").repartition(tasks) \
            .write.mode("append").parquet(str(parquet))

    def part_files():
        return sorted(p.name for p in parquet.iterdir() if p.name.endswith(".parquet") and not p.name.startswith("."))

    commit(delta_chunks[0])                 # version 0
    commit(delta_chunks[1])                 # version 1
    spark_job(parquet_lines[:20], 4)
    files = part_files()
    assert len(files) == 4
    # a commit a batch, and two Parquet files a batch (by name): batch 0 (txid 1) and 1 (txid 2)
    spouts = DeltaTridentSpout(str(delta), ["sentence"], max_batch_files=1), \
        ParquetTridentSpout(str(parquet), ["sentence"], max_batch_files=2)
    table, checkpoint = tmp_path / "counts", tmp_path / "checkpoint"
    factory = DiesAfterCommit(delta_counts_factory(str(table)), tmp_path / "died", 2)
    _run(spark, _word_count(factory, *spouts), checkpoint, until_it_dies=True)
    # as a driver killed there leaves it: batch 1 (txid 2) planned and in the state, not committed
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()

    commit(delta_chunks[2])                 # version 2
    DeltaTable(str(delta)).optimize.compact()  # version 3: rewrites every file, adds no data
    assert DeltaTable(str(delta)).history(1)[0]["operation"] == "OPTIMIZE"
    spark_job(parquet_lines[20:], 2)
    _run(spark, _word_count(factory, *spouts), checkpoint, until_it_dies=False)

    assert delta_counts(table) == expected_counts(delta_lines + parquet_lines)
    # the re-run batch 1 read what its offset named, which the new commits and files did not change
    assert (checkpoint / "commits" / "1").exists()
    assert _offset(checkpoint, 1, str(delta))["parts"][str(delta)] == \
        {"first_version": 1, "last_version": 1, "files": 1, "rows": len(delta_chunks[1])}
    assert _offset(checkpoint, 1, files[0])["batch"] == files[2:]
    # batch 2 read the rest: versions 2..3 (OPTIMIZE adding nothing) and the new job's files
    assert _offset(checkpoint, 2, str(delta))["parts"][str(delta)] == \
        {"first_version": 2, "last_version": 3, "files": 1, "rows": len(delta_chunks[2])}
    assert _offset(checkpoint, 2, files[0])["batch"] == sorted(set(part_files()) - set(files))
    assert not (checkpoint / "offsets" / "3").exists()


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
