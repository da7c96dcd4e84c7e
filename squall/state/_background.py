"""`LatestWrites`: writes to the master put on a thread of their own, the latest of each key
only, so that a master away (its calls retried for seconds) never holds up the caller: a file
state's commit (`squall.state.file.LastWrite`), the checkpoint spout's record of its committed
txid (`squall.state.checkpoint`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable


class LatestWrites:
    """Runs each ``put`` given to `put` on a thread of its own, the latest of each key only, in
    the order the keys were first waiting. The thread runs while writes wait, and ends when none
    does. A put logs its own failure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, Callable[[], None]] = {}
        self._running = False

    def put(self, key: Hashable, put: Callable[[], None]) -> None:
        """Run ``put`` soon, unless a later put of ``key`` comes first (then that one only)."""
        with self._lock:
            self._waiting[key] = put
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="squall-state-records", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self._running = False
                    return
                key = next(iter(self._waiting))
                put = self._waiting.pop(key)
            put()
