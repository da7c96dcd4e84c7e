"""The squall_trident source's readers without a query (issue 36 item 2): a spout's batch
metadata as the offset, planned once and emitted again the same; a spout that emits another
batch for the same txid fails the task naming it."""

from __future__ import annotations

import re

import pytest

from squall import Fields
from squall.trident.spout import IBatchSpout

pytest.importorskip("pyspark.sql.datasource")

from squall.trident.spark.rows import loads
from squall.trident.spark.source import BatchSpoutReader, PartitionedSpoutReader, SpoutSpec

from ..external.conftest import redis_server  # noqa: F401 (its fixture: a redis-server on loopback)
from .conftest import write_lines


def _read(reader, start, end):
    # read() yields Arrow batches of the pickled tuples (the trident_tuple column)
    return [loads(row) for p in reader.partitions(start, end) for rb in reader.read(p)
            for row in rb.column(0).to_pylist()]


def test_a_file_spouts_offsets_are_each_files_byte_range_and_a_replay_reads_the_same_lines(tmp_path):
    from squall.external.trident_files import FileTridentSpout

    write_lines(tmp_path / "a.txt", ["one", "two", "three"])
    write_lines(tmp_path / "b.txt", ["four"])
    reader = PartitionedSpoutReader(SpoutSpec("files", FileTridentSpout(str(tmp_path), max_batch_records=2), {}))
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert first["txid"] == 1 and {k: v for k, v in first["parts"]["a.txt"].items() if k in ("start", "end")} == {"start": 0, "end": 8}
    assert set(first["parts"]["a.txt"]) == {"start", "end", "sha256", "ino", "head"}  # the range, and which file
    assert sorted(_read(reader, start, first)) == [["four"], ["one"], ["two"]]
    assert sorted(_read(reader, start, first)) == [["four"], ["one"], ["two"]]  # a re-run: the same
    second = reader.latestOffset(first, None)
    assert second["txid"] == 2 and _read(reader, first, second) == [["three"]]
    assert reader.latestOffset(second, None) == second  # nothing new: no batch
    write_lines(tmp_path / "b.txt", ["five"])
    third = reader.latestOffset(second, None)
    assert third["txid"] == 3 and _read(reader, second, third) == [["five"]]


class _Drifting(IBatchSpout):
    """Emits a different tuple each time it is asked for a batch: not transactional."""

    def __init__(self):
        self.calls = 0

    def open(self, conf, context):
        pass

    def emit_batch(self, batch_id, collector):
        self.calls += 1
        collector.emit([f"{batch_id}-{self.calls}"])

    def ack(self, batch_id):
        pass

    def get_output_fields(self):
        return Fields("x")


def test_a_batch_spout_that_replays_another_batch_fails_the_task_naming_it():
    reader = BatchSpoutReader(SpoutSpec("drift", _Drifting(), {}))
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert end["txid"] == 1 and end["tuples"] == 1
    [partition] = reader.partitions(start, end)
    spout_copy = BatchSpoutReader(SpoutSpec("drift", _Drifting(), {}))  # a task's copy: its own calls
    spout_copy.spec.spout.calls = 5
    with pytest.raises(ValueError, match=r"new_stream\('drift', _Drifting\): batch txid 1 was 1 tuples when planned"
                                         r".*not transactional"):
        list(spout_copy.read(partition))


def test_a_redis_streams_spouts_offsets_are_each_streams_entry_ids_and_a_replay_reads_the_same(redis_server):  # noqa: F811 (the fixture imported above)
    import redis

    from squall.external.trident_redis_streams import RedisStreamTridentSpout

    client = redis.Redis.from_url(redis_server.url)
    for i in range(5):
        client.xadd("s1", {"value": f"a{i}"})
    client.xadd("s2", {"value": "b0"})
    spout = RedisStreamTridentSpout(redis_server.url, ["s1", "s2"], id_field=None, max_batch_entries=3)
    reader = PartitionedSpoutReader(SpoutSpec("redis", spout, {}))
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert first["txid"] == 1 and first["parts"]["s1"]["count"] == 3  # JSON as the spout's metadata is
    assert sorted(_read(reader, start, first)) == [["a0"], ["a1"], ["a2"], ["b0"]]
    assert sorted(_read(reader, start, first)) == [["a0"], ["a1"], ["a2"], ["b0"]]
    second = reader.latestOffset(first, None)
    assert sorted(_read(reader, first, second)) == [["a3"], ["a4"]]
    assert reader.latestOffset(second, None) == second


def test_a_kafka_transactional_spouts_offsets_replay_exactly_their_records():
    from squall.external.kafka import KafkaSpoutConfig, TopicPartition
    from squall.external.trident_kafka import KafkaTridentSpoutTransactional

    from ..external.test_kafka import MemoryConsumer

    logs = {TopicPartition("t", 0): [f"a{i}" for i in range(3)], TopicPartition("t", 1): ["b0"]}
    config = KafkaSpoutConfig("mem:0", ["t"], "g", consumer_factory=lambda props: MemoryConsumer(logs),
                              translator=lambda r: [r.partition, r.offset, r.value],
                              output_fields=["partition", "offset", "value"])
    reader = PartitionedSpoutReader(SpoutSpec("kafka", KafkaTridentSpoutTransactional(config), {}))
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    records = sorted(_read(reader, start, first))
    assert records == [[0, 0, "a0"], [0, 1, "a1"], [0, 2, "a2"], [1, 0, "b0"]]
    logs[TopicPartition("t", 0)].append("a3")  # more data: a re-run of txid 1 must not take it
    assert sorted(_read(reader, start, first)) == records
    second = reader.latestOffset(first, None)
    assert _read(reader, first, second) == [[0, 3, "a3"]]


def test_a_file_spouts_offsets_keep_only_the_files_gone_last(tmp_path):
    """A directory whose files are read and then removed: each offset (Spark writes one to its
    checkpoint per micro-batch) held every file the directory ever had, so the offsets, and the
    work of every batch, grew without end. Only the 1,000 files gone last keep their range now,
    as on the other hosts; a file that is there all along goes on where it was."""
    from squall.external.trident_files import FileTridentSpout

    kept = 1_000  # squall.trident.partitioned.GONE_PARTITIONS_KEPT
    reader = PartitionedSpoutReader(SpoutSpec("files", FileTridentSpout(str(tmp_path)), {}))
    offset = reader.initialOffset()
    read = []
    rounds = kept + 200
    for r in range(rounds):
        write_lines(tmp_path / f"f{r:05d}.txt", [f"f{r}"])
        (tmp_path / f"f{r - 3:05d}.txt").unlink(missing_ok=True)
        write_lines(tmp_path / "always.txt", [f"a{r}"])
        end = reader.latestOffset(offset, None)
        assert end["txid"] == offset["txid"] + 1
        assert len(end["parts"]) <= kept + 4, (r, len(end["parts"]))
        if r % 100 == 0 or r == rounds - 1:  # the same batch read back now and then
            read += _read(reader, offset, end)
        offset = end
    assert offset["parts"]["always.txt"]["end"] == sum(len(f"a{r}\n") for r in range(rounds))
    assert sorted(line for [line] in read if line.startswith("f")) == sorted(
        f"f{r}" for r in range(rounds) if r % 100 == 0 or r == rounds - 1)


class _RememberingQueue(IBatchSpout):
    """Storm's usual IBatchSpout over a queue: batch ``batch_id`` is what the queue held when it
    was first asked for (at most ``size``), remembered by id until acked, so a replay emits it
    again, an empty one too."""

    def __init__(self, size):
        self.size = size
        self.queue = []
        self.batches = {}
        self.acked = []

    def open(self, conf, context):
        pass

    def emit_batch(self, batch_id, collector):
        if batch_id not in self.batches:
            self.batches[batch_id], self.queue = self.queue[:self.size], self.queue[self.size:]
        for value in self.batches[batch_id]:
            collector.emit([value])

    def ack(self, batch_id):
        self.acked.append(batch_id)
        del self.batches[batch_id]

    def get_output_fields(self):
        return Fields("x")


def test_a_batch_spouts_empty_batch_is_acked_and_its_txid_passed_as_storm_commits_it():
    # Storm commits an empty batch like any other (its txid is used, the spout acked): a spout
    # that remembers batch ids must not be asked for the empty txid again, or it replays it
    # forever and nothing queued after is ever read
    spout = _RememberingQueue(size=2)
    reader = BatchSpoutReader(SpoutSpec("queue", spout, {}))
    start = reader.initialOffset()
    assert reader.latestOffset(start, None) == start  # txid 1 empty: no micro-batch
    assert reader.latestOffset(start, None) == start  # txid 2 empty as well
    spout.queue = [f"r{i}" for i in range(5)]
    offset, end = start, reader.latestOffset(start, None)
    assert end["txid"] == 3  # not txid 1 again, empty forever
    assert spout.acked == [1, 2] and set(spout.batches) == {3}
    read = []
    while end != offset:
        read += [values[0] for values in _read(reader, offset, end)]
        reader.commit(end)
        offset, end = end, reader.latestOffset(end, None)
    assert [offset["txid"], read] == [5, [f"r{i}" for i in range(5)]]  # every record once, in order
    assert spout.acked == [1, 2, 3, 4, 5, 6] and spout.batches == {}  # 6: the empty one after
    assert reader.latestOffset(offset, None) == offset  # txid 7 empty
    assert spout.acked == [1, 2, 3, 4, 5, 6, 7]


def test_an_offset_another_spout_wrote_is_refused_naming_both(tmp_path):
    """Spark matches a query's sources to its checkpoint's by position: after a stream was
    renamed, or the new_stream calls reordered, a spout was handed another one's offsets and
    read from them silently. Offsets now name their spout; one without (an older checkpoint's)
    passes."""
    from squall.external.trident_files import FileTridentSpout

    write_lines(tmp_path / "a.txt", ["one", "two"])
    lines = PartitionedSpoutReader(SpoutSpec("lines", FileTridentSpout(str(tmp_path)), {}))
    first = lines.latestOffset(lines.initialOffset(), None)
    assert first["spout"] == "lines" and sorted(_read(lines, lines.initialOffset(), first)) == [["one"], ["two"]]
    renamed = PartitionedSpoutReader(SpoutSpec("sentences", FileTridentSpout(str(tmp_path)), {}))
    said = ("new_stream('sentences', FileTridentSpout): the checkpoint's offset of txid 1 is spout 'lines''s, "
            "not this one's: the topology's spouts changed since the checkpoint was written")
    with pytest.raises(ValueError, match=re.escape(said)):
        renamed.latestOffset(first, None)
    with pytest.raises(ValueError, match=re.escape(said)):
        renamed.partitions({"txid": 0}, first)  # a batch the checkpoint planned, run again
    queue = BatchSpoutReader(SpoutSpec("queue", _Drifting(), {}))
    with pytest.raises(ValueError, match="offset of txid 1 is spout 'lines''s"):
        queue.latestOffset(first, None)
    older = {k: v for k, v in first.items() if k != "spout"}
    assert renamed.latestOffset(older, None) == older  # nothing new after it, and no refusal
