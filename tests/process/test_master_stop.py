"""``squall nimbus --host process`` stopped by SIGTERM (systemd's stop, a Ctrl-C's SIGINT alike)
while clients and workers hold connections to it: it exits within a bound, closing them, and
keeps every change it acknowledged."""

import signal
import subprocess
import threading

from squall._config import cluster_conf
from squall._errors import SquallError
from squall._secret import load_or_create_secret
from squall._wire import Client
from squall.cluster.client import MasterClient

from ..conftest import wait_until
from .conftest import Cluster
from .recovery_topology import recovery_topology

STOP_BOUND_SECS = 10  # as long as `Cluster.stop` waits for its master


def _sigterm_while_busy(cluster, kept):
    """Load ``cluster``'s master (topology ``t``'s status ``kept``) with clients, SIGTERM it,
    check that it exits within the bound closing every connection; the status the toggler was
    last told, and what was answered."""
    conf = cluster_conf(cluster.conf)
    port, secret = conf["nimbus.thrift.port"], load_or_create_secret(conf)
    idle = Client("127.0.0.1", port, secret)
    idle.call("list")  # authenticated; then idle
    stop = threading.Event()
    reads, changes, held = [0], [kept], [idle]

    def read():  # a new connection a read, each kept open after it, as a worker keeps its own
        while not stop.is_set():
            try:
                c = Client("127.0.0.1", port, secret, timeout=5)
                held.append(c)
                c.call("list")
                reads[0] += 1
            except SquallError:  # the master stopping: refused, or its connection closed
                pass

    def toggle():
        with MasterClient(conf, timeout=5) as m:
            while not stop.is_set():
                want = "ACTIVE" if changes[-1] == "INACTIVE" else "INACTIVE"
                try:
                    if want == "ACTIVE":
                        m.activate("t")
                    else:
                        m.deactivate("t")
                except SquallError:  # not acknowledged: the master may not have kept it
                    return
                changes.append(want)
    threads = [threading.Thread(target=read, daemon=True) for _ in range(4)]
    threads.append(threading.Thread(target=toggle, daemon=True))
    for t in threads:
        t.start()

    def answered():
        return f"{reads[0]} reads and {len(changes) - 1} changes answered"
    try:
        assert wait_until(lambda: reads[0] >= 100 and len(changes) >= 10, 20), answered()
        cluster.master.send_signal(signal.SIGTERM)
        try:
            cluster.master.wait(STOP_BOUND_SECS)
        except subprocess.TimeoutExpired:
            cluster.master.kill()  # this test's own master, by its pid
            cluster.master.wait(5)
            raise AssertionError(f"the master did not exit within {STOP_BOUND_SECS} s of SIGTERM ({answered()})")
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert cluster.master.returncode == 0
    left = [c for c in held if not c.closed_by_peer()]
    assert not left, f"the master exited leaving {len(left)} of {len(held)} connections open"
    for c in held:
        c.close()
    return changes[-1], answered()


def test_a_master_sent_sigterm_while_clients_connect_and_a_connection_idles_exits_and_keeps_what_it_acked(tmp_path):
    """Five times: a master with one authenticated connection idle (a worker's between its
    heartbeats), four clients each making a new connection for each read and keeping it open
    after (as a worker keeps its own), and one toggling a topology between ACTIVE and INACTIVE on
    its kept connection, is sent SIGTERM. It exits within the bound every time, every connection
    closed by it, and the master started next from its directory finds the status the toggler
    was last told was kept. Before, a master stopped while a client's handshake answer was being
    read could lose the cancel of that connection (Python 3.11's wait_for, CPython gh-86296) and
    never exit: a worker's connection kept it alive for good (2 of 4 runs of a
    tests/process/test_no_master.py variant)."""
    cluster = Cluster(tmp_path, supervise=False)
    try:
        with cluster.client() as m:
            m.submit_topology("t", {}, recovery_topology(10), initial_status="INACTIVE")
        kept = "INACTIVE"
        for round_ in range(5):
            if round_:
                cluster.start_master()
                with cluster.client() as m:
                    status = m.get_topology_info("t")["status"]
                assert status == kept, f"round {round_}: the master kept {status}, the toggler was last told {kept}"
            kept, answered = _sigterm_while_busy(cluster, kept)
            print(f"round {round_}: {answered}; last told {kept}")
        cluster.start_master()
        with cluster.client() as m:
            assert m.get_topology_info("t")["status"] == kept
    finally:
        cluster.stop()
