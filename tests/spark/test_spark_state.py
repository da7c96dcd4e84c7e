"""Stateful bolts on the Spark host (issue 16): the worker without the spout SIGKILLed mid-run;
its bolts' state comes back from the file store under storm.local.dir as last committed, the
spout replays what was not committed, and no update is lost. One test: a SparkSession is slow."""

from pathlib import Path

import pytest

from ..conftest import wait_until
from ..process.recovery_topology import kill_a_worker_without
from ..process.semantics_topology import topology_conf
from ..state.counting import acked, check_counts, committed_counts, counting_topology
from .conftest import Running, spark_cluster_of

N = 2000


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    yield from spark_cluster_of("local[2]", tmp_path_factory)


def test_state_rolls_back_and_no_update_is_lost_after_a_spark_worker_is_sigkilled(spark_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    conf = topology_conf(out, **{"topology.message.timeout.secs": 10, "topology.max.spout.pending": 200,
                                 "topology.state.checkpoint.interval.ms": 300})
    with Running(spark_cluster, "counting", conf, counting_topology(N)) as c:
        assert wait_until(lambda: len(acked(out)) > 300, 90), "the topology did not start committing"
        kill_a_worker_without(c, "counting", "source")
        assert wait_until(lambda: acked(out) >= set(range(N)), 120), \
            f"ids never acked: {sorted(set(range(N)) - acked(out))[:20]}"
    counts = committed_counts(Path(spark_cluster.conf["storm.local.dir"]) / "state", spark_cluster.conf["squall.secret"].encode(), "counting")
    twice, replayed = check_counts(counts, N, out)
    assert replayed > 0, "nothing was replayed: the kill hit no tuple in flight"
    print(f"Spark host SIGKILL: {twice} updates applied twice, {replayed} tuples replayed")
