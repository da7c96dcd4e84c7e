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


class _Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)


class _FakeSession:
    """What SparkCluster reads of a session given to it, on a standalone master."""

    class sparkContext:  # pyspark's attribute name
        master = "spark://127.0.0.1:7077"

        @staticmethod
        def getConf():  # pyspark's method name
            return _Conf({"spark.driver.host": "127.0.0.1"})


def test_a_driver_waits_for_its_executors_before_its_master_recovers_and_times_its_workers(tmp_path, monkeypatch):
    """A driver started again (SIGKILLed, restarted on the same storm.local.dir) made its master
    first, which recovered the topology and gave its workers nimbus.task.timeout.secs from then
    to be heard; its supervisor registered only once the executors were up. On a standalone
    cluster whose executors took 22 s to come (timeout 10 s), the master took both workers'
    machine for lost: an error per worker, "its machine is taken for lost", after every such
    restart. The executors are now waited for before the master is made."""
    import squall.cluster.spark as spark_host

    order = []

    class Made(Exception):
        pass

    def master(*args, **kwargs):
        order.append("master")
        raise Made
    monkeypatch.setattr(spark_host.SparkCluster, "_wait_for_slots",
                        staticmethod(lambda sc, conf: order.append("executors") or 2))
    monkeypatch.setattr(spark_host, "Master", master)
    with pytest.raises(Made):
        spark_host.SparkCluster(spark=_FakeSession(), conf={"storm.local.dir": str(tmp_path)})
    assert order == ["executors", "master"]
