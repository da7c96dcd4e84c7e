"""A Streams API merge after a regrouping of windows, on the process host, through a worker's
SIGKILL and a rebalance: every id counted, and no stall longer than a few windows.

The pipeline (`streams_topology.windowed_ids`): ids -> ``repartition(2)`` -> tumbling windows of
400 ms -> each key's ids (``aggregate_by_key``: each window task's partial lists, merged after
the regrouping by key on 2 tasks, which end a window once every window task punctuated it) ->
each key's running number of ids (``update_state_by_key``), which a second stream's
``state_query`` asks."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections import Counter

from ..conftest import wait_until
from ..state.counting import acked, emitted, stop_and_wait
from .nodes import log_tail, placed
from .semantics_topology import topology_conf
from .streams_topology import KEYS, emit_up_to, lines, times, windowed_ids

WINDOW_SECS = 0.4
"""The pipeline's window length."""
TIMEOUT_SECS = 30
"""The topology's message timeout: a stall that only the timeout's replays end lasts this long."""
STALL_SECS = 25 * WINDOW_SECS
"""The longest the acks may stop once the topology's workers run again (after the kill, after the
rebalance): a restarted worker's start, then a few windows. Well under the message timeout."""



def longest_gap(start: float, end: float, ack_times: list[float]) -> tuple[float, float]:
    """The longest time in [start, end] with no ack, and when it began."""
    points = [start, *[t for t in ack_times if start < t < end], end]
    return max((b - a, a) for a, b in itertools.pairwise(points))


def test_streams_merge_counts_every_id_without_a_stall_through_a_sigkill_and_a_rebalance(cluster, tmp_path):
    """The worker of a window task and a merge task (not the spout's) is SIGKILLed mid-run: the
    surviving merge task holds a half-ended window (the surviving window task's punctuation, and
    values) when the window task's replacement starts its windows on a clock of its own. Later
    the topology is rebalanced to 1 worker. Then the input pauses, and 3 ids come one at a time:
    each is in one window task's window, and the other's windows are empty.

    Storm's merge counted punctuations, whoever sent them, and its window tasks sent none for an
    empty window: on main, under two CPU hogs, acks stopped at 350 for 60 s after the kill in 1
    run of 3 (the spout's pending tuples held in the merge, and held again once the message
    timeout replayed them), and in the 2 others the first lone id was unacked after 10 s. Now:
    once the workers run again, acks never stop for more than `STALL_SECS` (a worker's start
    and a few windows, well under the message timeout), and each lone id is acked within it;
    every id is acked, none replayed by the message timeout; an id emitted once is in exactly
    one window's result (under its key), a replayed one in at least one and at most as many as
    it was emitted; each key's queried state counts every id of the key, and no more than the
    windows' results hold."""
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, 2, **{"topology.message.timeout.secs": TIMEOUT_SECS, "topology.max.spout.pending": 200,
                                    "topology.state.checkpoint.interval.ms": 300})

    def why():
        return "\n".join(f"--- {p}\n{log_tail(p)}" for p in [
            cluster.dir.parent / "master.log", *sorted(cluster.dir.glob("logs/workers-artifacts/*/*/worker.log"))])
    with cluster.client() as m:
        m.submit_topology("streams", conf, windowed_ids(str(out)))
        assert wait_until(lambda: len(acked(out)) > 300, 60), why()
        info = m.get_topology_info("streams")

        def ports(component):
            return {st["worker"] for st in info["components"][component]["task_stats"].values()}
        victims = [w for w in info["workers"] if w["port"] not in ports("spout1")]
        assert len(victims) == 1 and victims[0]["port"] in ports("bolt2") & ports("bolt3"), \
            (info["workers"], {c: ports(c) for c in ("spout1", "bolt2", "bolt3")})
        victim = victims[0]["pid"]
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: placed(m, "streams", 2, {}) and victim not in
                          {w["pid"] for w in m.get_topology_info("streams")["workers"]}, 60), why()
        up_at = time.time()
        before = len(acked(out))
        assert wait_until(lambda: len(acked(out)) > before + 300, 60), why()
        executors = {"bolt2": 1, "bolt3": 1, "bolt4": 1}
        rebalanced_at = time.time()
        m.rebalance("streams", num_workers=1, executors=executors, wait_secs=1)
        assert wait_until(lambda: placed(m, "streams", 1, executors), 60), why()
        up_again_at = time.time()
        n = stop_and_wait(out, resume=300, timeout=120, why=why)
        done_at = time.time()
        for _ in range(3):  # the input paused: one id at a time, in one window task's window
            emit_up_to(out, n + 1)
            assert wait_until(lambda n=n: n in acked(out), STALL_SECS), \
                f"the lone id {n} unacked after {STALL_SECS} s\n{why()}"
            n += 1
        (out / "query").write_text("")
        assert wait_until(lambda: _queries_acked(out) >= set(range(KEYS)), 60), why()
        errors = [e["error"] for e in m.get_topology_info("streams")["errors"]]
        m.kill_topology("streams", wait_secs=0)

    ack_times = [t for _, t in times(out, "ack")]
    after_kill = longest_gap(up_at, rebalanced_at, ack_times)
    after_rebalance = longest_gap(up_again_at, done_at, ack_times)
    assert after_kill[0] <= STALL_SECS and after_rebalance[0] <= STALL_SECS, (
        f"acks stopped for {after_kill[0]:.1f} s from {after_kill[1] - up_at:.1f} s after the killed worker's "
        f"replacement ran, {after_rebalance[0]:.1f} s from {after_rebalance[1] - up_again_at:.1f} s after the "
        f"rebalance (at most {STALL_SECS} s)")

    emits = emitted(out)
    assert set(emits) == set(range(n)), sorted(set(emits) ^ set(range(n)))[:20]
    seen = Counter()
    for key, ids in lines(out, "windows"):
        assert all(i % KEYS == key for i in ids), (key, ids)
        seen.update(ids)
    assert set(seen) == set(range(n)), f"ids in no window: {sorted(set(range(n)) - set(seen))[:20]}"
    once = [i for i in range(n) if emits[i] == 1 and seen[i] != 1]
    assert not once, f"ids emitted once, in other than one window: {[(i, seen[i]) for i in once[:20]]}"
    over = [(i, seen[i], emits[i]) for i in range(n) if seen[i] > emits[i]]
    assert not over, f"(id, windows, emits): in more windows than emitted {over[:20]}"

    # where the replays (and so the ids in two windows) come from. The kill: the spout fails at
    # once every pending tuple that may have been in the dead worker, also those whose window's
    # result was written already. The rebalance: the deactivated spout's pending tuples (their
    # acks wait for the stateful bolt's commit, and no checkpoint runs while the spouts are
    # deactivated) are emitted again by the spout's new instance. None waited for the timeout.
    emit_times: dict[int, list[float]] = {}
    for i, t in times(out, "emit"):
        emit_times.setdefault(i, []).append(t)
    replayed = {i: ts for i, ts in emit_times.items() if len(ts) > 1}
    late = [(i, round(b - a, 1)) for i, ts in replayed.items() for a, b in itertools.pairwise(ts)
            if b - a >= TIMEOUT_SECS]
    assert not late, f"(id, secs between emits): replayed by the message timeout {late[:20]}"
    at_kill = {i for i, ts in replayed.items() if killed_at <= ts[1] < rebalanced_at}
    at_rebalance = {i for i, ts in replayed.items() if ts[1] >= rebalanced_at}
    assert set(replayed) == at_kill | at_rebalance, sorted(set(replayed) - at_kill - at_rebalance)[:20]
    twice = {i for i in range(n) if seen[i] > 1}

    answers = {}
    for key, total in lines(out, "answers"):
        answers[key] = max(total, answers.get(key, 0))
    for key in range(KEYS):
        ids_of_key = sum(1 for i in range(n) if i % KEYS == key)
        in_windows = sum(c for i, c in seen.items() if i % KEYS == key)
        assert ids_of_key <= answers[key] <= in_windows, (key, ids_of_key, answers[key], in_windows)
    assert all("SIGKILL" in e or "worker" in e for e in errors), errors
    print(f"{n} ids; {len(at_kill)} replayed at the kill ({len(twice & at_kill)} of them in two windows), "
          f"{len(at_rebalance)} at the rebalance ({len(twice & at_rebalance)} in two windows); state "
          f"{sum(answers.values())} for {n} ids; acks stopped at most {after_kill[0]:.1f} s once the killed "
          f"worker's replacement ran ({up_at - killed_at:.1f} s after the kill), {after_rebalance[0]:.1f} s after "
          f"the rebalance")


def _queries_acked(out):
    return {int(x) for f in out.glob("queries-acked-*.txt") for x in f.read_text().split()}
