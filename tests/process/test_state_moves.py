"""Stateful bolts whose tasks a rebalance moves to another machine (two supervisors on
127.0.0.2 and .3, each with its own ``storm.local.dir``). The file store, the process host's
default, keeps a state on the machine of the worker that committed it: a task moved to a machine
without its latest commit must not start there from nothing (or from an older copy) and go on
committing, which loses every update the other machine holds. It is refused, with a `StateError`
the topology's errors show; the task's state is intact where it was, and goes on there."""

from urllib.parse import unquote

from squall import TopologyBuilder
from squall.state import state_key
from squall.state.file import FileStore

from ..conftest import wait_until
from ..state.counting import CountIds, Pass, ReplayingSpout, acked, check_counts, stop_and_wait
from .conftest import Cluster
from .nodes import Machine, log_tail, slots_of
from .semantics_topology import topology_conf

SECRET = "squall-state-moves-secret-0123456789"


def counting(tasks=4):
    """`ReplayingSpout` (endless) -> `Pass` -> `CountIds` (fields on id), the bolts with
    ``tasks`` tasks over 2 executors, so that a rebalance can move some of them."""
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(None), 1)
    b.set_bolt("work", Pass(), 2).shuffle_grouping("source").set_num_tasks(tasks)
    b.set_bolt("count", CountIds(), 2).fields_grouping("work", ["id"]).set_num_tasks(tasks)
    return b.create_topology()


def copies(machine, name):
    """namespace -> this machine's `FileStore` of it, for topology ``name``."""
    key = state_key(SECRET.encode())
    return {unquote(d.name[3:]): FileStore(d, unquote(d.name[3:]), key)
            for d in (machine.dir / "state" / name).glob("ns-*")}


def test_a_task_moved_to_another_machine_is_refused_its_stale_state_and_no_update_is_lost(tmp_path):
    cluster = Cluster(tmp_path, supervise=False, **{"squall.secret": SECRET})
    port = cluster.conf["supervisor.slots.ports"][0]
    machines = [Machine(cluster, f"m{i}", f"127.0.0.{i + 2}", **{"supervisor.slots.ports": [port]})
                for i in range(2)]
    out = tmp_path / "out"
    out.mkdir()

    def why():
        return "\n".join(f"--- {p.name}\n{log_tail(p)}" for p in
                         [cluster.dir.parent / "master.log", *(cluster.dir / "machines" / f"{mc.name}.log"
                                                                for mc in machines)])
    try:
        with cluster.client() as m:
            assert wait_until(lambda: len(m.nimbus.supervisors()) == 2, 30), why()
            conf = topology_conf(out, 1, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                            "topology.state.checkpoint.interval.ms": 300})
            m.submit_topology("moves", conf, counting())
            assert wait_until(lambda: len(acked(out)) > 300, 60), why()
            (home,) = {s.rsplit(":", 1)[0] for s in slots_of(m, "moves")}
            first = next(mc for mc in machines if mc.address == home)

            m.rebalance("moves", num_workers=2, wait_secs=0)  # half the tasks move to the other machine
            assert wait_until(lambda: len(slots_of(m, "moves")) == 2, 60), why()

            def refused():
                return [e["error"] for e in m.get_topology_info("moves")["errors"] if "another machine" in e["error"]]
            def both_run():
                return sum(w["alive"] for w in m.get_topology_info("moves")["workers"]) == 2
            # refused (or, before the fix, the moved tasks started from nothing there and ran on)
            assert wait_until(lambda: refused() or both_run(), 60), why()
            if not refused():
                before = len(acked(out))
                assert wait_until(lambda: refused() or len(acked(out)) > before + 300, 60), why()

            m.rebalance("moves", num_workers=1, wait_secs=0)
            assert wait_until(lambda: slots_of(m, "moves") == [f"{home}:{port}"], 60), \
                f"the topology went back to {slots_of(m, 'moves')}, not to {home}\n{why()}"
            n = stop_and_wait(out, resume=300, timeout=120, why=why)
            errors = refused()
            m.kill_topology("moves", wait_secs=0)
        counts = {}
        for ns, store in copies(first, "moves").items():
            if ns.startswith("count-"):
                counts.update(store.committed)
        # every id counted once at least, in the copies of the machine that ran every task
        # first and last: none was counted only on the other machine and lost there
        check_counts(_decoded(counts), n, out)
        assert errors, "no task was refused on the other machine"
        assert "component [count]" in errors[0] and "storm.local.dir" in errors[0], errors[0]
    finally:
        for mc in machines:
            mc.supervisor.terminate()
            mc.supervisor.wait(10)
        cluster.stop()


def _decoded(raw):
    """The `CountIds` counts of raw committed entries (the topology's serializer's bytes)."""
    from squall.state._kv import StateCodec
    codec = StateCodec({}, "test")
    return {codec.decode(k, "key"): codec.decode(v, "value") for k, v in raw.items()}
