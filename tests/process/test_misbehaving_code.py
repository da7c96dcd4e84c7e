"""User code that misbehaves on the process host: the worker it runs in must still end, and be
restarted, as Storm's would be."""

from squall import TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .recovery_topology import CrashesOnceLeavingAThread, DurableSpout, acked, acked_lines, pid_exists
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
