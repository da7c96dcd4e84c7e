"""`RotatingMap`: a map whose entries expire in bulk when its owner rotates it (Storm's).

It keeps ``n`` buckets (dicts), newest first. ``put`` writes to the newest bucket; ``rotate``
drops the oldest and returns (and passes to ``expire``) what it held. Rotated every T seconds,
an entry that is not re-put expires between T·(n−1) and T·n after it was put: with the spout's
2 buckets, a tuple times out between T and 2T; with the acker's 3, between 2T and 3T.

Costs: ``put`` and ``remove`` touch every bucket (n is 2 or 3), ``get`` scans newest first,
``rotate`` is O(expired entries), ``remove_if`` O(entries). Not thread-safe: its owner drives
it from one thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class RotatingMap:
    """A map of ``n`` buckets that its owner rotates; see the module docstring."""

    __slots__ = ("_buckets", "_expire", "newest")

    def __init__(self, num_buckets: int = 3, expire: Callable[[Any, Any], None] | None = None) -> None:
        if num_buckets < 2:
            raise ValueError("num_buckets must be >= 2")
        self._buckets: list[dict] = [{} for _ in range(num_buckets)]
        self._expire = expire
        self.newest = self._buckets[0]  # read-only view for hot paths that look there first

    def put(self, key: Any, value: Any) -> None:
        """Store ``key`` in the newest bucket (removing it from older ones)."""
        buckets = self._buckets
        buckets[0][key] = value
        for b in buckets[1:]:
            b.pop(key, None)

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        for b in self._buckets:
            if key in b:
                return b[key]
        return default

    def __contains__(self, key: Any) -> bool:
        return any(key in b for b in self._buckets)

    def contains_key(self, key: Any) -> bool:
        """True if ``key`` is present."""
        return key in self

    def remove(self, key: Any) -> Any:
        """Remove ``key`` and return its value (None if absent)."""
        for b in self._buckets:
            if key in b:
                return b.pop(key)
        return None

    def remove_if(self, predicate: Callable[[Any, Any], bool]) -> list[tuple[Any, Any]]:
        """Remove every entry for which ``predicate(key, value)`` holds; return them. O(size)."""
        out = []
        for b in self._buckets:
            gone = [(k, v) for k, v in b.items() if predicate(k, v)]
            for k, _v in gone:
                del b[k]
            out += gone
        return out

    def __len__(self) -> int:
        return sum(map(len, self._buckets))

    def size(self) -> int:
        """Number of entries."""
        return len(self)

    def rotate(self) -> dict:
        """Drop the oldest bucket, calling ``expire(key, value)`` for each entry; return it."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        self.newest = self._buckets[0]
        if self._expire is not None:
            for k, v in dead.items():
                self._expire(k, v)
        return dead


class TimeCacheMap(RotatingMap):
    """Storm's ``TimeCacheMap``: a `RotatingMap` of 3 buckets rotated by time, so that an entry
    not put again expires between ``expiration_secs`` and 1.5 times that after it was put.

    Storm's rotates on a cleaner thread of its own; this one is rotated by its owner's calls to
    `expire_due` (a thread of its own would need a lock on every call), on the clock ``now``
    (monotonic seconds). A component calls it from a timer of the engine's (``squall_timers``,
    every `period` seconds: `CoordinatedBolt`, `JoinResult`), so that entries expire on time
    even when no tuple comes, and may call it as tuples come too."""

    __slots__ = ("_next", "_now", "_period")

    BUCKETS = 3

    def __init__(self, expiration_secs: float, expire: Callable[[Any, Any], None] | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        super().__init__(self.BUCKETS, expire)
        self._now = now
        self._period = max(float(expiration_secs), 0.001) / (self.BUCKETS - 1)
        self._next = now() + self._period

    @property
    def period(self) -> float:
        """Seconds between rotations (half the expiration): how often `expire_due` is worth calling."""
        return self._period

    def use_clock(self, now: Callable[[], float]) -> None:
        """Rotate on the clock ``now`` from here on (the engine's, handed over once the owner is
        prepared: a simulated one in tests); the next rotation is a period from now."""
        self._now = now
        self._next = now() + self._period

    def expire_due(self) -> None:
        """Rotate once for every period that has passed since the last rotation (at most once
        per bucket: after that many every entry has expired, however long the gap was)."""
        now = self._now()
        if now < self._next:
            return
        due = int((now - self._next) // self._period) + 1
        self._next += due * self._period
        for _ in range(min(due, self.BUCKETS)):
            self.rotate()
