"""The bolt executor and its collectors (Storm's ``BoltExecutor``, ``BoltOutputCollectorImpl``,
``BasicBoltExecutor``).

Anchoring follows Storm exactly: for each target task and each anchor in a tracked tree, a fresh
64-bit edge id is xored into the anchor's ``outAckVal`` and into the child's value for every
root of the anchor; ``ack`` sends ``value ^ outAckVal`` per root to the acker. The common shape,
one anchor in one tree, keeps the root and value in two int slots of the tuple (no dict).

`OutputCollector` is thread-safe: items are appended to deques (atomic under the GIL), and an
emit or ack from a thread other than the executor's loop wakes that loop, which may be asleep.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from .._collectors import BasicOutputCollector, OutputCollector
from .._components import BasicBolt
from .._config import Config, conf_value
from .._errors import EmitError, FailedException, ReportedFailedException, WorkerStoppingError
from .._failure import EXCEPTION, EXPLICIT, FailureCause
from .._native import BasicCollectorBase, BasicExecute, BoltCollectorBase, IdSource, drain_inbox, own_methods, send_acks
from .._system import DEFAULT_STREAM, is_system_id
from .._tuple import TICK_SOURCE, UNROOTED_LINEAGE, Tuple, tick_source
from .acker import ACK, FAIL, RESET
from .executor import ErrorThrottle, Executor, TaskStats, Wiring, debug_log
from .plan import ExecutorSpec
from .routing import _NOWHERE, Router, bad_stream, build_routers, direct_task, not_values, router_of, wrong_size
from .stats import component_figures

_get_ident = threading.get_ident
_monotonic = time.monotonic

# How long one task's drain may hold its loop before it ends, after the input running then
# returns (at least one input runs each round). Up to DRAIN_LIMIT (1024) inputs are drained a
# round, and a bolt slow on each one (0.5 s: not one call long enough for the watchdog to move it)
# held a shared loop for 64 of them, 32 s: the acker, the spouts' acks and fails and the pending
# maps' rotation waited behind it, so that in 16 s with a 1 s message timeout none of 64 spout
# tuples was acked or failed, nor the checkpoint spout's init. A bolt fast on each input (a few
# microseconds) drains its 1024 well within this, and is not cut short.
DRAIN_BUDGET_SECS = 0.1

__all__ = ["BasicCollector", "BoltCollector", "BoltExecutor", "ErrorThrottle"]  # ErrorThrottle: executor's, once here


def _nothing() -> None:
    """A task's spill when it holds no acks in C (a bolt that is no BasicBolt)."""


class BoltExecutor(Executor):
    """Runs the tasks of one bolt component: ``execute`` per inbox tuple, ticks on a timer."""

    kind = "bolt"

    def __init__(self, spec: ExecutorSpec, wiring: Wiring, objs: dict[int, Any], contexts: dict[int, Any],
                 conf: dict[str, Any]) -> None:
        super().__init__(spec, wiring)
        self.objs = objs
        self.contexts = contexts
        self.conf = conf
        self.collectors: dict[int, BoltCollector] = {}
        self.execute: dict[int, Any] = {}
        self.tick: Tuple | None = None  # the tick tuple of its tasks, when they get ticks (set by open)
        self.ticks_queued: dict[int, int] = {}
        self.tick_stats: dict[int, TaskStats] = {}
        self.tick_execute: dict[int, Any] = {}
        # per task: what hands a BasicBolt's acks held in C to self.acks (`_basic_execute`)
        self.spill: dict[int, Callable[[], None]] = dict.fromkeys(self.task_ids, _nothing)
        self.acks: dict[int, int] = {}  # root -> xor of acks made this drain (see flush_acks)
        rng = random.Random(wiring.seed ^ spec.tasks[0])
        for t in self.task_ids:
            routers = build_routers(wiring.plan, self.component, t, contexts[t], rng, wiring.loads)
            self.collectors[t] = BoltCollector(self, t, routers, conf)
        # An exception escaping execute fails its input with the cause (`_input_raised`); then,
        # by default, it is reported and the task goes on; with topology.bolt.fail.fast it
        # crashes the worker, as in Storm (null: the bolt's ``squall_fail_fast`` when it raises,
        # true for a windowed bolt and for a stateful one whose state cannot undo what one
        # execute changed, which only the crash's rollback then drops)
        setting = conf.get(Config.TOPOLOGY_BOLT_FAIL_FAST)
        self.fail_fast: bool | None = None if setting is None else bool(setting)
        self.on_error = {t: functools.partial(self._input_raised, t) for t in self.task_ids}
        # its line on the worker's board: the root of the input it executes, read if the worker
        # dies (squall.engine.executing); an executor of several tasks names each as it drains it
        self.executing = wiring.executing
        self._executing_tasks = wiring.executing if len(self.task_ids) > 1 else None

    def open(self) -> None:
        freq = self.conf.get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
        ticked = bool(freq) and not is_system_id(self.spec.component)  # Storm's setupTicks: none for system bolts
        # Tick tuples are not counted in a task's counters (executed, acked, failed), as Storm's UI
        # leaves the __tick stream out of a bolt's figures: a tick runs through `tick_execute`,
        # which counts it in `tick_stats` (its sampled statistics, per stream, keep it)
        self.tick = Tuple([freq], tick_source()) if ticked else None
        self.ticks_queued = dict.fromkeys(self.task_ids, 0)  # ticks in each task's inbox
        self.tick_stats = {t: TaskStats() for t in self.task_ids} if ticked else {}
        self.tick_execute = {}
        for t in self.task_ids:
            self.current_task = t
            obj = self.objs[t]
            collector = self.collectors[t]
            if isinstance(obj, BasicBolt):
                obj.prepare(self.conf, self.contexts[t])
                basic = BasicCollector(collector)
                self.execute[t] = execute = _basic_execute(obj, collector, basic)
                self.spill[t] = execute.spill
                if ticked:  # its ack of a tick counted apart (an untracked ack: nothing held)
                    self.tick_execute[t] = _basic_execute(obj, collector, basic, self.tick_stats[t])
            else:
                obj.prepare(self.conf, self.contexts[t], collector)
                self.execute[t] = self.tick_execute[t] = obj.execute  # (its collector tells a tick's ack)
            watch = getattr(obj, "squall_activation", None)
            if watch is not None:  # a persistent window: whether a commit was taken while stopped
                watch(self.wiring.state)
        if ticked:
            self.drain = self._drain_ticked  # type: ignore[method-assign]
        self.opened = True

    def drain(self, limit: int) -> int:
        done = 0
        now = self.wiring.clock.now
        for t, q in self.inboxes.items():
            n = len(q)
            if not n:
                continue
            if n > limit:  # noqa: PLR1730 (a compare, not a min() call, on the drain path)
                n = limit
            self.current_task = t
            if self._executing_tasks is not None:
                self._executing_tasks.task = t
            # Storm's sampled statistics: runs of plain inputs, then a sampled one (timed); fewer
            # than n once the drain has held the loop for DRAIN_BUDGET_SECS
            done += drain_inbox(self.execute[t], q.popleft, n, self.stats[t], self.sampled[t], now, self.on_error[t],
                                self.executing, DRAIN_BUDGET_SECS)
            self.spill[t]()  # a BasicBolt's acks held in C, into self.acks: flushed below
        if self.acks:
            self.flush_acks()
        return done

    def _drain_ticked(self, limit: int) -> int:
        """`drain` for an executor that gets tick tuples: each tick runs by itself, counted in
        the task's `tick_stats` instead of its counters, in its place among the data."""
        done = 0
        now = self.wiring.clock.now
        tick = self.tick
        queued = self.ticks_queued
        for t, q in self.inboxes.items():
            n = len(q)
            if not n:
                continue
            if n > limit:  # noqa: PLR1730 (a compare, not a min() call, on the drain path)
                n = limit
            self.current_task = t
            if self._executing_tasks is not None:
                self._executing_tasks.task = t
            left = n
            deadline = _monotonic() + DRAIN_BUDGET_SECS  # the task's, across its runs between ticks
            while left:
                run = left
                if queued[t]:
                    try:  # (identity compares, in C)
                        run = q.index(tick, 0, left)
                    except ValueError:  # further in the inbox
                        pass
                    except RuntimeError:  # appended to meanwhile (a receiving thread): one at a time
                        run = 0 if q[0] is tick else 1
                if run:
                    ran = drain_inbox(self.execute[t], q.popleft, run, self.stats[t], self.sampled[t], now,
                                      self.on_error[t], self.executing, deadline - _monotonic())
                    left -= ran
                    done += ran
                    if ran < run:  # past the budget
                        break
                if left:  # the tick is next
                    queued[t] -= 1
                    drain_inbox(self.tick_execute[t], q.popleft, 1, self.tick_stats[t], self.sampled[t], now,
                                self.on_error[t], self.executing)
                    left -= 1
                    done += 1
                    if _monotonic() >= deadline:
                        break
            self.spill[t]()
        if self.acks:
            self.flush_acks()
        return done

    def _input_raised(self, task: int, tup: Tuple, error: Exception) -> None:
        """``execute`` of ``task`` raised ``error`` on input ``tup``: fail the input with the
        cause, so that its spout charges that record, not the others in flight, and can say in
        its dead letter what raised what. Then, by default, report it as a crash is reported
        (component, task, time, traceback; at most ``topology.max.error.report.per.interval``
        per ``topology.error.throttle.interval.secs``, Storm's throttle) and go on; with
        ``topology.bolt.fail.fast``, raise it again: the worker crashes (and reports it), and
        the spouts fail this input as an exception, the others it held as a lost worker.

        An error that carries its own ``squall_input_cause`` (a `FailureCause`) fails the input
        for that cause instead: a component that knows its input was not at fault (a ShellBolt
        whose subprocess died on an earlier tuple crashes the worker from the next ``execute``)
        must not charge that input to its record's retry budget.

        A `WorkerStoppingError` (a call the worker's stop cut short, as a Trident state call's
        retries) fails the input as a lost worker's, uncharged, and is not reported: at every
        stop of a worker in such a call, its topology's errors said a bolt had failed."""
        if isinstance(error, WorkerStoppingError):
            self.collectors[task].fail_with(tup, FailureCause.lost_in(self.component, task, error))
            return
        cause = getattr(error, "squall_input_cause", None)
        if not isinstance(cause, FailureCause):
            cause = FailureCause.of_exception(EXCEPTION, self.component, task, error)
        self.collectors[task].fail_with(tup, cause)
        fail_fast = self.fail_fast
        if fail_fast is None:
            fail_fast = getattr(self.objs[task], "squall_fail_fast", False)
        if fail_fast:
            raise error
        self.report_error(task, error, "execute raised on an input, which fails")

    def flush_acks(self) -> None:
        """Send the coalesced acks: one message per root.

        An ack made on the loop's thread is held, xor-combined per root, only while the next
        tuple waiting in the task's inbox belongs to the same root; otherwise (and at the end of
        every drain) the held acks go out at once. A held ack therefore never delays its tree:
        the tree cannot complete before that next tuple of it is acked too. Exact, because xor is associative and commutative;
        a fan-out's children processed in a row (W1's ten words of a sentence) cost the acker
        one update instead of ten (ENGINE-SPEED.md, lesson 9).
        """
        # cleared in place, not replaced: each task's `BasicExecute` holds this dict
        send_acks(self.acks, self.wiring.ackers, ACK)

    def timers(self):
        """Ticks, and the timers of bolts with a ``squall_timers(clock)`` method (a windowed
        bolt's trigger or watermark, squall.windowing): called on the loop as the bolt's task."""
        own = [(period, functools.partial(self._task_timer, t, cb))
               for t in self.task_ids if hasattr(self.objs[t], "squall_timers")
               for period, cb in self.objs[t].squall_timers(self.wiring.clock)]
        horizon = self._sample_horizon()
        if horizon is not None:
            own.append((horizon / 2, functools.partial(self._expire_samples, horizon)))
        tick = self.tick  # (set by open)
        if tick is None:
            return own
        inboxes = list(self.inboxes.items())
        queued = self.ticks_queued
        tracker = self.wiring.tracker  # a tracked topology counts its ticks as transferred too
        component = self.component

        def send_ticks() -> None:
            if tracker is not None:
                tracker.transfer(component, len(inboxes))
            for t, q in inboxes:
                queued[t] += 1
                q.append(tick)  # through the inbox, so a tick is ordered with the data
        return own + [(float(tick.values[0]), send_ticks)]

    def _sample_horizon(self) -> float | None:
        """How long a sampled input's sample stays open for its ack (None: until the table's
        cap, `MAX_OPEN_SAMPLES`, pushes it out): twice the message timeout. By then the spout
        has failed the input's tree, if it was not acked (a timeout fails it between T and 2T),
        or, with acking off, nothing waits for the ack at all; a bolt that never acks an input
        (it drops it) left its sample, and the input it holds, in the table for good, up to
        the cap: 16,384 inputs per task, 2.6 MB of 100-byte tuples or 16 MB of 1 KB ones. With
        acking on and message timeouts off a tree may wait for any time, so its samples do."""
        if not self.sampled or not next(iter(self.sampled.values())).freq:
            return None  # statistics off: nothing is sampled
        if self.wiring.plan.acking and not conf_value(self.conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS):
            return None
        return 2.0 * float(conf_value(self.conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))

    def _expire_samples(self, horizon: float) -> None:
        """The timer of `_sample_horizon`: forget the samples open for longer than it (run every
        half horizon, so a sample is forgotten between 2T and 3T after it opened, when the
        acker forgets a tree it was not told the end of). An ack that comes later still counts
        in the exact counters, not in the sampled acked count and process latency."""
        before = self.wiring.clock.now() - horizon
        for sampled in self.sampled.values():
            sampled.expire_samples(before)

    def _task_timer(self, task: int, callback: Any) -> None:
        self.current_task = task
        callback()
        if self.acks:
            self.flush_acks()

    def close(self) -> None:
        for t in self.task_ids:
            self.current_task = t
            self.objs[t].cleanup()

    def emitted_by_stream(self, task):
        return {s: (r.emitted, r.transferred) for s, r in self.collectors[task].routers.items()}

    def sampled_snapshot(self, task: int) -> dict:
        """The task's statistics, with the figures the bolt reports of itself, if it does (a
        Trident spout's emitter bolt its dead letters: `squall.engine.stats.component_figures`)."""
        snapshot = super().sampled_snapshot(task)
        snapshot.update(component_figures(self.objs[task]))
        return snapshot


def _basic_execute(bolt: BasicBolt, out: BoltCollector, basic: BasicCollector, stats: TaskStats | None = None):
    """``execute`` of a BasicBolt: anchor emits to the input, then ack it (or fail it); see
    `squall._native.BasicExecute`. Its acks are counted in ``stats`` (default: the task's)."""
    executor = out._ex
    sampled = executor.sampled[out._task]  # sampled inputs: their ack closes the sample

    def on_failed(tup: Tuple, e: FailedException) -> None:
        if isinstance(e, ReportedFailedException):
            out.report_error(e)
        out.fail_with(tup, FailureCause.of_exception(EXPLICIT, out._component, out._task, e))
    return BasicExecute(bolt.execute, basic, out.ack, on_failed, FailedException, executor.acks,
                        out._stats if stats is None else stats,
                        sampled.open_samples, sampled, executor.wiring.clock.now, out._inbox,
                        executor.wiring.ackers, ACK)


class BoltCollector(BoltCollectorBase, OutputCollector):
    """The collector of one bolt task; thread-safe (see the module docstring).

    Its ``ack`` is `squall._native.BoltCollectorBase`'s: compiled, its common case runs in C;
    every case has the semantics of `_ack_general`.
    """

    def __init__(self, executor: BoltExecutor, task: int, routers: dict[str, Router], conf: dict) -> None:
        self._ex = executor
        self._task = task
        self._component = executor.component
        self.routers = routers
        w = executor.wiring
        self._deliver = w.deliver
        self._ackers = w.ackers
        self._nackers = len(w.ackers)
        self._stats: TaskStats = executor.stats[task]
        self._samples = executor.sampled[task].open_samples
        self._close_sample = executor.sampled[task].close_sample
        self._now = w.clock.now
        self._rand = IdSource(w.seed ^ (task << 20))
        self._loop_ident = -1  # set by the loop when it starts; emits from other threads wake it
        self._inbox = executor.inboxes[task]
        self._acks = executor.acks  # the held acks the compiled ack reads (never rebound: send_acks clears it)
        self._key_of = executor.sampled[task].key_of
        self._explicit = FailureCause(EXPLICIT, self._component, task)  # the cause of a plain fail
        self._debug = bool(conf.get(Config.TOPOLOGY_DEBUG))
        if self._debug:  # every emit logged (a BasicBolt's too: `BasicCollector`)
            self.emit = self._debug_emit  # type: ignore[method-assign]
            self.emit_direct = self._debug_emit_direct  # type: ignore[method-assign]

    def _wake(self) -> None:
        loop = self._ex.wiring.loop
        if loop is not None:
            loop.wake()

    def emit(self, values, anchors=None, stream=DEFAULT_STREAM):
        r = router_of(self.routers, stream)
        if r is None or r.direct:
            self._bad_stream(stream, r)
        if type(values) is not list and (type(values) is Tuple or not_values(values)) or len(values) != r.nfields:
            raise _bad_values(r, values)
        targets = r.choose(values)
        self._send(r, targets, values, anchors)
        if _get_ident() != self._loop_ident:
            self._wake()
        return targets

    def emit_direct(self, task_id, values, anchors=None, stream=DEFAULT_STREAM):
        r = router_of(self.routers, stream)
        if r is None:
            self._bad_stream(stream, r)
        if type(values) is not list and (type(values) is Tuple or not_values(values)) or len(values) != r.nfields:
            raise _bad_values(r, values)
        if type(task_id) is not int:
            task_id = direct_task(task_id, r)
        kind = r.direct_targets.get(task_id)
        if kind is False:
            raise EmitError(f"Cannot emitDirect to a task expecting a regular grouping "
                            f"(component [{self._component}], stream [{stream}], task {task_id})")
        self._send(r, [task_id] if kind else [], values, anchors)
        if _get_ident() != self._loop_ident:
            self._wake()

    def _bad_stream(self, stream, r):
        raise bad_stream(stream, r, self._component, self._task)

    def _send(self, r: Router, targets: list[int], values: list, anchors: Any) -> None:
        r.emitted += 1
        r.transferred += len(targets)
        if not targets:
            return
        deliver = self._deliver
        if anchors is None or not self._nackers:
            t = Tuple(values, r.src)
            for task in targets:
                deliver[task](t)
            return
        if type(anchors) is Tuple:
            root = anchors._root
            if type(root) is int:
                if not root:  # anchored to an untracked tuple: nothing to track
                    t = Tuple(values, r.src)
                    for task in targets:
                        deliver[task](t)
                    return
                rand = self._rand
                src = r.src
                for task in targets:
                    edge = rand()
                    anchors._oav ^= edge
                    deliver[task](Tuple(values, src, root, edge))
                return
            anchors = (anchors,)
        self._send_multi(r, targets, values, anchors)

    def _send_multi(self, r: Router, targets: list[int], values: list, anchors: Any) -> None:
        """The general case: several anchors, or anchors in several trees."""
        if type(anchors) is not list and type(anchors) is not tuple:
            # read once: an iterator (a generator, a map) read again per target anchored
            # nothing, and its children, unanchored, let their spout tuple complete at once
            anchors = _listed_anchors(anchors, r)
        for a in anchors:
            if type(a) is not Tuple:
                s = r.src
                raise EmitError(f"anchors must be input Tuples, got {type(a).__name__} {a!r:.100} "
                                f"(component [{s.component}], task {s.task}, stream [{s.stream}]); "
                                f"squall's order is emit(values, anchors), not Storm's Java emit(anchor, values)")
        rand = self._rand
        deliver = self._deliver
        # a child of a tuple that descends from an input in no spout's tree that checkpoints wait
        # for (a persistent window's result) inherits the mark, in its spout's tree or not: lost,
        # its spout's replay would not bring the result back (`squall._tuple.UNROOTED_LINEAGE`)
        # (a ``_val`` set beside a dict root or none is that mark: beside one int root it is an edge)
        lineage = any(a._val and (type(a._root) is not int or not a._root) for a in anchors)
        for task in targets:
            roots: dict[int, int] = {}
            for a in anchors:
                a_roots = _roots_of(a)
                if not a_roots:
                    continue
                edge = rand()
                a._oav ^= edge
                for root in a_roots:
                    roots[root] = roots.get(root, 0) ^ edge
            if not roots:
                child = Tuple(values, r.src)
            elif lineage:  # a dict root, even of one tree: ``_val`` carries the mark
                child = Tuple(values, r.src, roots, UNROOTED_LINEAGE)
            elif len(roots) == 1:
                (root, val), = roots.items()
                child = Tuple(values, r.src, root, val)
            else:
                child = Tuple(values, r.src, roots)
            deliver[task](child)

    def _ack_general(self, tup):
        """`ack`, every case."""
        try:
            root = tup._root
        except AttributeError:
            raise self._not_input("ack", tup) from None
        if root and self._nackers:
            oav = tup._oav
            if _get_ident() == self._loop_ident:  # coalesced while the next input shares the root
                inbox = self._inbox
                last = not inbox or inbox[0]._root != root  # no sibling of this tree next
                acks = self._ex.acks
                if type(root) is int:
                    if last and not acks:  # nothing held (W2: every input its own tree): no dict
                        self._ackers[root % self._nackers]((ACK, root, tup._val ^ oav, -1))
                    else:
                        acks[root] = acks.get(root, 0) ^ tup._val ^ oav
                else:
                    for rt, val in root.items():
                        acks[rt] = acks.get(rt, 0) ^ val ^ oav
                if last and acks:
                    self._ex.flush_acks()
            else:
                if type(root) is int:
                    self._ackers[root % self._nackers]((ACK, root, tup._val ^ oav, -1))
                else:
                    for rt, val in root.items():
                        self._ackers[rt % self._nackers]((ACK, rt, val ^ oav, -1))
                self._wake()
        if tup._src is not TICK_SOURCE:  # a tick is not counted (`BoltExecutor.tick`)
            self._stats.acked += 1
        if self._samples:
            self._close_sample(id(tup), True, self._now())

    def fail(self, tup):
        self.fail_with(tup, self._explicit)

    def fail_with(self, tup: Tuple, cause: FailureCause) -> None:
        """Fail ``tup`` for ``cause``, which travels with the failure to the spout
        (`squall.Spout.fail_with`); `fail` is this with an explicit fail by this task."""
        if not isinstance(tup, Tuple):
            raise self._not_input("fail", tup)
        self._to_acker(tup, FAIL, cause.wire())
        if tup._src is not TICK_SOURCE:  # a tick is not counted (`BoltExecutor.tick`)
            self._stats.failed += 1
        self._key_of(tup).failed += 1  # every failure counted (exact), not only sampled ones
        if self._samples:
            self._close_sample(id(tup), False, self._now())

    def reset_timeout(self, tup):
        if not isinstance(tup, Tuple):
            raise self._not_input("reset_timeout", tup)
        self._ex.resets += 1
        self._to_acker(tup, RESET)

    def _not_input(self, verb: str, tup: Any) -> TypeError:
        """The error of an ``ack``/``fail``/``reset_timeout`` of something that is no input."""
        return TypeError(f"{verb} takes an input Tuple, got {type(tup).__name__} {tup!r:.100} "
                         f"(component [{self._component}], task {self._task})")

    def _to_acker(self, tup: Tuple, kind: int, val: Any = 0) -> None:
        if not self._nackers:
            return
        for rt in _roots_of(tup):
            self._ackers[rt % self._nackers]((kind, rt, val, -1))
        if _get_ident() != self._loop_ident:
            self._wake()

    def _debug_emit(self, values, anchors=None, stream=DEFAULT_STREAM):
        debug_log.info("Emitting: %s task %s stream %s: %r", self._component, self._task, stream, values)
        return BoltCollector.emit(self, values, anchors, stream)

    def _debug_emit_direct(self, task_id, values, anchors=None, stream=DEFAULT_STREAM):
        debug_log.info("Emitting: %s task %s stream %s: %r", self._component, self._task, stream, values)
        BoltCollector.emit_direct(self, task_id, values, anchors, stream)

    def report_error(self, error):
        self._ex.report_error(self._task, error)


def _bad_values(r: Router, values: Any) -> EmitError:
    if type(values) is Tuple:
        s = r.src
        return EmitError(f"emit got a Tuple as its values (component [{s.component}], task {s.task}, "
                         f"stream [{s.stream}]); squall's order is emit(values, anchors), not Storm's "
                         f"Java emit(anchor, values)")
    return wrong_size(r, values)


def _listed_anchors(anchors: Any, r: Router) -> list:
    """``anchors`` given as another iterable than a list or tuple (a set, a generator), as a
    list; the error naming component and stream for one that is no iterable at all."""
    try:
        return list(anchors)
    except TypeError:
        s = r.src
        raise EmitError(f"anchors must be an input Tuple, a list of them or None, got {type(anchors).__name__} "
                        f"{anchors!r:.100} (component [{s.component}], task {s.task}, stream [{s.stream}])") from None


def _roots_of(t: Tuple) -> dict[int, int]:
    root = t._root
    if not root:
        return {}
    if type(root) is int:
        return {root: t._val}
    return root


class BasicCollector(BasicCollectorBase, BasicOutputCollector):
    """A BasicBolt's collector: every emit is anchored to the input being executed.

    Its ``emit`` (`squall._native.BasicCollectorBase`) inlines the one-anchor path of
    `BoltCollector` (routing, edge ids, delivery): a BasicBolt always has exactly one anchor and
    runs on its loop's thread.
    """

    def __init__(self, out: BoltCollector) -> None:
        self._out = out
        self.input = None
        self._routers = out.routers
        self._deliver = out._deliver
        self._rand = out._rand
        self._tuple_type = Tuple
        self._nowhere = _NOWHERE
        self._acking = bool(out._nackers)
        if out._debug:  # topology.debug: every emit logged, as the bolt collector's are
            self.emit = self._debug_emit  # type: ignore[method-assign]

    def _debug_emit(self, values, stream=DEFAULT_STREAM):
        out = self._out
        debug_log.info("Emitting: %s task %s stream %s: %r", out._component, out._task, stream, values)
        return BasicCollector.emit(self, values, stream)

    def emit_direct(self, task_id, values, stream=DEFAULT_STREAM):
        self._out.emit_direct(task_id, values, self.input, stream)

    def reset_timeout(self, tup=None):
        self._out.reset_timeout(self.input if tup is None else tup)

    def report_error(self, error):
        self._out.report_error(error)


# the compiled emit and ack as the collectors' own methods: user code's calls of them specialised
# by CPython 3.11 (see squall._native.own_methods)
own_methods(BasicCollector)
own_methods(BoltCollector)
