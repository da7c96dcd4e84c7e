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

from .._native import PendingTreeBase
from .rotating_map import RotatingMap

# Messages to the acker: (kind, root, value, spout_task). value is unused for RESET; for FAIL it
# is the failure's cause (`squall.FailureCause.wire`, a plain tuple; anything else: no cause).
# spout_task is -1 except for INIT.
INIT = 0
ACK = 1
FAIL = 2
RESET = 3

# Replies to the spout task: (kind, root, delta_secs); FAILED carries the tree's cause (the first
# FAIL's, or None) in delta's place, which the spout does not use for a failure.
ACKED = 1
FAILED = 2
RESET_TIMEOUT = 3


class PendingTree(PendingTreeBase):
    """What the acker knows of one spout tuple's tree until it completes, fails or expires:

    - ``xor``: the xor of the edge ids seen so far; 0 once every edge created is acked;
    - ``spout_task``: the spout task to answer; -1 until the init tells it;
    - ``start``: when the root's first message arrived (the latency the spout is told runs from it);
    - ``failed``: a bolt failed the tree (perhaps before the init arrived);
    - ``reset``: a bolt asked to reset the tree's timeout; answered once the init is seen;
    - ``cause``: why it failed, as the first FAIL told it (None: not told).

    Mutable, one per root, updated in place by every message of its root. ``__slots__`` keeps it
    as small and as fast to read and write as the 5-item list it replaced. It has no constructor:
    `Acker.update`, which alone makes them, sets the fields itself, because calling an
    ``__init__`` added about 120 ns per spout tuple to the acker's ~850 (measured, Python 3.11).
    """

    __slots__ = ()  # PendingTreeBase holds them (squall._native: C fields when compiled)

    xor: int
    spout_task: int
    start: float
    failed: bool
    reset: bool
    cause: tuple | None


class Acker:
    """Pure xor bookkeeping; see the module docstring."""

    __slots__ = ("pending",)
    tree_type = PendingTree  # what `squall._native.acker_run` makes a new root's entry of

    def __init__(self) -> None:
        self.pending = RotatingMap(3)  # root -> PendingTree

    def update(self, kind: int, root: int, val: int, spout_task: int, now: float):
        """Apply one message; return the reply ``(spout_task, reply_kind, root, delta_secs)``
        or None. A plain tuple, not a NamedTuple: building one cost about 380 ns more per spout
        tuple (measured), and its sender slices the task off and sends the rest on its way."""
        pending = self.pending
        entry = pending.newest.get(root)  # nearly always there: skip the scan of older buckets
        if entry is None:
            entry = pending.get(root)
            if entry is None:  # first message of this root: it is in no bucket
                entry = pending.newest[root] = PendingTree()
                entry.xor = 0
                entry.spout_task = -1
                entry.start = now
                entry.failed = entry.reset = False
                entry.cause = None
        if kind == ACK:
            entry.xor ^= val  # updated in place: an ack does not refresh the entry's expiry (Storm)
        elif kind == INIT:
            entry.xor ^= val
            entry.spout_task = spout_task
        elif kind == FAIL:
            entry.failed = True
            if entry.cause is None and type(val) is tuple:  # the first cause told is the one kept
                entry.cause = val
            pending.put(root, entry)
        elif kind == RESET:
            entry.reset = True
            pending.put(root, entry)
        task = entry.spout_task
        if task < 0:
            return None  # init not seen yet: an ack or fail overtook it
        if entry.xor == 0:
            pending.remove(root)
            return (task, ACKED, root, now - entry.start)
        if entry.failed:
            pending.remove(root)
            return (task, FAILED, root, entry.cause)
        if entry.reset:
            entry.reset = False
            return (task, RESET_TIMEOUT, root, now - entry.start)
        return None

    def rotate(self) -> int:
        """Expire the oldest bucket (called every message timeout); returns how many dropped."""
        return len(self.pending.rotate())

    def __len__(self) -> int:
        return len(self.pending)
