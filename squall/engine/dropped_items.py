"""Telling the other workers that this one may have lost items on their way to a worker that moved.

When a worker restarts at a new address (a Spark task comes back on another port or executor),
each of its peers learns the new address at its own next heartbeat, up to a heartbeat period
apart. What a peer's transport held for the old address, sent after the old worker's death was
seen (its spouts' replays at the master's notice among it), goes to the new address, as the
process host's next launch at the same address gets it (`squall.engine.transport.Transport.set_peers`):
it is not lost, and nothing fails for it. Before, it was dropped, and the spouts failed again
every tuple pending at the move, the replays the notice had just made included: each tuple
the dead worker lost reached every live branch three times (3,800 emits for 3,000 ids on
Spark). But what the transport may have lost in the move (written into a connection to the old
address that was not seen to break, or held where it cannot be taken back, as ZeroMQ's queue)
the peer's own spouts fail, their pending tuples emitted until then
(`squall.engine.worker.Worker.tasks_lost`); and what it lost may come from another worker's
spout: a tuple emitted by worker C after C learned the move, routed through a bolt in worker B
that had not learned it yet, is lost by B, and C's notice came too early to fail it. It waited
out the message timeout (30 s by default): on Spark, the last kill of the W5 resilience run took
42.7 s to drain, against 0.7 s on the process host, whose workers come back at the same address.

So a worker that may have lost items for moved tasks tells every peer (`Transport.broadcast`,
after the items it queued for that peer), and each peer's spouts fail their pending tuples that
may have reached those tasks, emitted until the message arrives. Whatever B lost left a spout
before B lost it, hence before the message reaches the spout's worker: no clocks are
compared across machines. The worker now at the new address is told too: its spouts' tuples
may have passed through B on their way back to its own tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .transport import Transport

_KEY = "dropped"


def dropped_message(tasks: Iterable[int]) -> dict[str, list[int]]:
    """The control message saying that items for ``tasks`` were dropped."""
    return {_KEY: sorted(int(t) for t in tasks)}


def is_dropped_message(message: Any) -> bool:
    """Whether a control message is a `dropped_message`."""
    return isinstance(message, dict) and _KEY in message


def dropped_tasks(message: Any) -> list[int]:
    """The tasks a `dropped_message` names.

    Raises:
        TypeError: ``message`` is not one (the transport drops it).
    """
    tasks = message.get(_KEY) if isinstance(message, dict) else None
    if not isinstance(tasks, list) or not all(type(t) is int for t in tasks):
        raise TypeError(f"not a dropped-items message: {message!r:.80}")
    return tasks


class DroppedItemsLink:
    """Joins a worker's lost-item notices to its peers' through its transport (see the module
    docstring). ``tasks_lost(tasks, own)`` is the worker's `Worker.tasks_lost`."""

    def __init__(self, tasks_lost: Any, transport: Transport) -> None:
        self.tasks_lost = tasks_lost
        self.transport = transport

    def moved(self, tasks: Iterable[int]) -> None:
        """The workers of ``tasks`` moved and the transport may have lost what it sent them
        (`Transport.set_peers` says which): fail this worker's spouts' tuples that may have been
        in it, and tell the peers."""
        tasks = list(tasks)
        if not tasks:
            return
        self.tasks_lost(tasks)
        self.transport.broadcast(dropped_message(tasks))

    def heard(self, sender: Any, message: Any) -> None:
        """A peer dropped items for the tasks ``message`` names: this worker's spouts fail what
        may have been among them, this worker's own tasks included."""
        self.tasks_lost(dropped_tasks(message), own=True)
