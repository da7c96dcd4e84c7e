"""A planned batch whose records the spout all dead-letters (a translator that raises), on Spark's
engine: it is a micro-batch of no rows whose offset moves past them, so the records after it are
read. Before, a plan that emitted no tuple kept the source at its old offset: the same bad records
were planned again at every trigger and nothing after them was ever read (a file with ``bad1``,
``bad2``, ``good`` and ``max_batch_records=2`` was planned 5 times, every plan ``{'txid': 0}``), a
stalled query with nothing failing. Driven through the squall_trident source's readers as
test_source.py does (a task's read retried, the driver restarted from the last offset), then one
live query on the package's session."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.external.trident_files import FileTridentSpout
from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec

from ..external.conftest import redis_server  # noqa: F401 (its fixture: a redis-server on loopback)
from .conftest import count_lines_live, dead_letter_lines, read_batch, write_lines
from .ops import refuse_bad

pytestmark = pytest.mark.timeout(300)  # the live test may pay the package's cold SparkSession


def test_a_file_batch_of_dead_letters_only_moves_the_offset_past_them(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="squall.external.trident_files")
    path = tmp_path / "a.txt"
    write_lines(path, ["bad1", "bad2", "good1", "bad3", "bad4", "bad5", "bad6", "good2"])

    def reader():
        return PartitionedSpoutReader(SpoutSpec("files", FileTridentSpout(str(tmp_path), translator=refuse_bad,
                                                                          max_batch_records=2), {}))

    driver = reader()
    start = driver.initialOffset()
    first = driver.latestOffset(start, None)  # bad1, bad2: no tuple, but past them
    assert first["txid"] == 1 and first["parts"]["a.txt"]["end"] == 10
    assert read_batch(driver, start, first) == read_batch(driver, start, first) == []  # a task retried: nothing
    second = driver.latestOffset(first, None)
    assert second["txid"] == 2 and read_batch(driver, first, second) == [["good1"]]  # good1, bad3
    third = driver.latestOffset(second, None)  # bad4, bad5
    assert third["txid"] == 3 and read_batch(driver, second, third) == []
    # the driver restarted: a new reader (its emitter new) from the last offset Spark wrote
    restarted = reader()
    fourth = restarted.latestOffset(third, None)  # bad6, good2
    assert fourth["txid"] == 4 and read_batch(restarted, third, fourth) == read_batch(restarted, third, fourth) == [["good2"]]
    assert restarted.latestOffset(fourth, None) == fourth  # nothing new: no batch
    offsets = {"bad1": 0, "bad2": 5, "bad3": 16, "bad4": 21, "bad5": 26, "bad6": 31}
    txids = {"bad1": 1, "bad2": 1, "bad3": 2, "bad4": 3, "bad5": 3, "bad6": 4}
    assert dead_letter_lines(caplog) == sorted(
        f"FileTridentSpout dead letter: txid {txids[name]}: {path} offset {at}: ValueError: refused {name!r}"
        for name, at in offsets.items())  # each once, a retried read and the restart included


def test_a_redis_stream_batch_of_dead_letters_only_moves_the_offset_past_them(redis_server, caplog):  # noqa: F811 (the fixture imported above)
    import redis

    from squall.external.trident_redis_streams import RedisStreamTridentSpout

    caplog.set_level(logging.ERROR, logger="squall.external.trident_redis_streams")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    bad = [client.xadd("s", {"other": f"bad{i}"}) for i in range(4)]
    client.xadd("s", {"value": "good"})
    spout = RedisStreamTridentSpout(redis_server.url, ["s"], ["value"], id_field=None, max_batch_entries=2)
    reader = PartitionedSpoutReader(SpoutSpec("redis", spout, {}))
    offset, read, txids = reader.initialOffset(), [], []
    for _ in range(5):  # 3 batches: two of dead letters only, then the good entry
        end = reader.latestOffset(offset, None)
        if end == offset:
            break
        txids.append(end["txid"])
        read += read_batch(reader, offset, end)
        assert read_batch(reader, offset, end) == read[len(read) - len(read_batch(reader, offset, end)):]  # a retry: same
        offset = end
    assert txids == [1, 2, 3] and read == [["good"]]
    assert dead_letter_lines(caplog) == sorted(
        f"RedisStreamTridentSpout dead letter: txid {1 + i // 2}: stream 's' entry {entry}: "
        f"missing field 'value' (has ['other'])" for i, entry in enumerate(bad))


def test_a_live_query_reads_past_batches_of_dead_letters_counting_each_good_line_once(spark, tmp_path, request):
    # txid 1: three refused lines, a micro-batch of no rows; txid 2: the good lines
    lines = ["bad1", "bad2", "bad3", "good1", "good2", "good1"]
    assert count_lines_live(spark, tmp_path, lines, refuse_bad) == {"good1": 2, "good2": 1}
    # planned in Spark's Python source process, forked (through the fork server) with the stderr
    # of Spark's JVM, which is this process's from when the session started: pytest's global
    # capture, not a test's capfd
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None or not capture.is_globally_capturing():
        pytest.skip("the dead letters' log lines are read from pytest's capture of stderr: run without -s")
    _, err = capture.read_global_capture()
    dead = [line for line in err.splitlines() if "FileTridentSpout dead letter" in line]
    assert sorted(line.split(": refused ")[1] for line in dead) == [repr(f"bad{i}") for i in range(1, 4)], dead
    assert all(" txid 1: " in line for line in dead), dead  # the micro-batch of no rows
