"""Stateful windowed bolts (Storm's ``BaseStatefulWindowedBolt``): a windowed bolt whose state is
checkpointed like a `BaseStatefulBolt`'s, and whose windows may be checkpointed too
(``with_persistence()``, Storm 2's ``PersistentWindowedBoltExecutor``). See docs/state.md.

`TopologyBuilder.set_bolt` runs one in a `StatefulWindowedBoltExecutor` (a `WindowedBoltExecutor`
that also passes ``init_state`` and the checkpoint hooks on), or with persistence in a
`PersistentWindowedBoltExecutor`, and the builder's checkpoint wiring runs that inside a
`StatefulBoltExecutor`, as Storm nests them. Either way inputs wait for INITSTATE.

Without persistence (Storm 1.x's stateful windowing): an input is acked when it left its last
window **and** the commit after that went through (the window's acks are deferred like any
stateful bolt's), so the message timeout must cover the window. On ROLLBACK the windows are
dropped: every tuple in them is failed, so its spout replays it and the windows fill again from
the replays (in event time the watermark starts afresh: a replay is late only if newer tuples,
by more than the lag, reached the task and a watermark was taken before it came back). Windows
are therefore never lost, save such late replays; a window evaluated before the rollback may be
evaluated again (at-least-once, like the state). Storm 1.x instead asks for a message id field
(``withMessageIdField``) to skip windows already evaluated after a restart; squall needs none.

With persistence: the window's tuples (their values, serialized when they arrive, and their
source) and the progress of the window manager, its policies and the watermark are saved in a
second state of the same provider, namespace ``"<component>-<task>-window"`` (so the user's keys
never clash with them), prepared and committed with the user's state (`WindowStore`). An input is
acked at the first commit after it entered the window, not when it leaves it, so the message
timeout need not cover the window (only the checkpoint interval). On ROLLBACK, and at INITSTATE
after a restart, the windows are reloaded as last committed: tuples committed are not replayed
and windows resume with them, while tuples that arrived since (not acked yet) are failed and
replayed. At-least-once again: a window evaluated after the last commit may be evaluated again.
Emits are left unanchored, as Storm's, ``anchors=`` or not (`UnanchoredEmits`: anchoring them to
tuples acked at the commit would make a downstream failure replay tuples the window still holds,
or put them in a tree already complete, which nothing replays).
``with_max_events_in_memory(n)`` bounds the tuples held in memory (`WindowStore`).
"""

from __future__ import annotations

import logging
from typing import Any

from .._collectors import OutputCollector
from .._config import Config, conf_value
from .._failure import ROLLED_BACK, FailureCause, fail_all_because, fail_because, fail_for
from .._system import DEFAULT_STREAM
from .._tuple import Tuple
from ..metric._api import CountMetric
from ..metric._builtin import BUCKET_KEY
from ..windowing._api import BaseWindowedBolt
from ..windowing.executor import WindowedBoltExecutor
from ..windowing.manager import window_manager
from ..windowing.restart import PARTIAL_WINDOWS_METRIC
from ._api import StateError
from ._kv import StateCodec
from ._names import get_key_value_state, owner_of
from ._window_store import DEFAULT_MAX_EVENTS_IN_MEMORY, WindowStore, runs, unruns

log = logging.getLogger("squall.windowing")


class BaseStatefulWindowedBolt(BaseWindowedBolt):
    """A windowed bolt with a checkpointed state; see the module docstring. ``init_state(state)``
    is called once, before the first ``execute(window)``, with the state as last committed."""

    _persistent = False
    _max_events = DEFAULT_MAX_EVENTS_IN_MEMORY

    def with_persistence(self) -> BaseStatefulWindowedBolt:
        """Save the windows with each checkpoint (Storm's ``withPersistence``): inputs are acked
        at the commit after they arrive, and after a rollback or a restart the windows resume as
        committed, instead of being dropped and replayed. Call it before `set_bolt` (which
        picks the executor). See the module docstring."""
        self._persistent = True
        return self

    def with_max_events_in_memory(self, n: int) -> BaseStatefulWindowedBolt:
        """With `with_persistence`, hold at most ``n`` of the window's tuples in memory (default
        1,000,000, Storm's); the others are read back from the state when a window needs them,
        plus those that arrived since the last checkpoint. Without persistence it does nothing
        (Storm's)."""
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"the maximum events in memory must be a positive int, got {n!r}")
        self._max_events = n
        return self

    def is_persistent(self) -> bool:
        """True if the windows are saved with the checkpoints (`with_persistence`)."""
        return self._persistent

    def max_events_in_memory(self) -> int:
        """The most window tuples held in memory (`with_max_events_in_memory`)."""
        return self._max_events

    def init_state(self, state: Any) -> None:
        """Receive the state (as last committed), before the first ``execute``."""

    def pre_prepare(self, txid: int) -> None:
        """Called before the state prepares transaction ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Called before the state commits transaction ``txid``."""

    def pre_rollback(self) -> None:
        """Called before the state rolls back to its last commit (and the windows are dropped)."""


class StatefulWindowedBoltExecutor(WindowedBoltExecutor):
    """Runs a `BaseStatefulWindowedBolt` (inside a `StatefulBoltExecutor`); see the module docstring."""

    bolt: BaseStatefulWindowedBolt

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        if conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0:  # where a restart can cut a window (below)
            self.partial_windows = context.register_metric(PARTIAL_WINDOWS_METRIC, CountMetric(),
                                                           int(conf_value(conf, BUCKET_KEY)))

    def squall_resumed_from_commit(self, txid: int) -> None:
        """Called by `StatefulBoltExecutor` before ``init_state`` when this task resumes from the
        commit before ``txid`` with acking off: it died since (its worker did), and nothing
        replays what it held. Its windows begin again empty (a persistent window's: as
        committed), so those that span the crash would fire short, or again: they are not fired
        (`squall.windowing.restart`)."""
        self.cut_at_restart()

    def init_state(self, state: Any) -> None:
        self.bolt.init_state(state)

    def pre_prepare(self, txid: int) -> None:
        self.bolt.pre_prepare(txid)

    def pre_commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)

    def pre_rollback(self) -> None:
        self.bolt.pre_rollback()
        assert self.manager is not None, "prepare() builds the window before a rollback"
        held = [e.value for e in self.manager.queue]
        self.new_window()
        self._arrivals.clear()  # failed below: their timeouts need no reset
        self._fresh = 0
        why = (f"the windows of [{self.component}] task {self.task} were dropped with its state's rollback to "
               f"its last commit; the tuple replays to fill them again")
        fail_all_because(self.collector, held, self.component, self.task, why, ROLLED_BACK)  # replayed, they fill the windows again

    def new_window(self) -> None:
        """Start with empty windows (and a watermark afresh, in event time)."""
        spec = self.spec
        assert spec is not None, "prepare() reads the window's settings first"
        self.manager = window_manager(self, spec.length, spec.sliding, spec.event_time)
        if spec.event_time:
            self.watermarks = self.new_watermarks()
            self._watermark_moved = None  # a watermark afresh: its wait starts with the next tuples


class UnanchoredEmits(OutputCollector):
    """A persistent window's collector underneath its windowed one: every emit unanchored, the
    ``anchors`` given or not (Storm leaves a persistent window's emits unanchored).

    Its inputs are acked at the commit after they came, so a result anchored to them joins a
    tuple tree already complete, which nothing replays, or one its spout replays into the
    window again. Looking in a spout's tree, such a result let the checkpoint forwarder pass a
    PREPARE over a sink that had not written it (it waits only for inputs in no spout's tree):
    the commit recorded the window as fired, and the sink's worker died with the result (a
    window of 20 ids, its one result never written, `tests/state/test_anchored_window_results.py`).
    Unanchored, it holds the checkpoint at the sink like any window result."""

    def __init__(self, out: OutputCollector) -> None:
        self._out = out

    def emit(self, values: list, anchors: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, None, stream)

    def emit_direct(self, task_id: int, values: list, anchors: Any = None, stream: str = DEFAULT_STREAM) -> None:
        self._out.emit_direct(task_id, values, None, stream)

    def ack(self, tup: Tuple) -> None:
        self._out.ack(tup)

    def fail(self, tup: Tuple) -> None:
        self._out.fail(tup)

    def fail_with(self, tup: Tuple, cause: FailureCause) -> None:
        fail_for(self._out, tup, cause)

    def reset_timeout(self, tup: Tuple) -> None:
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)


class PersistentWindowedBoltExecutor(StatefulWindowedBoltExecutor):
    """Runs a `BaseStatefulWindowedBolt` made `with_persistence` (inside a `StatefulBoltExecutor`);
    see the module docstring. The manager queues the tuples' numbers in the `WindowStore`."""

    persistent = True
    squall_holds_inputs = False  # acked at the checkpoint's commit, not when they leave the window

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        unchecked = collector.unchecked() if hasattr(collector, "unchecked") else collector
        self.out.delegate = UnanchoredEmits(unchecked)
        # beside the bolt's state (`StatefulBoltExecutor` names it; Storm's <component>-<task id>)
        base = getattr(self, "squall_state_namespace", None) or f"{self.component}-{context.get_this_task_id()}"
        namespace = f"{base}-window"
        self.window_state = get_key_value_state(namespace, conf, context)
        codec = StateCodec(conf, owner_of(namespace, context))
        self.store = WindowStore(self.window_state, codec, self.bolt.max_events_in_memory())
        self.restored = False
        # a window fired since the last PREPARE: its results are in no transaction yet
        # (`StatefulBoltExecutor` rolls such a task back at a recovery's INITSTATE)
        self.fired_since_prepare = False
        # what the window took since the last PREPARE, in order, to take again after such a
        # rollback (`redo_since_prepare`): ("add", tuple, ts), ("late", tuple, ts),
        # ("watermark", ts), ("time", now_ms)
        self.since_prepare: list[tuple[Any, ...]] = []
        self._activation: Any = None  # the topology's activity in this worker (`squall_activation`)
        self.restored_settled = False  # the commit restored was taken stopped and settled (`pre_prepare`)

    def squall_activation(self, activation: Any) -> None:
        """The engine hands the topology's activity as this worker sees it
        (`squall.engine.loop.TopologyActivation`), read at each PREPARE (`pre_prepare`)."""
        self._activation = activation

    def add(self, tup: Tuple, ts: int) -> None:
        try:
            seq = self.store.add(tup, ts)
        except StateError as e:  # reported, and the tuple failed (saying why): it is not in the window
            self.collector.report_error(str(e))
            fail_because(self.collector, tup, self.component, self.task, str(e))
            return
        assert self.manager is not None, "prepare() builds the window before the first input"
        self.since_prepare.append(("add", tup, ts))
        self.manager.add(seq, ts)
        self.collector.ack(tup)  # taken at the next prepare, acked at its commit

    def late(self, tup: Tuple, ts: int) -> None:
        self.since_prepare.append(("late", tup, ts))
        super().late(tup, ts)

    def advance_watermark(self, wm: int) -> None:
        self.since_prepare.append(("watermark", wm))
        super().advance_watermark(wm)

    def time_passed(self, now: int) -> None:
        self.since_prepare.append(("time", now))
        super().time_passed(now)

    def redo_since_prepare(self, taken: list[tuple[Any, ...]]) -> None:
        """After a rollback to the last commit (`pre_rollback`), take again what the window took
        since the last PREPARE (``taken``, `since_prepare` before the rollback) as it took it the
        first time: each tuple with the timestamp it had (a processing-time tuple's arrival, not
        the time of the recovery), a late one acked again and no more (its emit on the late
        stream is anchored to it, still in its spout's tree), and the watermarks and timers
        between them where they came, so that the windows fire again as they fired, on the
        same tuples.

        Executed afresh instead (989026e4), a processing-time tuple arrived at the recovery,
        into the window open then: records fired in their windows were fired again in that one
        (3 + 3, then 6 for the same 3 records); an event-time tuple that had come late, already
        sent on the late stream, was before the restored watermark and went into its window
        too, and the windows fired at one watermark, after the recovery."""
        watermarks = self.watermarks
        for entry in taken:
            kind = entry[0]
            if kind == "add" or kind == "late":
                tup, ts = entry[1], entry[2]
                if watermarks is not None:
                    self.track(tup, ts)
                if kind == "add":
                    self.add(tup, ts)
                else:
                    self.since_prepare.append(entry)
                    self.collector.ack(tup)
            elif kind == "watermark":
                if watermarks is not None:
                    watermarks.last_watermark = entry[1]
                self.advance_watermark(entry[1])
            else:
                self.time_passed(entry[1])

    def on_expiry(self, seqs: list[int]) -> None:
        """Nothing to ack: the tuples were acked at a commit; they leave the state at the next."""

    def on_activation(self, seqs: list[int], new: list[int], expired: list[int], end_ts: int | None) -> None:
        store = self.store
        if self._cut is not None and self.spans_restart(len(seqs), end_ts):
            store.forget(expired)
            return
        self.fired_since_prepare = True
        self.run_window(store.tuples_of(seqs), store.tuples_of(new), store.tuples_of(expired), end_ts, None)
        store.forget(expired)

    def init_state(self, state: Any) -> None:
        self._restore()
        if self._cut is not None and self.restored_settled:
            # the last commit was taken stopped and settled: nothing came or fired after it
            # (a rebalance, a kill and resubmission, a deactivation), so the windows resume whole
            log.info("Component [%s] task %s resumes from a commit taken while its topology was inactive and "
                     "after its window had settled: its windows resume whole, none is held back",
                     self.component, self.task)
            self._cut = None
        self.bolt.init_state(state)

    def pre_prepare(self, txid: int) -> None:
        self.bolt.pre_prepare(txid)
        manager = self.manager
        assert manager is not None, "prepare() builds the window before the first checkpoint"
        live = {e.value for e in manager.queue}
        live.update(manager.expired)
        wm = self.watermarks.get_state() if self.watermarks is not None else None
        since, prev, expired, eviction, trigger = manager.get_state()
        # settled: the topology is inactive here (its spouts stopped) and since the last PREPARE the
        # window took no tuple and fired no window. A worker stopped after such a commit lost
        # nothing (a kill's or rebalance's wait ends so: the checkpoints go on through it), so
        # the restarted task resumes whole from it, where after a crash it holds back the windows
        # that span it (`squall_resumed_from_commit`, `squall.windowing.restart`)
        activation = self._activation
        settled = (activation is not None and not activation.active and not self.fired_since_prepare
                   and not any(entry[0] in ("add", "late") for entry in self.since_prepare))
        self.store.save(live, [[since, runs(prev), runs(expired), eviction, trigger], wm, settled])
        self.window_state.prepare_commit(txid)
        self.fired_since_prepare = False
        self.since_prepare = []

    def pre_commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)
        self.window_state.commit(txid)

    def pre_rollback(self) -> None:
        self.bolt.pre_rollback()
        self.window_state.rollback()
        if self.restored:  # a live task: back to the windows as committed (before INITSTATE: at it)
            self._restore()

    def _restore(self) -> None:
        self.new_window()
        progress, events = self.store.restore()
        # (a progress saved before 2026-12-07 has no third item: not known to be settled)
        self.restored_settled = progress is not None and len(progress) > 2 and progress[2] is True
        if progress is not None:
            (since, prev, expired, eviction, trigger), wm = progress[0], progress[1]
            assert self.manager is not None  # new_window() made it
            self.manager.restore_state([since, unruns(prev), unruns(expired), eviction, trigger], events)
            if wm is not None and self.watermarks is not None:
                self.watermarks.restore_state(wm)
                self.resume_origins()
        self.restored = True
        self.fired_since_prepare = False
        self.since_prepare = []


def windowed_executor(bolt: BaseWindowedBolt) -> WindowedBoltExecutor:
    """The executor `TopologyBuilder.set_bolt` runs ``bolt`` in."""
    if isinstance(bolt, BaseStatefulWindowedBolt):
        if bolt.is_persistent():
            return PersistentWindowedBoltExecutor(bolt)
        return StatefulWindowedBoltExecutor(bolt)
    return WindowedBoltExecutor(bolt)
