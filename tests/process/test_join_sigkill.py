"""`JoinBolt` on the process host, acking on, the worker of a join task SIGKILLed while every
row is held in the windows: each row is replayed and finally acked, and the joined output holds
every pair of users and orders at least once (at-least-once: some twice), and nothing else.

The window slides (10 s long, every 1 s) so that each window after the last row arrived holds
all rows: which pairs a window makes does not depend on when the replays come back, only that
they come back within the window's length (the dead worker's spout tuples fail as soon as the
master tells the spouts' workers, or restart with their worker)."""

import json
import os
import signal
from collections import Counter

from squall import Duration, Fields, TopologyBuilder

from ..conftest import wait_until
from .join_topology import ORDERS, USERS, RecordingJoin, RowSpout, Sink, acked, lines, pairs
from .semantics_topology import topology_conf


def test_a_sigkilled_join_worker_loses_no_row_and_no_pair(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    join = RecordingJoin("users", "uid").join("orders", "uid", "users").select("users:uid, name, oid, price") \
        .with_window(Duration.seconds(10), Duration.seconds(1))
    b = TopologyBuilder()
    b.set_spout("users", RowSpout("users"))
    b.set_spout("orders", RowSpout("orders"))
    b.set_bolt("join", join, 2).fields_grouping("users", Fields("uid")).fields_grouping("orders", Fields("uid"))
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("join")
    conf = topology_conf(out, **{"topology.message.timeout.secs": 30})
    rows = len(USERS) + len(ORDERS)
    with cluster.client() as m:
        m.submit_topology("join", conf, b.create_topology())
        try:
            in_windows = lambda: sum(int(x.split()[1]) for x in _last_per_pid(lines(out, "windows-*.txt")))
            # every row is in a window of one of the two join tasks, none acked yet (10 s)
            assert wait_until(lambda: in_windows() == rows, 60), lines(out, "windows-*.txt")[-4:]
            assert not acked(out, "users") and not acked(out, "orders")
            pids = {int(f.read_text()) for f in out.glob("join-*.pid")}
            assert len(pids) == 2, "the join tasks ran in one worker"
            victim = min(pids)
            os.kill(victim, signal.SIGKILL)
            assert wait_until(lambda: len(cluster.workers()) == 2 and victim not in cluster.workers(), 30), \
                "the killed worker was not restarted"
            assert wait_until(lambda: acked(out, "users") == set(range(len(USERS)))
                              and acked(out, "orders") == set(range(len(ORDERS))), 90), \
                (sorted(set(range(len(USERS))) - acked(out, "users")),
                 sorted(set(range(len(ORDERS))) - acked(out, "orders")))
        finally:
            m.kill_topology("join", wait_secs=0)
    emits = Counter(lines(out, "emits-users.txt")) + Counter(lines(out, "emits-orders.txt"))
    assert sum(emits.values()) > rows, "nothing was replayed: the kill hit nothing"
    joined = Counter(tuple(json.loads(x)) for x in lines(out, "joined-*.jsonl"))
    expected = pairs()
    assert len(expected) == 3 * 60
    assert set(joined) == expected, (sorted(expected - set(joined))[:10], sorted(set(joined) - expected)[:10])


def _last_per_pid(window_lines):
    """The last window size line each worker process wrote (the newest window of each task)."""
    last = {}
    for line in window_lines:
        last[line.split()[0]] = line
    return list(last.values())
