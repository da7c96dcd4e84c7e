"""User code that misbehaves on the process host: the worker it runs in must still end, and be
restarted, as Storm's would be."""

import uuid
from pathlib import Path

from squall import TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .recovery_topology import (CrashesOnceLeavingAThread, DurableSpout, HogsTheInterpreterOnce, LeaksUntilRestarted,
                                Wanderer, acked, acked_lines, pid_exists)
from .semantics_topology import topology_conf

N = 200


def test_a_crashed_worker_whose_bolt_left_a_thread_running_exits_and_loses_nothing(tmp_path):
    """A bolt leaves a call that never returns in a ThreadPoolExecutor, then crashes its worker
    (topology.bolt.fail.fast). The worker process must end at once, as Storm's worker halts,
    rather than wait at the interpreter's exit for that thread until the master's heartbeat
    timeout (60 s here) restarts it: its supervisor restarts it, and every id is acked, once."""
    c = Cluster(tmp_path, **{"nimbus.task.timeout.secs": 60})
    try:
        out = tmp_path / "out"
        out.mkdir()
        b = TopologyBuilder()
        b.set_spout("source", DurableSpout(N))
        b.set_bolt("crash", CrashesOnceLeavingAThread(N // 2)).shuffle_grouping("source")
        with c.client() as m:
            m.submit_topology("t", topology_conf(out, workers=1, **{"topology.bolt.fail.fast": True}),
                              b.create_topology())
            assert wait_until(lambda: (out / "crashed").exists(), 60), "the bolt did not crash"
            crashed = int((out / "crashed").read_text())
            assert wait_until(lambda: not pid_exists(crashed), 15), \
                "the crashed worker still runs: its exit waits for the thread its bolt left"
            assert wait_until(lambda: acked(out) >= set(range(N)), 60), \
                f"not acked: {sorted(set(range(N)) - acked(out))[:20]}"
            assert sorted(acked_lines(out)) == list(range(N))  # each id acked once at its spout
            errors = m.get_topology_info("t")["errors"]
            assert any(e["component"] == "crash" and "crashing on 100" in e["error"] for e in errors), errors
    finally:
        c.stop()


def test_a_bolt_that_changes_the_working_directory_leaves_the_workers_state_where_it_was(tmp_path, monkeypatch):
    """storm.local.dir relative (its default, "storm-local", is): a bolt's os.chdir in prepare
    must not send its worker's stateful bolts' checkpoints under the new directory, where the
    next launch of the worker (started in the supervisor's directory) would not find them."""
    from ..state.counting import CountIds, Pass, ReplayingSpout, committed_counts

    monkeypatch.chdir(tmp_path)  # the master, its supervisor and their workers start here
    local = f"storm-local-{uuid.uuid4().hex[:8]}"  # relative; unique in the processes' command lines
    c = Cluster(tmp_path, **{"storm.local.dir": local})
    c.dir = Path(local)  # how its processes' command lines name it
    try:
        out = tmp_path / "out"
        out.mkdir()
        b = TopologyBuilder()
        b.set_spout("source", ReplayingSpout(N))
        b.set_bolt("wander", Wanderer()).shuffle_grouping("source")
        b.set_bolt("work", Pass()).shuffle_grouping("source")
        b.set_bolt("count", CountIds(), 2).fields_grouping("work", ["id"])
        secret = None
        with c.client() as m:
            m.submit_topology("t", topology_conf(out, workers=1, **{"topology.state.checkpoint.interval.ms": 200}),
                              b.create_topology())
            assert wait_until(lambda: acked(out) >= set(range(N)), 60), \
                f"not acked: {sorted(set(range(N)) - acked(out))[:20]}"
            assert (out / "elsewhere").is_dir()  # the bolt did move its worker
            secret = (tmp_path / local / "secret").read_bytes().strip()
            state = tmp_path / local / "state"
            assert wait_until(lambda: set(committed_counts(state, secret, "t")) >= set(range(N)), 30), \
                f"the state is not under {state}: {sorted(p.relative_to(out) for p in out.rglob('ns-*'))}"
            m.kill_topology("t", wait_secs=0)
    finally:
        c.stop()


def test_a_worker_whose_bolt_holds_the_interpreter_is_restarted_and_the_user_is_shown_where(tmp_path):
    """A bolt's call into C never lets go of the GIL: its worker's heartbeats stop, the master
    restarts it after nimbus.task.timeout.secs (5 s here) and says so in the topology's errors,
    naming the worker's components, and its supervisor had the worker write its threads' stacks to its output
    before, the bolt's execute among them (Storm's equivalent: a jstack). Every id is acked, once."""
    c = Cluster(tmp_path, **{"nimbus.task.timeout.secs": 5})
    try:
        out = tmp_path / "out"
        out.mkdir()
        b = TopologyBuilder()
        b.set_spout("source", DurableSpout(N))
        b.set_bolt("hog", HogsTheInterpreterOnce(N // 2)).shuffle_grouping("source")
        with c.client() as m:
            m.submit_topology("t", topology_conf(out, workers=1, **{"topology.message.timeout.secs": 10}),
                              b.create_topology())
            assert wait_until(lambda: (out / "hogged").exists(), 60), "the bolt did not start hogging"
            hog = int((out / "hogged").read_text())
            assert wait_until(lambda: not pid_exists(hog), 30), "the hogging worker was not stopped"
            assert wait_until(lambda: acked(out) >= set(range(N)), 60), \
                f"not acked: {sorted(set(range(N)) - acked(out))[:20]}"
            assert sorted(acked_lines(out)) == list(range(N))  # each id acked once at its spout
            errors = [e for e in m.get_topology_info("t")["errors"] if "missed heartbeats" in e["error"]]
            assert errors and "hog" in errors[0]["error"] and "source" in errors[0]["error"], errors
        output = "".join(p.read_text(errors="replace") for p in (c.dir / "supervisor").glob("worker-*.log"))
        assert "has run no Python for 2.5 s" in output and "in execute" in output, output[-3000:]
    finally:
        c.stop()


def test_a_worker_past_its_memory_cap_is_restarted_and_loses_nothing(tmp_path):
    """A bolt leaks 5 MB per tuple. Without a cap its worker grows until the machine's OOM killer
    picks a victim (the master, a supervisor, another worker); with
    topology.worker.max.heap.size.mb (Storm's worker heap cap) it exits past the cap, as a JVM
    dies of OutOfMemoryError: the master restarts it and says why (the slot, the cap, the key),
    the other worker keeps running, and every id is acked once."""
    cap_mb = 300
    c = Cluster(tmp_path, **{"nimbus.task.timeout.secs": 30})
    try:
        out = tmp_path / "out"
        out.mkdir()
        b = TopologyBuilder()
        b.set_spout("source", DurableSpout(N))
        b.set_bolt("leak", LeaksUntilRestarted()).shuffle_grouping("source")
        with c.client() as m:
            m.submit_topology("t", topology_conf(out, workers=2, **{"topology.worker.max.heap.size.mb": cap_mb,
                                                                    "topology.message.timeout.secs": 10}),
                              b.create_topology())
            assert wait_until(lambda: (out / "leaking").exists(), 60), "the bolt did not start"
            pid, port, baseline = map(int, (out / "leaking").read_text().split())
            assert baseline < (cap_mb - 150) << 20, f"a worker takes {baseline >> 20} MB already"
            others = set(c.workers()) - {pid}
            assert others, c.workers()
            assert wait_until(lambda: not pid_exists(pid), 60), "the leaking worker was not stopped"
            assert wait_until(lambda: acked(out) >= set(range(N)), 60), \
                f"not acked: {sorted(set(range(N)) - acked(out))[:20]}"
            assert sorted(acked_lines(out)) == list(range(N))  # each id acked once at its spout
            assert all(pid_exists(p) for p in others), "a worker that stayed under the cap was restarted"
            info = m.get_topology_info("t")
            errors = [e for e in info["errors"] if "memory cap" in e["error"]]
            assert len(errors) == 1, info["errors"]
            assert (f":{port} exceeded its memory cap" in errors[0]["error"]
                    and f"over the {cap_mb} MB of topology.worker.max.heap.size.mb" in errors[0]["error"]), errors
            assert errors[0]["worker"] == port, errors
            restarts = {w["port"]: w["restarts"] for w in info["workers"]}
            assert restarts[port] >= 1 and all(n == 0 for p, n in restarts.items() if p != port), restarts
    finally:
        c.stop()
