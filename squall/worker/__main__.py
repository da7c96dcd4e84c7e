"""``python -m squall.worker``: a worker process of the process host, whose supervisor starts it
so. Its main is the host's, `squall.cluster.worker_process.main`, run by its `entry`, which
ends the process at once with main's status, whatever threads user code left running: this
entry point is the one module of `squall.worker` that imports the cluster layer, and nothing
imports it (docs/architecture.md)."""

from ..cluster.worker_process import entry

entry()
