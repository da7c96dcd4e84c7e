"""A spout that paces itself on its acks (60 in flight), behind a bolt that batches its inputs
(50 at a time), before a stateful bolt (`tests/state/batching.py`), on the process host, with a
worker of the stateful bolt SIGKILLed mid-run.

Before, no checkpoint passed the batching bolt while it held part of a batch, and the spout
waited for the acks a commit would give: the topology never committed (60 records emitted, none
acked). Now the checkpoints pass it as Storm's do, and the kill costs what Storm's at-least-once
state costs: the killed task's state comes back as last committed, the records whose updates
were dropped (the killed task's since its commit, and the others' rolled back with the failed
checkpoint) replay from the spout, and so none is lost. A record is counted twice only when its
update was committed but its ack died with the worker, so it replayed after the commit: each
record's count is 1, or at most the number of times the spout emitted it."""

import os
import signal

from ..conftest import wait_until
from ..state.batching import batching_topology
from ..state.counting import acked, check_counts, committed_counts, in_flight, stop_and_wait
from .conftest import topology_errors
from .semantics_topology import topology_conf


def _kill_a_worker_of(client, name, component, sparing):
    """SIGKILL a worker of topology ``name`` that runs a task of ``component`` and none of
    ``sparing``; return its ``info`` entry."""
    info = client.get_topology_info(name)

    def ports(c):
        return {st["worker"] for st in info["components"][c]["task_stats"].values()}
    hosts, spared = ports(component), ports(sparing)
    victims = [w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) in hosts - spared]
    assert victims, f"every worker running [{component}] runs [{sparing}] too: {info['workers']}"
    os.kill(victims[0]["pid"], signal.SIGKILL)
    return victims[0]


def test_a_paced_spout_behind_a_batching_bolt_loses_no_record_when_the_stateful_worker_is_sigkilled(
        cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 5,
                                 "topology.state.checkpoint.interval.ms": 300})
    secret = (cluster.dir / "secret").read_bytes().strip()

    def counted():
        return set(committed_counts(cluster.dir / "state", secret, "batching"))

    def why():
        return (f"{len(acked(out))} acked, {in_flight(out)} in flight, {len(counted())} in the committed state"
                + topology_errors(cluster.client, "batching"))
    with cluster.client() as m:
        # endless, until the test stops it (then the batching bolt drains its last batch)
        m.submit_topology("batching", conf, batching_topology(None, size=50, window=60, counters=2))
        assert wait_until(lambda: len(counted()) >= 300, 20, interval=0.2), \
            f"the topology did not commit 300 records\n{why()}"
        assert wait_until(lambda: in_flight(out) >= 50, 20, interval=0.05), f"nothing in flight\n{why()}"
        _kill_a_worker_of(m, "batching", "count", sparing="source")
        n = stop_and_wait(out, resume=300, done=counted, timeout=60, why=why)
        m.kill_topology("batching", wait_secs=0)
    counts = committed_counts(cluster.dir / "state", secret, "batching")
    # every record counted at least once, and more often only as often as it was emitted again
    twice, replayed = check_counts(counts, n, out)
    assert replayed > 0, "nothing was replayed: the kill hit no record in flight"
    print(f"process host SIGKILL behind a batching bolt: {n} records, {replayed} replays, {twice} counted twice")
