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


@pytest.mark.timeout(300)  # 4 crashes at most, restarted after 0, 1, 2, 4 s; longer on a loaded machine
def test_poison_lines_that_kill_the_spouts_worker_are_dead_lettered_and_good_ones_are_out(cluster, tmp_path):
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    p.write_input(src)
    with cluster.client() as master:
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
