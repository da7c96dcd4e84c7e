"""The lines a `FileTridentSpout` cannot read are logged once each, naming their txid, however
often their batch is replayed, on a LocalCluster with a real redis-server: 3 files of 40 good
lines and 4 the translator refuses, 7 lines of each file a batch, the first attempt of every
third txid failed after the spout emitted it (txid 3 holds a refused line of each file): 12 log
lines, each naming the txid and the offset of its line, every good line counted once, 12 dead
letters in the figures.

Before: each replay logged its batch's dead letters again (15 lines for the 12 refused lines),
without the txid, so a user counting the log, the only place the lines are named, counted dead
letters that were never there."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("redis")

from squall import LocalCluster

from ..conftest import wait_until
from . import trident_dead_letters as t

PER_BATCH = 7  # t.topology's max_batch_records


def _messages(caplog, marker: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if marker in r.getMessage()]


@pytest.mark.timeout(120)
def test_a_file_trident_spouts_refused_lines_are_logged_once_each_through_replays(tmp_path, redis_server, caplog):
    caplog.set_level(logging.ERROR, logger="squall.external.trident_files")
    src = tmp_path / "in"
    src.mkdir()
    inp = t.Input()
    inp.write(src, redis_server.url)
    want = []  # (txid, file, offset) of every refused line: line i of a file is in txid i // 7 + 1
    for f in range(inp.files):
        path = src / f"f{f}.txt"
        offset = 0
        for i, line in enumerate(path.read_bytes().splitlines(keepends=True)):
            if not line.startswith(b"good-"):
                want.append(f"FileTridentSpout dead letter: txid {i // PER_BATCH + 1}: {path} offset {offset}: ")
            offset += len(line)
    assert len(want) == inp.files * inp.bad_lines
    good = dict.fromkeys(inp.good, 1)
    with LocalCluster() as cluster:
        cluster.submit_topology("tdlog", t.conf(), t.topology(src, redis_server.url))
        assert wait_until(lambda: t.stored(redis_server.url) == good, 90), t.stored(redis_server.url)
        dead = t.expected_dead(inp)
        assert wait_until(lambda: t.figures(cluster.get_topology_info("tdlog")) == dead, 30), \
            t.figures(cluster.get_topology_info("tdlog"))
        cluster.kill_topology("tdlog", wait_secs=0)
    assert t.stored(redis_server.url) == good
    logged = _messages(caplog, "FileTridentSpout dead letter")
    assert len(logged) == len(want), logged  # once each: not again at the replay of txid 3
    assert sorted(m[:m.index(": ", m.index(" offset ")) + 2] for m in logged) == sorted(want), logged
