"""The checkpoint spout's worker SIGKILLed with acking off (``topology.acker.executors`` 0) on the
process host: numbers -> a persistent tumbling event-time window that sums each window -> a sink
that appends every result with its window's bounds, each component in a worker of its own.
Counted: every window result the sink got, and every id in them, against the windows of the ids
the spout emitted."""

import os
import signal
import time
from collections import Counter

from ..conftest import wait_until
from .checkpoint_restart_topology import conf, emitted, expected_windows, prepares, sink_rows, topology
from .conftest import topology_errors

N, PER_SEC = 3000, 500  # 6 s of ids, a window (50 ids) fired every 0.1 s
INTERVAL_MS = 500
WORKERS = 4  # one per component: numbers, window, sink, $checkpointspout


def test_a_live_window_does_not_fire_again_when_the_checkpoint_spout_restarts_with_acking_off(roomy_cluster,
                                                                                               tmp_path):
    """The checkpoint spout's worker is SIGKILLed 8 windows in; the window task, in another
    worker, lives on. The restarted spout sends INITSTATE; the live task has nothing to roll
    back. Before, it rolled back to its last commit and ran what it took since its last PREPARE
    again, as it does with acking on (for a sink's worker that died with results): each window
    fired since that PREPARE (through the spout's restart) reached the sink twice (sent 3,000
    ids in 61 windows, 4 runs: 65 to 79 results, 3,200 to 3,900 ids counted, the sums 60,100 to
    630,450 over)."""
    out = tmp_path / "out"
    out.mkdir()
    name = "checkpoint-restart"
    expected = expected_windows(N)
    with roomy_cluster.client() as m:
        m.submit_topology(name, conf(out, WORKERS, INTERVAL_MS), topology(N, PER_SEC))

        def why():
            return topology_errors(roomy_cluster.client, name)
        assert wait_until(lambda: len(sink_rows(out)) >= 8 and len(prepares(out)) >= 2, 60), \
            f"the topology did not start: {len(sink_rows(out))} results, {len(prepares(out))} prepares{why()}"
        info = m.get_topology_info(name)
        where = {c: {st["worker"] for st in v["task_stats"].values()} for c, v in info["components"].items()}
        assert len(set().union(*where.values())) == WORKERS, f"components share a worker: {where}"
        port = next(iter(where["$checkpointspout"]))
        victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) == port)
        os.kill(victim["pid"], signal.SIGKILL)
        killed_at = time.time()

        def after():
            return [p["at"] for p in prepares(out) if p["at"] > killed_at]

        def done():
            return emitted(out) == N and {(r["start"], r["end"]) for r in sink_rows(out)} >= set(expected)
        # the restarted spout's INITSTATE, then two PREPAREs, reached the window; and every id
        # was emitted and every window of them reached the sink
        assert wait_until(lambda: len(after()) >= 2 and done(), 60), \
            f"not done: {len(after())} prepares since the kill, {emitted(out)} ids emitted, " \
            f"{len(sink_rows(out))} results{why()}"
        m.kill_topology(name, wait_secs=0)
    rows = sink_rows(out)
    last_prepare = max(p["at"] for p in prepares(out) if p["at"] <= killed_at)
    # what the INITSTATE would have rolled back: the results fired since the last PREPARE before the kill
    since = [r for r in rows if last_prepare < r["at"] < min(after())]
    per_window = Counter((r["start"], r["end"]) for r in rows)
    ids = Counter(i for r in rows for i in r["ids"])
    total = sum(r["sum"] for r in rows)
    print(f"sent {N} ids in {len(expected)} windows; {len(since)} results since the last PREPARE before the "
          f"kill; the sink got {len(rows)} results for {len(per_window)} windows, {sum(ids.values())} ids "
          f"({len(ids)} distinct); the sums add up to {total}, the ids to {sum(range(N))}")
    assert since, "no window fired between the last PREPARE before the kill and the restart: nothing tested"
    assert [w for w, k in per_window.items() if k > 1] == []
    assert {(r["start"], r["end"]): r["ids"] for r in rows} == expected
    assert sum(ids.values()) == N and set(ids) == set(range(N))
    assert total == sum(range(N))
