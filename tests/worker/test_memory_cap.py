"""The memory cap's decision (`squall.worker.memory_cap.MemoryCap`), fed readings: which key
caps, when a reading is due, and when one is past the cap."""

import pytest

from squall import InvalidTopologyException
from squall._config import submit_warnings
from squall.worker.memory_cap import EXIT_OVER_MEMORY, MIB, MemoryCap

HEAP = "worker.heap.memory.mb"
MAX_HEAP = "topology.worker.max.heap.size.mb"


def test_no_key_no_cap():
    """No default cap: a Python worker's size varies too much for Storm's 768 MB."""
    assert MemoryCap.of({}, {}) is None
    assert MemoryCap.of({HEAP: None}, {MAX_HEAP: None}) is None


def test_the_lower_of_the_two_keys_caps():
    """The cluster's worker.heap.memory.mb and the topology's topology.worker.max.heap.size.mb
    are both limits: the lower applies, and the error names its key."""
    assert (MemoryCap.of({HEAP: 512}, {}).limit_mb, MemoryCap.of({HEAP: 512}, {}).key) == (512, HEAP)
    cap = MemoryCap.of({HEAP: 512}, {MAX_HEAP: 300.5})
    assert (cap.limit_mb, cap.key, cap.limit_bytes) == (300.5, MAX_HEAP, int(300.5 * MIB))
    assert MemoryCap.of({HEAP: 200}, {MAX_HEAP: 300}).key == HEAP


@pytest.mark.parametrize("value", [0, -5, "300", True, float("inf")])
def test_a_bad_cap_is_refused_naming_its_key(value):
    with pytest.raises(InvalidTopologyException, match=rf"^topology configuration: '{MAX_HEAP}' must be a positive "
                                                        r"number of megabytes, or null \(no cap\), got"):
        MemoryCap.of({}, {MAX_HEAP: value})
    with pytest.raises(InvalidTopologyException, match=rf"^cluster configuration: '{HEAP}' must be a positive"):
        MemoryCap.of({HEAP: value}, {})


def test_readings_once_a_period_and_one_past_the_cap_is_enough():
    cap = MemoryCap(100, MAX_HEAP, period=1.0)
    readings = []
    for now, rss in [(0.0, 50 * MIB), (0.4, 500 * MIB), (1.0, 100 * MIB), (1.5, 0), (2.1, 100 * MIB + 1)]:
        if cap.due(now):
            readings.append((now, cap.exceeded(now, rss)))
    # 0.4 and 1.5 come before the next reading is due; exactly the cap is not past it
    assert readings == [(0.0, False), (1.0, False), (2.1, True)]


def test_the_error_names_the_slot_the_cap_its_key_and_the_fullest_component():
    cap = MemoryCap(300, MAX_HEAP)
    text = cap.message("10.0.0.5:6701", 412 * MIB, ("leaky", 17))
    assert text == ("worker on 10.0.0.5:6701 exceeded its memory cap: 412 MB resident, over the 300 MB of "
                    f"{MAX_HEAP}; it exits (status {EXIT_OVER_MEMORY}) and is restarted, and the tuples it held "
                    "are replayed (most items waiting in its inboxes: component [leaky], 17)")
    assert "inboxes" not in cap.message("h:1", 412 * MIB, ("leaky", 0))


def test_the_caps_are_warned_of_only_where_they_are_not_applied():
    """The process host and Spark apply them; LocalCluster, whose workers are threads of the
    user's process, does not, and says so at submission."""
    from squall import TopologyBuilder
    from squall.testing import TestWordSpout
    b = TopologyBuilder()
    b.set_spout("words", TestWordSpout())
    conf = {MAX_HEAP: 300}
    assert submit_warnings(conf, b.create_topology(), "t") == []
    assert submit_warnings(conf, b.create_topology(), "t", memory_capped=False) == [
        (f"t: '{MAX_HEAP}' is not applied (LocalCluster's workers are threads of this process; the process host "
         "and Spark cap each worker process, docs/cluster.md)")]


@pytest.mark.parametrize("reuse, capped", [(None, True), ("1", False)])
def test_a_spark_python_worker_that_spark_reuses_is_not_capped_and_says_so(reuse, capped, monkeypatch, caplog):
    """A Python worker Spark reuses keeps what earlier launches left in it: a cap would stop
    every later launch at its first reading (a crash loop), so only fresh ones are capped."""
    import squall.cluster.logs as logs
    import squall.cluster.spark_task as spark_task
    import squall.cluster.worker_process as worker_process
    from squall.cluster.spark_task import worker_task

    monkeypatch.setattr(logs, "install_worker_logging", lambda *a: None)  # this process's logging stays pytest's
    # the worker in this process, not a child of it, so that what it does is seen here
    monkeypatch.setattr(spark_task, "run_watched", lambda work, *a: spark_task.WatchedEnd(work(bytearray), "", ()))
    calls = []
    monkeypatch.setattr(worker_process, "run", lambda *a, **kw: calls.append(kw["cap_memory"]) or 0)
    if reuse is None:
        monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    else:
        monkeypatch.setenv("SPARK_REUSE_WORKER", reuse)
    conf = {HEAP: 300, "squall.spark.worker.host": "127.0.0.1"}
    with caplog.at_level("WARNING", logger="squall.worker"):
        assert list(worker_task("127.0.0.1:1", "t-1-1", "spark:1", 1, conf)(iter([]))) == [{"status": 0}]
    assert calls == [capped]
    assert ("no memory cap: Spark reuses its Python workers" in caplog.text) is not capped
