"""Shared by the cluster tests of a file line that kills its spout's worker under
``topology.bolt.fail.fast`` (tests/external/test_file_spout_deaths.py on LocalCluster,
tests/process/test_poison_fail_fast.py on the process host): the input file (1,000 good lines,
three poison ones; or the same split between two files, one for each of two spout tasks), a
topology of a `FileSpout` (one task, or two) and a bolt that notes each line it is
given in the file ``seen``, raises on a poison one (its worker dies, the spout with it) and
appends the others to ``out``; and the checks of what came out."""

from __future__ import annotations

import collections
import json
import os
import re
from pathlib import Path

from squall import Bolt, Config, TopologyBuilder
from squall.external.files import FileSpout, charges_path
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff
from tests.written import finished_lines

GOOD = 1000
POISON = ("poison-a", "poison-b", "poison-c")
NAME = "events.txt"
# with two spout tasks, the input in two files, one owned by each (`squall.external.files.owner_of`:
# task 1 reads events.txt, task 0 more.txt)
NAMES = (NAME, "more.txt")
# No retry after a death alone: each further quick crash of the worker waits 1, 2, 4 ... s
# before its restart (squall.cluster.backoff), so a poison line costs 3 crashes here, its first
# delivery among others, one in a group of suspects (SUSPECT_GROUPS) and one alone (tests/external/test_file_spout_deaths.py plays max_retries
# 3 without a cluster)
MAX_RETRIES = 0


def note(path: str, line: str) -> None:
    """Appends ``line`` to ``path`` in one write (O_APPEND: whole lines from any process)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


def lines(path: Path) -> list[str]:
    return finished_lines(path)


class Check(Bolt):
    """Notes each line in ``seen``; raises on a poison one (noting it in ``raised`` with 1 if the
    spout's task is in this worker, else 0), else appends it to ``out`` and acks."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        # whether the spout's task runs in this worker: then a raise here takes it down too
        self.beside_spout = bool(set(context.get_this_worker_tasks()) & set(context.get_component_tasks("lines")))

    def execute(self, tup):
        value = tup.values[0]
        note(os.path.join(self.notes, "seen"), value)
        if value in POISON:
            note(os.path.join(self.notes, "raised"), f"{value} {int(self.beside_spout)}")
            raise RuntimeError(f"poison line {value!r}")
        note(os.path.join(self.notes, "out"), value)
        self.collector.ack(tup)


def values() -> list[str]:
    """The lines of the input: the good ones with the poison ones among them."""
    out = [str(i) for i in range(GOOD)]
    for k, value in enumerate(POISON):
        out.insert((k + 1) * GOOD // (len(POISON) + 1), value)
    return out


def write_input(src: Path, files: int = 1) -> None:
    """The input, moved into ``src`` complete: in one file, or every ``files``-th line in each of
    the first ``files`` of `NAMES`."""
    for k, name in enumerate(NAMES[:files]):
        tmp = src / f".{name}"
        tmp.write_text("".join(f"{v}\n" for v in values()[k::files]))
        tmp.rename(src / name)


def topology(src: Path, local_dir: Path, notes: Path, local: bool = False, spout_tasks: int = 1):
    """``spout_tasks`` tasks of the spout and 2 of the bolt (``local``: local-or-shuffle grouped)."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["line"], quiet_secs=0, progress_dir=local_dir, poll_secs=0.05,
                                   backoff=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01)), spout_tasks)
    bolt = b.set_bolt("check", Check(str(notes)), 2)
    (bolt.local_or_shuffle_grouping if local else bolt.shuffle_grouping)("lines")
    return b.create_topology()


def conf(workers: int = 1) -> Config:
    c = Config()
    c[Config.TOPOLOGY_BOLT_FAIL_FAST] = True
    c.set_num_workers(workers)
    c.set_message_timeout_secs(300)   # no failure but the deaths
    return c


def dead_letters(local_dir: Path, files: int = 1) -> list[dict]:
    """The dead letters of the input's ``files`` files."""
    return [json.loads(x) for name in NAMES[:files]
            for x in lines(local_dir / "filespout" / "lines" / "dead-letter" / f"{name}.dead")]


def done(src: Path, local_dir: Path, notes: Path, files: int = 1) -> bool:
    """Every line out or dead-lettered (`check_outcome` tells which should be which), every
    file finished (renamed done)."""
    settled = set(lines(notes / "out")) | {d["record"].strip() for d in dead_letters(local_dir, files)}
    return (all((src / f"{name}.done").exists() for name in NAMES[:files])
            and len(settled) == GOOD + len(POISON))


def progress(src: Path, local_dir: Path, notes: Path, files: int = 1) -> str:
    return (f"{len(dead_letters(local_dir, files))} dead letters, {len(set(lines(notes / 'out')))} of {GOOD} good lines "
            f"out, {len(lines(notes / 'seen'))} deliveries, files {sorted(p.name for p in src.iterdir())}")


def check_outcome(src: Path, local_dir: Path, notes: Path, files: int = 1) -> dict[str, int]:
    """Every good line out at least once, each poison one dead-lettered for its death alone,
    none charged still; returns the figures: duplicates out, good lines delivered again, deaths."""
    out = collections.Counter(lines(notes / "out"))
    missing = {str(i) for i in range(GOOD)} - set(out)
    assert not missing, f"{len(missing)} good lines never out: {sorted(missing, key=int)[:20]}"
    seen = collections.Counter(lines(notes / "seen"))
    dead = dead_letters(local_dir, files)
    good_dead = sorted(d["record"].strip() for d in dead if d["record"].strip() not in POISON)
    assert not good_dead, f"{len(good_dead)} good lines dead-lettered: {good_dead}"
    assert sorted(d["record"] for d in dead) == sorted(f"{p}\n" for p in POISON)
    for d in dead:
        said = re.fullmatch(rf"failed {MAX_RETRIES + 1} times \(max_retries {MAX_RETRIES}\): its worker died "
                            rf"each of the {MAX_RETRIES + 1} times it was in flight alone", d["reason"])
        assert said, d["reason"]
        assert d["cause"]["kind"] == "worker-lost"
        # its deaths: one alone, at most one in each level's group of suspects before it goes
        # alone (SUSPECT_GROUPS: none if another poison line of its group killed the worker
        # first), and at most one among others
        assert MAX_RETRIES + 1 <= seen[d["record"].strip()] <= MAX_RETRIES + 2 + len(SUSPECT_GROUPS) - 1, seen
    # every charge deleted with its line (the file's entry itself goes at the commit after its
    # rename, which the topology's kill may come before: pruned at the next start)
    for task in range(files):
        charges = json.loads(charges_path(local_dir / "filespout" / "lines", task).read_text())
        assert all(not f["charged"] for f in charges["files"].values()), charges
    again = {v for v, n in seen.items() if n > 1 and v not in POISON}
    return {"duplicates": sum(out.values()) - len(out), "good delivered again": len(again),
            "deaths": sum(seen[p] for p in POISON)}
