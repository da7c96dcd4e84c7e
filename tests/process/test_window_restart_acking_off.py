"""A window task's own worker SIGKILLed with acking off (``topology.acker.executors`` 0) on the
process host: numbers -> a stateful windowed bolt (persistent or not) that sums each event-time
window -> a sink that appends every result with its window's bounds, each component in a worker
of its own. Counted: every id the spout emitted, every window result the sink got and every id
in them, against the ids each window's bounds hold.

Acking off is at most once: the ids the dead worker held are lost, and so may be the windows
they were in. But no window may reach the sink twice, nor with part of its ids as if whole."""

import os
import signal
import time
from collections import Counter

import pytest

from ..conftest import wait_until
from .checkpoint_restart_topology import conf, emitted, sink_rows
from .conftest import topology_errors
from .window_restart_topology import START_MS, STEP_MS, Scripted, expected_ids, topology

N, PER_SEC = 3000, 500  # 6 s of ids, 10 ms of event time apart: a 500 ms window holds 50
WORKERS = 4  # one per component: numbers, window, sink, $checkpointspout


def kill_the_windows_worker(m, name: str) -> None:
    """SIGKILL the worker of component [window] of topology ``name`` (each component in its own)."""
    info = m.get_topology_info(name)
    where = {c: {st["worker"] for st in v["task_stats"].values()} for c, v in info["components"].items()}
    assert len(set().union(*where.values())) == WORKERS, f"components share a worker: {where}"
    port = next(iter(where["window"]))
    victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) == port)
    os.kill(victim["pid"], signal.SIGKILL)


@pytest.mark.parametrize("kind, shape", [("persistent", "tumbling"), ("stateful", "sliding")])
def test_a_window_task_whose_worker_died_fires_no_window_twice_or_short_with_acking_off(roomy_cluster, tmp_path,
                                                                                       kind, shape):
    """The window task's worker is SIGKILLed 8 windows in; the master restarts it, and the task
    resumes from its last commit (no INITSTATE comes with acking off: it initializes at the
    next PREPARE). Before, it fired the windows that span the crash anyway: a persistent window
    fired again, from the commit, the windows it had fired since (2 or 3 twice, 95 to 105 ids
    in two tumbling windows, their second copy short of the ids taken after the commit), and
    the window cut by the crash went out short of the ids that died with the worker. Now those
    windows are not fired: every result holds exactly the ids of its bounds, once."""
    out = tmp_path / "out"
    out.mkdir()
    name = f"window-restart-{kind}"
    with roomy_cluster.client() as m:
        m.submit_topology(name, conf(out, WORKERS), topology(N, PER_SEC, kind, shape, event_time=True))

        def why():
            return topology_errors(roomy_cluster.client, name)
        assert wait_until(lambda: len(sink_rows(out)) >= 8, 60), \
            f"the topology did not start: {len(sink_rows(out))} results{why()}"
        kill_the_windows_worker(m, name)
        killed_at = time.time()
        last_end = -(-(START_MS + (N - 1) * STEP_MS) // 500) * 500  # the first window end after the last id
        # every id emitted, and the window of the last ids reached the sink (the restarted task
        # went on to the end)
        assert wait_until(lambda: emitted(out) == N and any(r["end"] == last_end for r in sink_rows(out)), 60), \
            f"not done: {emitted(out)} ids emitted, {len(sink_rows(out))} results{why()}"
        m.kill_topology(name, wait_secs=0)
    rows = sink_rows(out)
    per_window = Counter((r["start"], r["end"]) for r in rows)
    ids = Counter(i for r in rows for i in r["ids"])
    short = [(r["start"], r["end"], len(r["ids"])) for r in rows if r["ids"] != expected_ids(r["start"], r["end"], N)]
    after = [r for r in rows if r["at"] > killed_at]
    print(f"{kind} {shape}: sent {N} ids; the sink got {len(rows)} results ({len(after)} after the kill) for "
          f"{len(per_window)} windows, {len(ids)} distinct ids ({N - len(ids)} in no window); "
          f"{sum(k - 1 for k in per_window.values())} windows again, {len(short)} short: {short}")
    assert after, "no window fired after the kill: nothing tested"
    assert [w for w, k in per_window.items() if k > 1] == []
    assert short == []
    if shape == "tumbling":  # each id in one window at most
        assert [i for i, k in ids.items() if k > 1] == []
    assert set(ids) <= set(range(N))


AHEAD = 503  # emitted before the kill, after 497: 50 ms ahead of 498, within the lag (200 ms)
OUT_OF_ORDER = [*range(498), AHEAD, *range(498, AHEAD), *range(AHEAD + 1, 1500)]


def test_a_window_whose_restart_took_an_older_tuple_first_does_not_fire_one_that_lost_a_newer(roomy_cluster,
                                                                                              tmp_path):
    """A source's tuples out of order within the lag: the spout emits ids 0..497, then id 503
    (30 ms past the window end 1,005,000), and waits; the window's worker is killed holding 503
    (a stateful window commits no window), and the spout goes on with 498..502, 504.. (held by
    the transport for the restarting worker, delivered to it in order).

    Before, the cut was the first timestamp the source task delivered since the restart (498's):
    the window (1,005,000, 1,005,500] starts after it, so it was fired without 503, 49 of its 50
    ids, as if whole. A source task's tuples may be as old as the lag behind the newest it sent,
    so the cut is now that first timestamp plus the lag, and that window is not fired: every
    result holds exactly the ids of its bounds, once."""
    n = len(OUT_OF_ORDER)
    out = tmp_path / "out"
    out.mkdir()
    name = "window-restart-out-of-order"
    spout = Scripted(OUT_OF_ORDER, 498, PER_SEC)  # pauses after 0..497 and 503
    with roomy_cluster.client() as m:
        m.submit_topology(name, conf(out, WORKERS), topology(n, PER_SEC, "stateful", "tumbling", True, spout))

        def why():
            return topology_errors(roomy_cluster.client, name)
        assert wait_until(lambda: (out / "paused").exists(), 60), f"the spout did not reach its pause{why()}"
        time.sleep(1.0)  # the window takes id 503 (its results up to then reach the sink)
        kill_the_windows_worker(m, name)
        (out / "go").touch()
        last_end = -(-(START_MS + (n - 1) * STEP_MS) // 500) * 500  # the window of the last ids
        assert wait_until(lambda: emitted(out) == n and any(r["end"] == last_end for r in sink_rows(out)), 60), \
            f"not done: {emitted(out)} ids emitted, {len(sink_rows(out))} results{why()}"
        m.kill_topology(name, wait_secs=0)
    rows = sink_rows(out)
    per_window = Counter((r["start"], r["end"]) for r in rows)
    ids = Counter(i for r in rows for i in r["ids"])
    short = [(r["start"], r["end"], len(r["ids"])) for r in rows if r["ids"] != expected_ids(r["start"], r["end"], n)]
    said = (f"sent {n} ids; the sink got {len(rows)} results for {len(per_window)} windows, {len(ids)} distinct ids "
            f"({n - len(ids)} in no window); {sum(k - 1 for k in per_window.values())} windows again, "
            f"{len(short)} short: {short}")
    print(said)
    assert [w for w, k in per_window.items() if k > 1] == [], said
    assert short == [], said
    assert [i for i, k in ids.items() if k > 1] == [] and set(ids) <= set(range(n)), said
    assert AHEAD not in ids, said  # it died with the worker (the test's premise)
