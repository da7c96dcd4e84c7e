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

    address: str = ""  # where peers reach this worker

    def set_receiver(self, receive: Callable[[int, Any], None]) -> None:
        """Where arriving items go: ``receive(task, item)`` (the worker's)."""

    def set_peers(self, peers: dict[int, str]) -> None:
        """The address of the worker hosting each remote task (new tasks, or peer moves)."""

    def set_launches(self, launches: dict[str, int]) -> None:
        """The master's launch id per slot: messages from older launches are dropped."""

    def set_control_handler(self, handle: Callable[[str, Any], None]) -> None:
        """Where control messages go: ``handle(sender slot, message)``."""

    def broadcast(self, message: Any) -> None:
        """Send a small control message (backpressure) to every peer worker."""

    def statistics(self) -> dict[str, Any]:
        """What was dropped or refused, for the worker's heartbeat."""
        return {}

    def close(self) -> None:
        """Stop receiving and let go of the connections."""


class InMemoryNetwork:
    """The wire between one topology's in-process workers: their transports by address."""

    def __init__(self) -> None:
        self.endpoints: dict[str, InMemoryTransport] = {}


class InMemoryTransport(Transport):
    """For workers in one process: deliver by calling the receiving worker's ``receive``.

    The receiving endpoint is looked up per item by the task's peer address, so a worker that
    restarted under that address is found without rebuilding anyone's routes; items for an
    address no worker holds are dropped, as a dead worker's would be.
    """

    def __init__(self, network: InMemoryNetwork, address: str) -> None:
        self.network = network
        self.address = address
        self._receive: Callable[[int, Any], None] | None = None
        self._control: Callable[[str, Any], None] | None = None
        self._peers: dict[int, str] = {}
        network.endpoints[address] = self

    def sender(self, task_id: int) -> Callable[[Any], None]:
        endpoints, peers = self.network.endpoints, self._peers

        def send(item: Any) -> None:
            peer = endpoints.get(peers.get(task_id))  # type: ignore[arg-type]
            if peer is not None and peer._receive is not None:
                try:
                    peer._receive(task_id, item)
                except KeyError:
                    pass  # no longer that worker's task (rebalanced): dropped, as over the network
        return send

    def set_receiver(self, receive: Callable[[int, Any], None]) -> None:
        self._receive = receive

    def set_peers(self, peers: dict[int, str]) -> None:
        self._peers.update(peers)

    def set_control_handler(self, handle: Callable[[str, Any], None]) -> None:
        self._control = handle

    def broadcast(self, message: Any) -> None:
        for address in set(self._peers.values()):
            peer = self.network.endpoints.get(address)
            if peer is not None and peer is not self and peer._control is not None:
                peer._control(self.address, message)

    def statistics(self) -> dict[str, Any]:
        return {"dropped": {}, "refused": 0}

    def close(self) -> None:
        if self.network.endpoints.get(self.address) is self:
            del self.network.endpoints[self.address]
