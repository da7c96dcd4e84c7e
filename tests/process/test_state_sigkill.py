"""Stateful bolts on the process host (issue 16): a worker SIGKILLed mid-run; its bolts' state
comes back from the file store under storm.local.dir as last committed, the spout replays what
was not committed, and no update is lost (Storm's at-least-once state)."""

from ..conftest import wait_until
from ..state.counting import (
    acked,
    check_counts,
    committed_counts,
    counting_topology,
    stop_spouts,
    stopped_at,
    windowed_counting_topology,
)
from .recovery_topology import kill_a_worker_without
from .semantics_topology import topology_conf



def _stop(out, done, what):
    """Stop the endless spout writing under ``out`` and wait until ``done()`` holds every id it
    emitted; return how many that is."""
    stop_spouts(out)
    assert wait_until(lambda: stopped_at(out) is not None, 10), "the spout did not stop"
    n = stopped_at(out)
    assert wait_until(lambda: done() >= set(range(n)), 120), f"ids never {what}: {sorted(set(range(n)) - done())[:20]}"
    return n


def test_state_rolls_back_and_no_update_is_lost_after_a_worker_is_sigkilled(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                 "topology.state.checkpoint.interval.ms": 300})
    with cluster.client() as m:
        # endless, until the test stops it: the kill hits tuples in flight
        m.submit_topology("counting", conf, counting_topology(None))
        assert wait_until(lambda: len(acked(out)) > 300, 60), "the topology did not start committing"
        kill_a_worker_without(m, "counting", "source")
        before = len(acked(out))
        assert wait_until(lambda: len(acked(out)) > before + 300, 60), "acks did not resume"
        n = _stop(out, lambda: acked(out), "acked")
        m.kill_topology("counting", wait_secs=0)
    secret = (cluster.dir / "secret").read_bytes().strip()
    twice, replayed = check_counts(committed_counts(cluster.dir / "state", secret, "counting"), n, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"process host SIGKILL: {twice} updates applied twice, {replayed} tuples replayed")


def test_persistent_windows_resume_from_the_file_store_after_a_worker_is_sigkilled(cluster, tmp_path):
    """The same with `WindowCounts`, a persistent windowed bolt: its windows come back from the
    file store; every id is counted in some window (no window content lost)."""
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
        kill_a_worker_without(m, "windows", "source")
        before = len(counted())
        assert wait_until(lambda: len(counted()) > before + 300, 60), "counting did not resume"
        n = _stop(out, counted, "counted")
        m.kill_topology("windows", wait_secs=0)
    twice, replayed = check_counts(committed_counts(cluster.dir / "state", secret, "windows"), n, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"process host SIGKILL, persistent windows: {twice} updates applied twice, {replayed} tuples replayed")
