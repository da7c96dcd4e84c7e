"""A SparkCluster that fails to start leaves nothing running: not its master's thread, and not
the SparkSession it created, which the next SparkCluster in the process would otherwise be
handed (getActiveSession), with that session's master instead of the one it asked for."""

import socket

import pytest

from squall import SquallError


def test_a_cluster_that_cannot_start_stops_the_session_it_created_and_the_next_one_gets_its_own(tmp_path):
    from pyspark.sql import SparkSession

    from squall.cluster.spark import SparkCluster
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = {"storm.local.dir": str(tmp_path / "a"), "nimbus.thrift.port": port}
        with pytest.raises(SquallError, match=f"cannot listen on 127.0.0.1:{port}"):
            SparkCluster(master="local[2]", conf=conf)
    assert SparkSession.getActiveSession() is None
    with SparkCluster(master="local[1]", conf={"storm.local.dir": str(tmp_path / "b"), "nimbus.thrift.port": 0}) as cluster:
        assert cluster.spark.sparkContext.master == "local[1]"
        assert cluster.launcher.slots() == [0]
    assert SparkSession.getActiveSession() is None
