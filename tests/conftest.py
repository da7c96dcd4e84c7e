"""Shared test helpers: polling with a deadline instead of fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(pred: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass; return its last truth value.

    Use it as ``assert wait_until(lambda: tracker.is_acked(1))`` for things that must happen,
    and as ``assert not wait_until(lambda: tracker.is_failed(1), 1.0)`` for things that must
    not happen within a window.
    """
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return bool(pred())
        time.sleep(interval)
