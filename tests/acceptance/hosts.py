"""The process host and Spark behind the verbs the acceptance tests call on a `LocalCluster`,
so that one test body runs on all three hosts.

`RemoteCluster` has the verbs `MasterClient` has (`NimbusVerbs`, written once over the master's
protocol) over the host's `MasterClient` (the process host) or `SparkCluster` (which is one). What LocalCluster answers from its own memory, a remote host answers from what
its master reports: `is_idle` from the workers' heartbeats (see its docstring), and counts in
``get_topology_info`` lag up to a heartbeat behind the tuples (tests poll them with
``wait_until``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from squall import StormTopology
from squall.cluster.client import NimbusVerbs

from ..conftest import wait_until

HEARTBEAT_SECS = 0.2
"""``worker.heartbeat.frequency.secs`` on the remote test hosts: counts reach the master this
often, so ``is_idle`` can tell sooner that they stopped moving."""

SETTLE_HEARTBEATS = 3
"""How many heartbeat periods the counts must stay still (with empty inboxes) for ``is_idle``."""


class RemoteCluster(NimbusVerbs):
    """A LocalCluster's verbs over a remote host's master, for one test: `NimbusVerbs` over the
    host client's ``nimbus``, with what LocalCluster does beyond them (a submission waits for
    its tasks, names sorted, the host in the cluster's summary, `is_idle`, `shutdown`).

    Args:
        client: the host's `MasterClient` (or `SparkCluster`).
        host: ``"process"`` or ``"spark"`` (for messages).
        slots_free: true once the host's workers of killed topologies are gone, so the next test
            has every slot (called by `clear`).
    """

    def __init__(self, client: Any, host: str, slots_free: Callable[[], bool]) -> None:
        self.client = client
        self.nimbus = client.nimbus
        self.host = host
        self._slots_free = slots_free
        self._still: dict[str, tuple[tuple, float]] = {}

    def submit_topology(self, name: str, conf: Any, topology: StormTopology, initial_status: str = "ACTIVE") -> None:
        """Submits, then waits until every task of ``name`` has reported from a live worker, as
        LocalCluster's submit returns with its executors running: a test's own deadlines then
        time its topology, not how long a loaded machine takes to start worker processes (on
        Spark under load, longer than the 10 s a test gave 100 tuples to be acked)."""
        self.client.submit_topology(name, dict(conf or {}), topology, initial_status)
        assert wait_until(lambda: self._all_tasks_reported(self.get_topology_info(name)), 120), \
            f"the {self.host} host did not start every task of {name} in 120 s"

    @staticmethod
    def _all_tasks_reported(info: dict[str, Any]) -> bool:
        comps = info["components"].values()
        return (all(w["alive"] for w in info["workers"])
                and sum(len(c["task_stats"]) for c in comps) == sum(c["tasks"] for c in comps))

    def get_topology_names(self) -> list[str]:
        return sorted(super().get_topology_names())

    def get_cluster_info(self) -> dict[str, Any]:
        return {"host": self.host, **super().get_cluster_info()}

    def is_idle(self, name: str) -> bool:
        """True when every task of ``name`` has reported, its last heartbeats show empty inboxes,
        and its counts (emitted, transferred, acked, failed, executed, the ackers' executed)
        have not moved for `SETTLE_HEARTBEATS` heartbeat periods.

        Weaker than LocalCluster's (which sees every loop asleep): a tuple that sat unseen
        between two inboxes for that long would be missed. Counts only move forward while
        anything flows, so a topology still working is never reported idle.
        """
        info = self.get_topology_info(name)
        comps = info["components"].values()
        reported = self._all_tasks_reported(info)
        counts = (tuple((c["emitted"], c["transferred"], c["acked"], c["failed"], c["executed"]) for c in comps),
                  info["acker"]["executed"], reported)
        now = time.monotonic()
        last, since = self._still.get(name, (None, now))
        if counts != last:
            self._still[name] = (counts, now)
            return False
        return reported and not sum(c["backlog"] for c in comps) and now - since >= SETTLE_HEARTBEATS * HEARTBEAT_SECS

    def shutdown(self) -> None:
        """What a test's ``shutdown`` means on a shared host: its topologies are killed (the
        host itself stays up for the next test)."""
        self.clear()

    def clear(self) -> None:
        """Kill every topology at once and wait until their workers are gone."""
        for t in self.list_topologies():
            try:
                self.kill_topology(t["name"], wait_secs=0)
            except Exception:  # noqa: BLE001 - removed meanwhile
                pass
        assert wait_until(lambda: not self.list_topologies() and self._slots_free(), 30), \
            f"the {self.host} host did not free its slots after the test"
