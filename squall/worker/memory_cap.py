"""`MemoryCap`: a worker process's cap on its own resident memory, Storm's worker heap.

Storm caps each worker's heap (``-Xmx`` from ``worker.heap.memory.mb``; the resource-aware
scheduler's ``topology.worker.max.heap.size.mb``): a bolt that leaks dies of OutOfMemoryError, its
supervisor restarts the worker and its tuples fail back, rather than the machine's OOM killer
picking a victim (the master, a supervisor, another topology's worker). A Python worker has no
heap limit, so the worker watches its resident set size (``/proc/self/statm``) once a second
instead, on its agent's loop (`squall.worker.agent.WorkerAgent`), and past the cap reports an
error and exits with `EXIT_OVER_MEMORY`: the master takes it for a crash.

Only where each worker is a process of its own: the process host and Spark, not LocalCluster.
There is no default cap (a Python worker's size varies too much for Storm's 768 MB): only a key
set caps. The cluster's ``worker.heap.memory.mb`` (squall.yaml) caps every worker, a topology's
``topology.worker.max.heap.size.mb`` its own; with both, the lower applies (both are limits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._config import MEMORY_CAP_KEYS, Config, setting

EXIT_OVER_MEMORY = 4  # a worker's exit status past its cap (1: user code crashed; 3: it could not start)
CHECK_SECS = 1.0  # how often a worker reads its resident size
MIB = 1 << 20


class MemoryCap:
    """The decision alone, fed readings: `due` says when to read, `exceeded` whether a reading
    (bytes resident) is past the cap. One reading past it is enough, as a JVM fails the first
    allocation past ``-Xmx``."""

    def __init__(self, limit_mb: float, key: str, period: float = CHECK_SECS) -> None:
        self.limit_mb = limit_mb
        self.limit_bytes = int(limit_mb * MIB)
        self.key = key
        self.period = period
        self._next = float("-inf")

    @classmethod
    def of(cls, cluster: Mapping[str, Any], topology: Mapping[str, Any]) -> MemoryCap | None:
        """The cap of a worker of the cluster (``cluster``: its configuration) running a topology
        (``topology``: the plan's); None when neither key is set.

        Raises:
            InvalidTopologyException: a key's value is not a positive number (naming it).
        """
        caps = []
        for key, conf, where in ((Config.WORKER_HEAP_MEMORY_MB, cluster, "cluster configuration"),
                                 (Config.TOPOLOGY_WORKER_MAX_HEAP_SIZE_MB, topology, "topology configuration")):
            assert key in MEMORY_CAP_KEYS
            value = setting(conf, key, None, where=where)
            if value is not None:
                caps.append((float(value), key))
        if not caps:
            return None
        limit, key = min(caps, key=lambda c: c[0])  # equal caps: the cluster's, listed first
        return cls(limit, key)

    def due(self, now: float) -> bool:
        """Whether a reading is due at ``now`` (monotonic seconds)."""
        return now >= self._next

    def exceeded(self, now: float, rss_bytes: int) -> bool:
        """Take the reading ``rss_bytes`` made at ``now``: whether it is past the cap."""
        self._next = now + self.period
        return rss_bytes > self.limit_bytes

    def message(self, slot: str, rss_bytes: int, fullest: tuple[str, int] | None = None) -> str:
        """The error a worker on ``slot`` reports past its cap; ``fullest``: the component whose
        tasks hold the most items in the worker's inboxes, and how many."""
        text = (f"worker on {slot} exceeded its memory cap: {rss_bytes / MIB:.0f} MB resident, over the "
                f"{self.limit_mb:g} MB of {self.key}; it exits (status {EXIT_OVER_MEMORY}) and is restarted, "
                f"and the tuples it held are replayed")
        if fullest is not None and fullest[1] > 0:
            text += f" (most items waiting in its inboxes: component [{fullest[0]}], {fullest[1]})"
        return text
