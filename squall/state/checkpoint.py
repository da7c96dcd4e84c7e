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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._components import Spout
from .._config import Config, conf_value
from .._fields import Fields
from .._system import CHECKPOINT_STREAM
from ._names import get_key_value_state

log = logging.getLogger(__name__)

CHECKPOINT_COMPONENT_ID = "$checkpointspout"
CHECKPOINT_STREAM_ID = CHECKPOINT_STREAM  # Storm's CheckpointSpout.CHECKPOINT_STREAM_ID
CHECKPOINT_FIELDS = Fields("txid", "action")
INTERVAL_KEY = Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL
MIN_INTERVAL_MS = 100  # Storm's floor

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

    def _set(self, state: CheckPointState) -> None:
        self._save(state)
        self.state = state

    def next_step(self, now: float) -> tuple[int, str] | None:
        """The ``(txid, action)`` to emit now, or None (a step is in flight, or it is not time)."""
        if self.in_progress:
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

    def failed(self, txid: int) -> None:
        """The step with ``txid`` failed or timed out: recover."""
        self.recovering = True
        self.in_progress = False


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
        saved = self.state.get(_STATE_KEY)
        start = CheckPointState(int(saved[0]), str(saved[1])) if saved else INITIAL
        interval_ms = max(MIN_INTERVAL_MS, float(conf_value(conf, INTERVAL_KEY)))
        self.progress = CheckpointProgress(start, interval_ms / 1000.0, self._save)

    def _save(self, state: CheckPointState) -> None:
        self.state.put(_STATE_KEY, [state.txid, state.phase])  # a plain list: it serializes with pickle off
        self.state.commit()

    def next_tuple(self) -> None:
        step = self.progress.next_step(self._now())
        if step is not None:
            self.collector.emit(list(step), step[0], CHECKPOINT_STREAM_ID)

    def ack(self, msg_id: Any) -> None:
        self.progress.acked(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.progress.failed(msg_id)

    def is_exhausted(self) -> bool:
        """Always: it has no input of its own to wait for (`squall.testing.complete_topology`)."""
        return True
