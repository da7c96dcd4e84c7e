"""A process-wide registry, so test helpers survive being copied.

squall copies components per task (it pickles them), so a `FeederSpout` fed by a test, or a
tracker a test holds, would otherwise be a different object in each task. Helpers keep their
state here under an id and pickle as that id, as Storm's testing classes do with their static
maps. Copies in the same process therefore share the state.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

_lock = threading.RLock()
_state: dict[str, Any] = {}


def register(value: Any) -> str:
    """Keep ``value`` under a new id and return the id."""
    key = uuid.uuid4().hex
    with _lock:
        _state[key] = value
    return key


def lookup(key: str) -> Any:
    """The value kept under ``key``."""
    with _lock:
        try:
            return _state[key]
        except KeyError:
            raise LookupError(f"squall.testing: no shared state {key!r} in this process (a test helper "
                              f"only works in the process that made it)") from None


def lock() -> threading.RLock:
    """The registry's lock, for read-modify-write of shared state."""
    return _lock
