"""Several machines, for real: a master in the root namespace, supervisors on machines of their
own (network namespaces with their own addresses, else 127.0.0.x), a reliable topology, and
machines that die, hang, lose their link or fail their health checks while tuples flow.

Each loss must move the lost machine's executors to the others after nimbus.task.timeout.secs
(at once for a failed health check), and every id must be acked in the end (`DurableSpout`).
Where a machine hangs, its sink tasks run on when it resumes until their worker is stopped,
beside the tasks that replaced them (zombies: their pending batches, which replayed elsewhere,
are committed as they stop): the Parquet and Delta sinks must still hold each id exactly once
(on loopback addresses only: on the namespaces' machines the check doubled the test's time).
"""

import signal
from collections import Counter

import pytest

from squall import StormSubmitter

from ..conftest import wait_until
from .conftest import Cluster
from .nodes import Machine, NetnsUnavailable, Network, log_tail, slots_of
from .recovery_topology import RECOVERY_CONF, acked, recovery_topology, stop_and_wait, stopped_at, written_ids
from .semantics_topology import topology_conf

SECRET = "squall-nodes-test-secret-0123456789"  # every machine must hold the cluster's secret
TIMEOUT = 4  # nimbus.task.timeout.secs


def _cluster(tmp_path, **extra):
    return Cluster(tmp_path, supervise=False, **{"nimbus.task.timeout.secs": TIMEOUT, "squall.secret": SECRET, **extra})


def _hosts(slots):
    return {s.rsplit(":", 1)[0] for s in slots}


def _running_on(client, name, machines):
    """The machines topology ``name`` runs on now."""
    hosts = _hosts(slots_of(client, name))
    return [mc for mc in machines if mc.address in hosts]


def _settled(client, name, machines, lost):
    """Whether topology ``name`` runs on 2 of ``machines``, none of ``lost``, and each of its
    workers has beaten from the process its machine runs: only then may the next loss hit one
    (a worker still starting on a frozen machine's slot would escape the freeze and keep its
    slot, its executors never to move)."""
    info = client.get_topology_info(name)
    on = _running_on(client, name, machines)
    pids = {w["slot"].rsplit(":", 1)[0]: w["pid"] for w in info["workers"] if w["alive"]}
    return (len(on) == 2 and not set(on) & set(lost)
            and all(pids.get(mc.address) in mc.workers() for mc in on))


def _why(cluster, machines):
    return "\n".join(f"--- {p.name}\n{log_tail(p)}" for p in
                     [cluster.dir.parent / "master.log", *(cluster.dir / "machines" / f"{mc.name}.log" for mc in machines)])


def _lose_machines(cluster, machines, out, losses, tables=None):
    """Run the recovery topology on 2 of ``machines`` (one slot each), and apply each of
    ``losses`` in turn to a machine it runs on: its executors must move to free machines while
    tuples flow (the spout runs until the test stops it, however fast the machine), and every
    id be acked in the end (with ``tables``, in its Parquet and Delta sinks there, checked by
    `_each_id_once` after the test resumed and stopped what it lost). Returns the machines lost."""
    with cluster.client() as m:  # all registered first, so that the topology starts on two machines
        assert wait_until(lambda: len(m.nimbus.supervisors()) == len(machines), 30), \
            "the supervisors did not register\n" + _why(cluster, machines)
    with StormSubmitter.using_conf(cluster.conf):
        StormSubmitter.submit_topology("spread", topology_conf(out, **RECOVERY_CONF), recovery_topology(tables=tables))
    lost, ran_on = [], []
    with cluster.client() as m:
        assert wait_until(lambda: len(acked(out)) > 200 and _settled(m, "spread", machines, lost), 60), \
            "the topology did not start\n" + _why(cluster, machines)
        for lose in losses:
            # the machine the last loss moved executors to, whose worker started last (the
            # case that once hit a worker still starting), else the first
            on = _running_on(m, "spread", machines)
            victim = next((mc for mc in on if mc not in ran_on), on[0])
            ran_on = on
            lose(victim)
            lost.append(victim)
            assert wait_until(lambda: _settled(m, "spread", machines, lost), TIMEOUT + 30), \
                f"still on {slots_of(m, 'spread')} after losing {victim.address}\n" + _why(cluster, machines)
            before = len(acked(out))
            assert wait_until(lambda before=before: len(acked(out)) > before + 50, 30), \
                "acks did not resume\n" + _why(cluster, machines)
        stop_and_wait(out, why=lambda: _why(cluster, machines))
    return lost


def _tables(tmp_path):
    """Where the topology's Parquet and Delta sinks write, or None without pyarrow and deltalake."""
    try:
        import deltalake  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    return tmp_path / "tables"


def _each_id_once(cluster, machines, out, tables):
    """Once the topology is killed (its workers gone, their sinks' last batches committed), each
    id the spout emitted is in the Parquet directory and the Delta table exactly once."""
    if tables is None:
        return
    with cluster.client() as m:
        m.kill_topology("spread", wait_secs=0)
    assert wait_until(lambda: not any(mc.workers() for mc in machines), 30), "the workers did not stop"
    expected = list(range(stopped_at(out)))
    for sink, ids in written_ids(tables).items():
        twice = sorted(i for i, n in Counter(ids).items() if n > 1)
        assert ids == expected, (f"{sink}: {len(ids)} rows for {len(expected)} ids, {len(twice)} ids more than once "
                                 f"(e.g. {twice[:10]}), missing {sorted(set(expected) - set(ids))[:10]}")


def _stop(cluster, machines):
    for mc in machines:
        mc.freeze(signal.SIGCONT)  # a stopped process cannot take the SIGTERM that ends it
    cluster.stop()


def test_machines_in_network_namespaces_that_die_or_lose_their_link_lose_nothing(tmp_path):
    """Four machines, each a network namespace with an address that exists only there; the
    master in the root namespace. One machine is killed (its supervisor SIGKILLed, its workers
    with it), then another's link is cut: each time the executors move to a free machine. When
    the link comes back, that machine's stale worker is stopped: it is assigned nothing."""
    try:
        net = Network(4)
    except NetnsUnavailable as e:
        pytest.skip(f"network namespaces cannot be made here ({e}); "
                    "test_machines_on_loopback_addresses runs the same scenario on 127.0.0.x")
    machines = []
    try:
        cluster = _cluster(tmp_path, **{"nimbus.host": net.master_address})
        port = cluster.conf["supervisor.slots.ports"][0]
        try:
            for i, (address, ns) in enumerate(zip(net.addresses, net.namespaces)):
                machines.append(Machine(cluster, f"m{i}", address, ns, **{"supervisor.slots.ports": [port]}))
            out = tmp_path / "out"
            out.mkdir()
            _, cut = _lose_machines(cluster, machines, out,
                                    [Machine.kill, lambda mc: net.cut(machines.index(mc))])
            assert cut.workers(), "the cut machine's worker should still run, unaware"
            net.cut(machines.index(cut), up=True)
            assert wait_until(lambda: not cut.workers(), 20), "the stale worker was not stopped\n" + \
                _why(cluster, machines)
        finally:
            _stop(cluster, machines)
    finally:
        net.remove()


def test_machines_on_loopback_addresses_that_die_or_hang_lose_nothing(tmp_path):
    """The same scenario without namespaces (it always runs): four supervisors on 127.0.0.2-5.
    One machine is killed, then another hangs (its supervisor and workers SIGSTOPped, as silent
    as a cut link); resumed, the hung machine's stale worker is stopped, and each id is once in
    the Parquet and Delta sinks. Before, the stale worker's sink tasks committed their pending
    batches as it stopped, which had replayed to their replacements: 95 of 640 ids were in the
    Parquet files twice."""
    cluster = _cluster(tmp_path)
    port = cluster.conf["supervisor.slots.ports"][0]
    machines = []
    try:
        for i in range(4):
            machines.append(Machine(cluster, f"m{i}", f"127.0.0.{i + 2}", **{"supervisor.slots.ports": [port]}))
        out = tmp_path / "out"
        out.mkdir()
        _, hung = _lose_machines(cluster, machines, out, [Machine.kill, Machine.freeze], _tables(tmp_path))
        hung.freeze(signal.SIGCONT)
        assert wait_until(lambda: not hung.workers(), 20), "the stale worker was not stopped\n" + _why(cluster, machines)
        _each_id_once(cluster, machines, out, _tables(tmp_path))
    finally:
        _stop(cluster, machines)


def test_a_machine_that_fails_its_health_checks_hands_its_workers_to_healthy_machines(tmp_path):
    """Storm's supervisor health checks: a script in storm.health.check.dir prints an ERROR
    line; its machine's supervisor stops its workers, and the master moves them to the healthy
    machine at once. When the check passes again the machine is healthy again."""
    cluster = _cluster(tmp_path)
    port = cluster.conf["supervisor.slots.ports"][0]
    checks = tmp_path / "healthchecks"
    checks.mkdir()
    machines = []
    try:
        for i in range(3):
            mdir = checks / f"m{i}"
            mdir.mkdir()
            check = mdir / "disk"
            check.write_text(f"#!/bin/sh\nif [ -e {tmp_path}/sick-m{i} ]; then echo 'ERROR disk full on m{i}'; fi\nexit 0\n")
            check.chmod(0o755)
            machines.append(Machine(cluster, f"m{i}", f"127.0.0.{i + 2}",
                                    **{"supervisor.slots.ports": [port], "storm.health.check.dir": str(mdir),
                                       "squall.health.check.interval.secs": 0.5}))
        out = tmp_path / "out"
        out.mkdir()
        (sick,) = _lose_machines(cluster, machines, out,
                                 [lambda mc: (tmp_path / f"sick-{mc.name}").write_text("")])
        assert not sick.workers()
        with cluster.client() as m:
            (info,) = [s for s in m.nimbus.supervisors() if s["host"] == sick.address]
            assert not info["healthy"] and info["health_problem"] == f"disk: ERROR disk full on {sick.name}"
            (tmp_path / f"sick-{sick.name}").unlink()
            assert wait_until(lambda: all(s["healthy"] for s in m.nimbus.supervisors()), 10)
    finally:
        _stop(cluster, machines)
