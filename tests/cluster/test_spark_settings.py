"""The Spark host's checks of a session's settings, without Spark: a fake SparkContext."""

import sys

from squall.cluster.spark import (
    FORCED,
    _master_addresses,
    check_session,
    expected_slots,
    warn_once,
)


class FakeConf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class FakeContext:
    def __init__(self, master, **values):
        self.master = master
        self._conf = FakeConf(values)

    def getConf(self):
        return self._conf


def test_a_session_with_speculation_or_dynamic_allocation_is_warned_about():
    sc = FakeContext("yarn", **{"spark.speculation": "true", "spark.dynamicAllocation.enabled": "true",
                                "spark.task.maxFailures": "4", "spark.authenticate": "true",
                                "spark.network.crypto.enabled": "true"})
    warnings = check_session(sc)
    assert len(warnings) == 2
    assert "spark.speculation=true" in warnings[0] and "need false" in warnings[0]
    assert "spark.dynamicAllocation.enabled=true" in warnings[1]


def test_sparks_idle_timeout_that_kills_python_workers_is_forced_off_or_warned_about():
    """Spark 4's ``spark.python.worker.killOnIdleTimeout`` with an
    ``idleTimeoutSeconds`` kills a Python worker that sent nothing back for that long: a
    squall worker's task sends its one record when the worker ends, so each was killed every
    N seconds (measured on local[2] with 3 s: both workers lost and restarted every 3 s, 3
    restarts each in 18 s, the topology's errors empty). A session squall makes turns it off; a
    given one that kills so is warned about."""
    assert FORCED["spark.python.worker.killOnIdleTimeout"] == "false"
    assert FORCED["spark.python.worker.idleTimeoutSeconds"] == "0"
    auth = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    (warning,) = check_session(FakeContext("yarn", **auth, **{"spark.python.worker.killOnIdleTimeout": "true",
                                                              "spark.python.worker.idleTimeoutSeconds": "60s"}))
    assert warning.startswith("the Spark session sets spark.python.worker.killOnIdleTimeout=true with "
                              "spark.python.worker.idleTimeoutSeconds=60s: Spark would kill each squall worker's "
                              "task after 60s"), warning
    for idle in (None, "0", "0s"):  # no idle timeout: nothing to kill on
        values = {"spark.python.worker.killOnIdleTimeout": "true"} | ({} if idle is None else
                                                                       {"spark.python.worker.idleTimeoutSeconds": idle})
        assert check_session(FakeContext("yarn", **auth, **values)) == []
    # the timeout alone only logs Spark's warning for each worker every 60 s: not squall's business
    assert check_session(FakeContext("yarn", **auth, **{"spark.python.worker.idleTimeoutSeconds": "60"})) == []


def test_a_local_session_running_another_python_is_warned_about():
    sc = FakeContext("local[2]", **{"spark.pyspark.python": "/usr/bin/python2"})
    assert ["spark.pyspark.python is /usr/bin/python2" in w for w in check_session(sc)] == [True]
    assert check_session(FakeContext("local[2]", **{"spark.pyspark.python": sys.executable})) == []


def test_expected_slots_come_from_local_cluster_or_the_executor_settings():
    assert expected_slots(FakeContext("local-cluster[2,1,1024]")) == 2
    assert expected_slots(FakeContext("local-cluster[3, 2, 512]", **{"spark.task.cpus": "2"})) == 3
    assert expected_slots(FakeContext("spark://h:7077", **{"spark.executor.instances": "4",
                                                           "spark.executor.cores": "2"})) == 8
    assert expected_slots(FakeContext("local[4]")) is None
    assert expected_slots(FakeContext("yarn")) is None  # dynamic: whatever registers


def test_on_a_cluster_the_master_listens_everywhere_and_is_reached_at_the_driver_host():
    sc = FakeContext("spark://h:7077", **{"spark.driver.host": "10.1.2.3"})
    assert _master_addresses(sc, "127.0.0.1") == ("0.0.0.0", "10.1.2.3")
    assert _master_addresses(sc, "10.9.9.9") == ("10.9.9.9", "10.9.9.9")
    assert _master_addresses(FakeContext("local[2]"), "127.0.0.1") == ("127.0.0.1", "127.0.0.1")


def test_on_a_cluster_all_on_loopback_the_master_listens_on_loopback_only():
    sc = FakeContext("spark://127.0.0.1:7077", **{"spark.driver.host": "127.0.0.1"})
    assert _master_addresses(sc, "127.0.0.1") == ("127.0.0.1", "127.0.0.1")


def test_a_session_beyond_this_machine_without_spark_authentication_and_encryption_is_warned_about():
    """Each worker's task carries squall.secret through Spark's RPC, which is in clear unless
    both settings are on."""
    (warning,) = check_session(FakeContext("spark://h:7077"))
    assert warning.startswith("Spark master spark://h:7077: spark.authenticate is off and "
                              "spark.network.crypto.enabled is off, so squall.secret")
    assert "spark.authenticate=true and spark.network.crypto.enabled=true" in warning and "docs/spark.md" in warning
    (warning,) = check_session(FakeContext("yarn", **{"spark.authenticate": "true"}))
    assert "spark.network.crypto.enabled is off" in warning and "spark.authenticate is off" not in warning
    assert check_session(FakeContext("yarn", **{"spark.authenticate": "true",
                                                "spark.network.crypto.enabled": "TRUE"})) == []
    assert check_session(FakeContext("k8s://https://api:443", **{"spark.authenticate": "true",
                                                                 "spark.ssl.rpc.enabled": "true"})) == []
    for local in ("local[2]", "local-cluster[2,1,1024]", "local"):  # the secret stays on this machine
        assert check_session(FakeContext(local, **{"spark.pyspark.python": sys.executable})) == []


def test_the_same_warning_is_logged_once(caplog):
    warnings = check_session(FakeContext("spark://once:7077"))
    warn_once(warnings)
    warn_once(check_session(FakeContext("spark://once:7077")))
    assert [r.getMessage() for r in caplog.records if "spark://once:7077" in r.getMessage()] == warnings
