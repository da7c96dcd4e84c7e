"""Network partitions on the process host (not deaths): machines in network namespaces of their
own (`Network`), cut off from each other or from the master for a few seconds, then healed,
while a reliable topology runs; every record the spout sent is counted (`partition_topology`).

- two workers cut off from each other for longer than ``topology.message.timeout.secs``: what
  crossed fails and is replayed, every record reaches a sink, duplicates only of replayed ids,
  and the workers talk again after the heal, with no restart;
- the same, shorter than the timeout, and a machine unplugged for 8 s: nothing fails, nothing
  is taken twice, and tuples cross again within seconds of the heal;
- a supervisor (and its worker) cut off from the master only, for longer than
  ``nimbus.task.timeout.secs``: the master moves its executors to another machine; after the
  heal the old worker stops, and the planned number of workers run.
"""

import subprocess
import time
from collections import Counter

import pytest

from squall import StormSubmitter
from tests.written import finished_lines

from ..conftest import wait_until
from .conftest import Cluster
from .nodes import Machine, NetnsUnavailable, Network, log_tail
from .partition_topology import partition_topology, sink_counts, sink_rows, spout_events, spout_lines, stop_spout
from .semantics_topology import topology_conf

SECRET = "squall-partition-test-secret-0123456789"
TAG = "sq25p"


def _network(machines):
    try:
        return Network(machines, tag=TAG)
    except NetnsUnavailable as e:
        pytest.skip(f"network namespaces cannot be made here ({e})")


class _Setup:
    def __init__(self, tmp_path, net, machines=2, **extra):
        self.net = net
        self.cluster = Cluster(tmp_path, supervise=False, **{"nimbus.host": net.master_address,
                                                            "squall.secret": SECRET, **extra})
        port = self.cluster.conf["supervisor.slots.ports"][0]
        self.port = port
        self.machines = []
        for i in range(machines):
            self.machines.append(Machine(self.cluster, f"m{i}", net.addresses[i], net.namespaces[i],
                                         **{"supervisor.slots.ports": [port]}))
        self.out = tmp_path / "out"
        self.out.mkdir()

    def why(self):
        return "\n".join(f"--- {p.name}\n{log_tail(p, 40)}" for p in
                         [self.cluster.dir.parent / "master.log",
                          *(self.cluster.dir / "machines" / f"{mc.name}.log" for mc in self.machines),
                          *(self.cluster.dir / "machines" / mc.name / "supervisor" / f"worker-{self.port}.log"
                            for mc in self.machines)])

    def submit(self, **conf):
        with self.cluster.client() as m:
            assert wait_until(lambda: len(m.nimbus.supervisors()) == len(self.machines), 30), \
                "the supervisors did not register\n" + self.why()
        with StormSubmitter.using_conf(self.cluster.conf):
            # plain round-robin shuffle: half the tuples cross between the workers, however idle
            conf = {"topology.disable.loadaware.messaging": True, **conf}
            StormSubmitter.submit_topology("part", topology_conf(self.out, workers=2, **conf), partition_topology())

    def info(self):
        with self.cluster.client() as m:
            return m.get_topology_info("part")

    def stop(self):
        self.cluster.stop()


def _check_counts(out, why, two_copies=False):
    """Stop the spout and wait until every id it emitted is acked; then every emitted id reached
    a sink, and an id a sink took twice is one the spout failed (a replay). Returns (emitted
    ids, failed ids, sink counts)."""
    stop_spout(out)

    def done():
        e, a, _ = spout_events(out)
        return set(e) <= set(a)
    assert wait_until(done, 60), f"ids never acked: {sorted(set(spout_events(out)[0]) - set(spout_events(out)[1]))[:20]}\n{why()}"
    emitted, _, failed = spout_events(out)
    n = max(emitted) + 1
    assert set(emitted) == set(range(n))
    counts = sink_counts(out)
    assert set(counts) >= set(range(n)), f"ids lost: {sorted(set(range(n)) - set(counts))[:20]}"
    twice = {i for i, c in counts.items() if c > 1}
    if two_copies:  # while cut off, the old copy of the spout emitted the ids the new one did
        by = {}
        for kind, i, pid, _ in spout_lines(out):
            if kind == "e":
                by.setdefault(i, set()).add(pid)
        twice -= {i for i, p in by.items() if len(p) > 1}
    assert twice <= set(failed), f"ids taken twice though never failed: {sorted(twice - set(failed))[:20]}"
    emits = Counter(emitted)
    assert all(counts[i] <= emits[i] for i in counts), "a sink took an id more often than it was emitted"
    return set(emitted), set(failed), counts


def _worker_pids(setup):
    return {w["slot"]: w["pid"] for w in setup.info()["workers"]}


def _started(setup, acks=200):
    def ok():
        try:
            info = setup.info()
        except Exception:  # noqa: BLE001 (a call that failed: not yet)
            return False
        _, acked, _ = spout_events(setup.out)
        return len(info["workers"]) == 2 and all(w["alive"] for w in info["workers"]) and len(acked) >= acks
    assert wait_until(ok, 60), "the topology did not start\n" + setup.why()


def _cut_between(net, a, b, heal=False):
    net.block(a, net.addresses[b], unblock=heal)
    net.block(b, net.addresses[a], unblock=heal)


WIRES = pytest.mark.parametrize("encryption", ["auto", "false"], ids=["zmq-curve", "tcp"])


@WIRES
def test_two_workers_cut_off_from_each_other_past_the_message_timeout_replay_and_reconnect(tmp_path, encryption):
    net = _network(2)
    try:
        s = _Setup(tmp_path, net, **{"squall.encryption": encryption})
        try:
            s.submit(**{"topology.message.timeout.secs": 2, "topology.max.spout.pending": 50})
            _started(s)
            pids = _worker_pids(s)
            _cut_between(net, 0, 1)
            # the cut lasts until tuples that crossed it timed out and failed
            assert wait_until(lambda: spout_events(s.out)[2], 20), "nothing failed during the cut\n" + s.why()
            _cut_between(net, 0, 1, heal=True)
            healed_at = time.time()
            # every sink task, on both workers, takes records again: the workers talk again
            tasks = {f.name for f in s.out.glob("sink-*.log")}

            def all_sinks_after_heal():
                after = set()
                for f in s.out.glob("sink-*.log"):
                    for line in finished_lines(f)[-50:]:
                        parts = line.split()
                        if len(parts) == 3 and float(parts[2]) > healed_at + 0.5:
                            after.add(f.name)
                return after == tasks
            assert wait_until(all_sinks_after_heal, 30), "the workers did not talk again after the heal\n" + s.why()
            _, failed, _ = _check_counts(s.out, s.why)
            assert failed, "nothing failed"
            assert _worker_pids(s) == pids, "a worker was restarted"
            assert all(w["restarts"] == 0 for w in s.info()["workers"])
        finally:
            s.stop()
    finally:
        net.remove()


@WIRES
def test_cuts_shorter_than_the_message_timeout_fail_nothing_and_tuples_cross_again_soon_after_the_heal(
        tmp_path, encryption):
    """Two cuts, each shorter than the message timeout, on one cluster (a cluster, its machines
    and a started topology cost ~3 s a test). First the two workers cut off from each other for
    1.5 s: acks resume after the heal and nothing fails. Then a worker's machine unplugged for
    8 s (no packet passes, none is refused: the kernels send again what waits, on their own
    backoff), well under the message timeout, then plugged back in. Left to the kernel, the
    connection's next retransmission came 12.6 s after the cut (200 ms doubling); on the TCP
    wire the first tuple crossed 5.2 s after the heal, while the spout's tuples waited. Both
    wires cap the backoff at storm.messaging.netty.max_wait_ms (1 s, raised as a silence lasts:
    `squall.worker.reconnect`), so the first tuple crosses within about a second (0.6-0.8 s
    measured). On the ZeroMQ wire (here CurveZMQ) the receiving end closed its connection at the
    silence bound's keepalive (~8 s): the retransmissions after the heal were refused, what the
    sender's kernel held was lost, and the first tuple crossed 51.7 s after the heal, 50 ids
    failed at the message timeout; it keeps squall.tcp.keepalive.secs (60 s), as the TCP wire's
    accepted connections do. The bound, 3 s, leaves 2 s for a loaded machine's loops to read and
    run it. Nothing fails (each cut is shorter than the timeout), every record reaches a sink
    once, and no worker restarts."""
    net = _network(2)
    try:
        # the master does not take the unplugged machine's worker or supervisor for dead
        s = _Setup(tmp_path, net, **{"squall.encryption": encryption, "nimbus.task.timeout.secs": 60,
                                     "nimbus.supervisor.timeout.secs": 60})
        try:
            s.submit(**{"topology.message.timeout.secs": 30, "topology.max.spout.pending": 50})
            _started(s)
            pids = _worker_pids(s)
            _cut_between(net, 0, 1)
            before = len(spout_events(s.out)[1])
            time.sleep(1.5)  # the partition itself (not a synchronisation): well under the timeout
            _cut_between(net, 0, 1, heal=True)
            assert wait_until(lambda: len(spout_events(s.out)[1]) > before + 200, 30), \
                "acks did not resume after the short cut\n" + s.why()
            failed = spout_events(s.out)[2]
            assert not failed, f"{len(failed)} ids failed though the short cut was well under the timeout"
            spout_pid = spout_lines(s.out)[-1][2]
            unplugged = 1 - net.addresses.index(next(sl for sl, p in pids.items() if p == spout_pid).rsplit(":", 1)[0])
            net.cut(unplugged)
            time.sleep(8.0)  # the partition itself (not a synchronisation)
            net.cut(unplugged, up=True)
            healed = time.time()

            def crossed():  # the sinks of the other worker take the spout's tuples again
                return [t for _, pid, t in sink_rows(s.out) if pid != spout_pid and t > healed]
            assert wait_until(crossed, 30), "no tuple crossed after the heal\n" + s.why()
            took = min(crossed()) - healed
            assert took < 3.0, f"the first tuple crossed {took:.1f} s after the heal\n" + s.why()
            _, failed, counts = _check_counts(s.out, s.why)
            assert not failed, f"{len(failed)} ids failed though the cut was shorter than the timeout"
            assert all(c == 1 for c in counts.values())
            assert _worker_pids(s) == pids, "a worker was restarted"
        finally:
            s.stop()
    finally:
        net.remove()


def _all_workers(setup):
    return {pid: mc.name for mc in setup.machines for pid in mc.workers()}


@WIRES
def test_a_supervisor_cut_off_from_the_master_only_is_replaced_and_its_worker_stops_at_the_heal(tmp_path, encryption):
    net = _network(3)
    try:
        s = _Setup(tmp_path, net, machines=3, **{"nimbus.task.timeout.secs": 3, "nimbus.supervisor.timeout.secs": 3,
                                                 "squall.encryption": encryption})
        try:
            s.submit(**{"topology.message.timeout.secs": 2, "topology.max.spout.pending": 50})
            _started(s)
            # cut the machine whose worker runs the spout (the pid that wrote its lines) from the
            # master, not from the other machine
            pids = _worker_pids(s)
            spout_pid = spout_lines(s.out)[-1][2]
            victim_slot = next(sl for sl, p in pids.items() if p == spout_pid)
            victim = net.addresses.index(victim_slot.rsplit(":", 1)[0])
            net.block(victim, net.master_address)

            def moved():
                try:
                    info = s.info()
                except Exception:  # noqa: BLE001 (a call that failed: not yet)
                    return False
                return (victim_slot not in {w["slot"] for w in info["workers"]} and len(info["workers"]) == 2
                        and all(w["alive"] for w in info["workers"]))
            assert wait_until(moved, 40), "the executors did not move\n" + s.why()
            # the new copy of the spout emits; the old one, unaware, still runs
            assert wait_until(lambda: any(p != spout_pid for _, _, p, _ in spout_lines(s.out)[-200:]), 30), \
                "the new spout did not emit\n" + s.why()
            assert spout_pid in _all_workers(s), "the cut machine's worker should still run, unaware"
            net.block(victim, net.master_address, unblock=True)
            healed_at = time.time()
            assert wait_until(lambda: spout_pid not in _all_workers(s), 30), "the old worker was not stopped\n" + s.why()
            # it learns at its first heartbeat after the heal (until then it runs on, unaware, as
            # Storm's worker does until its supervisor reads the new assignment); what it wrote
            # while cut off is the partition's, and its peers dropped what it sent them
            assert time.time() - healed_at < 10, "the old worker ran on long after the heal"
            # the new copy took over from the last id emitted when it opened, and the old one
            # emitted on (as fast, while its peers still took its tuples): the ids only the old
            # one emitted are the new one's to emit once it passes them, so stop only then
            old_last = max(i for kind, i, pid, _ in spout_lines(s.out) if kind == "e" and pid == spout_pid)
            assert wait_until(lambda: max((i for kind, i, pid, _ in spout_lines(s.out) if kind == "e" and pid != spout_pid),
                                          default=-1) > old_last, 30), "the new spout never passed the old one\n" + s.why()
            _check_counts(s.out, s.why, two_copies=True)
            assert len(s.info()["workers"]) == 2
            assert wait_until(lambda: len(_all_workers(s)) == 2, 20), _all_workers(s)
        finally:
            s.stop()
    finally:
        net.remove()


def _sockets_to(ns, address, port):
    """The TCP sockets in namespace ``ns`` to ``address:port``, in any state (an orphan's FIN
    retried included)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tanH", "dst", f"{address}:{port}"],
                         capture_output=True, text=True, timeout=10, check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def _logged(path, text):
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def test_a_supervisor_cut_off_long_enough_to_give_its_connection_up_reaches_the_master_after_the_heal(tmp_path):
    """A supervisor cut off from the master long enough that its call times out and its machine
    gives the old connection up (its FIN never arrived): the master must not keep that dead
    connection for ever. It held it, busy, so that with the master's table full
    (``nimbus.thrift.max.connections``, here 2: the two supervisors) the healed supervisor was
    refused at every attempt, "all authenticated", and never reached the master again. TCP
    keepalive (``squall.tcp.keepalive.secs``) closes it once the dead end stops answering."""
    net = _network(2)
    try:
        s = _Setup(tmp_path, net, **{"nimbus.thrift.max.connections": 2, "squall.tcp.keepalive.secs": 3})
        port = s.cluster.conf["nimbus.thrift.port"]
        logs = [s.cluster.dir / "machines" / f"{mc.name}.log" for mc in s.machines]
        try:
            assert wait_until(lambda: all(_logged(p, "registered slots") for p in logs), 30), s.why()
            # its machine gives an unanswered connection up at once (not after minutes of retries)
            subprocess.run(["ip", "netns", "exec", net.namespaces[0], "sysctl", "-qw", "net.ipv4.tcp_orphan_retries=1"],
                           check=True, timeout=10)
            net.block(0, net.master_address)
            assert wait_until(lambda: _logged(logs[0], "cannot reach the master")
                              and not _sockets_to(net.namespaces[0], net.master_address, port), 60), \
                f"{_sockets_to(net.namespaces[0], net.master_address, port)}\n{s.why()}"
            net.block(0, net.master_address, unblock=True)
            assert wait_until(lambda: _logged(logs[0], "reached 10."), 30), \
                "the supervisor never reached the master again after the heal\n" + s.why()
        finally:
            s.stop()
    finally:
        net.remove()


def _inbound_from(ns, address, port, peer):
    """The established connections to ``address:port`` (a worker's data port, in namespace
    ``ns``) from ``peer``."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tnH", "state", "established", "src", f"{address}:{port}",
                          "dst", peer], capture_output=True, text=True, timeout=10, check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def test_a_worker_drops_the_connection_a_peer_gave_up_during_a_partition(tmp_path):
    """Plain TCP between the workers: a worker cut off from its peer long enough that its
    machine gives the connection up (its unacknowledged data timed out, its FIN lost) connects
    again after the heal. The peer, which never writes on the connections it accepted, kept the
    dead one as well, established and trusted, for ever: one of its ``MAX_INBOUND`` (256) places
    lost per partition or peer machine that died, until a peer's new connection is refused.
    Keepalive (``squall.tcp.keepalive.secs``) closes it."""
    net = _network(2)
    try:
        s = _Setup(tmp_path, net, **{"squall.encryption": "false", "squall.tcp.keepalive.secs": 3})
        try:
            for ns in net.namespaces:  # each machine gives up data unacknowledged for a few seconds
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_retries2=3"],
                               check=True, timeout=10)
            s.submit(**{"topology.message.timeout.secs": 2, "topology.max.spout.pending": 50})
            _started(s)
            a, b = net.addresses
            assert _inbound_from(net.namespaces[1], b, s.port, a) and _inbound_from(net.namespaces[0], a, s.port, b)
            _cut_between(net, 0, 1)
            # what was pending across the cut fails at the message timeout; once a worker's
            # connection to its peer broke, the peer is away and its spouts are held, so no more
            assert wait_until(lambda: len(spout_events(s.out)[2]) >= 20, 30), "nothing failed\n" + s.why()
            _cut_between(net, 0, 1, heal=True)
            before = len(spout_events(s.out)[1])
            assert wait_until(lambda: len(spout_events(s.out)[1]) > before + 200, 30), "acks did not resume\n" + s.why()
            # each worker holds one connection from the other: the new one
            assert wait_until(lambda: len(_inbound_from(net.namespaces[1], b, s.port, a)) == 1
                              and len(_inbound_from(net.namespaces[0], a, s.port, b)) == 1, 20), \
                (_inbound_from(net.namespaces[1], b, s.port, a), _inbound_from(net.namespaces[0], a, s.port, b))
            _check_counts(s.out, s.why)
        finally:
            s.stop()
    finally:
        net.remove()
