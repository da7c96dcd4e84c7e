"""The launcher seam: how a supervisor starts, stops and watches the workers of its slots.

A supervisor (`squall.cluster.supervisor.Supervisor`) is one loop for every host: it asks the
master which launch each of its slots must run and makes its `Launcher` match. The launcher is
all that differs between hosts:

- `squall.cluster.process_launcher.ProcessLauncher` (the process host): a worker is a
  ``python -m squall.worker`` process;
- `squall.cluster.spark.SparkLauncher`: a worker is a long-running Spark task;
- `squall.cluster.inprocess.InProcessLauncher` (`LocalCluster`): a worker is a set of threads in
  this process.

Each knows the slots it offers, starts a worker for a `Launch`, stops one (cleanly, within a
bounded time; a stopped worker's end is not an exit to report: it was asked to go), and reports
the workers that ended on their own (`WorkerExit`). The process launcher can also start a
worker again while no master answers (`Launcher.resume`), from what its last worker kept.
Secrets go only where a launcher needs them:
the process launcher writes the cluster's configuration, secret included, to an owner-only file
its worker processes read; the others hand workers what they need in memory.
"""

from __future__ import annotations

import abc

from .._nimbus import Launch, WorkerExit  # the records of the master's supervisor_sync

__all__ = ["Launch", "Launcher", "WorkerExit"]


class Launcher(abc.ABC):
    """Starts, stops and watches the workers of one supervisor's slots; see the module docstring."""

    host: str  # the slots' host part, and the address peers reach workers at where it matters
    resumes = False  # whether `resume` can start a worker without its master

    @abc.abstractmethod
    def slots(self) -> list[int]:
        """The ports of the slots offered now (may grow, never shrinks while workers run)."""

    @abc.abstractmethod
    def start(self, port: int, launch: Launch) -> None:
        """Start a worker on ``port`` for ``launch``; returns once it is under way."""

    @abc.abstractmethod
    def stop(self, port: int) -> None:
        """Stop ``port``'s worker, cleanly if it can within a bounded time; no exit is reported."""

    @abc.abstractmethod
    def running(self) -> dict[int, Launch]:
        """The launch each busy port runs (ended workers not yet reported by `exits` included)."""

    @abc.abstractmethod
    def exits(self) -> list[WorkerExit]:
        """Workers that ended on their own since the last call, each reported once."""

    def resume(self, port: int, launch: Launch, resumes: int) -> bool:
        """Start ``port``'s worker of ``launch`` again without the master (its ``resumes``-th
        local restart, while no master answers: `squall.cluster.local_assignment`); False if
        this host cannot (the default: its workers need the master to start)."""
        return False

    def watch(self) -> None:
        """Look at the running workers once (the supervisor calls it at every sync); the process
        launcher dumps the stacks of a worker that runs no Python (`squall.cluster.stall_watch`)."""

    def stop_all(self) -> None:
        """Stop every worker (the supervisor is stopping)."""
        for port in list(self.running()):
            self.stop(port)
