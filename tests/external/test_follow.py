"""squall.external.follow: spouts downstream of Spark, following a Delta table's versions and the
Parquet files a Spark job writes, with committed progress replayed after a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from squall import LocalCluster, TopologyBuilder
from squall.external.files import ProgressDoc
from squall.external.follow import DeltaTableSpout, ParquetDirectorySpout, start_mark
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_files import Recorder

CONF = {"topology.message.timeout.secs": 60}  # held rows must not time out and replay meanwhile


def rows(lo, hi):
    return pa.table({"event": [f"e-{i:03d}" for i in range(lo, hi)], "n": list(range(lo, hi))})


def topology(spout, log, **bolt):
    builder = TopologyBuilder()
    builder.set_spout("follow", spout)
    builder.set_bolt("rec", Recorder(log, **bolt), 2).shuffle_grouping("follow")
    return builder.create_topology()


def delta_spout(table, local):
    return DeltaTableSpout(table, ["event", "n"], commit_every=1, poll_secs=0.05, progress_dir=local)


def progress(local, kind, spout="follow"):
    return [json.loads(p.read_text()) for p in sorted((Path(local) / kind / spout).glob("task-*.json"))]


def first_progress(local, kind):
    """The first task's progress file, or {} until it is written (after the spout's first acks)."""
    found = progress(local, kind)
    return found[0] if found else {}


def test_delta_spout_emits_each_version_once_and_replays_only_what_was_not_acked_after_a_restart(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    deltalake.write_deltalake(table, rows(0, 20))
    first = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("one", CONF, topology(delta_spout(table, local), first, hold={"e-025", "e-027"}))
        assert wait_until(lambda: sorted(first.items()) == [f"e-{i:03d}" for i in range(20)], 20)
        assert wait_until(lambda: first_progress(local, "deltaspout").get("mark") == 0)  # version 0 all acked
        deltalake.write_deltalake(table, rows(20, 30), mode="append")  # the next version is picked up
        assert wait_until(lambda: len(first.items()) == 30, 20)
        assert wait_until(lambda: list(first_progress(local, "deltaspout").get("files", {}).values()) == [5])
        cluster.kill_topology("one", wait_secs=0)
    assert sorted(first.items()) == [f"e-{i:03d}" for i in range(30)]  # each row once
    assert progress(local, "deltaspout")[0]["mark"] == 0

    deltalake.write_deltalake(table, rows(30, 35), mode="append")  # written while nothing ran
    second = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("two", CONF, topology(delta_spout(table, local), second))
        assert wait_until(lambda: first_progress(local, "deltaspout").get("mark") == 2, 20)
        cluster.kill_topology("two", wait_secs=0)
    # from the first unacked row (25) of version 1 on (at-least-once: 26, 28, 29 again), then version 2
    assert sorted(second.items()) == [f"e-{i:03d}" for i in range(25, 35)]
    assert progress(local, "deltaspout")[0]["files"] == {}  # everything below the mark is forgotten


def test_a_failed_row_is_retried_then_dead_lettered_naming_the_table_file_and_row(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    deltalake.write_deltalake(table, rows(0, 5))
    log = SharedLog()
    spout = DeltaTableSpout(table, ["event", "n"], max_retries=2, commit_every=1, poll_secs=0.05, progress_dir=local)
    with LocalCluster() as cluster:
        cluster.submit_topology("dl", CONF, topology(spout, log, fail_always={"e-003"}))
        assert wait_until(lambda: first_progress(local, "deltaspout").get("mark") == 0)
        cluster.kill_topology("dl", wait_secs=0)
    assert sorted(log.items()) == ["e-000", "e-001", "e-002", "e-003", "e-003", "e-003", "e-004"]
    dead = [json.loads(line) for p in (local / "deltaspout" / "follow" / "dead-letter").iterdir()
            for line in p.read_text().splitlines()]
    assert len(dead) == 1 and dead[0]["row"] == 3 and dead[0]["version"] == 0
    assert dead[0]["values"] == ["e-003", 3] and dead[0]["reason"].startswith("failed 3 times; last: failed in [rec]")
    assert (dead[0]["cause"]["kind"], dead[0]["cause"]["component"]) == ("fail", "rec")  # the bolt's explicit fail
    assert dead[0]["source"] == table and dead[0]["file"].endswith(".parquet")


def test_a_version_that_deletes_rows_stops_the_spout_with_an_error_naming_it(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    deltalake.write_deltalake(table, rows(0, 5))
    deltalake.DeltaTable(table).delete("n < 2")  # version 1: a change, not an append
    deltalake.write_deltalake(table, rows(5, 7), mode="append")
    log = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("chg", CONF, topology(delta_spout(table, local), log))
        assert wait_until(lambda: len(log.items()) == 5)

        def errors():
            return [e["error"] for e in cluster.get_topology_info("chg")["errors"] if "version 1" in e["error"]]
        assert wait_until(errors, 10)
        error = errors()[0]
        cluster.kill_topology("chg", wait_secs=0)
    assert "follows appends only" in error and "skip_change_commits" in error
    assert sorted(log.items()) == [f"e-{i:03d}" for i in range(5)]  # nothing past the change


def test_the_parquet_files_a_spark_job_writes_are_emitted_once_each_run_after_run(tmp_path, spark):
    out, local = str(tmp_path / "spark-out"), tmp_path / "local"
    log = SharedLog()
    spout = ParquetDirectorySpout(out, ["event", "n"], commit_every=1, poll_secs=0.05, progress_dir=local)

    def spark_job(lo, hi, mode):
        df = spark.createDataFrame([(f"e-{i:03d}", i) for i in range(lo, hi)], "event string, n long")
        df.repartition(3).write.mode(mode).parquet(out)

    with LocalCluster() as cluster:
        cluster.submit_topology("pq", CONF, topology(spout, log))
        spark_job(0, 40, "errorifexists")
        assert wait_until(lambda: len(log.items()) == 40, 30)
        spark_job(40, 60, "append")  # a second run adds part files next to the first's
        assert wait_until(lambda: len(log.items()) == 60, 30)
        cluster.kill_topology("pq", wait_secs=0)
    assert sorted(log.items()) == [f"e-{i:03d}" for i in range(60)]
    # a restart reads nothing again: every file is recorded as read to its end
    again = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("pq2", CONF, topology(
            ParquetDirectorySpout(out, ["event", "n"], poll_secs=0.05, progress_dir=local), again))
        spark_job(60, 65, "append")
        assert wait_until(lambda: len(again.items()) == 5, 30)
        cluster.kill_topology("pq2", wait_secs=0)
    assert sorted(again.items()) == [f"e-{i:03d}" for i in range(60, 65)]


def test_appends_then_an_optimize_then_an_append_are_each_emitted_once_and_the_spout_goes_on(tmp_path):
    # each version is classed by its own log entry: a snapshot's history(1) names the latest commit
    table, local = str(tmp_path / "events"), tmp_path / "local"
    for lo in (0, 5, 10):
        deltalake.write_deltalake(table, rows(lo, lo + 5), mode="append")
    deltalake.DeltaTable(table).optimize.compact()  # version 3: the same rows in one file
    deltalake.write_deltalake(table, rows(15, 20), mode="append")
    log = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("opt", CONF, topology(delta_spout(table, local), log))
        assert wait_until(lambda: len(log.items()) == 20, 20)
        deltalake.write_deltalake(table, rows(20, 22), mode="append")  # not stopped at the OPTIMIZE
        assert wait_until(lambda: len(log.items()) == 22, 20)
        assert wait_until(lambda: first_progress(local, "deltaspout").get("mark") == 5, 20)
        errors = cluster.get_topology_info("opt")["errors"]
        cluster.kill_topology("opt", wait_secs=0)
    assert sorted(log.items()) == [f"e-{i:03d}" for i in range(22)]  # each row once, none lost
    assert errors == []


def test_an_optimize_as_the_newest_version_neither_hides_the_appends_before_it_nor_stops_the_spout(tmp_path):
    table, local = str(tmp_path / "events"), tmp_path / "local"
    deltalake.write_deltalake(table, rows(0, 5))
    deltalake.write_deltalake(table, rows(5, 8), mode="append")
    deltalake.DeltaTable(table).optimize.compact()
    log = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("opt2", CONF, topology(delta_spout(table, local), log))
        assert wait_until(lambda: first_progress(local, "deltaspout").get("mark") == 2, 20)
        errors = cluster.get_topology_info("opt2")["errors"]
        cluster.kill_topology("opt2", wait_secs=0)
    assert sorted(log.items()) == [f"e-{i:03d}" for i in range(8)]
    assert errors == []


def test_a_task_without_its_own_progress_starts_over_rather_than_take_another_tasks_mark():
    other = {"task-0.json": ProgressDoc({}, 5, 2)}
    assert start_mark(other, "task-1.json", 2) is None  # task 1's files up to 5 were never its
    assert start_mark(other, "task-0.json", 2) == 5
    both = {"task-0.json": ProgressDoc({}, 5, 2), "task-1.json": ProgressDoc({}, 3, 2)}
    assert start_mark(both, "task-1.json", 2) == 3
    # another parallelism: the lowest mark, only if every task of the earlier run left its doc
    assert start_mark(both, "task-2.json", 3) == 3 and start_mark(both, "task-0.json", 1) == 3
    assert start_mark(other, "task-0.json", 1) is None and start_mark(other, "task-0.json", 3) is None
    assert start_mark({"task-0.json": ProgressDoc({}, 5, 1), "task-1.json": ProgressDoc({}, 3, 2)},
                      "task-0.json", 3) is None  # docs of two runs
    assert start_mark({}, "task-0.json", 1) is None


def test_a_directory_with_finished_files_and_no_success_marker_is_said_once(tmp_path, caplog, monkeypatch):
    """A directory ParquetSinkBolt fills never gets Spark's _SUCCESS: the spout, waiting for it by
    default, read nothing for as long as it ran, without a word (0 of 1,000 rows in 60 s)."""
    import logging

    import pyarrow.parquet as pq

    from squall.external import follow
    monkeypatch.setattr(follow, "UNMARKED_WARN_SECS", 0.3)  # 60 s in a deployment

    out = tmp_path / "out"
    out.mkdir()
    pq.write_table(rows(0, 10), out / "part-0.parquet")
    log = SharedLog()
    spout = ParquetDirectorySpout(out, ["event", "n"], poll_secs=0.05, progress_dir=str(tmp_path / "local"))
    said = lambda: [r.getMessage() for r in caplog.records if "no _SUCCESS" in r.getMessage()]  # noqa: E731
    with caplog.at_level(logging.WARNING, "squall.external.follow"), LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(spout, log))
        assert wait_until(said, 10)
        assert not wait_until(lambda: len(said()) > 1, 0.5), "said once"
        assert str(out) in said()[0] and "require_success=False" in said()[0]
        assert log.items() == []  # still waiting, as asked
        (out / "_SUCCESS").touch()
        assert wait_until(lambda: len(log.items()) == 10)


def test_neither_spout_reads_a_parquet_file_out_of_its_source_through_a_link_or_a_log_path(tmp_path):
    """Whoever writes the followed directory, or the table's log, could make the spout read a
    Parquet file only the workers' user may read: a link in the directory was listed and read (its
    rows went out as tuples), and so was an add of "../private.parquet" in a Delta commit. A link
    is left out; such an add stops the Delta spout with an error naming it."""
    import os

    import pyarrow.parquet as pq

    from .test_file_progress import Collector, Context

    class Reported(Collector):
        def __init__(self):
            super().__init__()
            self.errors = []

        def report_error(self, message):
            self.errors.append(message)

    pq.write_table(rows(100, 101), tmp_path / "private.parquet")
    out = tmp_path / "out"
    out.mkdir()
    pq.write_table(rows(0, 2), out / "part-0.parquet")
    os.symlink(tmp_path / "private.parquet", out / "part-1.parquet")
    directory = ParquetDirectorySpout(out, ["event", "n"], require_success=False, progress_dir=tmp_path / "local")
    directory.open({}, Context(0, 1), Reported())
    assert [f.key for f in directory._new_files()] == ["part-0.parquet"]

    table = tmp_path / "events"
    deltalake.write_deltalake(str(table), rows(0, 2))
    add = {"path": "../private.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
    (table / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"add": add}) + "\n")
    spout, reported = DeltaTableSpout(str(table), ["event", "n"], progress_dir=tmp_path / "local"), Reported()
    spout.open({}, Context(0, 1), reported)
    assert [f.version for f in spout._new_files()] == [0]
    assert reported.errors == [f"DeltaTableSpout 'lines': version 1 of {table} adds ../private.parquet, a path out "
                               f"of the table's directory, which the spout does not read"]


def test_a_delta_add_naming_a_file_of_the_table_by_absolute_path_or_file_uri_is_read(tmp_path):
    """The Delta protocol allows an add's path to be absolute, and some writers write one for a
    file in the table (``/data/t/part-0.parquet``, ``file:/data/t/part-0.parquet``): the spout
    stopped at such a version as if it led out of the table. Out of the table stays refused."""
    import pyarrow.parquet as pq

    from .test_file_progress import Collector, Context

    table = tmp_path / "events"
    deltalake.write_deltalake(str(table), rows(0, 2))
    pq.write_table(rows(2, 3), table / "by path.parquet")
    pq.write_table(rows(3, 4), table / "by-uri.parquet")
    log = table / "_delta_log"
    for version, path in [(1, str(table / "by path.parquet")), (2, (table / "by-uri.parquet").as_uri())]:
        add = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
        (log / f"{version:020d}.json").write_text(json.dumps({"add": add}) + "\n")
    spout = DeltaTableSpout(str(table), ["event", "n"], progress_dir=tmp_path / "local")
    spout.open({}, Context(0, 1), Collector())
    found = spout._new_files()
    assert [(f.version, Path(f.path).name) for f in found[1:]] == [(1, "by path.parquet"), (2, "by-uri.parquet")]
    assert spout.stopped is None
    from squall.external.follow import table_file
    for out in [str(tmp_path / "private.parquet"), (tmp_path / "x.parquet").as_uri(), "s3://b/t/x.parquet",
                f"{table}/../x.parquet", "../x.parquet", "%2E%2E/x.parquet", "file://otherhost/t/x.parquet"]:
        assert table_file(str(table), out) is None, out


def test_the_directory_spout_refuses_a_link_put_in_a_files_place_after_its_listing(tmp_path, monkeypatch):
    """The listing left links out by name (``os.path.islink``) and pyarrow then opened the file,
    following one: a link put in place between the two had its rows emitted. The open refuses it."""
    import os

    import pyarrow.parquet as pq

    from .test_file_progress import Collector, Context

    class Reported(Collector):
        def report_error(self, message):
            self.errors = [*getattr(self, "errors", []), message]

    pq.write_table(rows(100, 101), tmp_path / "private.parquet")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "private.parquet", out / "part-0.parquet")
    monkeypatch.setattr(os.path, "islink", lambda path: False)  # the listing saw the regular file it replaced
    spout = ParquetDirectorySpout(out, ["event", "n"], require_success=False, poll_secs=0,
                                  progress_dir=tmp_path / "local")
    reported = Reported()
    spout.open({}, Context(0, 1), reported)
    for _ in range(5):
        spout.next_tuple()
    assert reported.emitted == []
    assert len(reported.errors) == 1 and "a symbolic link, which the spout does not follow" in reported.errors[0]
