"""The per-tuple hot path: compiled (``squall._speedups``, C) when built, else these pure-Python twins.

`pip install` builds ``squall/_speedups.c`` when a C compiler and Python's headers are there (the
extension is optional: without them squall installs and runs on the twins below). Setting the
environment variable ``SQUALL_PURE_PYTHON=1`` picks the twins even when it is built; the test suite
runs the engine's tests both ways (``tests/test_native.py``). `COMPILED` says which is in use.

The names, each a base class or a callable of the engine (the modules that use them hold the rest
of each class):

- `IdSource`: a seeded source of random tuple and root ids.
- `TupleBase`: the slots of `squall.Tuple`.
- `RouterBase`: the slots of `squall.engine.routing.Router` (compiled, its two counters are C numbers).
- `TaskStatsBase`, `SpoutExecutorBase`: a task's counters, and a spout executor's; compiled, the
  C paths add to them in place.
- `BasicCollectorBase`: the slots of a BasicBolt's collector, and its one-anchor ``emit``.
- `BasicExecute`: a BasicBolt's execute-then-ack, made once per task.
- `SpoutCollectorBase`: the slots of a spout's collector, and its ``emit``.
- `BoltCollectorBase`: the slots of a bolt's collector, and its ``ack``.
- `PendingTreeBase`: the fields of `squall.engine.acker.PendingTree`.
- `send_acks`: a bolt executor's held acks, sent (`squall.engine.bolt_executor.BoltExecutor.flush_acks`).
- `own_methods`: a collector class's compiled methods made its own, so CPython 3.11 specialises
  the user's calls of them (``collector.emit(...)``).
- `acker_run`: the acker's inner loop (n messages through `Acker.update`).
- `acker_drain`: an acker task's messages, plain runs (`acker_run`) and the sampled ones counted.
- `execute_run`: a bolt executor's inner loop over its plain (not sampled) inputs (an exception
  that ``execute`` raises goes to its ``on_error`` when one is given).
- `drain_inbox`: a bolt task's inputs, plain runs and sampled ones (timed), as its executor drains them.
- `ExecutingEntry`: a bolt executor's line on its worker's board of the inputs being executed, where
  `execute_run` and `drain_inbox` keep the root of each input while it is executed
  (`squall.engine.executing`).
- `KeyStatsBase`: the figures of `squall.engine.stats.KeyStats`; compiled, C numbers.
- `spout_replies`: a spout's inner loop over the acker's replies (n calls of `SpoutExecutor._reply`;
  compiled, an ack is handled in C, its statistics counted exactly).
- `spout_produce`: a spout executor's rounds of ``next_tuple`` calls (`SpoutExecutor.produce`).
- `memo_chooser`: the fields grouping's choice for a str key (computed for ASCII, else remembered).
- `next_chooser`: the shuffle grouping's chooser, which ignores the values.
- `batch_items`: a received batch's Tuples, made from its columns (`squall.engine.serialize`).
- `unpack_batch`: a received batch of plain values, decoded from its bytes into its items
  (compiled only: the pure path is msgpack and `batch_items`).
- `deliver_items`: a received batch's items into their inboxes (`squall.engine.worker`).
- `unpack_into`: `unpack_batch` straight into the inboxes, with no flat list of items (compiled
  only: the pure path decodes the batch and delivers it with `deliver_items`).
- `interleave`: targets and items as one flat list (received acker messages and replies, and the
  pure `batch_items`); the same Python on both paths, as slice assignment is C already.
- `group_items`: a batch's columns, made from the items to send (compiled only: the pure path is
  `Serializer._group`).
- `sender`: a task's sender to another worker (`squall.worker.transport.ZmqTransport.sender`);
  its pure twin uses `plain_check`, which the in-memory transport uses too.
- `opaque_commit`: a grouped combiner's commit into an opaque in-memory map (Trident's
  `MemoryMapState`, `squall.trident.state.memory`), with `plain_value` and the key and value
  types it keeps as they are.
- `CountingEmit`: the emit of a Trident function whose emits a fused grouped ``Count`` counts
  (`squall.trident.processors._CountingCollector`).
- `pack_rows`: the rows a Trident bolt emits on a packed stream, into their tasks' packs
  (`squall.trident.executor`).
- `combine_rows`: a pack's rows combined per group into a grouped combiner's persist
  (`squall.trident.processors`).
- `current_frames`: ``sys._current_frames()`` with the garbage collector off
  (`squall.engine.thread_frames`); compiled, in one step that no other thread's ``gc.enable()``
  or ``gc.disable()`` can come between.
- `TridentTupleBase`, `view_of`: the slots of `squall.trident.TridentTuple` with ``t[i]`` and
  ``len(t)``, and one of its subtypes made without its ``__init__`` (a Trident bolt's views).

The two implementations have the same semantics; the C one hands every case outside the quick
path back to the Python collector, so errors come from the same code on both. Why it is worth it,
measured: see ``docs/profiles/w1-one-worker.md``.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import math
import os
import random
import select
import sys
import threading
import time
from itertools import repeat
from pathlib import Path
from types import FrameType
from typing import Any

_DEFAULT_STREAM = "default"  # squall._system.DEFAULT_STREAM (not imported: this module is imported first)
_monotonic = time.monotonic  # the clock of a drain's budget (compiled: CLOCK_MONOTONIC_COARSE, the same clock)


def IdSource(seed: int, bits: int = 64, times: int = 1, plus: int = 0) -> Any:
    """A source of random ids: calling it returns the next id of ``bits`` bits, from ``seed``;
    with ``times`` or ``plus`` set, ``(id or 1) * times + plus`` (a root that names its acker).
    Here `random.Random.getrandbits`; compiled, splitmix64 in C (another sequence, as random
    and as reproducible from the seed), whose bits the C emit paths take without an int."""
    if not isinstance(seed, int) or not 1 <= bits <= 64:
        raise ValueError("IdSource(seed, bits): seed an int, bits from 1 to 64")
    if times < 1 or plus < 0 or (2**bits - 1) * times + plus >= 2**64:
        raise ValueError("IdSource(seed, bits, times, plus): times at least 1, and the largest id times "
                         "`times` plus `plus` below 2**64")
    draw = functools.partial(random.Random(seed).getrandbits, bits)
    if times == 1 and not plus:
        return draw
    return lambda: (draw() or 1) * times + plus


class TupleBase:
    """The slots of `squall.Tuple`: values, where they came from, and the three ack slots."""

    __slots__ = ("_oav", "_root", "_src", "_val", "values")

    def __init__(self, values: list, src: Any, root: Any = 0, val: int = 0, oav: int = 0) -> None:
        self.values = values
        self._src = src
        self._root = root
        self._val = val
        self._oav = oav


class RouterBase:
    """The slots of `squall.engine.routing.Router`."""

    __slots__ = (
        "choose",
        "direct",
        "direct_targets",
        "emitted",
        "nfields",
        "silent",
        "src",
        "stream",
        "transferred",
    )


class TaskStatsBase:
    """The counters of `squall.engine.executor.TaskStats` (compiled: C numbers)."""

    __slots__ = ("acked", "executed", "failed", "latency_count", "latency_sum")


class SpoutExecutorBase:
    """The counters of `squall.engine.spout_executor.SpoutExecutor` (compiled: C numbers)."""

    __slots__ = ("emits", "in_flight")


class BasicCollectorBase:
    """The slots of a BasicBolt's collector (`squall.engine.bolt_executor.BasicCollector`) and its
    ``emit``: the one-anchor path of `BoltCollector.emit` inlined, since a BasicBolt always has
    exactly one anchor and runs on its loop's thread."""

    __slots__ = ("_acking", "_deliver", "_nowhere", "_out", "_rand", "_routers", "_tuple_type", "input")

    def emit(self, values, stream=_DEFAULT_STREAM):
        """Emit ``values`` on ``stream``, anchored to the current input."""
        try:
            r = self._routers.get(stream)
        except TypeError:  # an unhashable stream: the collector's error names it
            r = None
        if (r is None or r.direct or type(values) is not list and not isinstance(values, (list, tuple))
                or len(values) != r.nfields or type(values) is self._tuple_type):
            return self._out.emit(values, self.input, stream)  # raises the collector's error
        r.emitted += 1
        if r.silent:  # nobody subscribes (W1's counts): nothing to route, make or send
            return self._nowhere
        targets = r.choose(values)
        if not targets:
            return targets
        r.transferred += len(targets)
        a = self.input
        root = a._root
        deliver = self._deliver
        make = self._tuple_type
        if type(root) is not int:
            self._out._send_multi(r, targets, values, (a,))
        elif root and self._acking:
            rand = self._rand
            src = r.src
            for task in targets:
                edge = rand()
                a._oav ^= edge
                deliver[task](make(values, src, root, edge))
        else:
            t = make(values, r.src)
            for task in targets:
                deliver[task](t)
        return targets


class SpoutCollectorBase:
    """The slots of a spout task's collector (`squall.engine.spout_executor.SpoutCollector`) and
    its ``emit``. Compiled, ``emit`` does an untracked emit, and a tracked one with acking on, in C
    (its semantics are ``_emit_general``'s), and hands every other case to ``_emit_general``;
    here it is ``_emit_general`` for every case."""

    __slots__ = (
        "_ackers",
        "_acking",
        "_deliver",
        "_ex",
        "_now",
        "_pending",
        "_rand",
        "_root",
        "_task",
        "_tuple_type",
        "routers",
    )

    def emit(self, values, msg_id=None, stream=_DEFAULT_STREAM):
        """Emit ``values`` on ``stream``, tracked when ``msg_id`` is given."""
        return self._emit_general(values, msg_id, stream)


class BoltCollectorBase:
    """The slots of a bolt task's collector (`squall.engine.bolt_executor.BoltCollector`) and its
    ``ack``. Compiled, ``ack`` sends the ack of a one-tree input at once, in C, when it runs on
    the loop's thread with nothing held and no sibling of its tree next in the inbox (W2: every
    input its own tree), and hands every other case to ``_ack_general``, whose semantics it has;
    here it is ``_ack_general`` for every case."""

    __slots__ = ("_ackers", "_acks", "_close_sample", "_ex", "_inbox", "_loop_ident", "_now", "_samples", "_stats")

    def ack(self, tup):
        """Ack ``tup``."""
        return self._ack_general(tup)


def BasicExecute(user_execute, basic, ack, on_failed, failed_type, acks, stats, samples, sampled,
                 now, inbox, ackers, ack_tag):
    """A BasicBolt's ``execute(tup)``: run the bolt with ``basic`` as its collector, then ack the input
    (``on_failed(tup, error)`` when it raises ``failed_type``).

    The ack of the common one-root input is inlined (no `BoltCollector.ack` call or foreign-thread
    check: this runs on the loop's thread) and coalesced: held, xor-combined per root, while the
    next tuple waiting in ``inbox`` belongs to the same root, in ``acks`` (the executor's dict, root
    -> xor; see `BoltExecutor.flush_acks`), which the last sibling's ack sends (`send_acks`).
    Compiled, a run of siblings' acks made while ``acks`` is empty is held in C instead, and
    ``execute.spill()`` hands it to ``acks`` (the executor calls it after each drain of the task).
    """

    def execute(tup) -> None:
        basic.input = tup
        try:
            user_execute(tup, basic)
        except failed_type as e:
            on_failed(tup, e)
            return
        root = tup._root
        if type(root) is not int:
            ack(tup)
            return
        if root and ackers:
            x = tup._val ^ tup._oav
            if inbox and inbox[0]._root == root:  # a sibling is next: hold and combine
                acks[root] = acks.get(root, 0) ^ x
            elif acks:
                acks[root] = acks.get(root, 0) ^ x
                send_acks(acks, ackers, ack_tag)
            else:  # nothing held: send at once, no dict
                ackers[root % len(ackers)]((ack_tag, root, x, -1))
        stats.acked += 1
        if samples:  # sampled.open_samples: an ack closes a sampled input's sample
            sampled.close_sample(id(tup), True, now())
    # the compiled one holds a run of siblings' acks itself until spill(); here they are in acks
    execute.spill = _nothing  # type: ignore[attr-defined]
    return execute


def _nothing() -> None:
    """Does nothing."""


# 3.12 and later: allocations no longer run the collector (it runs at the eval breaker)
_COLLECTOR_INSIDE_ALLOCATIONS = sys.version_info < (3, 12)
_frames_lock = threading.Lock()


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the garbage collector off for the call, turned back on only
    if it was on (`squall.engine.thread_frames` says why); one caller at a time, so that no
    caller turns it back on while another is inside. Other threads run between the three calls
    here: a ``gc.disable()`` of theirs made meanwhile is undone, and a ``gc.enable()`` lets a
    collection run inside the call. The compiled one makes them one step."""
    if not _COLLECTOR_INSIDE_ALLOCATIONS:
        return sys._current_frames()
    with _frames_lock:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return sys._current_frames()
        finally:
            if was_on:
                gc.enable()


def own_methods(cls: type) -> list:
    """Set the methods of ``cls``'s compiled base that ``cls`` does not override on ``cls`` itself
    (compiled: CPython 3.11 specialises a call of a C method only on an instance of exactly the
    method's class). Here the bases' methods are Python functions, whose calls it specialises
    anyway: nothing to do. Returns the names set."""
    return []


def send_acks(acks: dict, ackers: list, kind: Any) -> None:
    """Send each ack held in ``acks`` (root -> xor) to its acker, ``ackers[root % len(ackers)]``,
    as ``(kind, root, xor, -1)``; then clear ``acks`` (also when a send raises)."""
    n = len(ackers)
    try:
        for root, val in acks.items():
            ackers[root % n]((kind, root, val, -1))
    finally:
        acks.clear()


class PendingTreeBase:
    """The fields of `squall.engine.acker.PendingTree`."""

    __slots__ = ("cause", "failed", "reset", "spout_task", "start", "xor")


def acker_run(acker, pop, n: int, now: float, deliver) -> None:
    """Apply ``n`` messages ``(kind, root, value, spout_task)`` from ``pop()`` to ``acker``
    (`Acker.update`), delivering each reply ``(kind, root, delta_secs)`` to ``deliver[spout_task]``."""
    update = acker.update
    for _ in range(n):
        kind, root, val, spout_task = pop()
        reply = update(kind, root, val, spout_task, now)
        if reply is not None:
            deliver[reply[0]](reply[1:])


def acker_drain(acker: Any, pop: Any, n: int, now: float, deliver: Any, sampled: Any, key_of: Any) -> int:
    """An acker task's ``n`` messages from ``pop()`` (`acker_run`), with Storm's sampled
    statistics: the last of each run of ``sampled.left`` messages is counted, ``sampled.freq``
    times, in the `KeyStats` of its handle (``(INIT, spout_task)`` for an init, else its kind) in
    ``sampled.by_handle``, else in ``key_of(kind, spout_task)``'s; then the next gap is drawn.
    ``sampled.left`` is kept, on an exception too. Returns ``n`` (`AckerExecutor.drain`)."""
    left = sampled.left
    ran = 0
    try:
        while ran < n:
            run = left - 1 if left - 1 < n - ran else n - ran  # noqa: FURB136 (a compare, not a min() call, on the drain path)
            acker_run(acker, pop, run, now, deliver)
            ran += run
            left -= run
            if ran < n:
                kind, root, val, spout_task = pop()
                reply = acker.update(kind, root, val, spout_task, now)
                if reply is not None:
                    deliver[reply[0]](reply[1:])
                ran += 1
                ks = sampled.by_handle.get((kind, spout_task) if kind == 0 else kind)  # 0: INIT
                if ks is None:
                    ks = key_of(kind, spout_task)
                ks.executed += sampled.freq
                left = sampled.gaps()
    finally:
        sampled.left = left
    return ran


class KeyStatsBase:
    """The figures of `squall.engine.stats.KeyStats`."""

    __slots__ = ("acked", "execute_ms", "execute_n", "executed", "failed", "latency_ms", "latency_n")

    def __init__(self) -> None:
        self.acked = self.failed = self.executed = self.latency_n = self.execute_n = 0
        self.latency_ms = self.execute_ms = 0.0


def drain_inbox(execute: Any, pop: Any, n: int, stats: Any, sampled: Any, now: Any, on_error: Any = None,
                executing: Any = None, budget: float | None = None) -> int:
    """A bolt task's ``n`` inputs from ``pop()``, with Storm's sampled statistics: runs of
    ``sampled.left - 1`` plain inputs (`execute_run`), then a sampled one, timed with ``now()``
    and opened as a sample for its ack to close (`squall.engine.stats.TaskStatistics`); its
    figures are added also when it raises. With ``budget`` (seconds), the drain ends after the
    first input that returns once it has run that long (by `time.monotonic`; at least one input
    runs). Returns the inputs executed; ``sampled.left`` is kept, on an exception too
    (`squall.engine.bolt_executor.BoltExecutor.drain`). ``on_error``, ``executing``: as
    `execute_run`'s."""
    # (the clock is read only for a drain of more than one input: one always runs)
    deadline = _monotonic() + max(budget, 0.0) if budget is not None and n > 1 else None
    left = sampled.left
    ran = 0
    try:
        while ran < n:
            run = left - 1 if left - 1 < n - ran else n - ran  # noqa: FURB136 (a compare, not a min() call, on the drain path)
            done = _run_inputs(execute, pop, run, stats, on_error, executing, deadline)  # counted, on a crash too
            ran += done
            left -= done
            if done < run or (ran < n and run and _past(deadline)):
                break
            if ran < n:
                tup = pop()
                ks = sampled.key_of(tup)
                start = now()
                sampled.open_sample(tup, start, ks)
                try:
                    _execute(execute, tup, on_error, executing)
                finally:
                    ks.executed += sampled.freq
                    ks.execute_ms += 1000.0 * (now() - start)
                    ks.execute_n += 1
                stats.executed += 1
                ran += 1
                left = sampled.gaps()
                if _past(deadline):
                    break
    finally:
        sampled.left = left
    return ran


def _past(deadline: float | None) -> bool:
    """Whether `time.monotonic` is at or past ``deadline`` (None: never)."""
    return deadline is not None and _monotonic() >= deadline


def _execute(execute: Any, tup: Any, on_error: Any, executing: Any = None) -> None:
    """``execute(tup)``; an `Exception` it raises goes to ``on_error(tup, exception)`` when given.
    With ``executing`` (an `ExecutingEntry`), ``tup``'s root is on its line meanwhile."""
    if executing is not None:
        root = getattr(tup, "_root", 0)
        executing.root = root if type(root) is int else 0
    try:
        execute(tup)
    except Exception as e:
        if on_error is None:
            raise
        on_error(tup, e)
    finally:
        if executing is not None:
            executing.root = 0


def execute_run(execute: Any, pop: Any, n: int, stats: Any, on_error: Any = None, executing: Any = None) -> int:
    """``execute(pop())`` ``n`` times, adding each input to ``stats.executed`` as it returns
    (on an exception, those before the one that raised); returns ``n``. A bolt executor's plain
    inputs between two sampled ones (`squall.engine.bolt_executor.BoltExecutor.drain`, through
    `drain_inbox`). With ``on_error``, an `Exception` that ``execute`` raises goes to
    ``on_error(input, exception)`` and the run goes on (the input counts as executed); what
    ``on_error`` raises ends it. With ``executing`` (an `ExecutingEntry`), each input's root is on
    its line while it is executed (`squall.engine.executing`)."""
    return _run_inputs(execute, pop, n, stats, on_error, executing, None)


def _run_inputs(execute: Any, pop: Any, n: int, stats: Any, on_error: Any, executing: Any,
                deadline: float | None) -> int:
    """`execute_run`'s work, also `drain_inbox`'s: with ``deadline`` (a `time.monotonic` value),
    the run ends after the first input that returns at or past it. Returns the inputs executed."""
    done = 0
    while done < n:
        _execute(execute, pop(), on_error, executing)
        done += 1
        stats.executed += 1
        if deadline is not None and _monotonic() >= deadline:
            break
    return done


def spout_replies(executor, pop, n: int, now, task_sampled: Any = None) -> None:
    """Apply ``n`` replies ``(kind, root, delta_secs)`` from ``pop()`` as ``executor._reply`` does
    (`SpoutExecutor`); ``now()`` is the clock the complete latency is measured with. With
    ``task_sampled`` (the task's `TaskStatistics`), Storm's sampled statistics: the last reply of
    each gap of ``task_sampled.left`` is a sampled one (``_reply(..., True)``), the next gap
    drawn before it; ``task_sampled.left`` is kept, on an exception too."""
    reply = executor._reply
    if task_sampled is None:
        for _ in range(n):
            reply(*pop())
        return
    left = task_sampled.left
    ran = 0
    try:
        while ran < n:
            run = left - 1 if left - 1 < n - ran else n - ran  # noqa: FURB136 (a compare, not a min() call, on the drain path)
            for _ in range(run):
                reply(*pop())
            ran += run
            left -= run
            if ran < n:
                left = task_sampled.gaps()
                kind, root, detail = pop()
                reply(kind, root, detail, True)
                ran += 1
    finally:
        task_sampled.left = left


def spout_produce(executor: Any, calls: list, budget: int, throttle: Any) -> int:
    """Up to ``budget`` rounds of ``next_tuple`` calls, ``calls`` being a spout executor's
    ``(task, next_tuple)`` pairs, each call made as its task (``executor.current_task``); a round
    that emitted nothing, a ``throttle.throttled`` or ``executor.in_flight`` at its
    ``max_pending`` (when not 0) ends them. Returns the emits made (`SpoutExecutor.produce`)."""
    start = executor.emits
    max_pending = executor.max_pending
    for _ in range(budget):
        before = executor.emits
        for t, next_tuple in calls:
            executor.current_task = t
            next_tuple()
        if executor.emits == before or (max_pending and executor.in_flight >= max_pending) or throttle.throttled:
            break
    return executor.emits - start


def memo_chooser(memo: dict, index: int, slow: Any, choices: list) -> Any:
    """The fields grouping's chooser for one key field (`squall._grouping.FieldsGrouping.chooser`):
    ``slow(values)``, which computes the choice among ``choices`` and remembers a str key's in
    ``memo``. In Python that is ``slow`` itself; compiled, the choice for a str key
    ``values[index]`` is made without a Python call: computed for an ASCII key (the same CRC-32
    and mix as ``slow``), looked up in ``memo`` for another."""
    return slow


def next_chooser(next_choice: Any) -> Any:
    """A chooser returning ``next_choice()`` whatever the values (`squall._grouping.ShuffleGrouping`)."""
    return lambda values: next_choice()


def batch_items(out: list, targets: list, values: list, src: Any, roots: Any, vals: Any, tuple_type: type) -> None:
    """Append a decoded batch run's targets and Tuples to ``out``, flat: ``target, tuple_type(values[i],
    src, roots[i], vals[i]), ...`` (``roots`` None: untracked tuples; a root None: the previous one,
    the same object); columns of different lengths raise ValueError."""
    # checked first, as the compiled one does: map() stops at its shortest column, so a damaged
    # batch whose values column was longer than its targets' was decoded, into Tuples whose
    # values were whatever that column held (a float, an int), where the compiled path refused it
    n = len(targets)
    if len(values) != n or roots is not None and (len(roots) != n or len(vals) != n):
        raise ValueError("a batch's run has columns of different lengths")
    if roots is None:
        tuples = list(map(tuple_type, values, repeat(src)))
    else:
        tuples = list(map(tuple_type, values, repeat(src), _same_roots(roots), vals))
    out.extend(interleave(targets, tuples))


def interleave(targets: list, items: list) -> list:
    """``[targets[0], items[0], targets[1], items[1], ...]`` (a batch flat, as a sender queues it
    and a receiver delivers it); lists of different lengths raise ValueError. Pure Python on both
    paths: two slice assignments, with no pair made per item."""
    if len(targets) != len(items):  # a forged or corrupt batch
        raise ValueError(f"a batch's column of {len(targets)} targets is for {len(items)} items")
    out: list = [None] * (2 * len(items))
    out[::2] = targets
    out[1::2] = items
    return out


def _same_roots(roots: list) -> Any:
    """A run's roots, each None (`squall.engine.serialize.SAME_ROOT`) the previous one again."""
    root = None
    for r in roots:
        if r is not None:
            root = r
        elif root is None:
            raise ValueError("a batch's run begins with the previous tuple's root")
        yield root


def deliver_items(inboxes: dict, items: list) -> int:
    """Append each item of ``items`` (flat: ``[task, item, task, item, ...]``) to ``inboxes[task]``,
    dropping items for tasks not there; returns how many were delivered."""
    if len(items) % 2:
        raise TypeError(f"a received batch is flat, task then item: got {len(items)} values")
    delivered = 0
    for task, item in zip(items[::2], items[1::2]):
        q = inboxes.get(task)
        if q is not None:
            q.append(item)
            delivered += 1
    return delivered


def group_items(items: list, tuple_type: type) -> Any:
    """The columns of a batch to send (``items`` flat: ``[task, item, task, item, ...]``), in C (`squall.engine.serialize.Serializer._group` says
    which); here None, and the serializer groups the items in Python."""
    return None


def pack_batch(items: list, tuple_type: type) -> bytes | None:
    """A batch's bytes made in C without msgpack's lists of columns
    (`squall.engine.serialize.Serializer.encode_batch`); here None, and the serializer packs the
    batch with msgpack, which writes the same bytes."""
    return None


def unpack_batch(data: Any, source_of: Any, tuple_type: type, words: list) -> list | None:
    """A received batch of plain values decoded in C straight from its bytes into its flat items,
    remembering short words in ``words`` (`squall.engine.serialize.Serializer.decode_batch`);
    here None, and the serializer decodes the batch with msgpack, into the same items."""
    return None


def unpack_into(data: Any, source_of: Any, tuple_type: type, words: list, inboxes: dict) -> int | None:
    """A received batch of plain values decoded in C straight into ``inboxes`` (a dict of deques by
    task; items for other tasks dropped), returning the items delivered
    (`squall.engine.serialize.Serializer.decode_into`); here None, with nothing delivered, and the
    batch is decoded and delivered the long way (`unpack_batch`, msgpack, `deliver_items`)."""
    return None


def plain_check(tuple_type: type[Any], plain: frozenset, check: Any) -> Any:
    """``check_item(item)``: ``check(item)`` (which raises for a value that cannot be sent) when
    ``item`` is a ``tuple_type`` with a value whose type is not in ``plain``; else nothing."""
    def check_item(item: Any) -> None:
        if type(item) is tuple_type:
            for v in item.values:
                if type(v) not in plain:
                    check(item)
                    return
    return check_item


class Outbox:
    """The items queued for one peer worker (`squall.worker.batching`). Compiled, a plain item is
    written as its batch's bytes when it is queued, and a tracked emit to a `sender` of an
    outbox writes its tuple there without making it; here every item is kept as it is, for the
    serializer to encode at the flush.

    Args:
        max_items: the items a batch holds at most.
        max_bytes: about the bytes a batch holds at most (compiled; an item of more than half
            of it is kept as it is, for the serializer to send or refuse).
        write: compiled, whether plain items are written as bytes (`squall.engine.serialize`'s
            batch format); false for a serializer of another format, which gets every item.
        seed: compiled, the state of the edge ids it draws for the tracked emits written to it
            (`squall.engine.serialize.edge_values`); here every edge id is the emit's own.
    """

    def __init__(self, max_items: int, max_bytes: int, write: bool = True, seed: int = 0) -> None:
        if max_items < 1:
            raise ValueError("Outbox: max_items must be 1 or more")
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.write = bool(write)
        self._items: list = []

    def put(self, task: int, item: Any, tuple_type: type) -> None:
        """Queue ``item`` for ``task``. One ``extend`` is one step under the GIL, so a `take` on
        another thread never takes a task without its item."""
        self._items.extend((task, item))

    def take(self) -> list:
        """Everything queued, in order, as chunks: each bytes (a whole batch, compiled only) or a
        list (flat: ``[task, item, task, item, ...]``) for the serializer."""
        items = self._items
        if not items:
            return []
        # a copy, then a delete of as many from the front: each is one step under the GIL, and
        # senders on other threads only extend, so what they add in between stays for the next take
        taken = items[:]
        del items[:len(taken)]
        return [taken]

    def __len__(self) -> int:
        return len(self._items) // 2


def sender(queue: Any, task: int, tuple_type: type, plain: frozenset, check: Any) -> Any:
    """``send(item)``: queues ``item`` for ``task`` in ``queue``, an `Outbox`, or a list to which
    it appends ``task``, then ``item`` (flat: ``[task, item, task, item, ...]``), after
    `plain_check`'s check of ``item``. One ``extend`` is one step under the GIL, so a flush on
    another thread never takes a task without its item."""
    check_item = plain_check(tuple_type, plain, check)
    if isinstance(queue, Outbox):
        put = queue.put

        def send_to(item: Any) -> None:
            check_item(item)
            put(task, item, tuple_type)
        return send_to
    if not isinstance(queue, list):
        raise TypeError("Sender: queue must be a list or an Outbox")
    extend = queue.extend

    def send(item: Any) -> None:
        check_item(item)
        extend((task, item))
    return send


PLAIN_KEY_TYPES = frozenset({str, bytes, int})
"""The parts of a key an in-memory map keeps as it is: no two of different encodings are equal (1
and 1.0 and True are equal in Python and distinct encoded, so floats and bools keep their encoding)."""

PLAIN_VALUE_TYPES = frozenset({str, bytes, int, float, bool, complex, type(None)})
"""Values that cannot change: an in-memory map keeps them as they are (a read needs no copy)."""


def plain_value(value: Any) -> bool:
    """Whether ``value`` cannot change: a `PLAIN_VALUE_TYPES` or a tuple of such values."""
    t = type(value)
    if t in PLAIN_VALUE_TYPES:
        return True
    return t is tuple and all(plain_value(v) for v in value)


def opaque_commit(committed: dict, written: dict, ks: list, args: list, curr_tx: Any, combine: Any,
                  value_type: Any) -> tuple[list, list[int], list[int]]:
    """A grouped combiner's commit of batch ``curr_tx`` into an opaque in-memory map, key by key
    (what `squall.trident.state.map.OpaqueMap.combine_partials` does over a backing map).

    ``committed`` maps each key (a tuple) to its stored ``value_type`` (an `OpaqueValue`) or to
    something kept encoded; ``written`` is what this batch wrote already, which it builds on as
    Storm's ``CachedBatchReadsMap``. Key ``ks[i]`` is combined with the partial ``args[i]``
    (``combine(stored, arg)``, or ``stored + arg`` when ``combine`` is None: the built-in
    Count's) by Storm's opaque rule; its new value goes to ``written`` and, if both its values
    are plain (`plain_value`), to ``committed``. Returns the new values (None where handed back),
    the indices handed back untouched (a key whose parts are not `PLAIN_KEY_TYPES` or whose
    stored value is encoded: the caller decodes) and the indices whose new value, in
    ``written``, the caller must encode into ``committed``. A stored txid newer than ``curr_tx``
    raises the value's own error (``value_type.for_batch``, which holds the rule)."""
    if len(ks) != len(args):
        raise ValueError(f"{len(ks)} keys and {len(args)} partial aggregates: one per key is needed")
    ret: list[Any] = [None] * len(ks)
    left: list[int] = []
    encode: list[int] = []
    plain_parts = PLAIN_KEY_TYPES
    for i, (k, arg) in enumerate(zip(ks, args)):
        if type(k) is not tuple or any(type(part) not in plain_parts for part in k):
            left.append(i)
            continue
        stored: Any = written.get(k)
        cached = stored is not None
        if stored is None:
            stored = committed.get(k)
        if stored is None:
            prev, new = None, arg
        else:
            if type(stored) is not value_type:
                left.append(i)
                continue
            # the rule's one home is the value's (`OpaqueValue.for_batch`); the C is its twin
            base, prev = stored.for_batch(curr_tx, cached)
            new = arg if base is None else base + arg if combine is None else combine(base, arg)
        value = value_type(curr_tx, new, prev)
        written[k] = value
        if plain_value(new) and plain_value(prev):
            committed[k] = value
        else:
            encode.append(i)
        ret[i] = new
    return ret, left, encode


class CountingEmit:
    """``emit(values)`` of a Trident function whose every emit a fused grouped ``Count`` counts
    (`squall.trident.processors._CountingCollector`): adds one to the group's count in ``groups``
    (``{(group value,): count}``), the group value being ``values[index]``, or ``input[index]``
    when ``index`` < 0 (a field of the tuple the function executes). Values that are not a list
    or tuple of ``nvalues`` values, and a group that cannot be hashed, go to ``general(values)``
    (the collector's Python emit, which counts them or raises its error)."""

    __slots__ = ("general", "groups", "index", "input", "nvalues")

    def __init__(self, index: int, general: Any) -> None:
        self.index = index
        self.general = general
        self.groups: dict = {}
        self.input: list = []
        self.nvalues = -1

    def __call__(self, values: Any) -> None:
        t = type(values)
        if (t is list or t is tuple) and len(values) == self.nvalues:
            i = self.index
            if i >= 0 or -i <= len(self.input):
                group = (values[i],) if i >= 0 else (self.input[i],)
                groups = self.groups
                try:
                    groups[group] = groups.get(group, 0) + 1
                    return
                except TypeError:  # unhashable: the general path raises its error
                    pass
        self.general(values)


def pack_rows(rows: list, attempt: Any, choose: Any, nfields: int, packs: dict, stream: Any,
              counts: dict) -> tuple[int, int]:
    """Each of ``rows`` (a Trident bolt's emits on packed stream ``stream``) appended to the pack
    ``packs[(stream, task)]`` of every task ``choose([attempt, *row])`` names, and counted in
    ``counts[task]`` (`squall.trident.executor._Output.emit_many`). Stops at the first row whose
    length is not ``nfields``. Returns (rows packed, tuples transferred)."""
    transferred = 0
    for i, values in enumerate(rows):
        if len(values) != nfields:
            return i, transferred
        tasks = choose([attempt, *values])
        transferred += len(tasks)
        for task in tasks:
            pack = packs.get((stream, task))
            if pack is None:
                packs[(stream, task)] = [values]
            else:
                pack.append(values)
            counts[task] = counts.get(task, 0) + 1
    return len(rows), transferred


def combine_rows(rows: Any, groups: dict, width: int, group_index: int, value_index: int, combine: Any) -> int:
    """A pack's ``rows`` taken by a grouped combiner's persist (one group field): the group
    ``(row[group_index],)`` gets ``row[value_index]`` if new, else ``combine(old, value)``
    (``old + value`` when ``combine`` is None: the built-in Count's). Stops at the first row that
    is not a list or tuple of ``width`` values or whose group cannot be hashed, for the caller to
    take on from there (and raise its error). Returns the rows done."""
    if not (0 <= group_index < width and 0 <= value_index < width):
        raise ValueError("combine_rows: the group and value indices must be within the width")
    for i, row in enumerate(rows):
        t = type(row)
        if (t is not list and t is not tuple) or len(row) != width:
            return i
        group = (row[group_index],)
        value = row[value_index]
        try:
            old = groups.get(group, _ABSENT)
        except TypeError:  # unhashable: the caller's path raises its error
            return i
        groups[group] = value if old is _ABSENT else old + value if combine is None else combine(old, value)
    return len(rows)


_ABSENT = object()


class TridentTupleBase:
    """The slots of `squall.trident.TridentTuple` (``values``, ``_fields``), ``t[i]`` (an index,
    a slice, or a field's name) and ``len(t)``."""

    __slots__ = ("_fields", "values")
    values: list
    _fields: Any

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self.values[self._fields.index(key)]
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)


def view_of(cls: Any, fields: Any, values: Any) -> Any:
    """An instance of ``cls`` (a `TridentTupleBase` subtype) holding ``fields`` and ``values``,
    made without its ``__init__``."""
    if not (isinstance(cls, type) and issubclass(cls, TridentTupleBase)):
        raise TypeError("view_of(type: a TridentTupleBase subtype, fields, values)")
    t = cls.__new__(cls)
    t.values = values
    t._fields = fields
    return t


_COMPILED_NAMES = {"IdSource": "IdSource", "BasicCollectorBase": "BasicCollectorBase", "BasicExecute": "BasicExecute",
                   "PendingTreeBase": "PendingTreeBase", "RouterBase": "RouterBase", "TupleBase": "TupleBase",
                   "TaskStatsBase": "TaskStatsBase", "SpoutExecutorBase": "SpoutExecutorBase",
                   "acker_run": "acker_run", "acker_drain": "acker_drain", "execute_run": "execute_run", "spout_replies": "spout_replies",
                   "spout_produce": "spout_produce", "memo_chooser": "MemoChooser",
                   "next_chooser": "NextChooser", "batch_items": "batch_items",
                   "group_items": "group_items", "deliver_items": "deliver_items",
                   "sender": "Sender", "SpoutCollectorBase": "SpoutCollectorBase",
                   "BoltCollectorBase": "BoltCollectorBase", "epoll_ready": "epoll_ready",
                   "send_nb": "send_nb", "recv_nb": "recv_nb",
                   "pack_batch": "pack_batch", "unpack_batch": "unpack_batch", "unpack_into": "unpack_into", "StaleWatch": "StaleWatch", "send_acks": "send_acks",
                   "own_methods": "own_methods",
                   "drain_inbox": "drain_inbox", "KeyStatsBase": "KeyStatsBase",
                   "opaque_commit": "opaque_commit", "CountingEmit": "CountingEmit",
                   "pack_rows": "pack_rows", "TridentTupleBase": "TridentTupleBase", "view_of": "view_of",
                   "combine_rows": "combine_rows", "Outbox": "Outbox", "ExecutingEntry": "ExecutingEntry",
                   "current_frames": "current_frames"}


class ExecutingEntry:
    """A bolt executor's line on its worker's board of the inputs being executed
    (`squall.engine.executing`): 16 bytes at ``offset`` (a multiple of 8) in the writable buffer
    ``memory``, ``root`` (the root of the input being executed, 0: none; an unsigned 64-bit int)
    then ``task`` (a signed one), in this machine's byte order. `execute_run` and `drain_inbox`
    store each input's root before its ``execute`` and 0 after it: compiled, two 64-bit stores."""

    __slots__ = ("_line",)

    def __init__(self, memory: Any, offset: int) -> None:
        view = memoryview(memory).cast("B")
        if view.readonly:
            raise BufferError("Object is not writable.")   # as the compiled one's buffer request says
        if offset < 0 or offset % 8 or offset > len(view) - 16:
            raise ValueError(f"ExecutingEntry: offset {offset} is not an 8-byte aligned place for 16 bytes "
                             f"in a buffer of {len(view)}")
        self._line = view[offset:offset + 16].cast("Q")

    @property
    def root(self) -> int:
        """The root of the input being executed (0: none)."""
        return self._line[0]

    @root.setter
    def root(self, value: int) -> None:
        self._line[0] = value

    @property
    def task(self) -> int:
        """The task whose inputs are executed."""
        task = self._line[1]
        return task - (1 << 64) if task >= 1 << 63 else task

    @task.setter
    def task(self, value: int) -> None:
        self._line[1] = value & 0xFFFFFFFFFFFFFFFF


class StaleWatch:
    """When a worker's loops last polled the TCP wire (`squall.worker.tcp.TcpTransport`), and a
    wait until that is too long ago and, given ``fd`` (the transport's epoll), something is there
    to read. Compiled, the wait sleeps without the GIL, so the transport's watchman does not take
    the GIL from a busy loop to find it has nothing to do."""

    def __init__(self, fd: Any = None) -> None:
        self._polled = time.monotonic()
        self._closed = False
        self._fd = fd

    def touch(self) -> None:
        """A loop polls now."""
        self._polled = time.monotonic()

    def wait_stale(self, secs: float, until: float | None = None) -> bool:
        """True once ``secs`` have passed since the last `touch` and, given ``fd``, it is
        readable or ``time.monotonic()`` has reached ``until`` (None: never); False once `close`
        was called."""
        if not 0.0 < secs < 3600.0:
            raise ValueError("StaleWatch.wait_stale: secs must be above 0 and below 3600")
        if until is not None and math.isnan(until):
            raise ValueError("StaleWatch.wait_stale: until must be a time, not NaN")
        while not self._closed:
            now = time.monotonic()
            left = self._polled + secs - now
            if left > 0:
                time.sleep(left)
                continue
            if self._fd is None or (until is not None and now >= until):
                return True
            # stale: wait (a span at most, to see a close or a touch) for something to read
            try:  # poll(), not select(), which refuses a descriptor past 1023
                watch = select.poll()
                watch.register(self._fd, select.POLLIN)
                readable = bool(watch.poll(secs * 1000))
            except (OSError, ValueError):
                readable = True  # the caller's read reports it
            if readable and self._polled + secs - time.monotonic() <= 0:
                return True
        return False

    def close(self) -> None:
        """`wait_stale` returns False from now on (within its ``secs``)."""
        self._closed = True


def epoll_ready(epoll: Any) -> list:
    """``[(fd, events)]`` ready now on ``epoll`` (`squall.worker.tcp`; compiled, it keeps the GIL)."""
    return epoll.poll(0)


def send_nb(sock: Any, data: Any) -> int:
    """Bytes of ``data`` sent on the non-blocking ``sock``; 0 if it would block (compiled, it
    keeps the GIL, see `squall.worker.tcp`). Other errors raise `OSError`."""
    try:
        return sock.send(data)
    except (BlockingIOError, InterruptedError):
        return 0


def recv_nb(sock: Any, size: int) -> bytes | None:
    """Up to ``size`` bytes from the non-blocking ``sock``: ``b""`` once the peer closed, None if
    nothing has come (compiled, it keeps the GIL). Other errors raise `OSError`."""
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None


class StaleBuildError(ImportError):
    """``squall._speedups`` was built from another version of ``squall/_speedups.c`` (or a
    ``_speedups_*.c`` it includes) than the one beside it: an edit without a rebuild, whose old
    C would run silently."""


def source_digest(source: Path) -> str:
    """The SHA-256 that ``setup.py`` records for a build from ``source`` (``_speedups.c``): over
    its bytes, then those of each ``_speedups_*.c`` beside it that it includes, in name order."""
    digest = hashlib.sha256(source.read_bytes())
    for included in sorted(source.parent.glob(f"{source.stem}_*.c")):
        digest.update(included.read_bytes())
    return digest.hexdigest()


def check_build(module: Any, source: Path) -> None:
    """Raise `StaleBuildError` unless ``module`` (the compiled ``_speedups``) was built from
    ``source`` and the files it includes as they are now (`source_digest`, which ``setup.py``
    records in the module's ``SOURCE_SHA256``). With no source beside the module (an installed
    wheel) there is nothing to compare, and the build is taken as it is."""
    if not source.is_file():
        return
    built = getattr(module, "SOURCE_SHA256", "")
    now = source_digest(source)
    if built != now:
        raise StaleBuildError(
            f"{getattr(module, '__file__', module)} was built from another version of {source} "
            f"(built from {built[:12] or 'a source it did not record'}, the file is now {now[:12]}). "
            "Rebuild it: `pip install -e .` or `python setup.py build_ext --inplace` in the repository; "
            "or set SQUALL_PURE_PYTHON=1 to run on the pure-Python twins")


COMPILED = False
if not os.environ.get("SQUALL_PURE_PYTHON"):
    try:
        from . import _speedups  # type: ignore[attr-defined]
    except ImportError:  # not built (no compiler at install time): the twins above serve
        pass
    else:
        check_build(_speedups, Path(__file__).with_name("_speedups.c"))
        globals().update({name: getattr(_speedups, c_name) for name, c_name in _COMPILED_NAMES.items()})
        COMPILED = True
