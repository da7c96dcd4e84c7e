"""What a thread waits for outside its process, for the report of a call that does not return.

The worker's watchdog (`squall.engine.worker.Worker.report_stuck`) reports a call into a
component that has not returned within the message timeout as user code "stuck?". A call that
waits for the master (a Trident coordinator's or spout's save to the transactional state,
`squall._transactional.MasterBackend`, tried again while no master answers: a partition, a
Nimbus HA failover, a master down) is not stuck in the user's code: its report names the
master and the request instead, where the user looks for the cause."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# thread ident -> what it waits for; each entry written by its own thread only (a dict's item
# assignment and pop are atomic), read by the watchdog's
_waiting: dict[int, Callable[[], str]] = {}


@contextmanager
def waiting_for(what: Callable[[], str]) -> Iterator[None]:
    """Note that this thread waits for what ``what`` says when asked (``the master at
    10.0.0.1:6627 (trident_state_write)``: asked then, it names the master called now, after a
    failover the new leader) until the block ends; a block inside another keeps the outer note."""
    ident = threading.get_ident()
    if ident in _waiting:
        yield
        return
    _waiting[ident] = what
    try:
        yield
    finally:
        _waiting.pop(ident, None)


def waited_for(ident: int | None) -> str | None:
    """What thread ``ident`` waits for now (`waiting_for`), or None."""
    what = None if ident is None else _waiting.get(ident)
    return None if what is None else what()
