"""The log cleaner's decisions (`squall.cluster.log_cleaner.plan`, Storm's logviewer LogCleaner)
on made-up listings, and its shell on a real directory (symlinks, what it logs)."""

import logging
import os

from squall._config import cluster_conf
from squall.cluster.log_cleaner import MB, LogCleaner, LogFile, WorkerDir, plan
from squall.engine.clock import SimulatedClock

DAY = 86400.0
NOW = 100 * DAY
WEEK = 7 * DAY


def wd(topo, port, mtime, *files):
    return WorkerDir(topo, str(port), mtime, tuple(LogFile(n, s, t) for n, s, t in files))


def test_a_dead_workers_directory_goes_once_everything_in_it_is_older_than_the_age():
    old, fresh = NOW - WEEK - 1, NOW - WEEK + 60
    listing = [wd("dead-1", 6700, old, ("worker.log", 10, old), ("worker.log.1", 10, old)),
               wd("dead-2", 6700, old, ("worker.log", 10, fresh)),   # a file too recent
               wd("dead-3", 6700, fresh, ("worker.log", 10, old)),   # the directory itself too recent
               wd("live", 6701, old, ("worker.log", 10, old))]       # old, but its worker runs here
    p = plan(listing, {("live", "6701")}, NOW, WEEK, 2048 * MB, 4096 * MB)
    assert p.dirs == [("dead-1", "6700")] and p.files == []
    # exactly at the age counts (Storm: lastModified <= now - age)
    assert plan([wd("t", 1, NOW - WEEK)], set(), NOW, WEEK, MB, 2 * MB).dirs == [("t", "1")]


def test_a_directory_over_its_cap_loses_its_oldest_rolled_files_never_an_active_one():
    d = wd("live", 6700, NOW, ("worker.log", 3 * MB, NOW - 500), ("worker.log.1", MB, NOW - 10),
           ("worker.log.2", MB, NOW - 20), ("worker.log.3", MB, NOW - 30), ("worker.yaml", 1, NOW - 900),
           ("gc.log.0.current", 2 * MB, NOW - 1000))
    # 8 MB (and a byte) against 5: the three rolled files, oldest first, are all it may delete
    p = plan([d], {("live", "6700")}, NOW, WEEK, 5 * MB, 100 * MB)
    assert p.dirs == [] and p.files == [("live", "6700", "worker.log.3"), ("live", "6700", "worker.log.2"),
                                        ("live", "6700", "worker.log.1")]
    # only as many as bring it under: 8 MB + 1 against 7 MB takes the oldest two
    p = plan([d], {("live", "6700")}, NOW, WEEK, 7 * MB, 100 * MB)
    assert p.files == [("live", "6700", "worker.log.3"), ("live", "6700", "worker.log.2")]
    # a dead worker's directory (not old enough to go) is held to the same cap the same way
    p = plan([d], set(), NOW, WEEK, 7 * MB, 100 * MB)
    assert p.files == [("live", "6700", "worker.log.3"), ("live", "6700", "worker.log.2")]


def test_over_the_total_the_oldest_files_go_a_dead_workers_log_too_a_live_workers_active_log_never():
    dead = wd("dead", 6700, NOW, ("worker.log", 2 * MB, NOW - 100), ("worker.yaml", 1, NOW - 5000),
              ("worker.log.1", MB, NOW - 50))
    live = wd("live", 6701, NOW, ("worker.log", 4 * MB, NOW - 9000), ("worker.log.1", MB, NOW - 200),
              ("worker.log.2", MB, NOW - 300))
    # 9 MB + 1 byte against 5 MB + 1: oldest eligible first (live .2, live .1, dead worker.log), the
    # live worker.log (the oldest file) and the dead worker's metadata never
    p = plan([dead, live], {("live", "6701")}, NOW, WEEK, 100 * MB, 5 * MB + 1)
    assert p.dirs == []
    assert p.files == [("live", "6701", "worker.log.2"), ("live", "6701", "worker.log.1"),
                       ("dead", "6700", "worker.log")]


def test_the_per_worker_cap_is_at_most_half_the_total_and_the_keys_come_from_the_configuration(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path)})
    c = LogCleaner.from_conf(conf, set)
    assert (c.interval_secs, c.age_secs, c.per_worker_bytes, c.total_bytes) == (600, WEEK, 2048 * MB, 4096 * MB)
    assert c.root == tmp_path / "logs" / "workers-artifacts"
    c = LogCleaner.from_conf(cluster_conf({"storm.local.dir": str(tmp_path), "logviewer.max.per.worker.logs.size.mb": 900,
                                           "logviewer.max.sum.worker.logs.size.mb": 1000}), set)
    assert c.per_worker_bytes == 500 * MB
    off = LogCleaner.from_conf(cluster_conf({"storm.local.dir": str(tmp_path), "logviewer.cleanup.interval.secs": None}),
                               set)
    assert off.tick() is False


def test_bad_values_are_refused_naming_the_key(tmp_path):
    import pytest

    from squall._errors import SquallError
    for key, value in (("logviewer.cleanup.interval.secs", 0), ("logviewer.cleanup.age.mins", 1.5),
                       ("logviewer.max.sum.worker.logs.size.mb", "big"), ("logviewer.max.per.worker.logs.size.mb", -1)):
        with pytest.raises(SquallError, match=f"'{key}' must be a positive integer"):
            cluster_conf({"storm.local.dir": str(tmp_path), key: value})


def _age(path, t):
    os.utime(path, (t, t), follow_symlinks=False)


def test_the_shell_follows_no_symlink_and_logs_what_it_deleted_on_its_timer(tmp_path, caplog):
    root = tmp_path / "workers-artifacts"
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.log.1").write_bytes(b"x" * 100)
    (outside / "worker.log").write_bytes(b"x")
    dead = root / "dead-1-1" / "6700"
    dead.mkdir(parents=True)
    (dead / "worker.log").write_bytes(b"x" * 10)
    (dead / "link-out").symlink_to(outside)       # a symlink in a dead directory: removed, not followed
    (root / "linked-topo").symlink_to(outside.parent)  # a topology "directory" that is a symlink: ignored
    (root / "t-2-2").mkdir()
    (root / "t-2-2" / "6701").symlink_to(outside)      # a port "directory" that is a symlink: ignored
    live = root / "live-1-1" / "6702"
    live.mkdir(parents=True)
    (live / "worker.log").write_bytes(b"y" * 10)
    (live / "worker.log.1").write_bytes(b"z" * (2 * MB))
    (live / "out.log.1").symlink_to(outside / "keep.log.1")  # a file symlink: never deleted nor counted
    clock = SimulatedClock(start=NOW)
    old = NOW - WEEK - 60
    for p in (dead / "worker.log", dead / "link-out", dead, live / "worker.log", live / "worker.log.1", live,
              outside / "keep.log.1", outside / "worker.log", outside):
        _age(p, old)
    cleaner = LogCleaner(root, lambda: {("live-1-1", "6702")}, 60, 7 * 24 * 60, 1, 4096, clock=clock)
    with caplog.at_level(logging.INFO, logger="squall.logcleaner"):
        assert cleaner.tick() is True  # the first round at once
    assert not (root / "dead-1-1").exists()  # its empty topology directory went with it
    assert (live / "worker.log").exists() and not (live / "worker.log.1").exists()
    assert (live / "out.log.1").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["keep.log.1", "worker.log"]
    assert (root / "linked-topo").is_symlink() and (root / "t-2-2" / "6701").is_symlink()
    said = caplog.text
    assert f"removed {dead}" in said and f"deleted {live / 'worker.log.1'}, {2 * MB} bytes" in said
    # the next round waits for the interval
    (live / "worker.log.1").write_bytes(b"z" * (2 * MB))
    clock.advance(59)
    assert cleaner.tick() is False and (live / "worker.log.1").exists()
    clock.advance(1)
    assert cleaner.tick() is True and not (live / "worker.log.1").exists()
