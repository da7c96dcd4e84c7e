"""Backpressure across workers: a worker's own `Backpressure` linked to its peers' through its
`Transport`, the same way on every host (`LocalCluster`'s in-process workers, the process and
Spark hosts' worker processes).

Each worker's `Backpressure` sees only its own inboxes. `BackpressureLink` tells the peers when
this worker goes over or under its bound (``{"over": bool}``, `Transport.broadcast`), records
what the peers say (`Backpressure.set_remote`, under the slot the transport vouches for, so a
spout is throttled while any worker of its topology is over), and every
`Backpressure.RENEW_SECS` forgets the peers' "over" not renewed and repeats its own while it
lasts: a lost "under", or a peer that died while over, throttles the spouts for a few seconds
at most.
"""

from __future__ import annotations

import threading
from typing import Any

from .loop import Backpressure
from .transport import ControlHandler, Transport


def backpressure_message(over: bool) -> dict[str, bool]:
    """The control message saying whether a worker is over its bound."""
    return {"over": over}


def over_of(message: Any) -> bool:
    """The state a peer's backpressure message reports.

    Raises:
        TypeError: ``message`` is not a backpressure message (the transport drops it).
    """
    if not isinstance(message, dict) or not isinstance(message.get("over"), bool):
        raise TypeError(f"not a backpressure message: {message!r:.80}")
    return message["over"]


class BackpressureLink:
    """Links ``backpressure`` to the peers reached by ``transport`` until `stop`; see the module
    docstring. Control messages other than backpressure's go to ``others`` (if given). Starts a daemon thread (``name``) that renews and expires every
    `Backpressure.RENEW_SECS` of real time."""

    def __init__(self, backpressure: Backpressure, transport: Transport,
                 name: str = "squall-backpressure", others: ControlHandler | None = None) -> None:
        self.backpressure = backpressure
        self.transport = transport
        self._others = others  # the control messages that are not about backpressure
        self._done = threading.Event()
        backpressure.listener = self._flipped
        transport.set_control_handler(self._heard)
        self._thread = threading.Thread(target=self._renew, name=name, daemon=True)
        self._thread.start()

    def _flipped(self, over: bool) -> None:
        self.transport.broadcast(backpressure_message(over))

    def _heard(self, sender: Any, message: Any) -> None:
        if self._others is not None and not (isinstance(message, dict) and "over" in message):
            self._others(sender, message)
            return
        self.backpressure.set_remote(sender, over_of(message))

    def _renew(self) -> None:
        bp = self.backpressure
        while not self._done.wait(bp.RENEW_SECS):
            bp.expire()
            if bp.over:
                self.transport.broadcast(backpressure_message(True))

    def stop(self, timeout: float = 2.0) -> None:
        """Stop renewing and telling the peers (call after the worker stopped, so that the
        "under" of its inboxes it forgot on stopping reaches them first)."""
        self._done.set()
        if self.backpressure.listener == self._flipped:
            self.backpressure.listener = None
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
