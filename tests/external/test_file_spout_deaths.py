"""A file line that kills the worker its `FileSpout` runs in: its retry budget outlives the
spout (kept beside its progress, in the task's charges file), so it reaches the dead-letter file
after ``max_retries``, and the good lines in flight beside it at each death are delivered again,
never charged. Driven directly: a "worker death" here is what a real one leaves behind, a spout
that is dropped without ``close`` (its progress since the last commit never written) and a new
one opened on the same directories. The LocalCluster test (and tests/process/test_poison_fail_fast.py
on the process host) run the same with a bolt under ``topology.bolt.fail.fast`` that raises."""

from __future__ import annotations

import collections
import json
import re
import time
from pathlib import Path

import pytest

from squall.external.files import READ_AHEAD_LINES, FileSpout, charges_path
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff

from ..conftest import QUICK_CRASH_BACKOFF, wait_until
from . import poison_file_fail_fast as p
from .test_file_progress import Context
from .test_file_record_limit import Collector

IN_FLIGHT = 20        # tuples of the spout in flight at once (its max spout pending)
MAX_RETRIES = 3


class Worker:
    """One life of the spout's worker: a spout task, and bolts that take its tuples
    `IN_FLIGHT` at a time, oldest first. A poison line kills the worker when it is processed."""

    def __init__(self, src: Path, local: Path, max_retries: int = MAX_RETRIES, **spout) -> None:
        spout = {"commit_every": 100, **spout}
        self.spout = FileSpout(src, ["line"], quiet_secs=0, progress_dir=local, poll_secs=0,
                               backoff=RetryBackoff(0.0, 0.001, max_retries, 0.01), **spout)
        self.collector = Collector()
        self.spout.open({}, Context(0, 1), self.collector)
        self.in_flight: collections.deque[tuple[object, str]] = collections.deque()

    def die(self) -> None:
        """What a dead process leaves: nothing written since, no ``close``."""
        if self.spout.handle is not None:
            self.spout.handle.close()


def test_a_line_that_kills_its_spouts_worker_each_time_is_dead_lettered_after_its_budget(tmp_path):
    """1,003 lines, three of which kill the worker each time they are processed (the spout dies
    with the bolt that raised). Each poison line is charged only for the deaths while it was in
    flight alone (after its first death it is a suspect, emitted alone), so it reaches the dead
    letters after max_retries + 1 = 4 such deaths, with a cause saying so; the good lines in
    flight or read beside it when it killed the worker are delivered again (counted) and each
    reaches the output; none is dead-lettered or left charged."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    p.write_input(src)
    delivered: collections.Counter[str] = collections.Counter()   # emits, per line
    out: collections.Counter[str] = collections.Counter()         # processed and acked, per line
    deaths: collections.Counter[str] = collections.Counter()      # worker deaths, per poison line
    w = Worker(src, local)
    deadline = time.monotonic() + 60
    try:
        while not ((src / f"{p.NAME}.done").exists() and not w.in_flight):
            assert time.monotonic() < deadline and sum(deaths.values()) < 40, (
                f"not done: {sum(deaths.values())} deaths {dict(deaths)}, {len(p.dead_letters(local))} dead "
                f"letters, {len(out)} of {p.GOOD} good lines out")
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            emitted = w.collector.emitted[before:]
            for line, msg_id in emitted:
                delivered[line] += 1
                w.in_flight.append((msg_id, line))
            if w.in_flight and (len(w.in_flight) >= IN_FLIGHT or not emitted):
                msg_id, line = w.in_flight.popleft()
                if line in p.POISON:
                    deaths[line] += 1
                    w.die()
                    w = Worker(src, local)
                    continue
                out[line] += 1
                w.spout.ack(msg_id)
    finally:
        w.spout.close()

    assert set(out) == {str(i) for i in range(p.GOOD)}   # every good line reached the output
    dead = p.dead_letters(local)
    assert sorted(d["record"] for d in dead) == sorted(f"{v}\n" for v in p.POISON)   # never a good one
    for d in dead:
        assert re.fullmatch(r"failed 4 times \(max_retries 3\): its worker died each of the 4 times it was "
                            r"in flight alone", d["reason"]), d["reason"]
        assert d["cause"]["kind"] == "worker-lost" and d["cause"]["message"] == d["reason"].split(": ", 1)[1]
    # 4 deaths alone each, one in each level's group of suspects before it goes alone
    # (SUSPECT_GROUPS), and at most one before it was known a suspect
    grouped = len(SUSPECT_GROUPS) - 1
    assert all(MAX_RETRIES + 1 + grouped <= deaths[v] <= MAX_RETRIES + 2 + grouped for v in p.POISON), deaths
    again = {v: n for v, n in delivered.items() if n > 1 and v not in p.POISON}
    assert again, "no good line was beside a poison one when it killed the worker"
    duplicates = sum(out.values()) - len(out)
    assert duplicates <= sum(again.values()) - len(again)   # a duplicate only where delivered again
    charges = json.loads(charges_path(local / "filespout" / "lines", 0).read_text())
    assert charges["files"] == {}, charges   # every charge deleted with its line, the file with them


def charged(local: Path) -> dict[str, str]:
    """The charges task 0's charges file keeps for the input file, by byte offset."""
    doc = json.loads(charges_path(local / "filespout" / "lines", 0).read_text())
    return doc["files"].get(p.NAME, {}).get("charged", {})


def test_after_a_death_the_lines_it_read_go_in_a_group_then_one_at_a_time_each_charged_while_alone(tmp_path):
    """The lines a dead task read are emitted again as a group of suspects, each with its level
    raised ("0 0 1": nothing charged) before it goes out, nothing else beside them; after a
    death with the group out, one at a time, each once the one before it ended, with its charge
    ("1 1 1": one failure, a death) written before it goes out and deleted by its ack; a
    ``close`` with one in flight takes its mark back (its worker did not die)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    p.write_input(src)
    w = Worker(src, local)
    for _ in range(5):
        w.spout.next_tuple()
    assert [line for line, _ in w.collector.emitted] == ["0", "1", "2", "3", "4"]   # together
    w.die()
    w = Worker(src, local)
    for _ in range(5):
        w.spout.next_tuple()
    # the group: the 5 lines read, and the read-ahead after them (the dead task may have read it)
    assert [line for line, _ in w.collector.emitted] == ["0", "1", "2", "3", "4"]
    levelled = [m for _, m in w.collector.emitted]
    assert charged(local) == {str(m.offset): "0 0 1" for m in levelled}
    w.die()
    w = Worker(src, local)
    for line in ("0", "1", "2"):
        for _ in range(3):
            w.spout.next_tuple()
        [(got, msg_id)] = w.collector.emitted   # nothing beside it
        level = {str(m.offset): "0 0 1" for m in levelled if m.offset > msg_id.offset}
        assert got == line and charged(local) == {str(msg_id.offset): "1 1 1", **level}
        w.spout.ack(msg_id)
        assert charged(local) == level   # deleted before anything else goes out
        w.collector.emitted.clear()
    w.spout.next_tuple()
    [(got, msg_id)] = w.collector.emitted
    assert got == "3" and charged(local)[str(msg_id.offset)] == "1 1 1"
    w.spout.close()
    # taken back to its level: it was not in flight when its worker died
    assert charged(local) == {str(m.offset): "0 0 1" for m in levelled if m.offset >= msg_id.offset}


def test_after_a_death_among_short_lines_at_most_read_ahead_lines_more_go_out_as_suspects(tmp_path):
    """The mark of how far a task may have read runs READ_AHEAD_LINES lines ahead of what it
    emitted, not 64 KiB: 10,000 lines of 15 bytes, a task dies with 20 in flight, and its
    restart emits as suspects (each acked before the next goes: one group each) only those and at most READ_AHEAD_LINES more (on main: 4,371, each with
    two durable writes, 15 to 23 s before the rest went out together), then the others together.
    Every line out once the restart is done, none charged."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    lines = [f"line-{i:09d}" for i in range(10_000)]
    (src / "short.txt").write_text("".join(f"{v}\n" for v in lines))
    w = Worker(src, local)
    for _ in range(IN_FLIGHT):
        w.spout.next_tuple()
    assert len(w.collector.emitted) == IN_FLIGHT
    w.die()
    w = Worker(src, local)
    out: collections.Counter[str] = collections.Counter()
    suspects = 0
    try:
        while len(out) < len(lines):
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            emitted = w.collector.emitted[before:]
            assert emitted, f"stalled with {len(out)} of {len(lines)} lines out"
            suspects += bool(w.spout.gate.group)   # out in a group of suspects, or alone
            for line, msg_id in emitted:
                out[line] += 1
                w.spout.ack(msg_id)
    finally:
        w.spout.close()
    assert sorted(out) == lines and set(out.values()) == {1}
    assert IN_FLIGHT <= suspects <= IN_FLIGHT + READ_AHEAD_LINES + 1, suspects
    assert json.loads(charges_path(local / "filespout" / "lines", 0).read_text())["files"] == {}


def test_a_line_dead_lettered_before_a_death_that_came_before_its_commit_is_not_dead_lettered_twice(tmp_path):
    """max_retries 0: the poison line is dead-lettered when it is read again charged for its
    death alone; the worker then dies again before any progress commit (another cause). The
    next task reads the line once more and counts it as done, from the charges file, without
    a second dead-letter entry or another death."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / p.NAME).write_text("good-0\npoison-a\ngood-1\ngood-2\n")
    never = {"max_retries": 0, "commit_every": 1000, "commit_secs": 3600.0}

    def life(upto: str | None = None) -> Worker:
        """A task that emits what it may, acking each good line, until a poison line is out or
        ``upto`` is acked (nothing in flight: a death then charges no one); returns it, not
        closed."""
        w = Worker(src, local, **never)
        for _ in range(20):
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            for line, msg_id in w.collector.emitted[before:]:
                if line in p.POISON:
                    return w
                w.spout.ack(msg_id)
                if line == upto:
                    return w
        return w

    life().die()                      # the poison line among the others: no charge
    life().die()                      # in a group of suspects: its level raised, no charge
    life().die()                      # alone: charged a death
    w = life(upto="good-1")           # read again charged past 0: dead-lettered; good-1 acked
    assert [d["record"] for d in p.dead_letters(local)] == ["poison-a\n"]
    w.die()                           # nothing in flight, before any commit: the committed offset is 0
    w = life()
    assert [line for line, _ in w.collector.emitted] == ["good-0", "good-1", "good-2"]   # no poison-a
    assert (src / f"{p.NAME}.done").exists()
    w.spout.close()
    assert [d["record"] for d in p.dead_letters(local)] == ["poison-a\n"]   # once


@pytest.mark.timeout(300)  # 9 crashes at most, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_on_local_cluster_a_poison_line_under_fail_fast_is_dead_lettered_and_every_good_one_is_out(tmp_path):
    """The same through a topology on LocalCluster (one worker: the bolt that raises under
    ``topology.bolt.fail.fast`` takes the spout down with it each time): the worker restarts
    after each death, and the topology ends with every good line out (duplicates counted), each
    poison one in the dead-letter file after its death alone, none charged."""
    from squall import LocalCluster

    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    p.write_input(src)
    with LocalCluster(QUICK_CRASH_BACKOFF) as cluster:
        cluster.submit_topology("poison", p.conf(), p.topology(src, local, notes))
        try:
            # 9 quick crashes at most (3 poison lines: among others, in a group, alone), restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
            assert wait_until(lambda: p.done(src, local, notes), 150), p.progress(src, local, notes)
        finally:
            cluster.kill_topology("poison", 0)
    figures = p.check_outcome(src, local, notes)
    assert figures["good delivered again"] > 0, figures   # good lines were beside a poison one


class WorkerContext(Context):
    """A task's context in a worker: with the worker's resources, as the engine lends them."""

    def __init__(self, index: int, tasks: int, resources) -> None:
        super().__init__(index, tasks)
        self.worker_resources = resources


def test_two_tasks_in_one_worker_send_their_suspects_alone_in_the_worker_not_only_in_their_task(tmp_path):
    """Two tasks of the spout in one worker, each reading a file of its own of 8 lines (task 0
    more.txt, task 1 events.txt), die together with 5 lines each in flight. In the worker's
    next life every line of both files is a suspect (each task had read past its file's end),
    and they go out in groups of one task's suspects: while one task's group is out, the other
    task emits nothing (were the groups only per task, the other task's poison line could kill
    the worker beside them, and raise their level, or charge one alone). Every line is counted:
    the 16 go out once each, in their file's order, each with its level raised before it went
    out, none marked once both tasks close; both files finish."""
    from squall._worker_resources import WorkerResources

    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    lines = {0: [f"a{i}" for i in range(8)], 1: [f"b{i}" for i in range(8)]}
    for index, name in ((0, "more.txt"), (1, "events.txt")):
        (src / name).write_text("".join(f"{line}\n" for line in lines[index]))

    def life() -> list[tuple[FileSpout, Collector]]:
        resources = WorkerResources()   # a new worker: its gate starts empty
        tasks = []
        for index in range(2):
            spout = FileSpout(src, ["line"], quiet_secs=0, progress_dir=local, poll_secs=0, commit_every=100,
                              backoff=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01))
            collector = Collector()
            spout.open({}, WorkerContext(index, 2, resources), collector)
            tasks.append((spout, collector))
        return tasks

    tasks = life()
    for spout, _ in tasks:
        for _ in range(5):
            spout.next_tuple()
    assert [[line for line, _ in c.emitted] for _, c in tasks] == [lines[0][:5], lines[1][:5]]   # together
    for spout, _ in tasks:   # the worker dies: nothing written since, no close
        assert spout.handle is not None
        spout.handle.close()

    tasks = life()
    out: dict[int, list[str]] = {0: [], 1: []}
    for _ in range(200):
        for spout, _ in tasks:
            spout.next_tuple()
        in_flight = [(i, line, msg_id) for i, (_, c) in enumerate(tasks) for line, msg_id in c.emitted]
        # one task's group of suspects alone in the worker
        assert len({i for i, _, _ in in_flight}) <= 1, in_flight
        for i, line, msg_id in in_flight:
            spout, collector = tasks[i]
            assert charges_of(local, i)[str(msg_id.offset)] == "0 0 1"   # written before it went out
            spout.ack(msg_id)
            collector.emitted.clear()
            out[i].append(line)
        if (src / "more.txt.done").exists() and (src / "events.txt.done").exists():
            break
    assert out == lines   # each line once, in its file's order, none lost
    for spout, _ in tasks:
        spout.close()
    assert charges_of(local, 0) == {} and charges_of(local, 1) == {}


def charges_of(local: Path, task: int) -> dict[str, str]:
    """Task ``task``'s charged lines (offset -> charge) of its one file."""
    kept = json.loads(charges_path(local / "filespout" / "lines", task).read_text())
    return {offset: charge for f in kept["files"].values() for offset, charge in f["charged"].items()}
