"""The inputs a plain bolt of a stateful topology holds that nothing would replay, and the
checkpoints waiting behind them (`CheckpointTupleForwarder`).

Storm's ``CheckpointTupleForwarder`` passes a checkpoint on as soon as it has come from every
input task. squall does too, except behind an input that may carry a persistent window's result,
emitted unanchored (its inputs are acked at the commit), or a tuple descending from one
(`squall.state._lineage`). If a sink that writes in the
background let a PREPARE past before writing such a result, the commit recorded the window as
fired while the result could still die with the sink's worker, and nothing would ever emit it
again. So a checkpoint waits until the bolt has acked or failed each such input given to it
before the checkpoint. An input in a spout's tree needs no wait: lost, it times out or fails and
its spout replays it, as in Storm.

Holding every input instead stalled a common shape for good: a spout that paces itself on its
acks (``topology.max.spout.pending``, or a source that emits once earlier records are acked) ->
a bolt that batches (keeps its inputs until it has N) -> a stateful bolt. The PREPARE waited for
the batch, the batch for inputs, the spout for acks, and the acks for a commit: 60 of 1,000
records emitted, none committed, in 20 s.

A bolt that keeps such an input for good still holds every checkpoint behind it; that one is
reported (`HeldCheckpoint`) once it has waited long enough (`squall.state._bolt.overdue_bound`),
rather than left silent.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .._tuple import Tuple


@dataclass(frozen=True)
class HeldCheckpoint:
    """A checkpoint held at a bolt for longer than it should be (`InputsInFlight.overdue`)."""

    action: str
    txid: int
    held_secs: float
    inputs_before: int  # inputs given to the bolt before it that it waits for, still open


@dataclass
class _Held:
    upto: int  # the number of inputs given before it: it waits for those
    release: Callable[[bool], None]
    keeps_failure: bool
    action: str
    txid: int
    since: float
    reported: bool = False


class InputsInFlight:
    """The inputs in no spout's tree a forwarded bolt was given and has not acked or failed yet,
    and the checkpoints held behind them. Thread-safe: a bolt may ack from a thread of its own (a
    sink that writes in the background acks each tuple once written).

    ``now``: the clock (seconds) that times how long a checkpoint was held."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._arrived = 0  # inputs given to the bolt so far; an input's number is its place
        self._open: dict[int, tuple[int, Tuple]] = {}  # id(input) -> (its number, it)
        self._failed_since_checkpoint = False
        self._held: deque[_Held] = deque()

    def timed_by(self, now: Callable[[], float]) -> None:
        """Time the checkpoints held from now on by ``now``: the engine's clock, once it hands
        it over (`CheckpointTupleForwarder.squall_timers`), before the first input. Timed by real
        time while the timer that reports them ran on a simulated clock, a checkpoint held for
        good was never reported however far a test moved time."""
        self._now = now

    def given(self, tup: Tuple) -> None:
        """``tup`` (one that may carry a persistent window's result) is handed to the bolt."""
        with self._lock:
            self._open[id(tup)] = (self._arrived, tup)
            self._arrived += 1

    def settled(self, tup: Tuple, failed: bool) -> None:
        """The bolt acked (or failed) ``tup``: pass on the checkpoints no longer behind an input.
        A tuple never `given` (one in a spout's tree) is ignored."""
        with self._lock:
            if self._open.pop(id(tup), None) is None:
                return  # acked twice, or not an input held for (one in a spout's tree)
            # it is lost with its failure: nothing replays it, so the PREPARE after it fails
            self._failed_since_checkpoint |= failed
            self._release()

    def hold(self, release: Callable[[bool], None], *, action: str, txid: int,
             keeps_failure: bool = False) -> bool:
        """A checkpoint ``(action, txid)`` arrived: call ``release(failed)`` once every input
        given before it is settled (at once if none is open); ``failed`` says whether an input
        was failed since the last PREPARE or ROLLBACK was released (one given after this
        checkpoint may count too: a PREPARE failed for it only costs a rollback, never a
        result). A COMMIT or an INITSTATE (``keeps_failure``) leaves the failure for the PREPARE
        that follows: a window's result failed after the last PREPARE passed belongs to the
        next transaction, and the INITSTATE that recovers a restarted task after a worker died
        changes nothing in the live tasks, whose windows fired meanwhile. (Cleared by that
        INITSTATE, the failure of the results a live window fired as the worker died let the
        next PREPARE through: the commit recorded the windows as fired, their results lost.)

        Returns True if the checkpoint waits (an input given before it is still open), False if
        it was released at once."""
        with self._lock:
            held = _Held(self._arrived, release, keeps_failure, action, txid, self._now())
            self._held.append(held)
            self._release()
            return bool(self._held) and self._held[-1] is held

    def overdue(self, after_secs: float) -> HeldCheckpoint | None:
        """The oldest checkpoint held here, if it has waited ``after_secs`` or more and was not
        returned before (each is returned once); else None."""
        with self._lock:
            if not self._held or self._held[0].reported:
                return None
            oldest = self._held[0]
            waited = self._now() - oldest.since
            if waited < after_secs:
                return None
            oldest.reported = True
            before = sum(1 for n, _t in self._open.values() if n < oldest.upto)
            return HeldCheckpoint(oldest.action, oldest.txid, waited, before)

    def _release(self) -> None:
        oldest = min((n for n, _t in self._open.values()), default=self._arrived)
        while self._held and self._held[0].upto <= oldest:
            held = self._held.popleft()
            failed = self._failed_since_checkpoint
            if not held.keeps_failure:
                self._failed_since_checkpoint = False
            held.release(failed)
