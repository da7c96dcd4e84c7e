"""A record that kills its worker's process the instant it is processed (``os._exit(1)``, as a
segfaulting C extension or a library's exit does: no Python exception, no last heartbeat), and
is the first record of the topology, so the worker dies within milliseconds of opening its
executors. On the process host, with ``squall.worker.max.launch.attempts: 2`` (the cluster
fixture's).

Such a worker had started: its executors opened and ran user code on tuples. Before the fix the
master learned that only from the worker's next heartbeat, a second after the executors opened,
so it took each death for a failed start ("exited with status 1 before it started"): the slot
waited the failed-start backoff, was given up at the second death, and no record came out ever
again. Now the worker's loops take no tuple until the master has recorded the start: each death
is a crash (restarted at once, then after 1 s, 2 s), never given up; the `FileSpout`
(``max_retries`` 0) dead-letters the poison line after its death alone (after one in a group of
suspects), and every good line comes out. The cluster is `crashing_cluster`: the crash backoff
is `QUICK_CRASH_BACKOFF`'s (the deaths are counted, not the 3 s the default backoff waited),
and its ``squall.worker.max.launch.attempts`` is 2 as the plain cluster's, so a death taken for
a failed start still gives the slot up."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from squall import Bolt, Config, TopologyBuilder
from squall.external.files import FileSpout
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff

from ..conftest import wait_until
from ..external.poison_file_fail_fast import lines, note

GOOD = 2000
POISON = "poison"
NAME = "events.txt"


class ExitOnPoison(Bolt):
    """Notes each line in ``seen``; on the poison one ends its process at once, as a crash in C
    would (nothing reported, no heartbeat); else appends the line to ``out`` and acks it."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def execute(self, tup):
        value = tup.values[0]
        note(os.path.join(self.notes, "seen"), value)
        if value == POISON:
            os._exit(1)
        note(os.path.join(self.notes, "out"), value)
        self.collector.ack(tup)


def _topology(src: Path, local: Path, notes: Path):
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["line"], quiet_secs=0, progress_dir=local, poll_secs=0.05,
                                   backoff=RetryBackoff(0.0, 0.001, 0, 0.01)))
    b.set_bolt("exit", ExitOnPoison(str(notes))).shuffle_grouping("lines")
    return b.create_topology()


def _dead_letters(local: Path) -> list[dict]:
    path = local / "filespout" / "lines" / "dead-letter" / f"{NAME}.dead"
    return [json.loads(x) for x in lines(path)]


@pytest.mark.timeout(240)
def test_a_worker_killed_by_its_first_record_is_a_crash_not_a_failed_start_and_every_good_record_comes_out(
        crashing_cluster, tmp_path):
    cluster = crashing_cluster
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    (src / f".{NAME}").write_text("".join(f"{v}\n" for v in [POISON, *map(str, range(GOOD))]))
    (src / f".{NAME}").rename(src / NAME)
    conf = Config()
    conf.set_num_workers(1)
    conf.set_message_timeout_secs(300)  # no failure but the deaths
    with cluster.client() as master:
        master.submit_topology("exits", conf, _topology(src, local, notes))
        try:
            def finished_or_given_up():
                workers = master.get_topology_info("exits")["workers"]
                return any(w["given_up"] for w in workers) or (
                    len(set(lines(notes / "out"))) == GOOD and len(_dead_letters(local)) == 1)
            assert wait_until(finished_or_given_up, 180), (len(set(lines(notes / "out"))), _dead_letters(local))
            info = master.get_topology_info("exits")
        finally:
            master.kill_topology("exits", 0)

    out, seen = collections.Counter(lines(notes / "out")), collections.Counter(lines(notes / "seen"))
    errors = [e["error"] for e in info["errors"]]
    print("FIGURES", {"good out": len(out), "duplicates": sum(out.values()) - len(out), "deaths": seen[POISON],
                      "workers": info["workers"], "errors": errors})
    assert not any(w["given_up"] for w in info["workers"]), (info["workers"], errors)
    assert not [e for e in errors if "before it started" in e or "failed to start" in e], errors
    assert set(out) == {str(i) for i in range(GOOD)}  # every good line, at least once
    [dead] = _dead_letters(local)
    assert dead["record"] == f"{POISON}\n"
    assert dead["reason"] == ("failed 1 times (max_retries 0): its worker died each of the 1 times it was "
                              "in flight alone"), dead
    # its first delivery among others, once in each level's group of suspects (SUSPECT_GROUPS),
    # then once alone: three deaths, each a restart of the one worker
    assert seen[POISON] == 2 + len(SUSPECT_GROUPS) - 1, seen[POISON]
    assert sum(w["restarts"] for w in info["workers"]) == seen[POISON], info["workers"]
