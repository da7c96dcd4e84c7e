"""Two topologies on one process-host cluster: A, a healthy acked counting pipeline, and B,
whose bolt ends its worker's process (``os._exit(7)``) on some tuples after it has run a while.
A counts every record once and none of its workers is restarted; B's errors say what happened
to B's workers. Before the fix a worker that had started and then died with a status other
than 0 (os._exit, a SIGSEGV, the OOM killer's SIGKILL) left no error at all: B's restarts
climbed while its errors stayed empty."""

import time
from collections import Counter

from tests.written import finished_lines

from ..conftest import QUICK_CRASH_BACKOFF, wait_until
from ..ports import free_ports
from .conftest import Cluster
from .neighbors_topology import Endless, ExitsOnSome, healthy, neighbour
from .recovery_topology import acked_lines, stop_and_wait
from .semantics_topology import topology_conf


def _counted(out, prefix):
    return Counter(int(line.split()[0]) for f in out.glob(f"{prefix}-*.txt") for line in finished_lines(f))


def test_a_neighbour_whose_bolt_exits_its_worker_is_told_why_and_the_other_topology_counts_each_record_once(tmp_path):
    c = Cluster(tmp_path, **{"supervisor.slots.ports": free_ports(4), **QUICK_CRASH_BACKOFF})
    try:
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        with c.client() as m:
            m.submit_topology("A", topology_conf(a, workers=2), healthy())
            assert wait_until(lambda: len(acked_lines(a)) > 100, 60), "A did not start"
            launches = {w["port"]: w["launch_id"] for w in m.get_topology_info("A")["workers"]}
            m.submit_topology("B", topology_conf(b, workers=2), neighbour(ExitsOnSome(after=1.0), Endless()))

            def b_crashes():
                return [e for e in m.get_topology_info("B")["errors"] if "status 7" in e["error"]]

            assert wait_until(lambda: b_crashes(), 60), \
                f"B's worker died, and its errors do not say so: {m.get_topology_info('B')['errors']}"
            [crash] = b_crashes()
            assert "exited with status 7 without being asked to stop while [bad] task" in crash["error"], crash
            restarts = {w["port"]: w["restarts"] for w in m.get_topology_info("B")["workers"]}
            assert sum(restarts.values()) >= 1, restarts
            begun = time.monotonic()
            m.list_topologies()
            assert time.monotonic() - begun < 2, "the master is slow to answer"
            m.kill_topology("B", wait_secs=0)

            n = stop_and_wait(a)
            assert sorted(acked_lines(a)) == list(range(n))  # each id acked once at its spout
            assert _counted(a, "counted") == Counter(range(n))  # counted once: nothing replayed
            assert _counted(a, "sunk") == Counter(range(n))
            info = m.get_topology_info("A")
            assert {w["port"]: w["launch_id"] for w in info["workers"]} == launches  # never restarted
            assert all(w["restarts"] == 0 for w in info["workers"]), info["workers"]
            assert info["errors"] == [], info["errors"]  # none of B's
    finally:
        c.stop()
