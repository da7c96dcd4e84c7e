"""Storm's semantics on the process host: a representative subset of the acceptance tests, run
across worker processes that exchange tuples over ZeroMQ (one cluster for the module)."""

from collections import Counter

from squall import TopologyBuilder

from ..conftest import wait_until
from .semantics_topology import (EmitsPoints, EmitsTooDeep, FailsAll, ListSpout, NeverAcks, Point, PointSerializer,
                                 RecordsTypes, records, task_counts, topology_conf, total, word_count)

SENTENCES = [f"w{i % 7} w{i % 11} w{i % 13} shared" for i in range(600)]


class _Running:
    """Submit, and kill at the end even if the test fails (the module shares 2 slots)."""

    def __init__(self, cluster, name, conf, topology):
        self.client = cluster.client()
        self.name = name
        self.client.submit_topology(name, conf, topology)

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        try:
            self.client.kill_topology(self.name, wait_secs=0)
        except Exception:
            pass
        self.client.close()


def test_word_count_is_exact_across_two_workers_and_a_key_stays_on_one_task(shared_cluster, tmp_path):
    """Spouts in both workers, count tasks in both: every word is counted exactly, and each word
    was counted by one task only although the processes hash it independently."""
    with _Running(shared_cluster, "wordcount", topology_conf(tmp_path), word_count(SENTENCES)):
        assert wait_until(lambda: len([r for r in records(tmp_path, "spout") if "ack" in r]) == len(SENTENCES), 40)
    assert wait_until(lambda: len(list(tmp_path.glob("counts-*.json"))) == 2, 20)
    per_task = task_counts(tmp_path)
    assert total(per_task) == Counter(w for s in SENTENCES for w in s.split())
    assert not set(per_task[0]) & set(per_task[1]), "a word was counted by two tasks"
    assert all(per_task), "fields grouping used only one task"


def test_a_worker_reports_the_messages_it_dropped_in_its_heartbeat(shared_cluster, tmp_path):
    """A forged message to a worker's data port is dropped, and `info` counts it per worker."""
    import socket

    from squall.worker.tcp import split_address

    with _Running(shared_cluster, "forged", topology_conf(tmp_path), word_count(SENTENCES[:50])) as m:
        def addressed():  # every worker reported its address (none listed yet is not that)
            workers = m.get_topology_info("forged")["workers"]
            return bool(workers) and all(w["address"] for w in workers)
        assert wait_until(addressed, 30)
        address = m.get_topology_info("forged")["workers"][0]["address"]
        forged = b"a forged mac, header and data of a batch: " + b"x" * 100
        # the default wire on loopback is TcpTransport's: frames of a 4-byte length, then the message
        with socket.create_connection(split_address(address)) as sock:
            sock.sendall(len(forged).to_bytes(4, "big") + forged)

        def unauthenticated():
            for w in m.get_topology_info("forged")["workers"]:
                if w["address"] == address and w["transport"]:
                    return w["transport"]["dropped"]["unauthenticated"]
            return 0
        assert wait_until(lambda: unauthenticated() == 1, 20)


def test_a_failed_tuple_reaches_its_spout_across_processes(shared_cluster, tmp_path):
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(list(range(20))), 1)
    b.set_bolt("fail", FailsAll(), 2).shuffle_grouping("items")
    with _Running(shared_cluster, "fails", topology_conf(tmp_path), b.create_topology()):
        assert wait_until(lambda: len(records(tmp_path, "spout")) == 20, 30)
    rows = records(tmp_path, "spout")
    assert sorted(r["fail"] for r in rows) == list(range(20))


def test_an_unacked_tuple_times_out_between_t_and_2t(shared_cluster, tmp_path):
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(list(range(5))), 1)
    b.set_bolt("never", NeverAcks(), 1).shuffle_grouping("items")
    with _Running(shared_cluster, "timeouts", topology_conf(tmp_path, **{"topology.message.timeout.secs": 1}),
                  b.create_topology()):
        assert wait_until(lambda: len(records(tmp_path, "spout")) == 5, 30)
    rows = records(tmp_path, "spout")
    assert all("fail" in r and 0.9 <= r["after"] <= 3.0 for r in rows), rows


def test_a_registered_type_crosses_workers_through_its_serializer(shared_cluster, tmp_path):
    b = TopologyBuilder()
    b.set_spout("points", EmitsPoints(50), 1)
    b.set_bolt("record", RecordsTypes(), 2).shuffle_grouping("points")
    conf = topology_conf(tmp_path, **{"topology.fall.back.on.pickle": False})
    conf.register_serialization(Point, PointSerializer)
    with _Running(shared_cluster, "points", conf, b.create_topology()):
        assert wait_until(lambda: len(records(tmp_path, "types")) == 50, 30)
    rows = records(tmp_path, "types")
    assert {r["type"] for r in rows} == {f"{Point.__module__}.Point"}
    assert all(r["sum"] == 0 for r in rows)


def test_an_unregistered_type_without_pickle_fallback_is_an_error_naming_type_and_component(shared_cluster, tmp_path):
    b = TopologyBuilder()
    b.set_spout("opaque", EmitsPoints(5, kind="opaque"), 1)
    b.set_bolt("record", RecordsTypes(), 2).shuffle_grouping("opaque")
    # plain shuffle: the tuples must cross workers to be serialized (a load-aware shuffle keeps
    # them in the emitting worker while its tasks keep up)
    conf = topology_conf(tmp_path, **{"topology.fall.back.on.pickle": False,
                                      "topology.disable.loadaware.messaging": True})
    with _Running(shared_cluster, "opaque", conf, b.create_topology()) as m:

        def error():
            errors = m.get_topology_info("opaque")["errors"]
            return next((e["error"] for e in errors if "Opaque" in e["error"]), None)
        assert wait_until(lambda: error() is not None, 30)
        message = error()
    assert "semantics_topology.Opaque" in message and "[opaque]" in message
    assert "register_serialization" in message


def test_an_emit_of_a_value_that_cannot_cross_workers_raises_in_the_emitting_component(shared_cluster, tmp_path):
    """Issue 10: a value nested 5000 deep failed its whole batch at flush, after the emit had
    returned, and crash-looped the worker. Now the emit of each such tuple bound for the other
    worker raises, naming component, stream and depth, in the spout's own code, which catches
    it; no worker crashes."""
    b = TopologyBuilder()
    b.set_spout("deep", EmitsTooDeep(20), 1)
    b.set_bolt("sink", NeverAcks(), 2).shuffle_grouping("deep")  # one task in each worker
    conf = topology_conf(tmp_path, **{"topology.disable.loadaware.messaging": True})  # to cross workers
    with _Running(shared_cluster, "deep", conf, b.create_topology()) as m:
        assert wait_until(lambda: len(records(tmp_path, "emit-errors")) == 10, 30)  # shuffle: half remote
        assert not [e for e in m.get_topology_info("deep")["errors"] if e.get("fatal")]  # no crash
    message = records(tmp_path, "emit-errors")[0]["error"]
    assert "component [deep]" in message and "stream [default]" in message
    assert "nested 5000 levels deep" in message


def test_metrics_of_tasks_in_both_workers_reach_one_consumer(shared_cluster, tmp_path):
    """TaskInfo and DataPoint cross processes (with pickle off): the consumer, in one worker,
    gets the counts of the bolt's tasks in both."""
    from .semantics_topology import CountsInMetric, MetricsToFile

    b = TopologyBuilder()
    b.set_spout("items", ListSpout(list(range(40))), 2)
    b.set_bolt("counter", CountsInMetric(), 2).shuffle_grouping("items")
    conf = topology_conf(tmp_path, **{"topology.fall.back.on.pickle": False})
    conf.register_metrics_consumer(MetricsToFile, argument=str(tmp_path))
    with _Running(shared_cluster, "metrics", conf, b.create_topology()):
        def counted():
            return sum(r["value"] for r in records(tmp_path, "metrics") if r["name"] == "counted")
        assert wait_until(lambda: counted() == 40, 40)
    rows = [r for r in records(tmp_path, "metrics") if r["name"] == "counted"]
    assert {r["component"] for r in rows} == {"counter"}
    assert len({r["port"] for r in rows}) == 2, "the counter's tasks are not in two workers"


def test_on_the_zmq_wire_word_count_is_exact_and_a_forged_message_is_counted(tmp_path):
    """``squall.transport.wire: zmq``: workers on ZeroMQ (`squall.worker.transport.ZmqTransport`)
    count as exactly, and a forged message is dropped and reported as on the TCP wire."""
    import zmq

    from .conftest import Cluster
    out = tmp_path / "out"
    out.mkdir()
    cluster = Cluster(tmp_path, **{"squall.transport.wire": "zmq"})
    try:
        with _Running(cluster, "wordcount", topology_conf(out), word_count(SENTENCES)) as m:
            assert wait_until(lambda: len([r for r in records(out, "spout") if "ack" in r]) == len(SENTENCES), 40)
            address = m.get_topology_info("wordcount")["workers"][0]["address"]
            sock = zmq.Context.instance().socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.connect(address)
            sock.send(b"a forged mac, header and data of a batch: " + b"x" * 100)
            sock.close()

            def unauthenticated():
                for w in m.get_topology_info("wordcount")["workers"]:
                    if w["address"] == address and w["transport"]:
                        return w["transport"]["dropped"]["unauthenticated"]
                return 0
            assert wait_until(lambda: unauthenticated() == 1, 20)
        assert wait_until(lambda: len(list(out.glob("counts-*.json"))) == 2, 20)
        per_task = task_counts(out)
        assert total(per_task) == Counter(w for s in SENTENCES for w in s.split())
        assert not set(per_task[0]) & set(per_task[1]), "a word was counted by two tasks"
    finally:
        cluster.stop()
