"""A windowed bolt across worker processes: event-time windows in a task of each worker, the
watermark, the late-tuple stream (a Tuple as a value crossing processes), and Storm's acking
rule (a spout tuple completes once it left every window, here in both workers)."""

import pytest

from squall import TopologyBuilder

from ..conftest import wait_until
from ..state.acking_off_windows import acking_off_conf, as_expected, describe, topology
from .semantics_topology import records, topology_conf
from .windowing_topology import RecordsLate, RecordsWindows, ScheduledSpout

ITEMS = [(0, v, 1000 + 100 * v) for v in range(20)]  # ts 1000 .. 2900, at once
# once each of the 2 window tasks closed the items' first 3 windows (1000 to 2500): their
# watermark (2900) passed it (after a fixed delay instead, a loaded machine let it into a window)
LATE = (2 * 3, 99, 500)
PUSH = (2 * 3, 100, 5000)  # after it, moves the watermark on, closing the last window of the items


def test_event_time_windows_late_tuples_and_acks_across_worker_processes(shared_cluster, tmp_path):
    b = TopologyBuilder()
    b.set_spout("items", ScheduledSpout(ITEMS + [LATE, PUSH]), 1)
    b.set_bolt("window", RecordsWindows(), 2).all_grouping("items")  # a task in each worker
    b.set_bolt("late", RecordsLate(), 1).shuffle_grouping("window", "late")
    client = shared_cluster.client()
    client.submit_topology("windows", topology_conf(tmp_path), b.create_topology())
    try:
        acked = lambda: {r["ack"] for r in records(tmp_path, "spout") if "ack" in r}
        assert wait_until(lambda: acked() == set(range(20)) | {99}, 60), records(tmp_path, "spout")
    finally:
        client.kill_topology("windows", wait_secs=0)
        client.close()
    windows = records(tmp_path, "windows")
    assert len({w["port"] for w in windows}) == 2, "the window tasks ran in one worker"
    for port in {w["port"] for w in windows}:
        mine = [w for w in windows if w["port"] == port]
        assert sorted(v for w in mine for v in w["values"] if v < 20) == list(range(20))
        assert all(w["end"] % 500 == 0 and w["end"] - w["start"] == 500 for w in mine)
    assert not any(99 in w["values"] for w in windows)
    late = records(tmp_path, "late")
    assert [r["values"] for r in late] == [[99, 500], [99, 500]]  # from each window task
    assert {r["from"] for r in late} == {"items"}
    assert not [r for r in records(tmp_path, "spout") if "fail" in r]
    assert 100 not in acked()  # still in the last window


@pytest.mark.parametrize("time", ["event-tumbling", "processing"])
def test_a_persistent_window_behind_a_bolt_of_two_tasks_fires_every_record_with_acking_off(shared_cluster, tmp_path,
                                                                                          time):
    """`tests/state/test_windows_acking_off.py` across 3 worker processes: with acking off the
    checkpoint spout sent INITSTATE, PREPARE and COMMIT at once, the window took them from the
    2 parse tasks interleaved, was never initialized, and fired nothing (sent 1,200, 0 windows)."""
    n, name = 1200, f"acking-off-{time}"
    client = shared_cluster.client()
    client.submit_topology(name, acking_off_conf(tmp_path, workers=3), topology(n, True, time))
    try:
        done = wait_until(lambda: as_expected(tmp_path, n, time), 20, interval=0.2)
    finally:
        client.kill_topology(name, wait_secs=0)
        client.close()
    assert done, describe(tmp_path, n, time)
