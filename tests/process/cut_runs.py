"""The run both tests of a cut link make: a finite `partition_topology` named "cut" submitted to
a cluster whose machines live in network namespaces, started and sending before the cut."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from squall import StormSubmitter

from ..conftest import wait_until
from .conftest import Cluster
from .nodes import Machine, log_tail
from .partition_topology import partition_topology, spout_events
from .semantics_topology import topology_conf


@dataclass
class CutRun:
    """The "cut" topology running on `machines`; `logs` are the master logs `why` shows first."""

    cluster: Cluster
    machines: list[Machine]
    logs: list[Path]
    out: Path

    def info(self) -> dict:
        with self.cluster.client() as m:
            return m.get_topology_info("cut")

    def why(self) -> str:
        """The logs' last lines, for an assertion's message."""
        return "\n".join(f"--- {p.name}\n{log_tail(p, 30)}" for p in
                         [*self.logs, *(self.cluster.dir / "machines" / f"{mc.name}.log" for mc in self.machines)])

    def workers(self) -> dict[str, set[int]]:
        """machine -> the pids of its workers."""
        return {mc.name: set(mc.workers()) for mc in self.machines}

    def launches(self) -> dict:
        """slot -> its worker's launch id."""
        return {w["slot"]: w["launch_id"] for w in self.info()["workers"]}


def start_cut_run(cluster: Cluster, machines: list[Machine], tmp_path: Path, logs: list[Path], ids: int) -> CutRun:
    """Submits "cut" (`ids` ids at 200 a second, 2 workers) once every machine registered, and
    returns when both workers are alive and 200 ids were acked."""
    out = tmp_path / "out"
    out.mkdir()
    run = CutRun(cluster, machines, logs, out)
    with cluster.client() as m:
        assert wait_until(lambda: len(m.nimbus.supervisors()) == len(machines), 30), \
            "the supervisors did not register\n" + run.why()
    with StormSubmitter.using_conf(cluster.conf):
        StormSubmitter.submit_topology("cut", topology_conf(out, workers=2, **{
            "topology.disable.loadaware.messaging": True, "topology.max.spout.pending": 100}),
            partition_topology(rate=200, limit=ids))
    assert wait_until(lambda: len(spout_events(out)[1]) >= 200 and len(run.info()["workers"]) == 2
                      and all(w["alive"] for w in run.info()["workers"]), 60), "the topology did not start\n" + run.why()
    return run
