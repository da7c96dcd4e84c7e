"""The acker: tracks each spout tuple's tree with one xor per root (Storm's ``Acker``).

Why xor works: every edge of a tuple tree gets a random 64-bit id. The id enters the root's
value twice: once when the edge is created (the spout's init, or the parent's ack, which carries
the xor of the children it anchored) and once when the child is acked. x ^ x = 0, so the value
returns to 0 exactly when every edge created has also been acked, whatever the order, with a
chance of a false zero of about 2^-64 per update. This is why the tracking costs O(1) per spout
tuple however big its tree is.

Why order does not matter: an ack may arrive before its init (they travel different paths); the
entry is created by whichever comes first, and completion is only declared once the init has
told us the spout task. A fail before the init is likewise remembered and reported once the init
arrives.

The `Acker` is a pure object: it takes a message and returns the reply to send to the spout
task, or None. Its pending map is rotated by the owner every message timeout; entries that
expire are dropped silently, because the spout times the tuple out on its own.
"""

from __future__ import annotations

from .rotating_map import RotatingMap

# Messages to the acker: (kind, root, value, spout_task). value is unused for FAIL and RESET,
# spout_task is -1 except for INIT.
INIT = 0
ACK = 1
FAIL = 2
RESET = 3

# Replies to the spout task: (kind, root, delta_secs).
ACKED = 1
FAILED = 2
RESET_TIMEOUT = 3


class Acker:
    """Pure xor bookkeeping; see the module docstring."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        # root -> [xor value, spout task (-1 until init), start time, failed, reset requested]
        self.pending = RotatingMap(3)

    def update(self, kind: int, root: int, val: int, spout_task: int, now: float):
        """Apply one message; return ``(spout_task, reply_kind, root, delta_secs)`` or None."""
        pending = self.pending
        entry = pending.newest.get(root)  # nearly always there: skip the scan of older buckets
        if entry is None:
            entry = pending.get(root)
            if entry is None:  # first message of this root: it is in no bucket
                entry = pending.newest[root] = [0, -1, now, False, False]
        if kind == ACK:
            entry[0] ^= val  # updated in place: an ack does not refresh the entry's expiry (Storm)
        elif kind == INIT:
            entry[0] ^= val
            entry[1] = spout_task
        elif kind == FAIL:
            entry[3] = True
            pending.put(root, entry)
        elif kind == RESET:
            entry[4] = True
            pending.put(root, entry)
        task = entry[1]
        if task < 0:
            return None  # init not seen yet: an ack or fail overtook it
        if entry[0] == 0:
            pending.remove(root)
            return (task, ACKED, root, now - entry[2])
        if entry[3]:
            pending.remove(root)
            return (task, FAILED, root, now - entry[2])
        if entry[4]:
            entry[4] = False
            return (task, RESET_TIMEOUT, root, now - entry[2])
        return None

    def rotate(self) -> int:
        """Expire the oldest bucket (called every message timeout); returns how many dropped."""
        return len(self.pending.rotate())

    def __len__(self) -> int:
        return len(self.pending)
