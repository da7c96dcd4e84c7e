"""The spout executor and its collector (Storm's ``SpoutExecutor``, ``SpoutOutputCollectorImpl``).

Each loop round, the executor first handles the acker's replies (ack, fail, reset timeout) and
then, if the topology is active, max spout pending allows it and nothing is backpressured, calls
``next_tuple`` on each task, repeatedly while it keeps emitting (up to a budget, so downstream
executors run between bursts). The pending map is a 2-bucket `RotatingMap` rotated every
message timeout, so an incomplete tuple fails between T and 2T.

Beyond Storm: when the host learns that another worker died (or that items queued for it were
dropped), it calls `SpoutExecutor.notify_lost` with that worker's tasks. A spout whose tuples can
reach any of them (downstream of it, or an acker) then fails at once, on its own loop, every
pending tuple emitted until then, instead of waiting one to two message timeouts for them: its
throughput comes back in seconds. Tuples that did complete are replayed too, which
at-least-once allows. They fail as a lost worker, which no retry budget counts, except each one
a bolt of the dead worker was executing when it died (its host read so:
`squall.engine.executing`), which fails as ``worker-died``, caused by its record.

Max spout pending (a number, null: a limit that follows the completion rate, or "auto": the
tuner) is `squall.engine.pending_tuner.MaxPending`'s: the executor only checks ``in_flight``
against its ``max_pending`` and feeds it counters on a timer.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._collectors import SpoutOutputCollector
from .._config import Config, conf_value
from .._errors import EmitError
from .._failure import TIMEOUT, WORKER_LOST, FailureCause
from .._native import IdSource, SpoutCollectorBase, SpoutExecutorBase, own_methods, spout_produce, spout_replies
from .._system import DEFAULT_STREAM
from .._tuple import Tuple
from .acker import ACKED, FAILED, INIT
from .executor import Executor, TaskStats, Wiring, debug_log
from .pending_tuner import MaxPending
from .plan import ExecutorSpec
from .rotating_map import RotatingMap
from .routing import Router, bad_stream, build_routers, direct_task, not_values, router_of, wrong_size
from .stateful_progress import committed_inputs
from .stats import MAX_SPOUT_PENDING, component_figures

log = logging.getLogger(__name__)


class SpoutExecutor(SpoutExecutorBase, Executor):
    """Runs the tasks of one spout component; see the module docstring."""

    kind = "spout"

    def __init__(self, spec: ExecutorSpec, wiring: Wiring, objs: dict[int, Any], contexts: dict[int, Any],
                 conf: dict[str, Any]) -> None:
        super().__init__(spec, wiring)
        self.objs = objs
        self.contexts = contexts
        self.conf = conf
        self.acking = wiring.plan.acking
        self.emits = 0  # emits by all tasks, to tell a productive next_tuple from an idle one
        self.pending = RotatingMap(2, self._expired)
        self.in_flight = 0  # == len(self.pending), kept as a counter: it is checked per next_tuple
        self._expired_ids: list[tuple[int, Any, str]] = []
        # tasks whose loss may lose this spout's tuples: its downstream and the ackers; and the
        # times (this worker's clock) until which `notify_lost` said items to them may be lost
        self._reaches = frozenset(wiring.plan.downstream_tasks(self.component) | set(wiring.plan.acker_tasks))
        # (and, by root, the causes of the tuples a bolt was executing when that worker died)
        self._lost: deque[tuple[float, Mapping[int, FailureCause]]] = deque()
        self.timeout_secs = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self.timeouts_on = bool(self.acking and conf_value(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS))
        comps = wiring.plan.topology.components
        # (squall's own spouts, the checkpoint spout and Trident's master coordinator, pace
        # themselves whatever their limit)
        own = self.component.startswith("$")
        holders = [] if own else sorted(
            c for c in wiring.plan.downstream(self.component) if getattr(comps[c].obj, "squall_holds_inputs", False))
        committers = [] if own else sorted(
            c for c in wiring.plan.downstream(self.component) if getattr(comps[c].obj, "squall_acks_at_commit", False))
        self.pending_limit = MaxPending(conf, self.task_ids, acking=self.acking, timeouts_on=self.timeouts_on,
                                        timeout_secs=self.timeout_secs, held_by=holders, paced=own,
                                        committed_by=committers)
        self.max_pending = self.pending_limit.limit
        # the inputs of the stateful bolts downstream that carry this spout's tuples: their
        # executions tell the limit whether those bolts are taking them (`CompletionRateLimit.
        # update`); not their other inputs, another spout's, which they may take all along
        self.committed_inputs = committed_inputs(wiring.plan, self.component, committers)
        self.timed_out = 0  # failed by a timeout or a lost worker: not completions, for the limit
        self.expired = 0  # failed by a timeout alone (the automatic limit doubles when only these come)
        self.expired_by_task = dict.fromkeys(self.task_ids, 0)  # the same, by task (for the tuners)
        self.active = False
        # each task's spout's fail_with (Spout's calls fail), or fail for a spout that is no Spout
        self.fail_hooks: dict[int, Callable[[Any, FailureCause], None]] = {t: _fail_hook(objs[t]) for t in self.task_ids}
        self.collectors: dict[int, SpoutCollector] = {}
        rng = random.Random(wiring.seed ^ spec.tasks[0])
        for t in self.task_ids:
            routers = build_routers(wiring.plan, self.component, t, contexts[t], rng, wiring.loads)
            self.collectors[t] = SpoutCollector(self, t, routers, conf)

    # --- lifecycle, on the loop thread -----------------------------------------------------------
    def open(self) -> None:
        for t in self.task_ids:
            self.current_task = t
            self.objs[t].open(self.conf, self.contexts[t], self.collectors[t])
        self.opened = True

    def set_active(self, active: bool) -> None:
        """Call ``activate``/``deactivate`` on every task when the topology's status changes."""
        if active == self.active:
            return
        self.active = active
        for t in self.task_ids:
            self.current_task = t
            if active:
                self.objs[t].activate()
            else:
                self.objs[t].deactivate()

    def close(self) -> None:
        for t in self.task_ids:
            self.current_task = t
            self.objs[t].close()

    # --- the hot path --------------------------------------------------------------------------------
    def can_emit(self) -> bool:
        """True if ``next_tuple`` may be called now (active, under max pending, not throttled)."""
        return (self.active and not self.wiring.backpressure.throttled
                and not (self.max_pending and self.in_flight >= self.max_pending))

    def produce(self, budget: int) -> int:
        """Call ``next_tuple`` while it emits, up to ``budget`` rounds; return the emits made."""
        # next_tuple looked up per burst: a spout may replace it on its instance
        calls = [(t, self.objs[t].next_tuple) for t in self.task_ids]
        return spout_produce(self, calls, budget, self.wiring.backpressure)

    def drain(self, limit: int) -> int:
        done = 0
        for t, q in self.inboxes.items():
            n = len(q)
            if not n:
                continue
            if n > limit:  # noqa: PLR1730 (a compare, not a min() call, on the drain path)
                n = limit
            # Storm's sampled statistics: runs of plain replies, then a sampled one
            spout_replies(self, q.popleft, n, self.wiring.clock.now, self.sampled[t])
            done += n
        # after the replies that came: a tuple the acker answered (say, failed by the bolt that
        # raised in a worker that then crashed) keeps that answer, not "worker lost"
        if self._lost:
            self._fail_lost()
        return done

    def _reply(self, kind: int, root: int, detail: Any, sample: bool = False) -> None:
        """One reply of the acker: ``detail`` is the delta (unused) of an ack or a reset, the
        cause (`FailureCause.wire`) of a failure. ``sample``: a sampled reply, whose complete
        latency goes into the statistics (counts go in for every reply: they are exact)."""
        info = self.pending.remove(root)
        if info is None:
            return  # late reply for a tuple that already timed out
        self.in_flight -= 1
        msg_id, task, stream, started = info
        self.current_task = task
        stats = self.stats[task]
        if kind == ACKED:
            stats.acked += 1
            latency = self.wiring.clock.now() - started
            stats.latency_sum += latency
            stats.latency_count += 1
            sampled = self.sampled[task]
            ks = sampled.by_handle.get(stream) or sampled.key("", stream, stream)
            ks.acked += 1
            if sample:
                ks.latency_ms += 1000.0 * latency
                ks.latency_n += 1
            self.objs[task].ack(msg_id)
        elif kind == FAILED:
            stats.failed += 1
            self._count_failed(task, stream)
            self.fail_hooks[task](msg_id, FailureCause.from_wire(detail))
        else:  # RESET_TIMEOUT: move it to the newest bucket
            self.pending.put(root, info)
            self.in_flight += 1

    # --- timeouts --------------------------------------------------------------------------------------
    def timers(self):
        timers = [(self.timeout_secs, self.rotate)] if self.timeouts_on else []
        period = self.pending_limit.period
        if period is not None:
            self.pending_limit.start(self.wiring.clock.now(), self.completed(), self.expired)
            timers.append((period, self._update_pending))
        return timers

    def completed(self) -> int:
        """Tuples acked or failed by the topology (not by timeout) since the executor started."""
        return sum(s.acked + s.failed for s in self.stats.values()) - self.timed_out

    def _update_pending(self) -> None:
        """The timer of an automatic max pending (`MaxPending`): it reads the counters."""
        held = bool(self.max_pending) and self.in_flight >= self.max_pending
        executed_by = self.wiring.executed_by
        inputs = self.committed_inputs
        progress = executed_by(inputs) if inputs and executed_by is not None else None
        self.max_pending = self.pending_limit.update(self.wiring.clock.now(), self.stats, self.completed(),
                                                     self.expired, self.expired_by_task, held, progress,
                                                     self.in_flight)

    def _expired(self, root: int, info: tuple) -> None:
        self._expired_ids.append((info[1], info[0], info[2]))

    def rotate(self) -> None:
        """Expire the oldest pending bucket: those tuples fail (Storm's reason "TIMEOUT")."""
        self.pending.rotate()
        expired, self._expired_ids = self._expired_ids, []
        self.expired += len(expired)
        for task, _msg_id, _stream in expired:
            self.expired_by_task[task] += 1
        self._fail(expired, _TIMED_OUT)
        storm = self.pending_limit.replay_storm(self.completed(), self.expired, self.wiring.reach)
        if storm is not None:
            log.warning("spout [%s] tasks %s: %s", self.component, self.task_ids, storm)

    def _fail(self, failed: list[tuple[int, Any, str]], cause: FailureCause) -> None:
        """Fail ``(task, msg_id, stream)`` already out of the pending map, for ``cause`` (a
        timeout or a lost worker)."""
        self.in_flight -= len(failed)
        self.timed_out += len(failed)  # not completions: the automatic max pending must not count them
        for task, msg_id, stream in failed:
            self.current_task = task
            self.stats[task].failed += 1
            self._count_failed(task, stream)
            self.fail_hooks[task](msg_id, cause)

    def _count_failed(self, task: int, stream: str) -> None:
        """A failed tree of ``task`` rooted on ``stream``, counted in its statistics: every one
        (beyond Storm, which samples them: a failure is rare and must not read 0)."""
        self.sampled[task].key("", stream, stream).failed += 1

    # --- lost workers ----------------------------------------------------------------------------------
    def notify_lost(self, tasks: Iterable[int], until: float, died: Mapping[int, FailureCause] | None = None) -> bool:
        """Items sent to ``tasks`` (of another worker) until ``until`` (this worker's clock) may
        be lost. If this spout's tuples can reach any of them, its pending tuples emitted until
        then fail, on the spout's loop (see the module docstring); returns whether they will.
        ``died``: root -> cause of the tuples a bolt was executing when that worker died (a
        `WORKER_DIED`, charged to the record); the others fail as a lost worker. Any thread may
        call this."""
        if self._reaches.isdisjoint(tasks):
            return False
        self._lost.append((until, died or _NONE_DIED))
        if self.wiring.loop is not None:
            self.wiring.loop.wake()
        return True

    def _fail_lost(self) -> None:
        notices = [self._lost.popleft() for _ in range(len(self._lost))]
        until = max(when for when, _ in notices)
        lost = self.pending.remove_if(lambda _root, info: info[3] <= until)
        died = {root: cause for _, causes in notices for root, cause in causes.items()}
        if died:  # the tuples being executed when their worker died: each for its own cause
            for root, info in lost:
                if root in died:
                    self._fail([(info[1], info[0], info[2])], died[root])
            lost = [(root, info) for root, info in lost if root not in died]
        self._fail([(info[1], info[0], info[2]) for _root, info in lost], _WORKER_LOST)

    def emitted_by_stream(self, task):
        return {s: (r.emitted, r.transferred) for s, r in self.collectors[task].routers.items()}

    def sampled_snapshot(self, task: int) -> dict:
        """The task's statistics, with its max spout pending now (a gauge) while one applies, and
        the figures the spout reports of itself (`squall.engine.stats.component_figures`)."""
        snapshot = super().sampled_snapshot(task)
        limit = self.pending_limit.task_limit(task)
        if limit:
            snapshot[(MAX_SPOUT_PENDING, "", "")] = limit
        snapshot.update(component_figures(self.objs[task]))
        return snapshot


def _counting(tracker: Any, emit: Callable[..., Any]) -> Callable[..., Any]:
    """``emit`` (or ``emit_direct``), counting each emit that returns in ``tracker``
    (`squall.engine.tracking.TupleCounts`), once it has delivered what it emitted."""
    spout_emit = tracker.spout_emit

    def counted_emit(*args: Any, **kwargs: Any) -> Any:
        out = emit(*args, **kwargs)
        spout_emit()
        return out
    return counted_emit


_TIMED_OUT = FailureCause(TIMEOUT)
_WORKER_LOST = FailureCause(WORKER_LOST)
_NONE_DIED: Mapping[int, FailureCause] = {}


def _fail_hook(spout: Any) -> Callable[[Any, FailureCause], None]:
    """How ``spout`` is told of a failure: its ``fail_with(msg_id, cause)`` (`squall.Spout`'s
    calls ``fail``), or for an object that has none, its ``fail(msg_id)``."""
    fail_with = getattr(spout, "fail_with", None)
    if fail_with is not None:
        return fail_with
    fail = spout.fail
    return lambda msg_id, _cause: fail(msg_id)


class SpoutCollector(SpoutCollectorBase, SpoutOutputCollector):
    """The collector of one spout task. Spout methods run on one thread, so no locking.

    Its ``emit`` is `squall._native.SpoutCollectorBase`'s: compiled, the common cases (untracked,
    and tracked with acking on) run in C; every case has the semantics of `_emit_general`.
    """

    def __init__(self, executor: SpoutExecutor, task: int, routers: dict[str, Router], conf: dict) -> None:
        self._ex = executor
        self._task = task
        self._component = executor.component
        self.routers = routers
        w = executor.wiring
        self._deliver = w.deliver
        self._ackers = w.ackers
        self._acking = bool(w.ackers)
        self._stats: TaskStats = executor.stats[task]
        self._now = w.clock.now
        self._rand = IdSource(w.seed ^ (task << 20))
        self._root = self._root_maker(w)
        self._tuple_type = Tuple
        self._pending = executor.pending  # what the compiled emit stores a tracked tuple in (never rebound)
        if conf.get(Config.TOPOLOGY_DEBUG):
            self.emit = self._debug_emit  # type: ignore[method-assign]
            self.emit_direct = self._debug_emit_direct  # type: ignore[method-assign]
        if w.tracker is not None:  # a tracked topology counts its spouts' emits (Storm's SpoutTracker)
            self.emit, self.emit_direct = _counting(w.tracker, self.emit), _counting(w.tracker, self.emit_direct)  # type: ignore[method-assign]

    def wake(self) -> None:
        """Wakes the loop this spout runs on (any thread may call it; `SpoutOutputCollector.wake`)."""
        loop = self._ex.wiring.loop
        if loop is not None:
            loop.wake()

    def _root_maker(self, w: Wiring) -> Callable[[], int]:
        """How a new root id is drawn: 64 random bits (0 is taken as 1: a root is never 0,
        which means untracked), except that with several ackers, some
        in this worker, the root names one of those (the acker of a root is ``root % ackers``,
        on every worker). Any acker may track any tree; the local one spares the tree's init
        and this spout's reply a crossing each, and the acks of the bolts in this worker. In a
        topology with an event-time window behind a bolt, the root also names this spout task
        (`squall.engine.origins`), so the window's watermark waits for it."""
        ackers = w.plan.acker_tasks
        n = len(ackers)
        here = set(w.worker_tasks)
        local = [i for i, t in enumerate(ackers) if t in here]
        origins = w.plan.root_origins
        if origins is not None and self._task in origins.spout_tasks:
            choices = local if local else list(range(n))
            span, base = origins.span, origins.offset(self._task, 0)
            assert base is not None  # one of its spout tasks
            if len(choices) == 1:
                return IdSource(w.seed ^ (self._task << 22), origins.random_bits, times=span, plus=base + choices[0])
            drawn = IdSource(w.seed ^ (self._task << 22), origins.random_bits)
            choose = random.Random(w.seed ^ (self._task << 21)).choice
            return lambda: (drawn() or 1) * span + base + choose(choices)
        rand = self._rand
        if n < 2 or not local or len(local) == n or n > 256:
            return rand
        # 56 random bits times n, plus a local acker's index: below 2**64, and never 0
        if len(local) == 1:
            return IdSource(w.seed ^ (self._task << 22), 56, times=n, plus=local[0])
        bits = IdSource(w.seed ^ (self._task << 22), 56)
        pick = random.Random(w.seed ^ (self._task << 21)).choice
        return lambda: (bits() or 1) * n + pick(local)

    def _router(self, stream: str) -> Router:
        r = router_of(self.routers, stream)
        if r is None:
            raise bad_stream(stream, r, self._component, self._task)
        return r

    def _emit_general(self, values, msg_id=None, stream=DEFAULT_STREAM):
        """`emit`, every case."""
        r = router_of(self.routers, stream)
        if r is None or r.direct:
            self._bad_stream(stream, r)
        if not_values(values) or len(values) != r.nfields:
            raise wrong_size(r, values)
        targets = r.choose(values)
        self._send(r, targets, values, msg_id)
        return targets

    def emit_direct(self, task_id, values, msg_id=None, stream=DEFAULT_STREAM):
        r = self._router(stream)
        if not_values(values) or len(values) != r.nfields:
            raise wrong_size(r, values)
        if type(task_id) is not int:
            task_id = direct_task(task_id, r)
        kind = r.direct_targets.get(task_id)
        if kind is False:
            raise EmitError(f"Cannot emitDirect to a task expecting a regular grouping "
                            f"(component [{self._component}], stream [{stream}], task {task_id})")
        self._send(r, [task_id] if kind else [], values, msg_id)

    def _bad_stream(self, stream, r):
        raise bad_stream(stream, r, self._component, self._task)

    def _send(self, r: Router, targets: list[int], values: list, msg_id: Any) -> None:
        r.emitted += 1
        r.transferred += len(targets)
        ex = self._ex
        ex.emits += 1
        deliver = self._deliver
        if msg_id is None or not self._acking:
            if targets:
                t = Tuple(values, r.src)
                for task in targets:
                    deliver[task](t)
            if msg_id is not None:  # acking off: Storm acks inside emit
                self._stats.acked += 1
                ex.sampled[self._task].key("", r.stream, r.stream).acked += 1  # exact, as with acking on
                ex.objs[self._task].ack(msg_id)
            return
        rand = self._rand
        root = self._root() or 1
        src = r.src
        xor = 0
        for task in targets:
            edge = rand()
            xor ^= edge
            deliver[task](Tuple(values, src, root, edge))
        # a fresh random 64-bit root is in no bucket: store it without RotatingMap.put's scan
        ex.pending.newest[root] = (msg_id, self._task, r.stream, self._now())
        ex.in_flight += 1
        ackers = self._ackers
        ackers[root % len(ackers)]((INIT, root, xor, self._task))

    def _debug_emit(self, values, msg_id=None, stream=DEFAULT_STREAM):
        debug_log.info("Emitting: %s task %s stream %s: %r", self._component, self._task, stream, values)
        return SpoutCollector.emit(self, values, msg_id, stream)

    def _debug_emit_direct(self, task_id, values, msg_id=None, stream=DEFAULT_STREAM):
        debug_log.info("Emitting: %s task %s stream %s: %r", self._component, self._task, stream, values)
        SpoutCollector.emit_direct(self, task_id, values, msg_id, stream)

    def report_error(self, error):
        self._ex.report_error(self._task, error)


# the compiled emit as the collector's own method: a spout's calls of it specialised by CPython
# 3.11 (see squall._native.own_methods)
own_methods(SpoutCollector)
