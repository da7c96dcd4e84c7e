"""A worker's error is kept once, with its own time, when the master kept it but its reply was
lost (a master SIGKILLed after saving a beat, a Nimbus HA leader whose ZooKeeper write failed, a
reply that timed out): the worker sends the errors of a beat that got no reply again, and the
master used to count them again at every such beat, so the UI, the REST API and ``squall
monitor`` showed one error as two or more (``(x2)``).

The workers reach the master through a proxy (tests/tcp_proxy.py) that, while told to
(``lose_replies``), forwards every request and drops its reply (closing the connection, as a
master killed after its save does): the beat carrying the error is kept by the master and the
worker hears nothing back."""

import signal
import subprocess
import sys

import yaml

from squall import TopologyBuilder

from ..conftest import wait_until
from ..tcp_proxy import TcpProxy
from .conftest import Cluster
from .flag_errors_topology import FlagReporter, Ticks


def _flag_errors(cluster, name):
    with cluster.client() as m:
        return [e for e in m.get_topology_info(name)["errors"] if e["error"].startswith("ValueError: flag ")]


def test_an_error_whose_beat_got_no_reply_is_kept_once_with_its_own_time_across_a_master_restart(tmp_path):
    """The error ``a`` reported while the master's replies are lost: the master keeps it, the
    worker hears nothing; the master is SIGKILLed and started again, and the worker sends ``a``
    again once replies come back; then the error ``b``. Once ``b`` is in, ``a`` is one record
    counted once (not x2), with the time it happened."""
    cluster = Cluster(tmp_path, supervise=False, **{"worker.heartbeat.frequency.secs": 0.2})
    proxy = TcpProxy(cluster.conf["nimbus.thrift.port"])
    sup_file = tmp_path / "supervisor.yaml"
    sup_file.write_text(yaml.safe_dump({**cluster.conf, "nimbus.thrift.port": proxy.port}))
    with open(tmp_path / "supervisor.log", "ab") as log:  # the child holds its own copy
        sup = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(sup_file)],
                               stdout=subprocess.DEVNULL, stderr=log)
    try:
        flags = tmp_path / "flags"
        flags.mkdir()
        b = TopologyBuilder()
        b.set_spout("ticks", Ticks(), 1)
        b.set_bolt("flags", FlagReporter(flags), 1).shuffle_grouping("ticks")
        with cluster.client() as m:
            m.submit_topology("flagged", {"topology.workers": 1}, b.create_topology())
            assert wait_until(lambda: all(w["alive"] for w in m.get_topology_info("flagged")["workers"])
                              and m.get_topology_info("flagged")["workers"], 30), \
                (tmp_path / "supervisor.log").read_text()[-3000:]

        # the first error kept: the spout is active (a reply said so) and the beats go through
        (flags / "0-ready").touch()
        assert wait_until(lambda: len(_flag_errors(cluster, "flagged")) == 1, 20), "the first error never came"
        # the replies are lost from the one to the beat that carries a: a beat sent before it
        # (every 0.2 s) would lose its reply first, and the worker reach the master no more
        proxy.lose_replies(after=b"ValueError: flag a")
        (flags / "a").touch()
        assert wait_until(lambda: len(_flag_errors(cluster, "flagged")) == 2, 10), "the master never kept the error a"
        assert wait_until(lambda: proxy.lost > 0, 10)
        [kept] = [e for e in _flag_errors(cluster, "flagged") if e["error"] == "ValueError: flag a"]
        # the master dies with the error saved and its reply lost, and starts again
        cluster.master.send_signal(signal.SIGKILL)
        cluster.master.wait(10)
        cluster.start_master()
        proxy.forward()
        (flags / "b").touch()
        assert wait_until(lambda: len(_flag_errors(cluster, "flagged")) == 3, 10), _flag_errors(cluster, "flagged")

        ready, a, b_ = _flag_errors(cluster, "flagged")
        assert (ready["error"], a["error"], b_["error"]) == (
            "ValueError: flag 0-ready", "ValueError: flag a", "ValueError: flag b")
        assert ready["count"] == 1, ready
        assert a["count"] == 1, f"the error a, sent once more after its reply was lost, counted {a['count']} times"
        assert a["time"] == a["last_time"] == kept["time"] < b_["time"], (kept, a, b_)
    finally:
        sup.terminate()
        sup.wait(20)
        proxy.close()
        cluster.stop()
