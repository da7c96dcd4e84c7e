"""A `FileTridentSpout`'s refused lines and a `RedisStreamTridentSpout`'s malformed entries (a real
redis-server) on Spark's engine, through the squall_trident source's readers (as
tests/trident_spark/test_source.py drives them): each is logged once, naming its txid,
where the driver plans its batch; a task's read of the batch, and the read again (a task retried,
the micro-batch re-run), log nothing; and a batch of refused lines only is a batch of its own
(test_dead_letter_batches.py), its lines logged under its txid. Each read and
each plan logged the file's again (12 lines here for 3 refused lines); the Redis spout, logging at
the first read only since c19ecc7, still logged again at each plan of a txid (6 lines for 3)."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.external.trident_files import FileTridentSpout
from squall.trident.spark.rows import loads
from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec

from ..external.conftest import redis_server  # noqa: F401 (its fixture: a redis-server on loopback)
from .conftest import write_lines


def _read(reader, start, end):
    return [loads(row) for p in reader.partitions(start, end) for rb in reader.read(p)
            for row in rb.column(0).to_pylist()]


def translate(line: bytes) -> list:
    text = line.decode().rstrip("\n")
    if text.startswith("bad"):
        raise ValueError(f"refused {text!r}")
    return [text]


def test_a_file_spouts_refused_lines_are_logged_once_each_on_spark(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="squall.external.trident_files")
    path = tmp_path / "a.txt"
    write_lines(path, ["one", "bad1", "two"])
    spout = FileTridentSpout(str(tmp_path), translator=translate, max_batch_records=4)
    reader = PartitionedSpoutReader(SpoutSpec("files", spout, {}))
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert first["txid"] == 1
    assert sorted(_read(reader, start, first)) == [["one"], ["two"]]
    assert sorted(_read(reader, start, first)) == [["one"], ["two"]]  # a task retried: the same
    write_lines(path, ["bad2"])
    second = reader.latestOffset(first, None)  # txid 2 refuses its one line: a batch of no rows
    assert second["txid"] == 2 and _read(reader, first, second) == _read(reader, first, second) == []
    write_lines(path, ["bad3"])
    third = reader.latestOffset(second, None)
    assert third["txid"] == 3 and _read(reader, second, third) == []
    assert reader.latestOffset(third, None) == third  # nothing new: no batch, nothing logged
    write_lines(path, ["three"])
    fourth = reader.latestOffset(third, None)
    assert fourth["txid"] == 4
    assert _read(reader, third, fourth) == [["three"]]
    assert _read(reader, third, fourth) == [["three"]]
    offsets = {"bad1": 4, "bad2": 13, "bad3": 18}  # "one\n" "bad1\n" "two\n" "bad2\n" ...
    txids = {"bad1": 1, "bad2": 2, "bad3": 3}
    lines = [r.getMessage() for r in caplog.records if "dead letter" in r.getMessage()]
    assert sorted(lines) == sorted(
        f"FileTridentSpout dead letter: txid {txids[name]}: {path} offset {at}: "
        f"ValueError: refused {name!r}" for name, at in offsets.items())


def test_a_redis_stream_spouts_malformed_entries_are_logged_once_each_on_spark(redis_server, caplog):  # noqa: F811 (the fixture imported above)
    import redis

    from squall.external.trident_redis_streams import RedisStreamTridentSpout

    caplog.set_level(logging.ERROR, logger="squall.external.trident_redis_streams")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ids = {"bad1": None, "bad2": None, "bad3": None}
    client.xadd("s", {"value": "one"})
    ids["bad1"] = client.xadd("s", {"other": "bad1"})
    spout = RedisStreamTridentSpout(redis_server.url, ["s"], ["value"], id_field=None, max_batch_entries=3)
    reader = PartitionedSpoutReader(SpoutSpec("redis", spout, {}))
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert _read(reader, start, first) == _read(reader, start, first) == [["one"]]  # a task retried
    ids["bad2"] = client.xadd("s", {"other": "bad2"})
    second = reader.latestOffset(first, None)  # txid 2 refuses its one entry: a batch of no rows
    assert second["txid"] == 2 and _read(reader, first, second) == _read(reader, first, second) == []
    ids["bad3"] = client.xadd("s", {"other": "bad3"})
    third = reader.latestOffset(second, None)
    assert third["txid"] == 3 and _read(reader, second, third) == []
    assert reader.latestOffset(third, None) == third  # nothing new: no batch, nothing logged
    client.xadd("s", {"value": "two"})
    fourth = reader.latestOffset(third, None)
    assert fourth["txid"] == 4 and _read(reader, third, fourth) == _read(reader, third, fourth) == [["two"]]
    txids = {"bad1": 1, "bad2": 2, "bad3": 3}
    lines = [r.getMessage() for r in caplog.records if "dead letter" in r.getMessage()]
    assert sorted(lines) == sorted(
        f"RedisStreamTridentSpout dead letter: txid {txids[name]}: stream 's' entry {entry}: "
        f"missing field 'value' (has ['other'])" for name, entry in ids.items())
