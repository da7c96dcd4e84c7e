"""A spout that paces itself on its acks, behind a bolt that batches its inputs, before a
stateful bolt (`tests/state/batching.py`), on LocalCluster: every record reaches the state once
and the checkpoints commit, as in Storm.

Before, a checkpoint passed the batching bolt only once it had acked every input given before
it: the PREPARE waited for the batch (50), the batch for the spout, the spout (60 in flight) for
acks, and the stateful bolt's acks for a commit. 60 of 1,000 records were emitted, none acked,
no commit, in 20 s; the spout's own pacing and ``topology.max.spout.pending`` alike."""

import pytest

from squall import Config

from ..conftest import wait_until
from .batching import batching_topology, commits
from .counting import acked, emitted
from .test_topology import cluster  # noqa: F401 (a fixture: a LocalCluster, shut down after)

N = 1000


def _committed(local, name):
    counts = {}
    for ns in local._state_memory.namespaces(name):
        if ns.startswith("count-"):
            counts.update(dict(local.get_state(name, ns).committed()))
    return counts


@pytest.mark.parametrize("pacing", ["its own", "max spout pending"])
def test_a_paced_spout_behind_a_batching_bolt_commits_every_record_in_the_state(cluster, tmp_path, pacing):  # noqa: F811
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(30)  # nothing times out: every record goes through once
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    conf["test.out.dir"] = str(tmp_path)
    window = 60
    if pacing == "max spout pending":
        conf.set_max_spout_pending(60)
        window = N
    cluster.submit_topology("batching", conf, batching_topology(N, size=50, window=window, counters=2))
    done = wait_until(lambda: len(acked(tmp_path)) == N and len(_committed(cluster, "batching")) == N,
                      20, interval=0.1)
    counts = _committed(cluster, "batching")
    cluster.kill_topology("batching", wait_secs=0)
    assert done, (f"{len(set(emitted(tmp_path)))} of {N} records emitted, {len(acked(tmp_path))} acked, "
                  f"{len(counts)} in the committed state, {commits(tmp_path)} commits")
    assert counts == dict.fromkeys(range(N), 1)  # no failure, no replay: each once
    assert emitted(tmp_path) == dict.fromkeys(range(N), 1)
    assert commits(tmp_path) > 0
