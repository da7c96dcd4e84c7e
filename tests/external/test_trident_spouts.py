"""The file and Redis Streams Trident spouts against real files and a real redis-server: a
replayed txid re-emits exactly the same records (also from a restarted task, and after the source
grew), every record is in exactly one txid, and a source changed under a batch is an error naming
it."""

from __future__ import annotations

import os

import pytest

from squall import FailedException
from squall.external.files import FileConnectorError
from squall.trident.partitioned import PartitionedTridentSpoutExecutor

from squall.trident.coordinator import TransactionAttempt

from ..trident.partition_fakes import Driver, Recorder

redis = pytest.importorskip("redis")

from squall.external.trident_files import FilePartition, FileTridentSpout  # noqa: E402
from squall.external.trident_redis_streams import RedisStreamTridentError, RedisStreamTridentSpout  # noqa: E402


def append(path, lines, end=b"\n"):
    with open(path, "ab") as f:
        f.write(b"".join(line.encode() + end for line in lines))


def words(batch):
    return [v[0] for v in batch]


# -- files ----------------------------------------------------------------------------------------

def test_file_spout_reads_no_symbolic_link_nor_fifo_put_in_the_directory(tmp_path):
    """Whoever writes the directory could link a file in that only the spout's user may read
    (its storm-local/secret): the spout emitted the target's lines as tuples. As FileSpout, it
    lists and opens regular files only, also when one is swapped in after the listing."""
    src = tmp_path / "in"
    src.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t-cluster-secret\n")
    append(src / "a.txt", ["a0"])
    append(src / "b.txt", ["b0"])
    (src / "planted.txt").symlink_to(secret)
    spout = FileTridentSpout(src)
    d = Driver(PartitionedTridentSpoutExecutor(spout), num_tasks=1)
    assert sorted(words(d.emit(1))) == ["a0", "b0"]
    append(src / "a.txt", ["a1"])
    append(src / "b.txt", ["b1"])
    (src / "b.txt").unlink()
    (src / "b.txt").symlink_to(secret)  # in a listed file's place: the batch's read is refused it
    emitter = spout.get_emitter({}, None)
    metas = emitter.emit_batch_new(TransactionAttempt(2, 0), Recorder(), {FilePartition("a.txt"), FilePartition("b.txt")}, {})
    assert [p.name for p in metas] == ["a.txt"]
    with pytest.raises(FileConnectorError, match=r"b\.txt cannot be read .*symbolic link"):
        emitter.re_emit_partition_batch(TransactionAttempt(1, 1), Recorder(), FilePartition("b.txt"),
                                        {"start": 0, "end": 3})
    (src / "b.txt").unlink()
    os.mkfifo(src / "b.txt")  # nor does a FIFO block the read until a writer comes
    assert [p.name for p in emitter.emit_batch_new(TransactionAttempt(3, 0), Recorder(), {FilePartition("b.txt")}, {})] == []
    assert "s3cr3t" not in repr(d.emit(2))


def test_file_spout_replays_the_same_byte_ranges_and_reads_every_line_once(tmp_path):
    append(tmp_path / "a.txt", [f"a{i}" for i in range(5)])
    append(tmp_path / "b.txt", [f"b{i}" for i in range(2)])
    (tmp_path / ".hidden").write_bytes(b"x\n")
    (tmp_path / "c.txt.inprogress").write_bytes(b"x\n")
    d = Driver(PartitionedTridentSpoutExecutor(FileTridentSpout(tmp_path, max_batch_records=3)), num_tasks=2)
    first = {1: d.emit(1), 2: d.emit(2)}
    assert sorted(words(first[1])) == ["a0", "a1", "a2", "b0", "b1"]  # in the order of the files' tasks
    assert words(first[2]) == ["a3", "a4"]
    append(tmp_path / "a.txt", ["a5"])
    append(tmp_path / "b.txt", ["b2 half"], end=b"")  # being written: not a line yet
    assert d.emit(2) == first[2]
    d.restart()
    assert d.emit(1) == first[1] and d.emit(2) == first[2]
    third = d.emit(3)
    assert words(third) == ["a5"]
    append(tmp_path / "b.txt", [" done"])
    append(tmp_path / "d.txt", ["d0"])  # a new file joins at the next batch
    fourth = d.emit(4)
    assert sorted(words(fourth)) == ["b2 half done", "d0"]
    got = [w for b in (first[1], first[2], third, fourth) for w in words(b)]
    assert sorted(got) == sorted(["a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1", "b2 half done", "d0"])


def test_file_spout_bad_and_oversized_lines_are_skipped_the_same_way_on_replay(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"ok1\n" + b"\xff\xfe\n" + b"x" * 100 + b"\n" + b"ok2\n")
    spout = FileTridentSpout(tmp_path)
    d = Driver(PartitionedTridentSpoutExecutor(spout))
    d.emitters[0].emitter.limit = 50
    assert words(d.emit(1)) == ["ok1", "ok2"]
    assert words(d.emit(1)) == ["ok1", "ok2"]


def _lines_one_by_one(data: bytes, limit: int, translate) -> list:
    """What a file's whole lines make, each taken alone: the reference for the block reader."""
    out = []
    for line in data.split(b"\n")[:-1]:
        if len(line) + 1 > limit:
            continue
        try:
            values = translate(line + b"\n")
        except ValueError:
            continue
        if values is not None:
            out.append(list(values))
    return out


@pytest.mark.parametrize("translator", ["default", "own"])
def test_file_spout_reads_by_blocks_what_it_would_read_line_by_line(tmp_path, translator):
    # lines across the reader's 64 KiB blocks: CRLF, not UTF-8, over the limit (short and longer
    # than a block), one longer than a block within it, and a last line still being written
    from squall.external.files import MAX_RECORD_KEY, translate_text

    limit = 100_000
    parts = []
    for i in range(6000):
        parts.append(f"line {i} é".encode() + (b"\r" if i % 7 == 0 else b""))
        if i % 997 == 0:
            parts.append(b"\xff bad \xfe")
        if i % 1999 == 0:
            parts.append(b"y" * (limit + 5))
        if i == 3000:
            parts.append(b"z" * 70_000)
    data = b"\n".join(parts) + b"\nhalf a li"
    (tmp_path / "a.txt").write_bytes(data)
    translate = translate_text if translator == "default" else (lambda b: [b.decode("latin-1").strip()[::-1]])
    spout = FileTridentSpout(tmp_path, max_batch_records=7 * 97, translator=translate)
    emitter = spout.get_emitter({MAX_RECORD_KEY: limit}, None)
    [partition] = emitter.get_ordered_partitions(["a.txt"])
    got, metas, last, txid = [], [], {}, 0
    while True:
        txid += 1
        batch = Recorder()
        meta = emitter.emit_batch_new(TransactionAttempt(txid, 0), batch, {partition}, last)[partition]
        if meta["end"] == meta["start"]:
            break
        got += batch.values
        metas.append((meta, batch.values))
        last = {partition: meta}
    assert got == _lines_one_by_one(data, limit, translate)
    assert len(got) == 6001 + (0 if translator == "default" else 7)  # the line of 70,000 bytes is one
    assert metas[-1][0]["end"] == data.rindex(b"\n") + 1
    for meta, values in metas:  # a replay reads the same range, the same tuples
        again = Recorder()
        emitter.re_emit_partition_batch(TransactionAttempt(1, 0), again, partition, meta)
        assert again.values == values


def test_file_spout_a_file_changed_under_a_batch_fails_its_replay_naming_it(tmp_path):
    path = tmp_path / "a.txt"
    append(path, ["one", "two"])
    d = Driver(PartitionedTridentSpoutExecutor(FileTridentSpout(tmp_path)))
    d.emit(1)
    path.write_bytes(b"onX\ntwo\n")
    with pytest.raises(FileConnectorError, match="a.txt.*changed"):
        d.emit(1)
    path.write_bytes(b"on")
    with pytest.raises(FileConnectorError, match="a.txt has 2 bytes"):
        d.emit(1)


def test_file_spout_a_new_file_moves_no_file_to_another_task(tmp_path):
    # batches 1 and 2 are in flight at once (topology.max.spout.pending 2) and the tasks run
    # them at their own pace: a file that changed task with the new listing was read from its
    # start by its new task while its old task had not yet stored where batch 1 ended there
    append(tmp_path / "a.txt", ["a0", "a1"])
    append(tmp_path / "c.txt", ["c0", "c1"])
    spout = PartitionedTridentSpoutExecutor(FileTridentSpout(tmp_path, max_batch_records=1))
    d = Driver(spout, num_tasks=2)
    meta = {1: d.coordinator.initialize_transaction(1, None, None)}
    append(tmp_path / "b.txt", ["b0"])
    meta[2] = d.coordinator.initialize_transaction(2, meta[1], None)
    emitted = {1: Recorder(), 2: Recorder()}
    fast, slow = d.emitters
    for emitter, txid in [(fast, 1), (fast, 2), (slow, 1), (slow, 2)]:
        emitter.emit_batch(TransactionAttempt(txid, 0), meta[txid], emitted[txid])
    got = words(emitted[1].values) + words(emitted[2].values)
    assert sorted(got) == ["a0", "a1", "b0", "c0", "c1"]


# -- Redis Streams --------------------------------------------------------------------------------

def add(client, stream, n, start=0):
    return [client.xadd(stream, {"value": f"{stream}-{start + i}"}) for i in range(n)]


def test_redis_stream_spout_replays_the_same_entries_and_reads_each_once(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ids = {"s1": add(client, "s1", 5), "s2": add(client, "s2", 1)}
    spout = RedisStreamTridentSpout(redis_server.url, ["s1", "s2"], max_batch_entries=3)
    d = Driver(PartitionedTridentSpoutExecutor(spout), num_tasks=2)
    first = {1: d.emit(1), 2: d.emit(2)}
    assert first[1] == [[ids["s1"][0], "s1-0"], [ids["s1"][1], "s1-1"], [ids["s1"][2], "s1-2"], [ids["s2"][0], "s2-0"]]
    assert first[2] == [[ids["s1"][3], "s1-3"], [ids["s1"][4], "s1-4"]]
    add(client, "s1", 2, start=5)
    assert d.emit(2) == first[2]
    d.restart()
    assert d.emit(1) == first[1] and d.emit(2) == first[2]
    d.success(2)
    third = d.emit(3)
    assert [v[1] for v in third] == ["s1-5", "s1-6"]
    got = sorted(v[1] for b in (first[1], first[2], third, d.emit(4)) for v in b)
    assert got == sorted([f"s1-{i}" for i in range(7)] + ["s2-0"])


def test_redis_stream_spout_skips_an_entry_its_translator_raises_on_whatever_it_raises(redis_server):
    """Only `MalformedEntry` was a dead letter: a KeyError failed the batch on every replay, for good."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.xadd("s", {"value": "1"})
    client.xadd("s", {"other": "x"})
    client.xadd("s", {"value": "3"})

    def strict(stream, entry):
        return [stream, entry.fields["value"]]

    spout = RedisStreamTridentSpout(redis_server.url, ["s"], translator=strict, output_fields=["stream", "value"])
    d = Driver(PartitionedTridentSpoutExecutor(spout), num_tasks=1)
    assert d.emit(1) == [["s", "1"], ["s", "3"]]
    assert d.emit(1) == [["s", "1"], ["s", "3"]]  # the same on a replay


def test_redis_stream_spout_start_dollar_trim_and_outage(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    add(client, "s", 3)
    url = redis_server.url.replace("redis://", "redis://:pw-9z@")
    client.config_set("requirepass", "pw-9z")
    authed = redis.Redis.from_url(url, decode_responses=True)
    spout = RedisStreamTridentSpout(url, ["s"], start_id="$", id_field=None)
    assert "pw-9z" not in repr(spout)
    d = Driver(PartitionedTridentSpoutExecutor(spout))
    assert d.emit(1) == []
    add(authed, "s", 2, start=3)
    assert d.emit(2) == [["s-3"], ["s-4"]]
    authed.xtrim("s", maxlen=1, approximate=False)
    d.restart()
    with pytest.raises(RedisStreamTridentError, match=r"txid 2: stream 's' holds 1 of the batch's 2"):
        d.emit(2)
    redis_server.stop()
    with pytest.raises(FailedException) as down:
        d.emit(3)
    assert "pw-9z" not in str(down.value)
