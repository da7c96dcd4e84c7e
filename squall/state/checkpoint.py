"""Storm's checkpoint spout (``CheckpointSpout``, ``CheckPointState``): what drives init-state,
prepare, commit and rollback through every stateful bolt.

`CheckpointProgress` is the protocol as a plain object (time passed in, no I/O): one step in
flight at a time, each a ``(txid, action)`` tuple on stream ``$checkpoint`` whose message id is
the txid. It starts in recovery, which finishes what the last run left: a PREPARING txid is rolled
back, a COMMITTING one committed again, and then INITSTATE hands every stateful bolt its committed
state. Afterwards, every ``topology.state.checkpoint.interval.ms``, PREPARE(txid+1) and, once
every bolt acked it, COMMIT(txid+1). Any failure (a bolt failed the step, or it timed out: a
worker died) sends it back to recovery. Its own ``(txid, phase)`` is saved in a state before
each step, so a restarted spout resumes where it was. `CheckpointSpout` is the spout around it.

Deactivated (``squall deactivate``, or the wait of a rebalance or a kill), it goes on taking
checkpoints for ``topology.message.timeout.secs`` (on a timer of its loop: a deactivated spout's
``next_tuple`` is not called), so that the tuples the stateful bolts took before the spouts
stopped are committed and acked, as the wait is for; later no tuple from before can be pending,
and it starts no step, but still sends the COMMIT of a transaction whose PREPARE went through.
Storm's stops with the other spouts: the tuples since the last commit stay unacked and are
replayed after a rebalance, and a transaction prepared before the stop is committed by the new
workers' recovery while its tuples, never acked, are replayed: counted twice.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._components import Spout
from .._config import Config, conf_value
from .._failure import TIMEOUT, FailureCause
from .._fields import Fields
from .._system import CHECKPOINT_STREAM
from .._transactional import LaunchRefusedError
from ..engine.loop import register_executor_timers
from ._api import StateError
from ._background import LatestWrites
from ._names import PROVIDER_KEY, get_key_value_state

log = logging.getLogger(__name__)

CHECKPOINT_COMPONENT_ID = "$checkpointspout"
CHECKPOINT_STREAM_ID = CHECKPOINT_STREAM  # Storm's CheckpointSpout.CHECKPOINT_STREAM_ID
CHECKPOINT_FIELDS = Fields("txid", "action")
INTERVAL_KEY = Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL
MIN_INTERVAL_MS = 100  # Storm's floor
INACTIVE_TICK_SECS = 0.1
"""How often a deactivated checkpoint spout looks whether to take a step (`CheckpointSpout.inactive_tick`)."""

INITSTATE, PREPARE, COMMIT, ROLLBACK = "INITSTATE", "PREPARE", "COMMIT", "ROLLBACK"
"""The actions (Storm's ``CheckPointState.Action``)."""
COMMITTED, PREPARING, COMMITTING = "COMMITTED", "PREPARING", "COMMITTING"
"""The phases of the spout's own state (Storm's ``CheckPointState.State``)."""
_STATE_KEY = "__state"


class CheckPointState(NamedTuple):
    """The checkpoint spout's own state: the current txid and its phase."""

    txid: int
    phase: str

    def next_state(self, recovering: bool) -> CheckPointState:
        """The state once the step of `next_action` is acked."""
        if self.phase == PREPARING:
            return CheckPointState(self.txid - 1, COMMITTED) if recovering else CheckPointState(self.txid, COMMITTING)
        if self.phase == COMMITTING:
            return CheckPointState(self.txid, COMMITTED)
        return self if recovering else CheckPointState(self.txid + 1, PREPARING)

    def next_action(self, recovering: bool) -> str:
        """The action this state asks for."""
        if self.phase == PREPARING:
            return ROLLBACK if recovering else PREPARE
        if self.phase == COMMITTING:
            return COMMIT
        return INITSTATE if recovering else PREPARE


INITIAL = CheckPointState(-1, COMMITTED)


STALL_WARN_AFTER = 3
"""Steps in a row that time out before the checkpoint spout says why no checkpoint goes through
(`CheckpointSpout.fail_with`); then again each time that count doubles."""


class CheckpointStalled(StateError):
    """Checkpoints time out again and again: every step waits in a bolt's inbox behind more
    tuples than it works off within the message timeout. Reported, not raised."""


class StateLost(StateError):
    """The state store no longer holds what the checkpoint spout saved in it: it lost committed
    state (a Redis restarted without persistence, flushed, or restored from an older snapshot)."""


def _committed_floor(state: CheckPointState) -> int:
    """The txid every stateful bolt has committed when the spout's saved state is ``state`` (a
    COMMITTING txid's prepares are saved before it, so its commit can be done again)."""
    return state.txid - 1 if state.phase == PREPARING else state.txid


def _said(state: CheckPointState | None) -> str:
    return "no checkpoint state" if state is None else f"txid {state.txid} {state.phase}"


def _marks(context: Any, namespace: str) -> tuple[Any, str]:
    """The topology's transactional state the spout records its last committed txid in (outside
    the state store, so a store that comes back empty is told from a first start), and its key;
    (None, key) where the host lends none."""
    key = "txid/" + re.sub(r"[^A-Za-z0-9_.-]", "_", namespace)
    try:
        return context.transactional_state("checkpoint"), key
    except Exception:  # noqa: BLE001 (a context without a host: a hand-made one in a test)
        return None, key


class CheckpointProgress:
    """The checkpoint protocol; see the module docstring. ``save`` persists the state (it is
    called before the step that needs it is emitted)."""

    def __init__(self, state: CheckPointState, interval_secs: float, save: Callable[[CheckPointState], None]) -> None:
        self.state = state
        self.interval = interval_secs
        self._save = save
        self.recovering = True
        self.in_progress = False
        self._last_checkpoint = float("-inf")
        self._paused_until = float("-inf")

    def _set(self, state: CheckPointState) -> None:
        self._save(state)
        self.state = state

    def next_step(self, now: float) -> tuple[int, str] | None:
        """The ``(txid, action)`` to emit now, or None (a step is in flight, or it is not time)."""
        if self.in_progress or now < self._paused_until:
            return None
        if self.recovering:
            action = self.state.next_action(True)
        elif self.state.phase != COMMITTED or now - self._last_checkpoint >= self.interval:
            if self.state.phase == COMMITTED:
                self._set(self.state.next_state(False))
                self._last_checkpoint = now
            action = self.state.next_action(False)
        else:
            return None
        self.in_progress = True
        return self.state.txid, action

    def acked(self, txid: int) -> None:
        """The step with ``txid`` went through every stateful bolt."""
        if txid == self.state.txid:
            nxt = self.state.next_state(self.recovering)
            if self.recovering and nxt == self.state:
                self.recovering = False  # INITSTATE went through: recovery is over
            else:
                self._set(nxt)
        else:
            log.warning("checkpoint ack of txid %s while at %s", txid, self.state)
        self.in_progress = False

    def failed(self, txid: int, now: float | None = None) -> None:
        """The step with ``txid`` failed or timed out: recover, at once after a step of the
        protocol, an interval after ``now`` after a step of the recovery itself (a rollback or
        INITSTATE that failed again, say refused by a store that fenced this worker off: tried
        again at once, it failed in a loop that kept a core busy until the master was heard)."""
        if self.recovering and now is not None:
            self.pause(now)
        self.recovering = True
        self.in_progress = False

    def pause(self, now: float) -> None:
        """Take no step for an interval from ``now`` (the state could not be saved)."""
        self._paused_until = now + self.interval


class CheckpointSpout(Spout):
    """Storm's ``$checkpointspout`` (one task), added by `TopologyBuilder` to a topology with a
    stateful bolt; see the module docstring."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(CHECKPOINT_STREAM_ID, CHECKPOINT_FIELDS)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        namespace = f"{context.get_this_component_id()}-{context.get_this_task_id()}"
        self.state = get_key_value_state(namespace, conf, context)
        self._where = f"component [{context.get_this_component_id()}] task {context.get_this_task_id()}"
        self._marks, self._mark_key = _marks(context, namespace)
        storm_id = getattr(context, "get_storm_id", None)
        self._storm_id = storm_id() if storm_id is not None else None
        self._mark = self._read_mark()
        # the record goes on a thread of its own, the latest only: a master away (its calls
        # retried for seconds) never holds up a checkpoint. It may lag the store by a few
        # commits; a store that lost everything is told all the same
        self._records = LatestWrites()
        self._saved = self._stored()
        start = self._saved or INITIAL
        interval_ms = max(MIN_INTERVAL_MS, float(conf_value(conf, INTERVAL_KEY)))
        self.progress = CheckpointProgress(start, interval_ms / 1000.0, self._save)
        self.lost: str | None = None
        self._checked_at = float("-inf")
        # till `activate`: a worker (re)started while its topology is inactive (a rebalance's or a
        # kill's wait) is never told `deactivate`, and finishes the transaction it finds prepared
        self._active = False
        self._drain_secs = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self._timeouts = 0  # steps timed out in a row, since one went through (`fail_with`)
        self._stalled_since: float | None = None  # when the first of them was emitted, about
        self._draining_until = float("-inf")
        floor = -1 if self._saved is None else _committed_floor(self._saved)
        if self._mark is not None and floor < self._mark:
            self._lose(f"its state store holds {_said(self._saved)}, but txid {self._mark} was committed "
                       f"(the topology's own record, outside the store)")

    def _stored(self) -> CheckPointState | None:
        saved = self.state.get(_STATE_KEY)
        return CheckPointState(int(saved[0]), str(saved[1])) if saved else None

    def _read_mark(self) -> int | None:
        if self._marks is None or self._storm_id is None:
            return None
        try:
            mark = self._marks.get(self._mark_key)
        except Exception as e:  # noqa: BLE001 (the record only guards against a store that lost its data)
            log.warning("%s: cannot read its committed txid from the topology's transactional state: %s",
                        self._where, e)
            return None
        # this submission's record only: a topology submitted again (its state deleted on purpose
        # to start afresh, docs/state.md) starts from what the store holds, as Storm's does
        if isinstance(mark, (list, tuple)) and len(mark) == 2 and mark[0] == self._storm_id and type(mark[1]) is int:
            return mark[1]
        return None

    def _lose(self, why: str) -> None:
        """Stop checkpointing: the state store lost committed state (see `StateLost`)."""
        where = getattr(getattr(self.state, "store", None), "where", None)
        where = f"(Redis at {where})" if where else f"({PROVIDER_KEY})"
        self.lost = (f"{self._where}: the state store {where} lost committed state: {why}. It restarted "
                     f"without persistence, was flushed or restored from an older snapshot (or a file "
                     f"store is on another machine); the tuples "
                     f"acked since were counted in the state it lost. No checkpoint is taken (the stateful "
                     f"bolts' tuples are failed and replayed) until the store holds that state again; to "
                     f"start the state afresh on purpose, kill the topology and submit it again")
        self.collector.report_error(StateLost(self.lost))  # in the worker's log too (report_error)

    def _save(self, state: CheckPointState) -> None:
        current = self._stored()
        if current != self._saved:
            raise StateLost(f"its state store holds {_said(current)} where it saved {_said(self._saved)}")
        self.state.put(_STATE_KEY, [state.txid, state.phase])  # a plain list: it serializes with pickle off
        self.state.commit()
        self._saved = state
        if state.phase == COMMITTED and self._marks is not None and self._storm_id is not None and state.txid >= 0:
            self._mark = state.txid
            self._records.put(self._mark_key, functools.partial(self._record, [self._storm_id, state.txid]))

    def _record(self, mark: list[Any]) -> None:
        try:
            self._marks.put(self._mark_key, mark)
        except LaunchRefusedError:
            # the topology killed (every kill of one with stateful bolts said so at WARNING), or
            # this worker moved or relaunched: an operator's own act, and the next launch records
            log.info("%s: the master no longer runs this worker; committed txid %s is not recorded",
                     self._where, mark[1])
        except Exception as e:  # noqa: BLE001 (the record only guards against a store that lost its data)
            log.warning("%s: cannot record committed txid %s in the topology's transactional state: %s",
                        self._where, mark[1], e)

    def _guarded(self, step: Callable[[], None]) -> None:
        """Run a step that may save the state; a store that lost it stops checkpointing, one that
        fails (down) fails the step (recovery tries again after an interval)."""
        try:
            step()
        except StateLost as e:
            self.progress.failed(self.progress.state.txid)
            self._lose(str(e))
        except StateError as e:
            error = StateError(f"{self._where}: cannot save its checkpoint state: {e}")
            error.__cause__ = e  # its traceback and type in the report too
            self.collector.report_error(error)
            self.progress.failed(self.progress.state.txid)
            self.progress.pause(self._now())

    def next_tuple(self) -> None:
        if self.lost is not None:
            self._check_restored()
            return
        step: list[tuple[int, str] | None] = [None]

        def run() -> None:
            step[0] = self.progress.next_step(self._now())
        self._guarded(run)
        if step[0] is not None:
            self.collector.emit(list(step[0]), step[0][0], CHECKPOINT_STREAM_ID)

    def _check_restored(self) -> None:
        """Once an interval, whether the store holds the state it lost again (restored): then
        checkpointing goes on from there."""
        now = self._now()
        if now - self._checked_at < self.progress.interval:
            return
        self._checked_at = now
        try:
            current = self._stored()
        except StateError:
            return
        floor = -1 if current is None else _committed_floor(current)
        if current is not None and floor >= (self._mark if self._mark is not None else -1) \
                and (self._saved is None or _committed_floor(self._saved) <= floor):
            log.warning("%s: the state store holds its checkpoint state again (%s): checkpointing goes on",
                        self._where, _said(current))
            self.lost = None
            self._saved = current
            self.progress = CheckpointProgress(current, self.progress.interval, self._save)

    def activate(self) -> None:
        self._active = True

    def deactivate(self) -> None:
        """Checkpoints go on for the message timeout (`inactive_tick`), then only a
        transaction prepared is committed (`_finish`)."""
        self._active = False
        self._draining_until = self._now() + self._drain_secs
        self.inactive_tick()

    def inactive_tick(self) -> None:
        """Deactivated (a timer of its loop calls it): within the message timeout of the
        deactivation, the step `next_tuple` would take (the tuples taken before the spouts
        stopped are committed and acked, not replayed); after it, `_finish`. Active: nothing."""
        if self._active:
            return
        if self._now() < self._draining_until:
            self.next_tuple()
        else:
            self._finish()

    def _finish(self) -> None:
        """Deactivated: send the COMMIT of a transaction whose PREPARE went through (and none
        is in flight), so that its tuples are acked during a rebalance's or a kill's wait
        rather than replayed after the workers restart, their updates committed again by the
        recovery (counted twice)."""
        if self.lost is None and self.progress.state.phase == COMMITTING:
            self.next_tuple()   # (a COMMIT, or nothing while a step is in flight)

    def ack(self, msg_id: Any) -> None:
        if self._timeouts >= STALL_WARN_AFTER:
            log.warning("%s: checkpoint txid %s went through, after %d steps in a row had timed out",
                        self._where, msg_id, self._timeouts)
        self._timeouts = 0
        if self.lost is None:
            self._guarded(lambda: self.progress.acked(msg_id))
            if not self._active:
                self.inactive_tick()

    def fail(self, msg_id: Any) -> None:
        self.progress.failed(msg_id, self._now())

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """`fail`, logging why the checkpoint failed (a rollback follows, which fails the
        tuples the stateful bolts took since their last commit): a step that timed out, a
        stateful bolt that was not initialized, a state hook that raised. A hook's exception is
        named by its type only: the bolt reported it, and a report is logged (with its message
        and traceback) once."""
        if cause.error and cause.component:
            log.warning("checkpoint txid %s failed: %s in [%s] task %s (reported there); recovering", msg_id,
                        cause.error, cause.component, cause.task)
        else:
            log.warning("checkpoint txid %s failed, %s; recovering", msg_id, cause.describe())
        if cause.kind == TIMEOUT:
            self._timed_out(msg_id)
        else:
            self._timeouts = 0
        self.fail(msg_id)

    def _timed_out(self, txid: Any) -> None:
        """Count a step that timed out; at `STALL_WARN_AFTER` in a row, and each time that
        count doubles, say why no checkpoint goes through. Each line above says only that one
        step timed out: a recovery step that waits behind the same queue times out too, and
        the next, for ever, while the stateful bolts commit nothing and every tuple they took
        replays (measured: a 10 tuples/s bolt before a stateful one, a 2 s timeout, 22 lines in
        90 s and not one commit)."""
        now = self._now()
        if self._timeouts == 0:
            self._stalled_since = now - self._drain_secs  # the step was emitted a timeout or more before
        self._timeouts += 1
        n = self._timeouts
        times, rest = divmod(n, STALL_WARN_AFTER)
        if rest or times & (times - 1):  # said at 3, 6, 12, 24 ... in a row: not a line per step
            return
        since = now - (self._stalled_since if self._stalled_since is not None else now)
        error = CheckpointStalled(
            f"{self._where}: no checkpoint went through for {since:.0f} s: {n} steps in a row (the last txid {txid}, "
            f"{self.progress.state.phase}) timed out ({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} {self._drain_secs:g} s). "
            f"A checkpoint waits in each bolt's inbox behind the tuples queued before it: a bolt takes longer "
            f"than the timeout to work its queue off (slow calls, or more tuples in flight than it completes "
            f"within the timeout). Until one goes through, the stateful bolts commit nothing and their tuples "
            f"time out and replay. Set {Config.TOPOLOGY_MAX_SPOUT_PENDING} to at most what the slowest bolt "
            f"completes in half the timeout, give it more executors, or raise {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS}")
        self.collector.report_error(error)  # in the worker's log, and `squall list`, the UI

    def is_exhausted(self) -> bool:
        """Always: it has no input of its own to wait for (`squall.testing.complete_topology`)."""
        return True


def _inactive_ticks(executor: Any) -> list[tuple[float, Callable[[], None]]]:
    """The timer of each checkpoint spout an executor runs: its steps while deactivated."""
    return [(INACTIVE_TICK_SECS, obj.inactive_tick) for obj in (getattr(executor, "objs", None) or {}).values()
            if isinstance(obj, CheckpointSpout)]


register_executor_timers(_inactive_ticks)
