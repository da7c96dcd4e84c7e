"""Stateful bolts on the process host (issue 16): a worker SIGKILLed mid-run; its bolts' state
comes back from the file store under storm.local.dir as last committed, the spout replays what
was not committed, and no update is lost (Storm's at-least-once state). The tests share one
cluster (a worker is killed, never the master or its supervisor): each runs its own topology,
killed at its end, with its state under its own name."""

from ..conftest import wait_until
from ..state.counting import (
    acked,
    check_counts,
    committed_counts,
    counting_topology,
    in_flight,
    stop_and_wait,
    windowed_counting_topology,
)
from .recovery_topology import kill_a_worker_without
from .semantics_topology import topology_conf


def test_state_rolls_back_and_no_update_is_lost_after_a_worker_is_sigkilled(shared_cluster, tmp_path):
    cluster = shared_cluster
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                 "topology.state.checkpoint.interval.ms": 300})
    with cluster.client() as m:
        # endless, until the test stops it: the kill hits tuples in flight
        m.submit_topology("counting", conf, counting_topology(None))
        assert wait_until(lambda: len(acked(out)) > 300, 60), "the topology did not start committing"
        assert wait_until(lambda: in_flight(out) >= 100, 30), f"{in_flight(out)} tuples in flight, not 100"
        kill_a_worker_without(m, "counting", "source")
        n = stop_and_wait(out, resume=300, timeout=120)
        m.kill_topology("counting", wait_secs=0)
    secret = (cluster.dir / "secret").read_bytes().strip()
    twice, replayed = check_counts(committed_counts(cluster.dir / "state", secret, "counting"), n, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"process host SIGKILL: {twice} updates applied twice, {replayed} tuples replayed")


def test_persistent_windows_resume_from_the_file_store_after_a_worker_is_sigkilled(shared_cluster, tmp_path):
    """The same with `WindowCounts`, a persistent windowed bolt: its windows come back from the
    file store; every id is counted in some window (no window content lost)."""
    cluster = shared_cluster
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                 "topology.state.checkpoint.interval.ms": 300})
    secret = (cluster.dir / "secret").read_bytes().strip()

    def counted():
        return set(committed_counts(cluster.dir / "state", secret, "windows"))
    with cluster.client() as m:
        m.submit_topology("windows", conf, windowed_counting_topology(None))  # endless, as above
        assert wait_until(lambda: len(counted()) > 300, 60), "the topology did not start committing"
        assert wait_until(lambda: in_flight(out) >= 100, 30), f"{in_flight(out)} tuples in flight, not 100"
        kill_a_worker_without(m, "windows", "source")
        n = stop_and_wait(out, resume=300, done=counted, timeout=120)
        m.kill_topology("windows", wait_secs=0)
    twice, replayed = check_counts(committed_counts(cluster.dir / "state", secret, "windows"), n, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"process host SIGKILL, persistent windows: {twice} updates applied twice, {replayed} tuples replayed")
