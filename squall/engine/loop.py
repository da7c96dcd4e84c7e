"""`ExecutorLoop`: one thread that runs several executors cooperatively.

Why not a thread per executor, as Storm has? Under the GIL, measured on this model's inner loop
(ENGINE-SPEED.md, lessons 5 and 6), one cooperative loop per worker was 15-30% faster and its
p99 latency 5-9x lower than a thread per executor, and it idles at far less CPU. So a worker runs
its executors on one loop, and a component declared blocking (``topology.executor.own.thread``)
gets a loop of its own, so its blocking never stalls the others. A component that blocks a
shared loop without saying so is found by the worker's watchdog (`Worker.find_stalls`), which
moves the loop's other executors to a new loop (`take_over`): the blocking one keeps the old
thread to itself, as if it had asked for its own, and the others go on at once. An executor
moves whole, between two of its calls: its calls never run on two threads at once, and its
later calls run on the new thread (an executor that must stay on its thread, say because its
``prepare`` opened an sqlite3 connection, opts out with ``topology.executor.blocking.move``).

Each round drains inboxes downstream-first (acker, then bolts from the deepest, each bolt task for
at most `DRAIN_LIMIT` inputs or `squall.engine.bolt_executor.DRAIN_BUDGET_SECS`, then the spouts'
acker replies), sends what they emitted for other workers (the transport's ``flush``), then lets
each spout emit a burst if it may (one call of ``next_tuple`` on a loop of its own, as Storm calls
it once between two looks at the acks: such a spout's call may take long), then fires due timers (ticks, timeouts), and sends again. A
round that did nothing asks a wait strategy how long to wait (`squall.engine.wait`, Storm's
``IWaitStrategy`` objects): with a spout that may emit, ``topology.spout.wait.strategy`` (by
default a short sleep that doubles while the spouts stay idle); with spouts that backpressure
holds back, ``topology.backpressure.wait.strategy``; otherwise the loop sleeps until an item
arrives (``wake``), the topology changes state, or the next timer is due, which also ends any
strategy's wait early. Producers wake a sleeping loop only when its ``sleeping`` flag is set, so
a busy loop pays nothing for being woken.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Container
from typing import Any

from .._config import Config
from .clock import Clock, WakeEvent
from .executor import Executor, log
from .spout_executor import SpoutExecutor
from .start_gate import StartGate
from .wait import WaitSituation, wait_strategy

# Items drained per task per round, and next_tuple rounds per spout burst. Small enough that
# queues stay short (latency, memory), large enough that per-round overhead is amortised.
DRAIN_LIMIT = 1024
# The acker, and a spout's replies from it, are drained of all they hold each round, whatever
# the number (as Storm's executors consume their whole queue). A bolt's round of DRAIN_LIMIT
# inputs costs the acker an init and an ack per tuple of each tree, and at the same share it fell
# behind for as long as a bolt on its loop had a backlog, so that no spout tuple completed (and,
# past the message timeout, every one failed and replayed) until the backlog was gone; and two
# bolt tasks on the loop complete up to twice DRAIN_LIMIT trees a round, whose replies a spout
# drained at DRAIN_LIMIT a round: its acks fell behind in the same way. The acker's work per
# message is a few operations in C; the replies are bounded by max spout pending.
REPLY_DRAIN_LIMIT = sys.maxsize
BUSY_WINDOW_SECS = 0.5  # how often a loop's `busy` fraction is updated
SPOUT_BURST = 64
# A spout with a loop of its own (topology.executor.own.thread: a shell spout, or one that
# blocks; or one whose blocking call made the watchdog give it its loop, `take_over`) is called
# once a round, as Storm's executor calls nextTuple once between two looks at its acks. Its next_tuple may take long (a ShellSpout's waits on its subprocess; Storm's
# randomsentence.js waits 100 ms), and a burst of 64 held its acks back for 64 of those: Storm's
# multilang.yaml had a complete latency of 3.5 s and acked nothing for its first 6 s.
BLOCKING_SPOUT_BURST = 1

_TIMER_SOURCES: list[Callable[[Executor], list[tuple[float, Callable[[], None]]]]] = []


def register_executor_timers(source: Callable[[Executor], list[tuple[float, Callable[[], None]]]]) -> None:
    """Have every loop ask ``source(executor)`` for more ``(period_secs, callback)`` timers of
    each executor it runs, besides the executor's own `Executor.timers`, once, before its first
    round (`squall.metric` reads the tasks' metrics so). Registering one twice has no effect."""
    if source not in _TIMER_SOURCES:
        _TIMER_SOURCES.append(source)


def _extra_timers(executor: Executor) -> list[tuple[float, Callable[[], None]]]:
    return [timer for source in _TIMER_SOURCES for timer in source(executor)]


class TopologyActivation:
    """The topology's activity as its loops see it; changes wake every registered loop."""

    def __init__(self, active: bool = False) -> None:
        self.active = active
        self.stopping = False
        self._loops: list[ExecutorLoop] = []
        self._lock = threading.Lock()

    def register(self, loop: ExecutorLoop) -> None:
        """Have `set_active` wake ``loop`` (`ExecutorLoop.wake`); `ExecutorLoop.start` calls it."""
        with self._lock:
            self._loops.append(loop)

    def unregister(self, loop: ExecutorLoop) -> None:
        """Stop waking ``loop`` (its thread ended); a loop not registered is ignored."""
        with self._lock:
            if loop in self._loops:
                self._loops.remove(loop)

    def set_active(self, active: bool) -> None:
        """Activate or deactivate the topology's spouts."""
        self.active = active
        with self._lock:
            loops = list(self._loops)
        for lp in loops:
            lp.wake()


class Backpressure:
    """Throttles spouts while any bolt inbox holds more than its bound (Storm 2's backpressure).

    Bounding is by tuples, not batches, and only data inboxes count: acker and spout-reply
    inboxes are never bounded, because blocking the ack cycle deadlocks (ENGINE-SPEED.md,
    lesson 7). Bolts are never blocked either, so cycles cannot deadlock; the spouts stop
    instead, which bounds what is in flight.

    A worker is over its bound too while its transport holds messages for a peer worker that
    does not take them (`hold`: the peer died, restarts, or hangs; see
    `squall.worker.batching.HOLD_MESSAGES`): Storm 2's netty client likewise reports a
    connection that is not ready, or whose write buffer is over its high watermark, as
    backpressure. Without it a spout flooded the transport's backlog for the absent peer once
    the peer's own "over" expired: its next launch got it all at once (85,000 tuples, three
    times its inbox's bound), or the backlog gave its oldest messages up.

    Across processes, each worker's `Backpressure` tells the others when its own state flips
    (``listener``, wired by the host to its transport), and they record it with `set_remote`:
    a spout is throttled while any worker of its topology is over its bound. A worker that stays
    over says so again every `RENEW_SECS`, and `expire` forgets a peer's "over" not heard for
    `EXPIRE_SECS`: a lost "under", a peer that died while over, or a forged or replayed "over"
    stops the spouts for a few seconds at most, never for good. Time is ``clock``'s
    (`squall.engine.clock`).
    """

    # ``throttled`` is a slot: each round of a spout's burst reads it from C (spout_produce) at
    # its offset instead of through the instance's dict (about 180 instructions a round)
    __slots__ = ("__dict__", "__weakref__", "throttled")
    RENEW_SECS = 1.0   # how often a worker over its bound repeats it to its peers
    EXPIRE_SECS = 5.0  # a peer's "over" not repeated for this long is forgotten

    def __init__(self, high: int, clock: Clock | None = None) -> None:
        self.high = high
        self.low = max(1, high // 2)
        self.throttled = False
        self.clock = clock or Clock()
        self._over: set[int] = set()
        self._held: set[str] = set()  # peers for which the transport holds too much (`hold`)
        self._remote: dict[Any, float] = {}  # peer -> when it last said it was over
        self._lock = threading.Lock()
        self._waiters: list[ExecutorLoop] = []
        self.listener: Callable[[bool], None] | None = None  # told when this worker's state flips

    @property
    def over(self) -> bool:
        """Whether one of this worker's own inboxes is over its bound, or its transport holds
        too much for a peer (`hold`)."""
        return bool(self._over) or bool(self._held)

    def register(self, loop: ExecutorLoop) -> None:
        """Have ``loop`` woken after every change that leaves the spouts unthrottled, so its spouts resume
        at once; `ExecutorLoop.start` calls it."""
        with self._lock:
            self._waiters.append(loop)

    def unregister(self, loop: ExecutorLoop) -> None:
        """Stop waking ``loop`` (its thread ended); a loop not registered is ignored."""
        with self._lock:
            if loop in self._waiters:
                self._waiters.remove(loop)

    def check(self, task: int, backlog: int) -> None:
        """Record ``task``'s backlog; flips ``throttled`` at the high and low watermarks."""
        if backlog >= self.high:
            if task not in self._over:
                self._update(lambda: self._over.add(task))
        elif task in self._over and backlog <= self.low:
            self._update(lambda: self._over.discard(task))

    def hold(self, peer: str, over: bool) -> None:
        """The transport holds too many messages for worker ``peer`` (``over``), or no longer:
        this worker counts as over its bound meanwhile, as if an inbox were full."""
        if over != (peer in self._held):
            self._update(lambda: self._held.add(peer) if over else self._held.discard(peer))

    def set_remote(self, source: Any, over: bool) -> None:
        """Another worker (``source``) reports whether it is over its bound."""
        now = self.clock.now()
        self._update(lambda: self._remote.__setitem__(source, now) if over else self._remote.pop(source, None))

    def expire(self) -> None:
        """Forget the peers whose "over" is older than `EXPIRE_SECS` (call every `RENEW_SECS`)."""
        cutoff = self.clock.now() - self.EXPIRE_SECS

        def drop_stale() -> None:
            for source in [s for s, heard in self._remote.items() if heard < cutoff]:
                del self._remote[source]
        with self._lock:
            stale = any(heard < cutoff for heard in self._remote.values())
        if stale:  # only then: an update wakes every loop that waits
            self._update(drop_stale)

    def forget(self, tasks: list[int]) -> None:
        """Drop the records of ``tasks`` (their worker stopped)."""
        self._update(lambda: self._over.difference_update(tasks))

    def _update(self, change: Callable[[], object]) -> None:
        with self._lock:
            was_local = self.over
            change()
            local = self.over
            self.throttled = local or bool(self._remote)
            waiters = [] if self.throttled else list(self._waiters)
        for lp in waiters:
            lp.wake()
        if local != was_local and self.listener is not None:
            self.listener(local)


class ExecutorLoop:
    """Runs executors on one thread; see the module docstring."""

    def __init__(self, name: str, state: TopologyActivation, backpressure: Backpressure, clock: Any,
                 conf: dict[str, Any], on_crash: Callable[[ExecutorLoop, Executor | None, BaseException], None],
                 event: WakeEvent | None = None) -> None:
        self.name = name
        self.state = state
        self.backpressure = backpressure
        self.clock = clock
        self.on_crash = on_crash
        self.executors: list[Executor] = []
        self.sleeping = False
        # when its earliest timer is due (inf: none): a simulated clock's advance waits for it to
        # pass, as Storm's advanceClusterTime waits for idle at each step. -inf until the loop has
        # scheduled its timers (it is opening its executors, user code, or waiting for the
        # host's word to start), so that an advance waits for that too: otherwise the simulated
        # seconds went by while a bolt prepared, and its ticks, scheduled after, were skipped
        self.next_due = float("-inf")
        # waiting for the topology's first activation, before any user code: idle while the
        # topology is inactive (`timers_run`)
        self.awaiting_activation = False
        # Of the last `BUSY_WINDOW_SECS` or so, the fraction spent in rounds that did some work
        # (a load-aware shuffle's signal that the tasks on this loop do not keep up); None until
        # the first window is over.
        self.busy: float | None = None
        self.track_busy = False  # set by the worker when a load-aware shuffle reads `busy`
        self.ident = -1
        self.thread: threading.Thread | None = None
        self.current: Executor | None = None
        # what a round that did nothing leads to (`squall.engine.wait`): the spouts' strategy
        # when a spout may emit, the backpressure one when backpressure holds the spouts back
        self.spout_wait = wait_strategy(conf, WaitSituation.SPOUT_WAIT)
        self.spout_burst = BLOCKING_SPOUT_BURST if conf.get(Config.TOPOLOGY_EXECUTOR_OWN_THREAD) else SPOUT_BURST
        self.backpressure_wait = wait_strategy(conf, WaitSituation.BACK_PRESSURE_WAIT)
        # what the loop sleeps on: the worker's transport may give one that its sockets also set
        # (`squall.engine.transport.Transport.loop_event`)
        self._event = event if event is not None else threading.Event()
        self._stop = False
        self._clean = True
        self.rounds = 0
        self.calls = 0  # calls into executors started (see _returned)
        self._boundary = threading.Lock()
        self._moved = False
        self.flush: Callable[[], None] = _nothing  # the transport's flush, set by the worker
        self.flush_due: Callable[[], None] = _nothing  # its flush after a working round (Transport.flush_due)
        self.poll: Callable[[], int] = _none_arrived  # the transport's poll, set by the worker
        # a tracked topology's counts of this worker (squall.engine.tracking.WorkerCounts), set by
        # the worker: each drain's items are counted as processed once it returns (what they
        # emitted is counted already)
        self.tracker: Any = None
        # the worker's (`squall.engine.start_gate`): held before the first round until the host
        # recorded that the worker started; None: not held
        self.start_gate: StartGate | None = None

    def add(self, executor: Executor) -> None:
        """Place an executor on this loop (before `start`)."""
        self.executors.append(executor)

    def wake(self) -> None:
        """Wake the loop if it sleeps (any thread may call this)."""
        self._event.set()

    def start(self) -> None:
        """Start the loop's thread."""
        self.state.register(self)
        self.backpressure.register(self)
        self.clock.register(self._event)
        self.thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self.thread.squall_loop = self  # type: ignore[attr-defined]  # whose ``current`` a log line names (squall.cluster.logs)
        self.thread.start()

    def timers_run(self, now: float) -> bool:
        """Whether this loop has run its timers due at ``now``: False while it is still opening
        its executors or about to (activated, not yet past its wait), True while it waits for
        the first activation of an inactive topology."""
        return self.next_due > now or (self.awaiting_activation and not self.state.active)

    def stop(self, clean: bool = True) -> None:
        """Ask the loop to stop after its current round; ``clean`` runs the user's close/cleanup."""
        self._clean = clean
        self._stop = True
        self._event.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; False if it is still running (stuck in user code)."""
        if self.thread is None:
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()

    # --- the thread --------------------------------------------------------------------------------
    def _main(self) -> None:
        self.ident = threading.get_ident()
        for ex in self.executors:
            for c in getattr(ex, "collectors", {}).values():
                c._loop_ident = self.ident
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 (user code crashed: the worker dies, Storm's fail-fast)
            self._stop = True
            try:  # what is queued for other workers leaves first: the failure of the input that raised
                self.flush()
            except Exception:  # noqa: BLE001 (logged: the crash itself is what is reported)
                log.debug("flush after a crash failed", exc_info=True)
            self.on_crash(self, self.current, e)
        finally:
            self.state.unregister(self)
            self.backpressure.unregister(self)
            self.clock.unregister(self._event)

    # Every call into an executor (user code) is bracketed: ``calls`` counts the calls started
    # and ``current`` is the executor until `_returned`, which takes ``_boundary``. The watchdog
    # (`take_over`) takes the same lock, so while it holds it a call it sees in progress cannot
    # end: the loop's thread learns of the move when that call returns, before it runs another.

    def _returned(self) -> bool:
        """End of a call into an executor; True if the executors were moved off this loop meanwhile."""
        with self._boundary:
            self.current = None
            return self._moved

    def take_over(self, calls: int, new_loop: ExecutorLoop, keep: Container[Executor] = ()) -> Executor | None:
        """Move every executor but the one blocking this loop, and those in ``keep``, to
        ``new_loop`` (not yet started).

        Called by the watchdog, not this loop's thread. Only if call number ``calls`` is still in
        progress (the one the watchdog saw last), which makes its executor the one blocking;
        that executor keeps this loop and its thread. Returns it, or None (nothing moved).
        No executor that moves is in a call: this loop's thread is in the blocking one's, and
        learns of the move before it calls into any other (`_returned`).
        """
        with self._boundary:
            blocked = self.current  # read before calls: a new call sets calls, then current
            if blocked is None or self.calls != calls or self._stop:
                return None
            moving = [ex for ex in self.executors if ex is not blocked and ex not in keep]
            if not moving:
                return None
            new_loop.executors = moving
            self.executors = [ex for ex in self.executors if ex is blocked or ex in keep]
            if isinstance(blocked, SpoutExecutor):
                # a spout whose next_tuple blocks, now on a thread of its own: called once a
                # round from the next (`_serve` reads it anew after the move), as one given its
                # own thread from the start; a burst held its acks back for 64 of its calls
                self.spout_burst = BLOCKING_SPOUT_BURST
            self._moved = True
        return blocked

    def _run(self) -> None:
        state = self.state
        event = self._event
        clock = self.clock
        if not all(ex.opened for ex in self.executors):  # (a loop made by take_over may start opened)
            while not self._stop and not state.active:  # open/prepare wait for the first activation
                self.awaiting_activation = True
                clock.wait(event, 0.1)
                event.clear()
            self.awaiting_activation = False
            # A split (`take_over`) while one opens leaves this loop the blocked executor and
            # those that may not move, some maybe not opened yet: open whatever is left here.
            while not self._stop and (todo := [ex for ex in self.executors if not ex.opened]):
                self.calls += 1
                self.current = todo[0]
                todo[0].open()
                self._returned()
        gate = self.start_gate
        if gate is not None and not gate.released:  # no tuple before the host knows the worker started
            gate.opened()
            gate.wait(lambda: self._stop, self.name)
        while not self._stop:
            with self._boundary:
                self._moved = False
            self._serve()
        self.flush()  # what flush_due held for a later round leaves before the loop ends
        if self._clean:
            for ex in self.executors:
                if ex.opened:
                    self.current = ex
                    try:
                        ex.close()
                    except Exception:  # noqa: BLE001 (the user's close/cleanup, logged: the others still close)
                        log.exception("close/cleanup of %s raised", ex.component)

    def _serve(self) -> None:
        """Run rounds over this loop's executors until it stops or they are moved (`take_over`)."""
        state = self.state
        event = self._event
        clock = self.clock
        consumers = [(ex, REPLY_DRAIN_LIMIT if ex.kind in ("acker", "spout") else DRAIN_LIMIT)
                     for ex in _downstream_first(self.executors)]
        spouts = [ex for ex in self.executors if isinstance(ex, SpoutExecutor)]
        bolts = [ex for ex in self.executors if ex.kind == "bolt"]
        bp = self.backpressure
        burst = self.spout_burst
        now = clock.now()
        timers = []
        for ex in self.executors:  # the timers stay with an executor when it changes loops
            if ex.schedule is None:
                ex.schedule = [[now + period, period, cb, ex] for period, cb in ex.timers() + _extra_timers(ex)]
            timers.extend(ex.schedule)
        next_due = self.next_due = min((t[0] for t in timers), default=float("inf"))
        seen_active = None
        idle = 0
        # the work time of this window, and when the round before began
        busy_secs, busy_due, last_now = 0.0, now + BUSY_WINDOW_SECS, now
        track_busy = self.track_busy
        flush = self.flush
        flush_due = self.flush_due
        poll = self.poll
        returned = self._returned
        tracker = self.tracker
        while not self._stop:
            self.rounds += 1
            active = state.active
            if active != seen_active:
                for sp in spouts:
                    self.calls += 1
                    self.current = sp
                    sp.set_active(active)
                    if returned():
                        return
                seen_active = active
            worked = poll()  # what other workers sent, into the inboxes before they are drained
            for ex, limit in consumers:
                self.calls += 1
                self.current = ex
                drained = ex.drain(limit)
                worked += drained
                if tracker is not None and drained:
                    tracker.process(ex.component, drained)
                if returned():
                    return
            if worked:
                # what the bolts emitted for other workers leaves before the spouts' burst: the
                # peers have it a burst sooner, and its Tuples are freed while still in the cache
                # (W1 on 2 workers: 1-4% less CPU a sentence, and a lower latency; w1-scaling-model.md)
                flush_due()
            may_emit = False
            if active:
                for sp in spouts:
                    if sp.can_emit():
                        may_emit = True
                        self.calls += 1
                        self.current = sp
                        worked += sp.produce(burst)
                        if returned():
                            return
            for ex in bolts:
                for t, q in ex.inboxes.items():
                    bp.check(t, len(q))
            now = clock.now()
            if track_busy:
                if worked:
                    busy_secs += now - last_now
                last_now = now
                if now >= busy_due:
                    self.busy = min(1.0, busy_secs / (now - busy_due + BUSY_WINDOW_SECS))
                    busy_secs, busy_due = 0.0, now + BUSY_WINDOW_SECS
            if now >= next_due:
                for timer in timers:
                    if now >= timer[0]:
                        timer[0] = max(timer[0] + timer[1], now)
                        self.calls += 1
                        self.current = timer[3]
                        timer[2]()
                        worked += 1
                        if returned():
                            return
                next_due = self.next_due = min(t[0] for t in timers)
            if worked:
                idle = 0
                flush_due()
                continue
            idle += 1
            if may_emit:
                timeout = self.spout_wait.idle(idle)
            elif active and spouts and bp.throttled:
                timeout = self.backpressure_wait.idle(idle)
            else:
                timeout = None
            if timeout is None:  # until woken, or the next timer
                timeout = None if next_due == float("inf") else next_due - now
            elif timeout <= 0.0:
                flush()  # an idle round: what flush_due held waits no longer
                continue  # poll again at once
            else:
                timeout = min(timeout, next_due - now)
            if track_busy:  # an idle loop's figure must say so too: its peers read it
                timeout = busy_due - now if timeout is None else min(timeout, busy_due - now)
            flush()  # emits from user threads may have been batched since the last round
            self.sleeping = True
            if not self._has_backlog() and not self._stop and state.active == seen_active:
                clock.wait(event, max(timeout, 0.0) if timeout is not None else None)
                last_now = clock.now()
            self.sleeping = False
            event.clear()

    def _has_backlog(self) -> bool:
        for ex in self.executors:
            for q in ex.inboxes.values():
                if q:
                    return True
        return False


def _nothing() -> None:
    pass


def _none_arrived() -> int:
    return 0


def _downstream_first(executors: list[Executor]) -> list[Executor]:
    """Acker first, then bolts from the deepest component, then spouts (for their replies)."""
    def rank(ex: Executor) -> tuple[int, int]:
        if ex.kind == "acker":
            return (0, 0)
        if ex.kind == "spout":
            return (2, 0)
        return (1, -getattr(ex, "depth", 0))
    return sorted(executors, key=rank)
