"""Poison lines of a file under ``topology.bolt.fail.fast`` on the process host (2 worker
processes): the bolt task that raises on them shares the `FileSpout`'s worker (local-or-shuffle
grouping), so each time it raises the spout's process dies with the counts it held. The retry
budget, kept beside the spout's progress, outlives it: each poison line reaches the dead-letter
file after its death alone, every good line reaches the output (duplicates counted), none is
dead-lettered or left charged, and the other worker never restarts
(tests/external/test_file_spout_deaths.py directly and on LocalCluster)."""

from __future__ import annotations

import pytest

from ..conftest import wait_until
from ..external import poison_file_fail_fast as p


@pytest.mark.timeout(300)  # a worker crashing in a row, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_poison_lines_that_kill_the_spouts_worker_are_dead_lettered_and_good_ones_are_out(crashing_cluster, tmp_path):
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    p.write_input(src)
    with crashing_cluster.client() as master:
        master.submit_topology("poison", p.conf(workers=2), p.topology(src, local, notes, local=True))
        try:
            assert wait_until(lambda: p.done(src, local, notes), 180), p.progress(src, local, notes)
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    figures = p.check_outcome(src, local, notes)
    print("FIGURES", figures)
    assert figures["good delivered again"] > 0, figures   # good lines were beside a poison one
    # each raise was in the spout's worker, and took it down: one restart of it per poison
    # delivery, none of the other worker
    assert {line.split()[1] for line in p.lines(notes / "raised")} == {"1"}
    assert sum(w["restarts"] for w in info["workers"]) == figures["deaths"], (info["workers"], figures)


@pytest.mark.timeout(300)  # a worker crashing in a row, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_with_two_spout_tasks_in_one_worker_no_good_line_is_charged_for_the_other_tasks_poison(crashing_cluster, tmp_path):
    """Two tasks of the spout in one worker process, each reading a file of its own with poison
    lines among good ones: after a death, each reads the lines its dead task had read again as
    suspects. A suspect goes out alone in the whole worker, not only among its own task's lines:
    were it alone only in its task, one task's good suspect would be in flight (or acked by the
    bolt, its spout's ack not yet in) when the other task's poison line kills the worker, and
    would be charged that death; with max_retries 0 that good line is then dead-lettered. Every
    line is counted: each good one out, each poison one dead-lettered after its one death alone,
    no good one dead-lettered or charged."""
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    p.write_input(src, files=2)
    with crashing_cluster.client() as master:
        master.submit_topology("poison", p.conf(workers=1), p.topology(src, local, notes, spout_tasks=2))
        try:
            assert wait_until(lambda: p.done(src, local, notes, files=2), 180), p.progress(src, local, notes, files=2)
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    figures = p.check_outcome(src, local, notes, files=2)
    print("FIGURES", figures)
    assert figures["good delivered again"] > 0, figures   # good lines were beside a poison one
    assert sum(w["restarts"] for w in info["workers"]) == figures["deaths"], (info["workers"], figures)
