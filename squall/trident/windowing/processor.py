"""The window operation in a Trident bolt (Storm's ``WindowTridentProcessor`` with
``StoreBasedTridentWindowManager``), over squall's window manager (``squall.windowing.manager``).

Per batch, in the bolt's task: the tuples of the batch are collected; when the batch finishes,
the duration window's boundaries that passed since the last batch fire first, then the batch's
tuples are added to the window (a count window fires as they are added), each window that fires
is aggregated with the operation's aggregator, and its results (under the trigger's id) are
emitted in this batch. The window's bolt is a committer (as Storm's, whose window operation
comes with a ``partitionPersist`` of its triggers): a batch finishes there at its ``$commit``,
in txid order, so the window takes the batches in txid order and a batch that finishes there
was preceded by the commit of every earlier one.

That makes a replay easy to tell: the batch the window took last is the only one that can come
again (a later bolt failed its commit, or the worker died after the window had taken it). Its
tuples are not added again; the results it emitted, kept in the store under its txid, are
emitted again. Each batch writes the store once (`WindowsStore.put_all`): its tuples, the
results, and the window's position (`WindowHead`: the txid taken last, the policies' progress,
the next duration boundary, the live batches); a task that starts reads it back, so a worker
killed and restarted over a store that outlives it (`KeyValueWindowsStoreFactory`) resumes the
windows where the last batch left them and counts each tuple once.

Time is the bolt executor's clock (simulated in tests); a duration window fires at the first
batch after each boundary, with the boundary as the window's end (the windows a timer would
have made, each tuple stamped with the time its batch finished).
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple

from ..._fields import Fields
from ...windowing.manager import WindowManager, window_manager
from ...windowing.policies import EvictionContext
from ..executor import BatchInfo
from ..operation import BaseAggregator, CombinerAggregator, ReducerAggregator, TridentCollector, TridentOperationContext
from ..processors import Processor, ProcessorContext, ReducerAggregatorImpl
from ..tuple import TridentTuple
from .config import WindowConfig
from .store import KEY_SEPARATOR, Entry, InMemoryWindowsStoreFactory, WindowsStore, WindowsStoreFactory

log = logging.getLogger("squall.trident.windowing")

_FORMAT = 1
HEAD_PREFIX = "st" + KEY_SEPARATOR
TUPLES_PREFIX = "tu" + KEY_SEPARATOR
TRIGGER_PREFIX = "tr" + KEY_SEPARATOR


class TriggerResult(NamedTuple):
    """What one firing of a window gave (Storm's ``TriggerResult``): its id and the aggregator's
    emits."""

    id: int
    result: list[list]


class LiveBatch(NamedTuple):
    """A batch with tuples still in the window: its txid, its first tuple's number, its size."""

    txid: int
    first_seq: int
    size: int


class WindowHead(NamedTuple):
    """Where a window stands after a batch, saved with it (stored as a plain list)."""

    txid: int                 # the batch taken last (0: none)
    next_seq: int             # the next tuple's number
    first_live: int           # the first tuple's number still in the window (the later ones all are)
    batches: list[LiveBatch]  # the batches with tuples in the window, in txid order
    manager: list             # `WindowManager.get_state`
    next_fire: int | None     # a duration window's next boundary (epoch ms; None: before its first batch)
    triggers: int             # triggers fired so far (the next one's id is this + 1)
    last_ts: int              # the last tuple's timestamp (ms): timestamps never go back

    def plain(self) -> list:
        """As stored."""
        return [_FORMAT, self.txid, self.next_seq, self.first_live, [list(b) for b in self.batches], self.manager,
                self.next_fire, self.triggers, self.last_ts]

    @classmethod
    def of(cls, stored: Any, where: str) -> WindowHead:
        """The head a store holds, checked."""
        if not isinstance(stored, (list, tuple)) or len(stored) != 9 or stored[0] != _FORMAT:
            raise ValueError(f"{where}: the window's record in its store is not one squall wrote: {stored!r:.200}")
        _, txid, next_seq, first_live, batches, manager, next_fire, triggers, last_ts = stored
        return cls(txid, next_seq, first_live, [LiveBatch(*b) for b in batches], list(manager), next_fire, triggers,
                   last_ts)


class _Accumulated(TridentCollector):
    """Keeps what the aggregator emits for one window (Storm's ``AccumulatedTuplesCollector``)."""

    def __init__(self, width: int, report: Any, where: str) -> None:
        self.values: list[list] = []
        self._width = width
        self._report = report
        self._where = where

    def emit(self, values: list) -> None:
        row = list(values)
        if len(row) != self._width:
            raise ValueError(f"{self._where}: the aggregator emitted {len(row)} values {row!r} for {self._width} "
                             f"function fields")
        self.values.append(row)

    def report_error(self, error: BaseException) -> None:
        self._report(error)


class CombinerWindowAggregator(BaseAggregator):
    """A `CombinerAggregator` over a window: ``zero()``, then ``combine`` with each tuple's ``init``."""

    def __init__(self, agg: CombinerAggregator) -> None:
        self.agg = agg

    def prepare(self, conf: dict, context: Any) -> None:
        """The combiner's."""
        self.agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        """``[zero()]``."""
        return [self.agg.zero()]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        """Combine the tuple's ``init``."""
        state[0] = self.agg.combine(state[0], self.agg.init(tuple))

    def complete(self, state: list, collector: TridentCollector) -> None:
        """Emit the value."""
        collector.emit([state[0]])

    def cleanup(self) -> None:
        """The combiner's."""
        self.agg.cleanup()


def as_window_aggregator(aggregator: Any, operation: str) -> BaseAggregator:
    """``aggregator`` as the `BaseAggregator` a window runs (a combiner or reducer wrapped).

    Raises:
        ValueError: not an aggregator, naming ``operation``.
    """
    if isinstance(aggregator, BaseAggregator):
        return aggregator
    if isinstance(aggregator, CombinerAggregator):
        return CombinerWindowAggregator(aggregator)
    if isinstance(aggregator, ReducerAggregator):
        return ReducerAggregatorImpl(aggregator)
    raise ValueError(f"{operation}: {type(aggregator).__name__} is not a BaseAggregator, CombinerAggregator "
                     "or ReducerAggregator")


class _WallClock:
    """Real time until the bolt executor hands its clock over (`WindowTridentProcessor.use_clock`)."""

    wall = staticmethod(time.time)


class WindowTridentProcessor(Processor):
    """``Stream.window`` and the tumbling and sliding forms (Storm's ``WindowTridentProcessor``);
    see the module docstring. ``window_id`` names the window's keys in its store (with the task's
    index): it must stay the same between submissions for a store that outlives them."""

    operation = "window"

    def __init__(self, window_config: WindowConfig, window_id: str, store_factory: WindowsStoreFactory,
                 input_fields: Fields, aggregator: BaseAggregator, function_fields: Fields) -> None:
        self.window_config = window_config
        self.window_id = window_id
        self.store_factory = store_factory
        self.input_fields = input_fields
        self.aggregator = aggregator
        self.function_fields = function_fields

    @property
    def squall_keeps_task_states(self) -> bool:
        """A store that outlives the task is named by task index and its layout recorded with the
        master (`squall.trident.KeyValueWindowsStoreFactory`); a user's factory may do so too."""
        return not isinstance(self.store_factory, InMemoryWindowsStoreFactory)

    # --- the task's life -------------------------------------------------------------------------

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        parent = tctx.parent_fields[0]
        self._idx = [parent.index(f) for f in self.input_fields]
        index = context.get_this_task_index()
        self._where = f"{tctx.name} {self.window_config} (window {self.window_id}, task index {index})"
        self._task_key = f"{self.window_id}{KEY_SEPARATOR}{index}{KEY_SEPARATOR}"
        self._clock: Any = _WallClock()
        self.aggregator.prepare(conf, TridentOperationContext(context))
        self.store: WindowsStore = self.store_factory.create(conf, context, f"window-{self.window_id}")
        self._values: dict[int, list] = {}  # a live tuple's number -> its values
        self._fired: list[TriggerResult] = []  # what fired while one batch was taken
        self.manager: WindowManager
        self.head: WindowHead
        self.last_results: list[TriggerResult]
        self._restore()

    def use_clock(self, clock: Any) -> None:
        """Take the bolt executor's clock (``clock.wall()``, seconds): simulated in tests."""
        self._clock = clock

    def cleanup(self) -> None:
        try:
            self.aggregator.cleanup()
        finally:
            self.store.shutdown()

    def _now_ms(self) -> int:
        return int(self._clock.wall() * 1000)

    def _restore(self) -> None:
        """Start from what the store holds (nothing: an empty window)."""
        length, sliding = self.window_config.lengths()
        self.manager = window_manager(self, length, sliding)
        self._values = {}
        stored = self.store.get(HEAD_PREFIX + self._task_key)
        if stored is None:
            # a duration window's boundaries start at its first batch (`_take_now`): in prepare
            # the task has not the engine's clock yet
            self.head = WindowHead(0, 0, 0, [], [], None, 0, 0)
            self.last_results = []
            return
        head = WindowHead.of(stored, self._where)
        events: list[tuple[int, int]] = []
        for b in head.batches:
            saved = self.store.get(self._tuples_key(b.txid))
            if saved is None:
                raise ValueError(f"{self._where}: the tuples of txid {b.txid} are not in the window's store "
                                 f"({type(self.store).__name__}), which its record says holds them")
            first_seq, rows = saved
            for seq, (ts, values) in enumerate(rows, first_seq):
                if seq >= head.first_live:
                    self._values[seq] = list(values)
                    events.append((seq, ts))
        self.manager.restore_state(head.manager, events)
        self.head = head
        self.last_results = [TriggerResult(i, [list(r) for r in rows])
                             for i, rows in self.store.get(self._results_key(head.txid)) or []]
        # what a worker that died mid-write left: keys of batches the record does not hold
        known = {self._tuples_key(b.txid) for b in head.batches} | {self._results_key(head.txid)}
        mine = (TUPLES_PREFIX + self._task_key, TRIGGER_PREFIX + self._task_key)
        stale = [k for k in self.store.get_all_keys() if k.startswith(mine) and k not in known]
        if stale:
            self.store.remove_all(stale)
        log.info("%s: resumed after txid %d with %d tuples in the window", self._where, head.txid, len(self._values))

    def _tuples_key(self, txid: int) -> str:
        return f"{TUPLES_PREFIX}{self._task_key}{txid}"

    def _results_key(self, txid: int) -> str:
        return f"{TRIGGER_PREFIX}{self._task_key}{txid}"

    # --- the window manager's listener -----------------------------------------------------------

    def on_expiry(self, events: list[Any]) -> None:
        """Tuples left their last window: forget their values."""
        for seq in events:
            self._values.pop(seq, None)

    def on_activation(self, events: list[Any], new: list[Any], expired: list[Any], end_ts: int | None) -> None:
        """A window fired: aggregate its tuples, keep the results for this batch to emit."""
        trigger = self.head.triggers + len(self._fired) + 1
        coll = _Accumulated(len(self.function_fields), self.tctx.report_error, self._where)
        agg = self.aggregator
        state = agg.init(trigger, coll)
        fields = self.input_fields
        for seq in events:
            agg.aggregate(state, TridentTuple(fields, self._values[seq]), coll)
        agg.complete(state, coll)
        self._fired.append(TriggerResult(trigger, coll.values))

    # --- batches ---------------------------------------------------------------------------------

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = []

    def execute(self, batch: BatchInfo, parent: int, values: list) -> None:
        batch.state[self.tctx.key].append([values[i] for i in self._idx])

    def finish_batch(self, batch: BatchInfo) -> None:
        txid = batch.attempt.txid
        head = self.head
        if txid == head.txid:
            # the batch taken last, again: its tuples are in; emit what it emitted
            results = self.last_results
        else:
            if txid < head.txid:
                # every batch before the one taken last was committed everywhere, so none comes
                # again: the txids started over (a new spout txid key, the coordinator's state
                # reset) over a store that outlived them
                log.warning("%s: batch of txid %d after txid %d: the txids started over; taken as a new batch",
                            self._where, txid, head.txid)
            results = self._take(txid, batch.state[self.tctx.key])
        emit = self.tctx.emit
        for r in results:
            for row in r.result:
                emit(batch, list(row))

    def _take(self, txid: int, rows: list[list]) -> list[TriggerResult]:
        """Add batch ``txid``'s tuples to the window, fire what is due, save it all; the results.
        Whatever goes wrong on the way (the aggregator failed the batch), the window goes back to
        what the store holds, so the batch's replay finds it as this attempt did."""
        try:
            return self._take_now(txid, rows)
        except BaseException:
            self._fired = []
            self._restore()
            raise

    def _take_now(self, txid: int, rows: list[list]) -> list[TriggerResult]:
        head = self.head
        manager = self.manager
        self._fired = []
        now = self._now_ms()
        next_fire = head.next_fire
        if not self.window_config.by_count:
            slide = self.window_config.sliding_length
            if next_fire is None:
                next_fire = now + slide
            while next_fire <= now:
                if not manager.queue:
                    # the windows due are empty and fire nothing: the last one due only moves the
                    # window's end (set as its firing would, without a scan of nothing)
                    last = next_fire + (now - next_fire) // slide * slide
                    manager.eviction.context = EvictionContext(last, sliding_interval=slide)
                    next_fire = last + slide
                    break
                manager.on_time(next_fire)
                next_fire += slide
        ts = max(manager.arrival_ts(now), head.last_ts)
        first_seq = head.next_seq
        for seq, values in enumerate(rows, first_seq):
            self._values[seq] = values
            manager.add(seq, ts)
        next_seq = first_seq + len(rows)
        fired, self._fired = self._fired, []
        # expiry goes oldest first (counts; and timestamps never go back), so the live tuples are
        # the numbers from the oldest one in the queue on
        first_live = min((e.value for e in manager.queue), default=next_seq)
        batches = [b for b in head.batches if b.first_seq + b.size > first_live]
        if rows:
            batches.append(LiveBatch(txid, first_seq, len(rows)))
        new = WindowHead(txid, next_seq, first_live, batches, manager.get_state(), next_fire,
                         head.triggers + len(fired), ts if rows else head.last_ts)
        entries = [Entry(HEAD_PREFIX + self._task_key, new.plain()),
                   Entry(self._results_key(txid), [[r.id, r.result] for r in fired])]
        if rows:
            entries.append(Entry(self._tuples_key(txid), [first_seq, [[ts, v] for v in rows]]))
        self.store.put_all(entries)
        self.head = new
        self.last_results = fired
        gone = [self._tuples_key(b.txid) for b in head.batches if b not in batches]
        if head.txid:
            gone.append(self._results_key(head.txid))
        if gone:
            self.store.remove_all(gone)
        return fired


__all__ = ["CombinerWindowAggregator", "LiveBatch", "TriggerResult", "WindowHead",
           "WindowTridentProcessor", "as_window_aggregator"]
