"""FileSpout with the one retry backoff and the one offset tracker, driven at random: acks in any
order, failures the lines caused (retried after their backoff, then dead-lettered), lost workers,
commits and crashes. Every line is acked or in the dead-letter file at the end, and the committed
offset never passes a line that was neither when it was written (so a crash skips nothing)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from squall import FailureCause
from squall._failure import EXCEPTION, WORKER_LOST
from squall.engine.clock import SimulatedClock
from squall.external.files import FileSpout, LineAt, load_progress
from squall.external.retry import RetryBackoff

from .test_file_progress import Context
from .test_file_record_limit import Collector

LINES = 120
LOST = FailureCause(WORKER_LOST)
RAISED = FailureCause(EXCEPTION, "parse", 3, "ValueError", "bad record")


def _line_starts(lines: list[str]) -> dict[int, str]:
    starts, at = {}, 0
    for line in lines:
        starts[at] = line
        at += len(line) + 1
    return starts


@pytest.mark.parametrize("seed", range(8))
def test_every_line_is_acked_or_dead_lettered_across_failures_retries_and_crashes(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    lines = [f"line-{i:03d}" for i in range(LINES)]
    (src / "a.txt").write_text("".join(f"{x}\n" for x in lines))
    starts = _line_starts(lines)
    progress = local / "filespout" / "lines" / "task-0.json"
    dead_file = local / "filespout" / "lines" / "dead-letter" / "a.txt.dead"
    clock = SimulatedClock()
    backoff = RetryBackoff(initial_delay=0.0, delay_period=0.01, max_retries=2, max_delay=0.05)
    done: set[str] = set()   # acked, or written to the dead-letter file
    crashes = 0

    def open_task() -> tuple[FileSpout, Collector]:
        spout = FileSpout(src, quiet_secs=0, commit_every=rng.choice((1, 3, 7)), poll_secs=0, progress_dir=local,
                          backoff=backoff, clock=clock)
        out = Collector()
        spout.open({}, Context(0, 1), out)
        return spout, out

    def dead_lettered() -> set[str]:
        if not dead_file.exists():
            return set()
        return {json.loads(json.loads(e)["record"])[0] for e in dead_file.read_text().splitlines()}

    def check_committed() -> None:
        # every line before the committed offset is done; the tracker forgets exactly the lines
        # before the offset made durable, so what it holds is bounded by the lines after it
        committed = load_progress(progress, "lines", str(src)).get("a.txt", 0) if progress.exists() else 0
        assert {line for at, line in starts.items() if at < committed} <= done | dead_lettered(), (seed, committed)
        tracker = spout.tracker
        if tracker is not None:
            assert tracker.committed_offset == committed
            first = tracker.nth_uncommitted_offset(1)
            assert first is None or first >= committed
            assert tracker.num_uncommitted_offsets() <= sum(1 for at in starts if at >= committed)

    spout, out = open_task()
    in_flight: list[LineAt] = []
    for _ in range(20_000):
        if (src / "a.txt.done").exists():
            break
        seen = len(out.emitted)
        spout.next_tuple()
        in_flight += [msg_id for _, msg_id in out.emitted[seen:]]
        clock.advance(rng.choice((0.0, 0.001, 0.02)))
        if in_flight and rng.random() < 0.6:
            msg_id = in_flight.pop(rng.randrange(len(in_flight)))
            op = rng.random()
            if op < 0.7:
                spout.ack(msg_id)
                done.add(starts[msg_id.offset])
            elif op < 0.85:
                spout.fail_with(msg_id, RAISED)
            else:
                spout.fail_with(msg_id, LOST)
        check_committed()
        if crashes < 3 and rng.random() < 0.003:
            crashes += 1
            if spout.handle is not None:
                spout.handle.close()   # a SIGKILL: no close(), only what was committed survives
            spout, out, in_flight = *open_task(), []
    else:
        pytest.fail(f"seed {seed}: a.txt never finished; done {len(done)} of {LINES}")
    dead = dead_lettered()
    assert done | dead == set(lines), sorted(set(lines) - done - dead)
