"""A `FileSpout` whose worker died, feeding an event-time window: the restarted task's suspects
(the lines read again below where the dead task had read to) go out in a group of 32, and the
window acks a line only once newer lines move its watermark past it. Those newer lines are the
ones read after the group, which waited for the group's last trees to end: nothing went out
again, nothing failed or timed out (a window keeps the tuples it holds from timing out), and the
pipeline stood still for good (found on the process host: a worker SIGKILLed beside the spout,
then 32 tuples emitted and 17 acked in the next two minutes, every window and total stuck).
Driven without a cluster, on a simulated clock: a group that has neither taken nor lost a member
for the topology's message timeout is set aside, and the lines after it go out."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from squall import FailureCause
from squall.engine.clock import SimulatedClock
from squall.external.files import FileSpout
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff

from .test_file_progress import Context
from .test_file_record_limit import Collector

LINES = 300
TIMEOUT_SECS = 30            # the topology's topology.message.timeout.secs
LAG = 10                     # the window acks a line once a line LAG newer went out
TICK = 0.1                   # simulated seconds between two next_tuple calls


class Life(NamedTuple):
    """One run of the spout's worker: its spout task and what that task emitted."""
    spout: FileSpout
    out: Collector


def start(src: Path, local: Path, clock: SimulatedClock) -> Life:
    """Opens the spout task as a (re)started worker does, on the same directories."""
    spout = FileSpout(src, ["line"], quiet_secs=0, progress_dir=local, poll_secs=0, commit_every=20, clock=clock,
                      backoff=RetryBackoff(0.0, 0.001, 3, 0.01))
    out = Collector()
    spout.open({"topology.message.timeout.secs": TIMEOUT_SECS}, Context(0, 1), out)
    return Life(spout, out)


def run(life: Life, clock: SimulatedClock, secs: float, acked: set[int],
        fail_once: dict[int, FailureCause] | None = None) -> None:
    """Calls next_tuple every TICK for ``secs`` simulated seconds, acking as an event-time
    window with a lag does: a line once a line LAG newer than it went out in this life. A line
    of ``fail_once`` fails with its cause the first time it goes out (and is taken out of it)."""
    fail_once = {} if fail_once is None else fail_once
    seen = 0
    for _ in range(round(secs / TICK)):
        life.spout.next_tuple()
        clock.advance(TICK)
        while seen < len(life.out.emitted):
            line, msg_id = life.out.emitted[seen]
            seen += 1
            if int(line) in fail_once:
                life.spout.fail_with(msg_id, fail_once.pop(int(line)))
        newest = max((int(line) for line, _ in life.out.emitted), default=-1)
        for line, msg_id in life.out.emitted:
            if int(line) <= newest - LAG and int(line) not in acked and int(line) not in fail_once:
                acked.add(int(line))
                life.spout.ack(msg_id)


def test_a_group_of_suspects_held_in_a_window_does_not_stop_the_spout_for_good(tmp_path):
    """300 lines; the first life emits 150 of them and dies with the newest held in the window.
    The second life's suspects go out in a group of 32, the window acks all but the last LAG of
    them and holds those until newer lines come. Before, no line went out after the group, for
    the 120 simulated seconds watched (every window after it never fired); now, once the group
    stood still for the message timeout, the lines after it go out, and every line but the last
    LAG (held by the window at the end of the input) is acked, in the first life or the second.
    Two suspects fail once on their way: one as a bolt's exception (its retry goes in a group,
    which waited for every line in flight to end: for ever, behind the window), one as being
    executed when another worker died (its retry goes alone: it waits for the message timeout,
    then goes beside what the window holds)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "events.txt").write_text("".join(f"{i}\n" for i in range(LINES)))
    clock = SimulatedClock()
    first = start(src, local, clock)
    acked: set[int] = set()
    while len(first.out.emitted) < 150:
        run(first, clock, TICK, acked)
    first.spout.handle.close()      # what a SIGKILL leaves: no close, nothing written since
    assert len(acked) >= 100        # the window acked the early lines, committed every 20

    second = start(src, local, clock)
    acked_before = set(acked)
    fail_once = {200: FailureCause("exception", "parse", 3, "ValueError", "bad"),
                 220: FailureCause("worker-died", "parse", 3, "", "exit status 7")}
    run(second, clock, 6 * TIMEOUT_SECS, acked, fail_once)
    assert not fail_once            # both went out and failed
    lines = [int(line) for line, _ in second.out.emitted]
    # the group of suspects went out first (the lines not acked when the first life died)
    assert lines[:SUSPECT_GROUPS[0]] == sorted(lines[:SUSPECT_GROUPS[0]])
    # every line reached the window again or for the first time, once each in this life
    assert set(range(LINES)) - acked_before <= set(lines)
    assert sorted(line for line, n in Counter(lines).items() if n > 1) == [200, 220]   # their retries
    assert max(lines) == LINES - 1
    assert acked == set(range(LINES - LAG))


POISON = 120   # kills the worker as it is processed (before the window, or in it as it fires)


class Ending(NamedTuple):
    """How a run of restarts ended: the worker's deaths, the lines acked, the dead letters."""
    deaths: int
    acked: set[int]
    letters: list[dict[str, str]]


def restart_until_done(tmp_path: Path, kills: Callable[[list[int]], bool], max_deaths: int) -> Ending:
    """300 lines through a `FileSpout` whose worker dies whenever ``kills`` says so of the lines
    emitted in its life so far (checked after each next_tuple, before the window acks), and is
    restarted on the same directories, until the file is done; at most ``max_deaths`` deaths."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "events.txt").write_text("".join(f"{i}\n" for i in range(LINES)))
    clock = SimulatedClock()
    deaths = 0
    acked: set[int] = set()
    while not (src / "events.txt.done").exists():
        assert deaths <= max_deaths, f"{deaths} deaths"
        life = start(src, local, clock)
        died = False
        for _ in range(round(20 * TIMEOUT_SECS / TICK)):
            life.spout.next_tuple()
            clock.advance(TICK)
            lines = [int(line) for line, _ in life.out.emitted]
            if kills(lines):
                died = True
                break
            newest = max(lines, default=-1)
            for line, msg_id in life.out.emitted:
                if int(line) <= newest - LAG and int(line) not in acked:
                    acked.add(int(line))
                    life.spout.ack(msg_id)
            if (src / "events.txt.done").exists():
                break
        if not died:
            for line, msg_id in life.out.emitted:   # the input ends: the window fires the rest
                if int(line) not in acked:
                    acked.add(int(line))
                    life.spout.ack(msg_id)
            for _ in range(20):
                life.spout.next_tuple()
            life.spout.close()
            break
        deaths += 1
        life.spout.handle.close()   # what a SIGKILL leaves: no close, nothing written since
    letters = [json.loads(x) for x in (local / "filespout" / "lines" / "dead-letter" / "events.txt.dead")
               .read_text().splitlines()]
    return Ending(deaths, acked, letters)


def test_a_poison_line_behind_suspects_held_in_a_window_is_the_only_dead_letter(tmp_path):
    """300 lines; line 120 kills the worker each time it is processed, upstream of an
    event-time window that acks a line once one LAG newer went out. Its first death is beside
    others, the next in a group of suspects (108 to 120, raising their levels), then each of
    them goes alone: the window holds each for the message timeout (nothing newer goes beside a
    suspect alone), it is set aside, and the next goes beside it, until 120 goes and kills the
    worker. Before, each suspect set aside kept the death charged before it went out, so 120's
    deaths were charged to 108 to 119 too, and all 13 were dead-lettered; now a suspect set
    aside counts a death beside others instead, bounded apart, and only 120 ends in the dead
    letters, after max_retries + 1 deaths alone (6 deaths in all), every other line acked."""
    end = restart_until_done(tmp_path, lambda lines: POISON in lines, max_deaths=6)
    assert [int(d["record"]) for d in end.letters] == [POISON]
    assert end.letters[0]["reason"].startswith("failed 4 times (max_retries 3): its worker died each of "
                                               "the 4 times it was in flight alone")
    assert end.acked == set(range(LINES)) - {POISON}
    assert end.deaths == 6


def test_a_poison_line_that_kills_in_the_window_ends_dead_lettered_after_bounded_deaths(tmp_path):
    """Line 120 kills the worker in the window itself, as it fires: once a line LAG newer went
    out beside it. It never dies alone: each life its suspect is set aside (held by the window
    for the message timeout) before the lines that fire it go out, so every death is one
    beside others for it and for the suspects set aside with it. Deaths beside others are
    bounded (2 * max_retries + 1 of them, `beside_limit`): the restarts end, and 120 is
    dead-lettered with the suspects set aside beside it each time (nothing tells them apart:
    any of them could be the one the window fired), and with the line whose going out fired it
    (it died at once, each time, as a poison line upstream of the window does), after 10
    deaths; every other line acked."""
    def fires_poison(lines: list[int]) -> bool:
        return POISON in lines and max(lines) >= POISON + LAG

    end = restart_until_done(tmp_path, fires_poison, max_deaths=20)
    dead = sorted(int(d["record"]) for d in end.letters)
    assert POISON in dead
    # 120 and the ten set aside beside it each time (119, 121 to 129) past 7 deaths beside
    # others; 130 went out last each time, the window fired 120 as it did, and it died at once,
    # as 120 did upstream of the window in the test above: charged 4 deaths alone
    assert dead == list(range(POISON - 1, POISON + LAG + 1)), dead
    besides = [d for d in end.letters if int(d["record"]) != POISON + LAG]
    assert all("died each of the 8 times it was in flight set aside beside others" in d["reason"] for d in besides)
    # every other line acked (119 was acked too, in a life that died before its commit: read
    # again, at least once)
    assert set(range(LINES)) - set(dead) <= end.acked <= set(range(LINES)) - {POISON}
    assert end.deaths == 10
