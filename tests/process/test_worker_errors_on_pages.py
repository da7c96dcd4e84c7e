"""The topology page (the REST API's ``/api/v1/topology/<id>``, and the web page's Errors table
that reads it) lists what the master records of the topology's workers: a worker SIGKILLed
mid-run is there once, as ``squall list``, ``squall info`` and ``squall monitor`` name it.

Before, the page's errors were its spouts' and bolts' last errors only: a user reading the UI
after a ``kill -9`` (or a worker killed by its memory cap, or restarted for its silence) saw
every figure of the worker's tasks start again from zero and no error saying why; the only trace
was the worker's ``restarts``."""

import json

from ..conftest import wait_until
from .recovery_topology import RECOVERY_CONF, kill_a_worker_without, recovery_topology, stop_and_wait, wait_started
from .semantics_topology import topology_conf


def _relaunched(master, name, slot):
    """Whether the worker of ``slot`` runs again, in a launch after its first."""
    return any(w["slot"] == slot and w["alive"] and w["launch_id"] > 1
               for w in master.get_topology_info(name)["workers"])


def test_a_sigkilled_worker_is_on_the_topology_page_once(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with cluster.client() as m:
        m.submit_topology("killed", topology_conf(out, **RECOVERY_CONF), recovery_topology())
        try:
            wait_started(out)
            before = m.get_topology_page("killed")
            victim = kill_a_worker_without(m, "killed", "source")
            assert wait_until(lambda: _relaunched(m, "killed", victim["slot"]), 30), "the worker was not relaunched"
            # every id the spout emitted is acked, the lost ones replayed: the topology ran on
            emitted = stop_and_wait(out, resume=100)
            page = m.get_topology_page("killed")
            info = m.get_topology_info("killed")
        finally:
            m.kill_topology("killed", wait_secs=0)
    kept = [e for e in info["errors"] if e["component"] == "__worker"]
    assert [(e["worker"], e["count"]) for e in kept] == [(victim["port"], 1)], kept
    assert kept[0]["error"] in json.dumps(page), f"the kill is nowhere on the topology page: {kept[0]['error']}"
    assert before["workerErrors"] == []
    rows = page["workerErrors"]
    assert [(r["component"], r["errorPort"], r["errorHost"], r["errorCount"], r["error"]) for r in rows] == \
        [("__worker", victim["port"], "127.0.0.1", 1, kept[0]["error"])]
    assert rows[0]["error"].startswith(f"worker on {victim['slot']} was killed by SIGKILL"), rows[0]["error"]
    assert rows[0]["errorTime"] == int(kept[0]["last_time"] * 1000)
    # the components' errors stay theirs: none here
    assert [c["lastError"] for c in page["spouts"] + page["bolts"]] == ["", "", ""]
    print(f"{emitted} ids emitted and acked through the kill; the page's worker errors: {rows[0]['error']!r}")
