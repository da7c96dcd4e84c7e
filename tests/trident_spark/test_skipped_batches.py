"""A planned batch that reads records and emits no tuple without dead-lettering any (lines or
Kafka records the translator skips by returning None; a Parquet file of no rows), on Spark's
engine: it is a micro-batch of no rows whose offset moves past them, so the records after it are
read, and a restarted driver goes on after it. Before, such a plan kept the source at its old
offset (only a batch of dead letters moved it, 69fb3ad6): the same records were planned again at
every trigger and nothing after them was ever read, a stalled query with nothing failing. Driven
through the squall_trident source's readers as test_dead_letter_batches.py does (a task's read
retried, the driver restarted from the last offset, every record's place counted), then one live
query on the package's session."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall import Fields
from squall.external.trident_files import FileTridentSpout
from squall.trident.partitioned import IPartitionedTridentSpout
from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec

from ..kafka_broker import QUIET, kafka_broker  # noqa: F401 (the module-scoped broker fixture)
from ..trident.test_partitioned import Part
from .conftest import count_lines_live, dead_letter_lines, read_batch, write_lines
from .ops import skip_comment_records, skip_comments

pytestmark = pytest.mark.timeout(300)  # the live test may pay the package's cold SparkSession


def _plan_all(reader, offset, plans: int = 10) -> tuple[list, list]:
    """The batches ``reader`` plans from ``offset`` until it plans none (at most ``plans``): each
    one's offset, and the tuples its read gives (read twice: a retried task gives the same)."""
    offsets, read = [], []
    for _ in range(plans):
        end = reader.latestOffset(offset, None)
        if end == offset:
            break
        got = read_batch(reader, offset, end)
        assert read_batch(reader, offset, end) == got
        offsets.append(end)
        read += got
        offset = end
    return offsets, read


def test_a_file_batch_of_skipped_lines_only_moves_the_offset_past_them(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="squall.external.trident_files")
    path = tmp_path / "a.txt"
    lines = ["#1", "#2", "good1", "#3", "#4", "#5", "#6", "good2", "#7", "bad1", "#8", "#9"]
    write_lines(path, lines)
    at = {}  # each line's byte offset
    offset = 0
    for line in lines:
        at[line] = offset
        offset += len(line) + 1

    def reader():
        return PartitionedSpoutReader(SpoutSpec("files", FileTridentSpout(str(tmp_path), translator=skip_comments,
                                                                          max_batch_records=2), {}))

    driver = reader()
    start = driver.initialOffset()
    first = driver.latestOffset(start, None)  # #1, #2: no tuple, no dead letter, but past them
    assert first["txid"] == 1 and first["parts"]["a.txt"]["end"] == at["good1"], first
    assert read_batch(driver, start, first) == read_batch(driver, start, first) == []  # a task retried: nothing
    second = driver.latestOffset(first, None)
    assert second["txid"] == 2 and read_batch(driver, first, second) == [["good1"]]  # good1, #3
    third = driver.latestOffset(second, None)  # #4, #5
    assert third["txid"] == 3 and read_batch(driver, second, third) == []
    # the driver restarted: a new reader (its emitter new) from the last offset Spark wrote, that
    # of a batch of skipped lines only: it reads from after them (#6 on), not #4 and #5 again
    restarted = reader()
    offsets, read = _plan_all(restarted, third)
    assert [o["txid"] for o in offsets] == [4, 5, 6]  # #6 good2; #7 bad1; #8 #9
    assert [o["parts"]["a.txt"]["start"] for o in offsets] == [at["#6"], at["#7"], at["#8"]]
    assert offsets[-1]["parts"]["a.txt"]["end"] == path.stat().st_size
    assert read == [["good2"]]
    # every line: the two good ones read once each, the refused one logged once, none left
    refused = f"FileTridentSpout dead letter: txid 5: {path} offset {at['bad1']}: ValueError: refused 'bad1'"
    assert dead_letter_lines(caplog) == [refused]
    assert restarted.latestOffset(offsets[-1], None) == offsets[-1]  # nothing new: no batch



def test_a_plan_that_reads_nothing_is_still_no_micro_batch(tmp_path):
    write_lines(tmp_path / "a.txt", ["good1"])
    reader = PartitionedSpoutReader(SpoutSpec("files", FileTridentSpout(str(tmp_path), translator=skip_comments), {}))
    offsets, read = _plan_all(reader, reader.initialOffset())
    assert [o["txid"] for o in offsets] == [1] and read == [["good1"]]
    assert reader.latestOffset(offsets[0], None) == offsets[0]  # asked again, nothing new: still none
    write_lines(tmp_path / "a.txt", ["#1"])
    second = reader.latestOffset(offsets[0], None)
    assert second["txid"] == 2 and read_batch(reader, offsets[0], second) == []
    assert reader.latestOffset(second, None) == second


def test_a_parquet_file_of_no_rows_is_a_micro_batch_of_no_rows_and_the_next_file_is_read(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    from squall.external.trident_tables import ParquetTridentSpout

    pq.write_table(pa.table({"word": pa.array([], pa.string())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"word": ["x", "y"]}), tmp_path / "b.parquet")
    reader = PartitionedSpoutReader(SpoutSpec("pq", ParquetTridentSpout(tmp_path, ["word"], max_batch_files=1), {}))
    offsets, read = _plan_all(reader, reader.initialOffset())
    assert [(o["txid"], o["batch"]) for o in offsets] == [(1, ["a.parquet"]), (2, ["b.parquet"])]
    assert read == [["x"], ["y"]]


def test_a_delta_commit_that_adds_no_row_is_a_micro_batch_of_no_rows_past_it(tmp_path):
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")

    from squall.external.trident_tables import DeltaTridentSpout

    table = str(tmp_path / "t")
    deltalake.write_deltalake(table, pa.table({"word": ["x"]}))
    deltalake.write_deltalake(table, pa.table({"word": pa.array([], pa.string())}), mode="append")  # adds no file
    reader = PartitionedSpoutReader(SpoutSpec("delta", DeltaTridentSpout(table, ["word"]), {}))
    first = reader.latestOffset(reader.initialOffset(), None)  # both commits: x
    assert read_batch(reader, reader.initialOffset(), first) == [["x"]]
    deltalake.write_deltalake(table, pa.table({"word": pa.array([], pa.string())}), mode="append")
    offsets, read = _plan_all(reader, first)  # version 2 alone: no row, but past it
    assert [o["parts"][table]["first_version"] for o in offsets] == [2] and read == []
    deltalake.write_deltalake(table, pa.table({"word": ["y"]}), mode="append")
    offsets, read = _plan_all(reader, offsets[-1])
    assert [o["parts"][table]["first_version"] for o in offsets] == [3] and read == [["y"]]


def _covered(offsets: list[dict]) -> list[tuple[int, int]]:
    """The (partition, offset) of every Kafka record the batches ``offsets`` read, tuples or not."""
    covered = []
    for end in offsets:
        for pid in end["batch"]:
            meta = end["parts"][pid]
            if not meta["empty"]:
                partition = int(pid.rsplit("@", 1)[1])
                covered += [(partition, o) for o in range(meta["first_offset"], meta["last_offset"] + 1)]
    return sorted(covered)


def test_a_kafka_batch_of_skipped_records_only_moves_the_offset_past_them(kafka_broker):  # noqa: F811 (the fixture)
    pytest.importorskip("confluent_kafka")
    from squall.external.kafka import KafkaSpoutConfig
    from squall.external.trident_kafka import KafkaTridentSpoutTransactional

    def reader():
        return PartitionedSpoutReader(SpoutSpec("kafka", KafkaTridentSpoutTransactional(KafkaSpoutConfig(
            kafka_broker.bootstrap, ["skips"], "skips", poll_timeout_ms=100, translator=skip_comment_records,
            output_fields=["line"], props={**QUIET, "fetch.wait.max.ms": 20})), {}))

    def plan_until(reader, offset, done) -> tuple[list, list]:
        # a poll returns what was fetched by then: plan until ``done`` (each plan polls 100 ms at most)
        offsets: list = []
        read: list = []
        for _ in range(100):
            more, got = _plan_all(reader, offsets[-1] if offsets else offset)
            offsets += more
            read += got
            if done(offsets, read):
                break
        return offsets, read

    driver = reader()
    skipped = kafka_broker.produce("skips", [f"#{i}" for i in range(8)])
    # batches of skipped records only: each a micro-batch of no rows, until every one is covered
    offsets, read = plan_until(driver, driver.initialOffset(), lambda o, r: len(_covered(o)) == len(skipped))
    assert offsets and read == [] and _covered(offsets) == sorted(skipped), offsets
    good = kafka_broker.produce("skips", ["good1", "#8", "#9", "good2"])
    more, read = plan_until(driver, offsets[-1], lambda o, r: len(r) == 2)
    offsets += more
    assert sorted(read) == [["good1"], ["good2"]]
    # the driver restarted from the last offset: it reads only what came after
    restarted = reader()
    late = kafka_broker.produce("skips", ["#10", "good3"])
    more, read = plan_until(restarted, offsets[-1], lambda o, r: len(_covered(offsets + o)) == 14)
    assert read == [["good3"]]
    assert _covered(offsets + more) == sorted(skipped + good + late)  # every record read, each once


def test_a_live_query_reads_past_batches_of_skipped_lines_counting_each_good_line_once(spark, tmp_path):
    # txid 1: three skipped lines, a micro-batch of no rows; txid 2: the good lines
    lines = ["#1", "#2", "#3", "good1", "good2", "good1"]
    assert count_lines_live(spark, tmp_path, lines, skip_comments) == {"good1": 2, "good2": 1}


class _Coordinator:
    def __init__(self, data):
        self.data = data

    def is_ready(self, txid):
        return True

    def get_partitions_for_batch(self):
        return sorted(self.data)

    def close(self):
        pass


class _FilteringEmitter:
    """A user's emitter, written as Storm's with no word of ``covers_records``: batches of at most
    two records, of which it emits only those not starting with '#' (a filter inside the spout)."""

    def __init__(self, data):
        self.data = data

    def get_ordered_partitions(self, info):
        return [Part(p) for p in info]

    def refresh_partitions(self, mine):
        pass

    def get_partitions_for_task(self, task_index, num_tasks, ordered):
        return ordered[task_index::num_tasks]

    def emit_batch_new(self, tx, collector, partitions, last):
        metas = {}
        for p in partitions:
            start = last[p]["end"] if last.get(p) else 0
            metas[p] = {"start": start, "end": min(start + 2, len(self.data[p.pid]))}
            self.re_emit_partition_batch(tx, collector, p, metas[p])
        return metas

    def re_emit_partition_batch(self, tx, collector, partition, meta):
        for record in self.data[partition.pid][meta["start"]:meta["end"]]:
            if not record.startswith("#"):
                collector.emit([record])

    def close(self):
        pass


class _SubclassedFilteringEmitter(_FilteringEmitter, IPartitionedTridentSpout.Emitter):
    """The same emitter as a subclass of Storm's interface, whose ``covers_records`` is the
    base's default."""


class _FilteringSpout(IPartitionedTridentSpout):
    def __init__(self, data, emitter):
        self.data, self.emitter = data, emitter

    def get_coordinator(self, conf, context):
        return _Coordinator(self.data)

    def get_emitter(self, conf, context):
        return self.emitter(self.data)

    def get_output_fields(self):
        return Fields("record")


@pytest.mark.parametrize("emitter", [_FilteringEmitter, _SubclassedFilteringEmitter])
def test_a_users_spout_that_filters_a_whole_batch_is_read_past_it_without_covers_records(emitter):
    data = {"a": ["#1", "#2", "a1", "#3", "#4", "#5", "a2"], "b": ["#6", "#7"]}
    spout = _FilteringSpout(data, emitter)
    driver = PartitionedSpoutReader(SpoutSpec("mine", spout, {}))
    # txid 1 reads #1 #2 and #6 #7: no tuple, but every partition's metadata moved past them.
    # Before, the plan stayed at the initial offset for good and a1, a2 were never read.
    offsets, read = _plan_all(driver, driver.initialOffset())
    assert sorted(read) == [["a1"], ["a2"]]
    assert [o["parts"]["a"]["end"] for o in offsets][-1] == 7 and offsets[-1]["parts"]["b"]["end"] == 2
    # each record read by exactly one batch: the batches' ranges tile both lists
    for pid, records in data.items():
        ranges = sorted({(o["parts"][pid]["start"], o["parts"][pid]["end"]) for o in offsets if pid in o["batch"]})
        covered = [i for start, end in ranges for i in range(start, end)]
        assert covered == list(range(len(records))), (pid, ranges)
    # nothing new: no micro-batch; a record added later is read by the next one
    assert driver.latestOffset(offsets[-1], None) == offsets[-1]
    data["b"].append("b1")
    more, read = _plan_all(driver, offsets[-1])
    # (after a batch that read, at most one of no rows: the end of it again, which moves the
    # metadata's start; the spout cannot say that it read nothing there)
    assert read == [["b1"]] and len(more) <= 2
    assert driver.latestOffset(more[-1], None) == more[-1]
