"""A sink's store that is down is not the records' fault: their retry budgets must not count it.

The user's complaint was "one bad record sent good ones to the dead-letter stream"; here there
is no bad record at all. A spout with ``max_retries`` 1 feeds good records to a sink whose store
stops answering (a Redis server SIGSTOPped, stopped and started again, out of memory; a disk
that is full). Each write fails, the spout retries it milliseconds later, and it fails again:
charged, two failures were past the budget, and good records went to the dead letters. Now such
a failure is of kind ``"unavailable"``, not charged; once the store is back every good record is
written, and none is dead-lettered. A record the store refuses for its own sake (WRONGTYPE: its
key holds another type) is still charged, and dead-lettered after its budget, alone.

Every record is counted: the Redis sinks write each id exactly once (a hash per id, however
often it was written), the file and Parquet sinks at least once (each good line present, none
missing; a file abandoned on the full disk is removed, so none is duplicated here either)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from bench.redis_server import RedisServer
from squall import Bolt, Fields, LocalCluster, TopologyBuilder

from ..conftest import wait_until
from ..test_disk_full import disk  # noqa: F401 - a 256 KiB tmpfs of the test's own (root only)
from .conftest import redis_server, running_redis  # noqa: F401 - the real redis-server fixture

CONF = {"topology.message.timeout.secs": 30}


class Pass(Bolt):
    """Emits its input's values anchored to it, then acks it: the plain bolt before the sink."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(self.fields))

    def execute(self, tup):
        self.collector.emit(list(tup.values), anchors=tup)
        self.collector.ack(tup)


def spout_failed(cluster, spout: str) -> int:
    """How many tuples ``spout`` saw fail (its statistics)."""
    return next(s["failed"] for s in cluster.get_topology_page("t")["spouts"] if s["spoutId"] == spout)


def redis_dead_letters(client) -> dict[str, dict]:
    """id -> (error, cause) of each entry of ``events:dead``."""
    return {d["id"]: {"error": d["error"], "cause": json.loads(d["cause"])} for _, d in client.xrange("events:dead")}


class Outage:
    """Takes a redis-server away one of three ways, and brings it back."""

    def __init__(self, server: RedisServer, how: str) -> None:
        self.server, self.how = server, how

    def begin(self) -> None:
        if self.how == "sigstop":     # does not answer: every call times out
            os.kill(self.server.proc.pid, signal.SIGSTOP)
        elif self.how == "restart":   # gone: every connect is refused
            self.server.stop()
        else:                         # out of memory: every write refused with OOM
            self.server.client().config_set("maxmemory", 1)

    def end(self) -> None:
        if self.how == "sigstop":
            os.kill(self.server.proc.pid, signal.SIGCONT)
        elif self.how == "restart":
            self.server.start()
        else:
            self.server.client().config_set("maxmemory", 0)


@pytest.fixture
def store(tmp_path):
    """A second redis-server, the sink's or the lookup's own (the stream's stays up)."""
    (tmp_path / "store").mkdir()
    with running_redis(tmp_path / "store") as server:
        yield server


def fast(url: str, timeout: float = 0.5) -> str:
    """``url`` with ``timeout``-second timeouts: a server that does not answer fails a call soon."""
    return f"{url}?socket_timeout={timeout}&socket_connect_timeout={timeout}"


def run_through_outage(stream_server, store: RedisServer, how: str, topology, n: int) -> tuple:
    """Submits ``topology`` (spout ``events`` on ``stream_server``), takes ``store`` away, XADDs
    ``n`` good records, waits until the spout saw more failures than all their budgets hold,
    brings ``store`` back and waits until every entry is acked or dead-lettered. Returns the
    good ids and the errors the topology reported."""
    r = stream_server.client()
    outage = Outage(store, how)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology)
        outage.begin()
        try:
            good = [r.xadd("events", {"key": f"k{i}"}) for i in range(n)]
            # max_retries 1: a record charged twice is dead-lettered; 3 failures a record is
            # more than every budget holds (on main, good records went to the dead letters
            # after 2 each, the failures stopped short of that, and the wait ends on them)
            assert wait_until(lambda: spout_failed(cluster, "events") > 3 * (n + 1) or r.xlen("events:dead") > 1,
                              60), spout_failed(cluster, "events")
        finally:
            outage.end()
        assert wait_until(lambda: r.xpending("events", "g")["pending"] == 0 and r.xlen("events:dead") >= 1, 60), \
            (r.xpending("events", "g")["pending"], r.xlen("events:dead"))
        errors = [e["error"] for e in cluster.get_topology_info("t")["errors"]]
        cluster.kill_topology("t", wait_secs=0)
    return good, errors


def spout(url: str):
    from squall.external.redis_streams import ExponentialBackoff, RedisStreamSpout
    return RedisStreamSpout(url, "events", "g", ["key"], batch_size=50,
                            backoff=ExponentialBackoff(initial_delay=0.01, max_delay=0.05, max_retries=1))


def check_refused(dead: dict, bad: str, component: str, error: str) -> None:
    """The one record refused for its own sake is the only dead letter, charged twice."""
    assert list(dead) == [bad], f"{len(set(dead) - {bad})} good records dead-lettered: {dead}"
    cause = dead[bad]["cause"]
    assert dead[bad]["error"].startswith("failed 2 times (max_retries 1)"), dead[bad]
    assert (cause["kind"], cause["component"]) == ("fail", component) and error in cause["message"], cause


@pytest.mark.parametrize("how", ["sigstop", "restart", "oom"])
def test_a_redis_sinks_server_that_is_down_dead_letters_no_good_record(redis_server, store, how):  # noqa: F811
    """events (max_retries 1) -> Pass -> RedisStreamSinkBolt on a server of its own, which goes
    away while 20 good records arrive. On main every write's failure was charged: all 20 good
    records were dead-lettered ("failed 2 times (max_retries 1); last: failed in [sink] task 3:
    RedisStreamSinkBolt: cannot write 'out': TimeoutError ..."). One record whose key holds a
    string in the sink's server (WRONGTYPE) is refused for its own sake: it alone is."""
    from squall.external.redis_streams import RedisStreamSinkBolt

    r, out = redis_server.client(), store.client()
    r.xgroup_create("events", "g", id="0", mkstream=True)
    bad = r.xadd("events", {"key": "bad"})
    out.set(f"out:{bad}", "a string, where the sink writes a hash")
    b = TopologyBuilder()
    b.set_spout("events", spout(redis_server.url))
    b.set_bolt("pass", Pass(["id", "key"]), 2).shuffle_grouping("events")
    b.set_bolt("sink", RedisStreamSinkBolt(fast(store.url), "out", mode="hash"), 1).shuffle_grouping("pass")
    good, errors = run_through_outage(redis_server, store, how, b.create_topology(), 20)
    check_refused(redis_dead_letters(r), bad, "sink", "WRONGTYPE")
    written = {k.split(":", 1)[1]: out.hgetall(k) for k in out.keys("out:*") if k != f"out:{bad}"}
    assert written == {g: {"key": f"k{i}"} for i, g in enumerate(good)}  # each of the 20, once
    assert any("cannot write 'out'" in e for e in errors), errors


def test_a_redis_lookups_server_that_does_not_answer_dead_letters_no_good_record(redis_server, store):  # noqa: F811
    """events (max_retries 1) -> RedisLookupBolt (GET key) on a server of its own, SIGSTOPped
    while 10 good records arrive -> a sink on the stream's server. On main each timed-out query
    was charged, and the good records were dead-lettered; one record whose key names a list
    (WRONGTYPE for GET) is refused for its own sake, and alone dead-lettered."""
    from squall.external.redis_streams import LookupSpec, RedisLookupBolt, RedisStreamSinkBolt

    r, looked_up = redis_server.client(), store.client()
    r.xgroup_create("events", "g", id="0", mkstream=True)
    bad = r.xadd("events", {"key": "a-list"})
    looked_up.rpush("a-list", "x")
    looked_up.mset({f"k{i}": f"value {i}" for i in range(0, 10, 2)})  # half the good keys exist
    b = TopologyBuilder()
    b.set_spout("events", spout(redis_server.url))
    # each lookup of the stopped server waits out its timeout on the bolt's loop, and the wait
    # below needs 33 failures: 0.1 s each instead of 0.5 (16 s of the test's 22). A lookup of
    # the live server that times out on a loaded machine is failed as unavailable, not charged,
    # and retried: the outcome checked stays the same.
    b.set_bolt("lookup", RedisLookupBolt(fast(store.url, 0.1), LookupSpec("key"), ["id", "key", "found"]),
               2).shuffle_grouping("events")
    b.set_bolt("sink", RedisStreamSinkBolt(redis_server.url, "out", mode="hash"), 1).shuffle_grouping("lookup")
    good, errors = run_through_outage(redis_server, store, "sigstop", b.create_topology(), 10)
    check_refused(redis_dead_letters(r), bad, "lookup", "WRONGTYPE")
    written = {k.split(":", 1)[1]: r.hgetall(k) for k in r.keys("out:*")}
    assert written == {g: {"key": f"k{i}", "found": f"value {i}" if i % 2 == 0 else "null"}
                       for i, g in enumerate(good)}
    assert any("string query of key" in e and "TimeoutError" in e for e in errors), errors


# --- a full disk under the file and Parquet sinks ------------------------------------------------


def fill(directory: Path) -> Path:
    """Takes every free byte of the file system of ``directory``; returns the file that holds them."""
    filler = directory / "filler"
    with open(filler, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == 28, e  # ENOSPC
    return filler


def run_file_outage(tmp_path: Path, full: Path, sink, n: int) -> tuple[list[str], list[dict], list[str]]:
    """``n`` good lines read by a FileSpout (max_retries 1) -> Pass -> ``sink`` writing under the
    full disk ``full``, freed once the spout saw more failures than the lines' budgets hold. Returns
    the lines, the dead letters and the errors reported."""
    from squall.external.files import FileSpout
    from squall.external.retry import RetryBackoff

    src = tmp_path / "in"
    src.mkdir()
    lines = [str(i) for i in range(n)]
    filler = fill(full)  # after the sink's directory was made: prepare creates it
    (src / "a.txt").write_text("".join(f"{x}\n" for x in lines))
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["line"], quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=tmp_path / "local",
                                   backoff=RetryBackoff(initial_delay=0.01, delay_period=0.01, max_retries=1,
                                                        max_delay=0.05), max_retries=1))
    b.set_bolt("pass", Pass(["line"])).shuffle_grouping("lines")
    b.set_bolt("sink", sink).shuffle_grouping("pass")
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        dead = tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead"
        try:
            assert wait_until(lambda: spout_failed(cluster, "lines") > 3 * n or dead.exists(), 60), \
                spout_failed(cluster, "lines")
        finally:
            filler.unlink()
        assert wait_until(lambda: (src / "a.txt.done").exists(), 60), "the file was not finished"
        errors = [e["error"] for e in cluster.get_topology_info("t")["errors"]]
        cluster.kill_topology("t", wait_secs=0)
    return lines, [json.loads(x) for x in dead.read_text().splitlines()] if dead.exists() else [], errors


def test_a_file_sinks_full_disk_dead_letters_no_good_record(tmp_path, disk):  # noqa: F811
    """10 good lines -> FileSinkBolt on a full disk: each file's fsync fails (ENOSPC) and its
    lines replay. On main each was charged: all 10 were dead-lettered. Now, once space is
    freed, each line is in a committed file, once, and no dead letter."""
    from squall.external.files import FileSinkBolt

    (disk / "out").mkdir()
    lines, dead, errors = run_file_outage(tmp_path, disk, FileSinkBolt(disk / "out", max_records=2, tick_secs=1), 10)
    assert dead == [], f"{len(dead)} good lines dead-lettered: {dead}"
    written = sorted((line for f in (disk / "out").glob("part-*") for line in f.read_text().splitlines()), key=int)
    assert written == lines  # each of the 10, once
    assert any("no space is left on the device (ENOSPC)" in e for e in errors), errors


def test_a_parquet_sinks_full_disk_dead_letters_no_good_record(tmp_path, disk):  # noqa: F811
    """10 good lines -> ParquetSinkBolt (batches of 2) on a full disk: each batch's write fails
    and its rows replay. On main each was charged: all 10 were dead-lettered. Now each row is in
    a committed file, once, and no dead letter."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from squall.external.parquet import ParquetSinkBolt

    (disk / "pq").mkdir()
    sink = ParquetSinkBolt(disk / "pq", pa.schema([("line", pa.string(), False)]), "line", batch_size=2)
    lines, dead, errors = run_file_outage(tmp_path, disk, sink, 10)
    assert dead == [], f"{len(dead)} good rows dead-lettered: {dead}"
    rows = sorted((r["line"] for f in (disk / "pq").glob("part-*.parquet") for r in pq.read_table(f).to_pylist()),
                  key=int)
    assert rows == lines  # each of the 10, once
    assert any("was not written" in e for e in errors), errors


def test_a_delta_batch_its_tables_constraint_refuses_is_charged_and_one_the_store_fails_is_not(tmp_path):
    """deltalake raises one class (DeltaError) for a full disk and for rows a CHECK constraint
    refuses: the first is the store's (``"unavailable"``), the second the rows' (``"fail"``,
    charged: else a record that breaks the constraint would replay for ever)."""
    import shutil

    import pyarrow as pa
    delta = pytest.importorskip("squall.external.delta", reason="needs deltalake")
    from deltalake import DeltaTable

    from .test_sink_fail_reasons import Context, Recorder, tuples

    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
    out = Recorder()
    sink = delta.DeltaSinkBolt(tmp_path / "t", schema, "id", batch_size=2)
    sink.prepare({}, Context(), out)
    DeltaTable(str(tmp_path / "t")).alter.add_constraint({"small": "n < 15"})
    for t in tuples(2):   # n = 10 and 20: the second breaks the constraint
        sink.execute(t)
    assert [(i, c.kind) for i, c in out.causes] == [(1, "fail"), (2, "fail")] and not out.acked
    assert "Invalid data found" in out.causes[0][1].message
    out.causes.clear()
    shutil.rmtree(tmp_path / "t")
    (tmp_path / "t").write_text("a file where the table was")
    for t in tuples(4)[2:]:
        sink.execute(t)
    assert [(i, c.kind) for i, c in out.causes] == [(3, "unavailable"), (4, "unavailable")], out.causes
