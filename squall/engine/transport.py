"""The seam between workers: how an item reaches a task that lives in another worker.

The engine only asks a `Transport` for a sender per remote task. `InMemoryTransport` (for
`LocalCluster`) hands items straight to the worker that currently hosts the task; the process
and Spark hosts send batches over ZeroMQ.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any


class Transport(abc.ABC):
    """Delivers items (tuples and acker messages) to tasks of other workers."""

    @abc.abstractmethod
    def sender(self, task_id: int) -> Callable[[Any], None]:
        """A function that delivers one item to ``task_id``, wherever it runs now."""

    def flush(self) -> None:
        """Send what the senders have batched. Loops call it after every round that did work
        and before they sleep, so a batch never waits longer than one round."""


class InMemoryTransport(Transport):
    """For workers in one process: deliver by calling the hosting worker's ``receive``.

    ``hosts`` maps task id to the worker object currently running it (or None while that worker
    restarts, when items are dropped as a dead worker's would be). It is looked up per item, so
    a restarted worker is found without rebuilding anyone's routes.
    """

    def __init__(self, hosts: dict[int, Any]) -> None:
        self.hosts = hosts

    def sender(self, task_id: int) -> Callable[[Any], None]:
        hosts = self.hosts

        def send(item: Any) -> None:
            worker = hosts.get(task_id)
            if worker is not None:
                worker.receive(task_id, item)
        return send
