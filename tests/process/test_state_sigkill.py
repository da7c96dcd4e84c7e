"""Stateful bolts on the process host (issue 16): a worker SIGKILLed mid-run; its bolts' state
comes back from the file store under storm.local.dir as last committed, the spout replays what
was not committed, and no update is lost (Storm's at-least-once state)."""

from ..conftest import wait_until
from ..state.counting import acked, check_counts, committed_counts, counting_topology
from .recovery_topology import kill_a_worker_without
from .semantics_topology import topology_conf

N = 3000


def test_state_rolls_back_and_no_update_is_lost_after_a_worker_is_sigkilled(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                 "topology.state.checkpoint.interval.ms": 300})
    with cluster.client() as m:
        m.submit_topology("counting", conf, counting_topology(N))
        assert wait_until(lambda: len(acked(out)) > 300, 60), "the topology did not start committing"
        kill_a_worker_without(m, "counting", "source")
        assert wait_until(lambda: acked(out) >= set(range(N)), 120), \
            f"ids never acked: {sorted(set(range(N)) - acked(out))[:20]}"
        m.kill_topology("counting", wait_secs=0)
    secret = (cluster.dir / "secret").read_bytes().strip()
    twice, replayed = check_counts(committed_counts(cluster.dir / "state", secret, "counting"), N, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"process host SIGKILL: {twice} updates applied twice, {replayed} tuples replayed")
