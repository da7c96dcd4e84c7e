"""A checkpoint spout whose own state starts afresh while the stateful bolts keep theirs (its
state was deleted, or a resubmission placed it on a machine without its copy): its txids start
again at 0, below the bolts' committed txids. Storm's states keep no order of txids and go on;
the bolts must too, or no checkpoint ever commits again and every tuple is replayed for ever."""

import shutil

from squall import Config, LocalCluster
from squall.state.file import FileKeyValueStateProvider

from ..conftest import wait_until
from .counting import acked, check_counts, counting_topology, stop_and_wait


def counts(directory, conf):
    """The committed counts of every `CountIds` task under ``directory``."""
    out = {}
    for d in (directory / "restart").glob("ns-count-*"):
        out.update(dict(FileKeyValueStateProvider().new_state(d.name[3:], conf, None).committed()))
    return out


def test_the_bolts_go_on_when_the_checkpoint_spouts_state_starts_afresh_below_their_txids(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    states = tmp_path / "states"
    conf = Config({"topology.message.timeout.secs": 3, "topology.max.spout.pending": 100,
                   "topology.state.checkpoint.interval.ms": 200, "test.out.dir": str(out),
                   "topology.state.provider": "squall.state:FileKeyValueStateProvider",
                   "topology.state.provider.config": {"directory": str(states)}})
    with LocalCluster() as cluster:
        cluster.submit_topology("restart", conf, counting_topology(None))  # endless, until stopped
        assert wait_until(lambda: len(acked(out)) > 300, 60)
        cluster.kill_topology("restart", wait_secs=0)
    (spout_state,) = (states / "restart").glob("ns-%24checkpointspout-*")
    shutil.rmtree(spout_state)
    with LocalCluster() as cluster:
        cluster.submit_topology("restart", conf, counting_topology(None))

        def why():
            return str([e["error"] for e in cluster.get_topology_info("restart")["errors"]][:2])
        n = stop_and_wait(out, resume=300, timeout=60, why=why)
        cluster.kill_topology("restart", wait_secs=0)
    check_counts(counts(states, {**conf, "topology.name": "restart"}), n, out)
