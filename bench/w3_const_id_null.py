"""W3 const-id-null (Storm's storm-perf ConstSpoutIdBoltNullBoltTopo).

    spout (ConstSpout) --local_or_shuffle--> bolt1 (IdBolt) --local_or_shuffle--> bolt2 (DevNullBolt)

The components, the measurement and the baseline are shared with W2; see `bench.w2_const_null`.
"""

from __future__ import annotations

from typing import Any

from .w2_const_null import DEFAULT_MAX_PENDING, baseline_w3, run as _run

__all__ = ["run", "baseline_w3"]


def run(acking: bool = True, secs: float = 30.0, warmup: float = 10.0,
        max_pending: int = DEFAULT_MAX_PENDING, host: str = "local", workers: int = 1,
        parallelism: int | None = None) -> dict[str, Any]:
    """One W3 run (LocalCluster, or the process host with ``workers`` workers) and its
    baseline; returns the record."""
    return _run("W3", acking, secs, warmup, max_pending, host, workers, parallelism)
