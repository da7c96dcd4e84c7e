"""The features that register on the builder's and the engine's extension points, loaded by every
module that plans or runs a topology: the master (`master`), the worker processes
(`worker_process`, `spark_task`) and LocalCluster's in-process workers (`inprocess`).

``import squall`` does not load them (its names load at their first use), nor does the package
``squall.cluster``: a client of a running master (``squall list``, ``squall kill``, `MasterClient`)
imports ``squall.cluster.client`` and needs none of them, nor the engine they pull in (about
half of what ``squall list`` imported before). What they register: the metrics' consumers,
timers and records (`squall.metric`), the stateful and windowed bolts' executors
(`squall.state`, `squall.windowing`).
"""

from .. import metric, state, windowing

__all__ = ["metric", "state", "windowing"]  # loaded for what they register at import
