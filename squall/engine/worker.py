"""`Worker`: the executors assigned to one worker slot, on their loops, with their inboxes.

A worker is built from the topology plan and its assignment (a list of executors), fresh
component instances unpickled per task, a clock and a `Transport` for tasks elsewhere. It knows
nothing of where it is hosted: `LocalCluster` runs several in one process, the process and Spark
hosts one per process.

Items for local tasks go straight into their inboxes (never through the transport); a task on
another loop of this worker is woken when it sleeps; a remote task is reached through the
transport's sender.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import cloudpickle

from .._config import GC_THRESHOLD_MAX, Config, conf_value
from .._context import TopologyContext
from .._error_lines import cannot_serialize, exception_text
from .._errors import InvalidTopologyException, WorkerStoppingError
from .._failure import WORKER_DIED, FailureCause
from .._native import deliver_items
from .._system import ACKER_COMPONENT
from .._tuple import Tuple
from .._waits import waited_for
from .._worker_resources import WorkerResources
from . import code_pickler
from .acker_executor import AckerExecutor
from .bolt_executor import BoltExecutor
from .executing import ExecutingBoard, ExecutingInput
from .executor import ErrorRecord, Executor, Wiring, error_record, log, unshare_dict
from .load_mapping import LoadMapping
from .loop import Backpressure, ExecutorLoop, TopologyActivation
from .plan import ExecutorSpec, TopologyPlan
from .spout_executor import SpoutExecutor
from .start_gate import StartGate
from .stateful_progress import StatefulInput, StatefulProgress
from .thread_frames import entry_from, frames_of
from .tracking import counted, tracker_of
from .transport import Transport

_NO_COUNTS: dict[str, int] = {}  # a stateful task's counts before its prepare

# The engine's own code, which calls the components' (theirs includes squall's components:
# connectors, windowed and stateful bolts' wrappers, Trident's bolts, squall.testing's)
_ENGINE_FILES = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
                 os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_native.py"))


def _user_entry(frame: FrameType | None) -> FrameType | None:
    """The outermost frame of the component code a loop's thread is in (``frame``: its
    innermost): the engine's call into it (``execute``, say); None if it is in the engine's own."""
    return entry_from(frame, _ENGINE_FILES)


def _frames_of(threads: Iterable[threading.Thread | None]) -> dict[int, FrameType]:
    """The current frame of each of ``threads`` that runs, by its ident, and of no other thread
    (`squall.engine.thread_frames.frames_of`: read without CPython 3.11's deadlock)."""
    return frames_of({t.ident for t in threads if t is not None and t.ident is not None})


def _on_stack(entry: FrameType, frame: FrameType | None) -> bool:
    while frame is not None:
        if frame is entry:
            return True
        frame = frame.f_back
    return False


@dataclass
class _UserCall:
    """A call into user code a loop's thread was seen in (`Worker.report_stuck`)."""

    entry: FrameType  # its outermost frame of user code: the call is the same while it is on the stack
    since: float  # when it was first seen, or last showed life (a reset_timeout)
    resets: int  # its executor's reset_timeout calls then
    reported: bool = False


def component_blobs(plan: TopologyPlan) -> dict[str, bytes]:
    """Each component pickled once; every task (and every restart) unpickles a fresh instance.

    Raises:
        InvalidTopologyException: naming the component that cannot be pickled.
    """
    blobs = {}
    for cid, spec in plan.topology.components.items():
        try:
            blobs[cid] = code_pickler.dumps(spec.obj)  # the user's modules may refer to each other
        except Exception as e:
            raise InvalidTopologyException(cannot_serialize(cid, e)) from e
    return blobs


def component_depths(plan: TopologyPlan) -> dict[str, int]:
    """Longest path from a spout to each component (cycles cut), for downstream-first draining."""
    comps = plan.topology.components
    depth = {cid: 0 for cid in comps}
    for _ in range(len(comps)):
        changed = False
        for cid, spec in comps.items():
            for (src, _stream) in spec.inputs:
                if src in depth and depth[src] + 1 > depth[cid] and depth[src] + 1 <= len(comps):
                    depth[cid] = depth[src] + 1
                    changed = True
        if not changed:
            break
    return depth


class Worker:
    """The executors of one worker slot; see the module docstring.

    ``on_opened`` is called once, on a loop's thread, when every executor has opened; the loops
    then run no round until ``start_gate.release()`` (the host recorded the start) or for
    ``start_wait_secs`` at most (`squall.engine.start_gate`). Without it they run at once.
    """

    def __init__(self, plan: TopologyPlan, port: int, assignment: list[ExecutorSpec], blobs: dict[str, bytes],
                 transport: Transport, clock: Any, state: TopologyActivation, backpressure: Backpressure,
                 report_error: Callable[[ErrorRecord], None],
                 on_crash: Callable[[Worker, ErrorRecord], None], seed: int, state_home: Any = None,
                 transactional_home: Any = None,
                 executing: Callable[[int], ExecutingBoard] | None = None,
                 on_opened: Callable[[], None] | None = None, start_wait_secs: float = 5.0) -> None:
        """``executing``: the host's board of the inputs being executed, made for so many bolt
        executors (`squall.engine.executing`; None: none is kept)."""
        self.plan = plan
        self.port = port
        self.state_home = state_home  # the host's, for stateful bolts' state providers (squall.state)
        # the host's, for Trident's coordinators (squall._transactional.TransactionalBackend)
        self.transactional_home = transactional_home
        # shared by this worker's tasks, not by its next life's (squall._worker_resources)
        self.resources = WorkerResources()
        self.clock = clock
        self.assignment = list(assignment)
        self.state = state
        self.backpressure = backpressure
        self._on_crash = on_crash
        self._report_error = report_error
        self.crashed: ErrorRecord | None = None
        # the watchdog's (find_stalls): per loop, its call count, since when, and the user frame it was in
        self._last_calls: dict[ExecutorLoop, tuple[int, float, FrameType | None]] = {}
        self._warned: dict[ExecutorLoop, int] = {}  # the stalled call each loop was warned of
        self._user_calls: dict[ExecutorLoop, _UserCall] = {}  # per loop, the user call it is in
        self._splits = 0
        self._loops_lock = threading.Lock()
        self._stopped = False
        self._crash_lock = threading.Lock()
        self.tasks = sorted(t for e in assignment for t in e.tasks)
        self.inboxes: dict[int, deque] = {t: deque() for t in self.tasks}
        # a tracked topology's counts (squall.testing.TrackedTopology), or None: then every
        # delivery counts what it transfers, every loop what it processes, and this worker
        # what arrives in it, so that what it held is counted as lost when it dies
        counts = tracker_of(plan.conf)
        self.counts = counts
        self.tracker = counts.worker() if counts is not None else None

        # One shared loop, plus one per executor of a component that asked for its own thread.
        self._transport = transport
        if transport.reach is not None:  # a line about an unreachable peer names its tasks' components
            transport.reach.components = lambda tasks: sorted({plan.task_to_component.get(t, "?") for t in tasks})
        self._loop_event = transport.loop_event
        shared = ExecutorLoop(f"squall-worker-{port}", state, backpressure, clock, plan.conf, self._crash,
                              transport.loop_event())
        self.loops = [shared]
        self.start_gate = StartGate(self.opened, on_opened, start_wait_secs)
        loop_of_exec: dict[ExecutorSpec, ExecutorLoop] = {}
        for e in assignment:
            cconf = plan.component_confs[e.component]
            if cconf.get(Config.TOPOLOGY_EXECUTOR_OWN_THREAD) and e.component != ACKER_COMPONENT:
                lp = ExecutorLoop(f"squall-worker-{port}-{e.component}-{e.tasks[0]}", state, backpressure,
                                  clock, cconf, self._crash, transport.loop_event())
                self.loops.append(lp)
                loop_of_exec[e] = lp
            else:
                loop_of_exec[e] = shared
        self.loop_of_task = {t: loop_of_exec[e] for e in assignment for t in e.tasks}
        for lp in self.loops:
            lp.start_gate = self.start_gate
            lp.flush = transport.flush
            lp.flush_due = transport.flush_due
            lp.poll = transport.poll
            lp.tracker = self.tracker

        depths = component_depths(plan)
        self.executors: list[Executor] = []
        self._capacity = conf_value(plan.conf, Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE)
        # Shuffles are load-aware only where they could leave the worker (Storm 2's default)
        load_aware = (conf_value(plan.conf, Config.TOPOLOGY_WORKERS) > 1
                      and not conf_value(plan.conf, Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING))
        for lp in self.loops:
            lp.track_busy = load_aware
        self.load_aware = load_aware
        # this worker's bolt tasks and their inboxes: the ones backpressure bounds and whose
        # load the peers are told
        self._bounded_inboxes = [(t, self.inboxes[t]) for e in assignment
                                 if plan.topology.components.get(e.component) is not None
                                 and plan.topology.components[e.component].kind == "bolt" for t in e.tasks]
        # every task's load: this worker's own, the others' as their workers tell it (`LoadLink`)
        self.load_mapping = LoadMapping(lambda t: self.task_load(t) if t in self.inboxes else None, clock,
                                        lambda t: self.task_fill(t) if t in self.inboxes else None)
        bolts = [e for e in assignment if plan.topology.components.get(e.component) is not None
                 and plan.topology.components[e.component].kind == "bolt"]
        self.board = executing(len(bolts)) if executing is not None else None
        lines = {e: self.board.entry(i, e.tasks[0]) for i, e in enumerate(bolts)} if self.board is not None else {}
        # the stateful tasks' data inputs by source, this worker's and its peers' (as they tell
        # them: `stateful_progress`), which the spouts' automatic max pending reads (`executed_by`)
        self._stateful_objs: dict[int, Any] = {}  # task -> its stateful bolt (set below)
        self.stateful_progress = StatefulProgress(self._stateful_counts, plan.component_tasks, clock)
        for e in assignment:
            lp = loop_of_exec[e]
            wiring = Wiring(plan, self._deliver_map(lp, transport), clock, state, backpressure,
                            report_error, port, self.tasks, seed, self.inboxes, loop=lp,
                            loads=self.load_mapping if load_aware else None, tracker=self.tracker,
                            executing=lines.get(e), reach=transport.reach, executed_by=self.executed_by)
            ex = self._make_executor(e, wiring, blobs)
            for t, obj in getattr(ex, "objs", {}).items():
                if getattr(obj, "squall_acks_at_commit", False):
                    self._stateful_objs[t] = obj
            ex.depth = depths.get(e.component, 0)  # type: ignore[attr-defined]
            lp.add(ex)
            self.executors.append(ex)

    def executed_by(self, inputs: Sequence[StatefulInput]) -> int | None:
        """The data inputs executed so far on ``inputs`` (stateful bolts' inputs from named
        components) by every task of their bolts, this worker's and, as their workers last told
        (`squall.engine.stateful_progress.ProgressLink`), the others'; None while one task's
        is not known. Counted by the stateful bolts themselves, exactly, checkpoints left out
        (`squall.state._bolt.StatefulBoltExecutor`). Read on any loop's thread: the counts only
        grow, and a read a few tuples behind is as good (a spout's max pending asks once a
        period, to tell a stateful bolt that takes its tuples from one that waits for them)."""
        return self.stateful_progress.executed(inputs)

    def _stateful_counts(self, task: int) -> dict[str, int] | None:
        """This worker's ``task``'s data inputs by source, if it is a stateful task here (none
        yet before its ``prepare``), else None."""
        obj = self._stateful_objs.get(task)
        return None if obj is None else getattr(obj, "squall_executed_from", _NO_COUNTS)

    def hosts_stateful_tasks(self) -> bool:
        """Whether a stateful bolt's task runs in this worker."""
        return bool(self._stateful_objs)

    def stateful_counts(self) -> list[tuple[int, str, int]]:
        """``(task, source, count)`` of this worker's stateful tasks, for its peers."""
        return [(t, src, n) for t in self._stateful_objs
                for src, n in list((self._stateful_counts(t) or _NO_COUNTS).items())]

    def task_fill(self, task: int) -> float:
        """Local ``task``'s inbox fill, Storm's load (0.0 empty, 1.0 when
        ``topology.executor.receive.buffer.size`` items wait, or more: backpressure stops the
        spouts only between their calls, so an inbox may hold more than its bound, while Storm's
        bounded queue cannot; the load messages' figures are from 0 to 1, `loads_of`)."""
        return min(1.0, len(self.inboxes[task]) / self._capacity)

    def task_load(self, task: int) -> float:
        """Local ``task``'s load (0.0 idle, 1.0 full): its inbox's fill (`task_fill`), or how
        busy its loop was lately (`ExecutorLoop.busy`, once measured), whichever is more. The
        second is squall's: an executor sharing its loop with the spout that feeds it never lets
        its inbox fill (the loop drains it before the spout emits again), and one thread holds
        the worker's share of the CPU (the GIL), so more tuples for a task on a loop with no idle
        time slow everything on that loop, the spout first, while a task in another worker may
        have time to spare."""
        busy = self.loop_of_task[task].busy
        fill = self.task_fill(task)
        return fill if busy is None else max(fill, busy)

    def bolt_loads(self) -> list[tuple[int, float]]:
        """``(task, load)`` of each bolt task in this worker (`task_load`) whose loop has
        measured how busy it is, for its peers: a figure from before that would read as idle
        to them, and send them this worker's tuples while it may be as busy as they are."""
        return [(t, self.task_load(t)) for t, _ in self._bounded_inboxes if self.loop_of_task[t].busy is not None]

    def _deliver_map(self, loop: ExecutorLoop, transport: Transport) -> dict[int, Callable[[Any], None]]:
        deliver: dict[int, Callable[[Any], None]] = {}
        for t in self.plan.task_to_component:
            deliver[t] = self._counted(t, transport.sender(t)) if t not in self.inboxes else self._local_deliver(loop, t)
        return deliver

    def _counted(self, t: int, deliver: Callable[[Any], None]) -> Callable[[Any], None]:
        """``deliver`` to task ``t``, counting what it transfers if the topology is tracked (as
        arriving here too, for a task of this worker; the receiver counts the others' arrivals)."""
        if self.tracker is None or self.counts is None:
            return deliver
        return counted(self.tracker if t in self.inboxes else self.counts, self.plan.task_to_component[t], deliver)

    def _local_deliver(self, loop: ExecutorLoop, t: int) -> Callable[[Any], None]:
        """How an executor on ``loop`` puts an item in local task ``t``'s inbox."""
        q = self.inboxes[t]
        if self.loop_of_task[t] is loop:
            return self._counted(t, q.append)
        spec = self.plan.topology.components.get(self.plan.task_to_component[t])
        bounded = spec is not None and spec.kind == "bolt"  # acker and spout inboxes never are
        return self._counted(t, _waking_append(q, self.loop_of_task[t], t, self.backpressure if bounded else None))

    def _make_executor(self, e: ExecutorSpec, wiring: Wiring, blobs: dict[str, bytes]) -> Executor:
        plan = self.plan
        # its own map, as Storm's Executor.normalizedComponentConf: what a task adds to its conf
        # (or to its context's get_storm_conf()) is not in another executor's
        conf = dict(plan.component_confs[e.component])
        if e.component == ACKER_COMPONENT:
            return AckerExecutor(e, wiring, conf)
        try:
            objs = {t: unshare_dict(cloudpickle.loads(blobs[e.component])) for t in e.tasks}
        except Exception as err:
            # the user's __setstate__ or __reduce__ (pickling worked at submit: unpickling runs
            # first here); raised bare, the worker died as "exited with status 1 before it
            # started: no output" on LocalCluster, naming neither the component nor the error
            raise InvalidTopologyException(
                f"Component [{e.component}] cannot be rebuilt for its tasks from its pickle "
                f"({exception_text(err)}); squall copies each component "
                f"per task, so it must unpickle as well as pickle") from err
        origins = plan.root_origins
        contexts = {t: TopologyContext(plan.topology, plan.storm_id, plan.task_to_component, t, self.port,
                                       self.tasks, conf, self.state_home, self.transactional_home, self.resources,
                                       origins)
                    for t in e.tasks}
        kind = plan.topology.components[e.component].kind
        cls = SpoutExecutor if kind == "spout" else BoltExecutor
        return cls(e, wiring, objs, contexts, conf)

    # --- control ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every loop (user code runs once the topology is active).

        Raises:
            InvalidTopologyException: ``topology.worker.gc.thresholds`` holds a count
                ``gc.set_threshold`` refuses (named, with the value); no loop started then.
        """
        thresholds = self.plan.conf.get(Config.TOPOLOGY_WORKER_GC_THRESHOLDS)
        if thresholds:
            try:
                gc.set_threshold(*thresholds)
            except (OverflowError, TypeError, ValueError) as e:  # a plan stored before submit checked the range
                raise InvalidTopologyException(f"{Config.TOPOLOGY_WORKER_GC_THRESHOLDS} = {thresholds!r}: {e} "
                                               f"(gc.set_threshold takes counts up to {GC_THRESHOLD_MAX})") from e
        for lp in self.loops:
            lp.start()

    def stop(self, clean: bool = True, timeout: float = 5.0) -> bool:
        """Stop the loops; True if all ended (a loop stuck in user code is abandoned)."""
        with self._loops_lock:  # no loop is added (find_stalls) once this starts
            self._stopped = True
        for lp in self.loops:
            lp.stop(clean)
        if self.tracker is not None:  # what its inboxes hold is never run
            self.tracker.died()
        # one deadline for all: a loop late in a user's cleanup must not cut the others' short
        deadline = time.monotonic() + timeout
        ok = True
        for lp in self.loops:
            ok = lp.join(max(0.0, deadline - time.monotonic())) and ok
        # what a dead process would take with it (a spout's reading thread and its connection),
        # ended here too: a host that runs workers in its own process (LocalCluster) outlives
        # this one, and what the tasks started would go on working for tasks that are gone
        self.resources.end()
        self.backpressure.forget(self.tasks)
        if not ok:
            stuck = [lp.name for lp in self.loops if lp.thread is not None and lp.thread.is_alive()]
            log.warning("worker %s: loops %s did not stop (user code blocked?); abandoned", self.port, stuck)
        return ok

    def receive(self, task: int, item: Any) -> None:
        """Deliver an item from another worker to local ``task`` (called by the transport)."""
        q = self.inboxes[task]
        if self.tracker is not None:  # (a tracked topology runs on LocalCluster's in-memory transport, which calls this)
            self.tracker.arrive(self.plan.task_to_component[task])
        q.append(item)
        lp = self.loop_of_task[task]
        if lp.sleeping:
            lp.wake()
        if len(q) >= self.backpressure.high and type(item) is Tuple:  # acker traffic is never bounded
            self.backpressure.check(task, len(q))

    def receive_batch(self, items: list[Any]) -> int:
        """Deliver a batch from another worker (called by the transport's `poll`, on one of this
        worker's loops), flat: ``[task, item, task, item, ...]``; items for tasks not here are
        dropped. Returns the items delivered.

        Cheaper per item than `receive`: the inbox is looked up and appended to, and the loops
        that sleep are woken once per batch (a loop checks its own inboxes' backpressure every
        round, so a woken loop sees a bound this batch crossed)."""
        # items not (or no longer) ours, e.g. sent under an old assignment, are dropped, as in Storm
        delivered = deliver_items(self.inboxes, items)
        self._received()
        return delivered

    def receive_into(self, fill: Callable[[dict[int, Any]], int | None]) -> int | None:
        """Deliver a batch from another worker that ``fill`` decodes straight into this worker's
        inboxes (a dict of deques by task, to which it appends; items for tasks not there it
        drops), as `receive_batch` does a decoded one; returns what ``fill`` does: the items
        delivered, or None when it delivered nothing (the caller then decodes the batch and
        hands it to `receive_batch`)."""
        delivered = fill(self.inboxes)
        if delivered is not None:
            self._received()
        return delivered

    def _received(self) -> None:
        """After a batch's delivery: backpressure checked, sleeping loops woken."""
        # a bolt's inbox over its bound throttles the spouts now, not when its loop next looks
        # (a slow bolt's round may take seconds); acker and spout inboxes are never bounded
        bp = self.backpressure
        for task, q in self._bounded_inboxes:
            if len(q) >= bp.high:
                bp.check(task, len(q))
        for lp in self.loops:
            if lp.sleeping:
                lp.wake()

    def wake_loops(self) -> None:
        """Wake every loop of the worker (items arrived for `Transport.poll`)."""
        for lp in self.loops:
            lp.wake()

    def tasks_lost(self, tasks: Iterable[int], own: bool = False, executing: Iterable[ExecutingInput] = (),
                   how: str = "", ago: float | None = None) -> int:
        """Items this worker sent to ``tasks`` (in another worker) until now, or until ``ago``
        seconds ago (`squall.engine.transport.Transport.loss_age`), may be lost: that
        worker died, or what was queued for it was dropped. Every local spout that reaches one
        of them fails its pending tuples emitted until then, on its own loop
        (`SpoutExecutor.notify_lost`). Returns how many spout executors will. ``own``: this
        worker's own tasks count too (a peer dropped items for them, which may have come from
        this worker's spouts: `squall.engine.dropped_items`); else they are left out (a notice
        of an earlier launch of this worker's slot concerns tuples of that launch).
        ``executing``: the inputs that worker's bolts were executing when it died, ``how`` (its
        exit status): each of their tuples fails as `squall.FailureCause` ``worker-died``."""
        tasks = frozenset(tasks) if own else frozenset(tasks).difference(self.inboxes)
        died = {e.root: FailureCause(WORKER_DIED, self.plan.task_to_component[e.task], e.task, "", how)
                for e in executing if e.task in tasks and e.task in self.plan.task_to_component}
        until = self.clock.now() - (ago or 0.0)
        return sum(ex.notify_lost(tasks, until, died) for ex in self.executors if isinstance(ex, SpoutExecutor))

    def _crash(self, loop: ExecutorLoop, executor: Executor | None, exc: BaseException) -> None:
        component = executor.component if executor is not None else "?"
        task = executor.current_task if executor is not None else -1
        if isinstance(exc, WorkerStoppingError):
            # a call the worker's stop cut short (a Trident coordinator spout's write to a
            # master that no longer answers, `squall._transactional.MasterBackend`): the
            # worker is going, its component did not fail; reported, it was a fatal error, a
            # death of the worker, at every such stop (a bolt's input: `BoltExecutor`)
            log.info("worker %s is stopping: [%s] task %s's loop ends, its call cut short: %s", self.port,
                     component, task, exc)
            return
        record = error_record(component, task, exc, self.port, fatal=True)
        with self._crash_lock:
            first = self.crashed is None
            if first:
                self.crashed = record
        if first:
            # before anyone hears of the death: what peers send from now on (the spouts' replays
            # at the notice) waits for the next launch, not in these inboxes (`Transport.hang_up`)
            self._transport.hang_up()
        self._report_error(record)
        log.error("worker %s crashed in component [%s] task %s:\n%s", self.port, component, task,
                  record.traceback)
        if first:
            for lp in self.loops:
                if lp is not loop:
                    lp.stop(clean=False)
            if self.tracker is not None:  # what it held (and was running) is never processed now
                self.tracker.died()
            self._on_crash(self, record)

    def find_stalls(self, now: float, threshold: float) -> list[str]:
        """Unblock the loops that one component's user code has held for over ``threshold`` seconds.

        Called periodically by the host (the watchdog). A loop whose current call into an
        executor has not returned since the previous call of this method ``threshold`` seconds
        ago or more, while other executors share the loop, is split (`ExecutorLoop.take_over`):
        the blocked component keeps the loop's thread to itself, and the other executors go on
        at once on a new loop, as in Storm, where a blocking executor stalls only itself. An
        executor whose component sets ``topology.executor.blocking.move`` to false stays with
        the blocked one (stalled, but on the thread it started on). Logs once per stall and
        returns the blocked components whose loop was split. Costs nothing on the tuple path.

        A call into an executor drains up to `DRAIN_LIMIT` inputs of a bolt, each a call of the
        user's ``execute`` of its own: as `report_stuck`, a loop whose thread is no longer in
        the user frame it was seen in at the previous look (a bolt slow on each of many queued
        inputs, say 1 ms each on a saturated machine) is making progress, not blocked.
        """
        moved = []
        loops = list(self.loops)
        frames = _frames_of(lp.thread for lp in loops)
        for lp in loops:
            calls = lp.calls
            seen = self._last_calls.get(lp)
            thread = lp.thread
            frame = frames.get(thread.ident) if thread is not None and thread.ident else None
            entry = _user_entry(frame)
            if (seen is None or seen[0] != calls or (seen[2] is None and entry is not None)
                    or (seen[2] is not None and not _on_stack(seen[2], frame))):
                self._last_calls[lp] = (calls, now, entry)
                continue
            blocking = lp.current
            if now - seen[1] < threshold or blocking is None or len(lp.executors) < 2:
                continue
            if lp._stop or lp.thread is None or not lp.thread.is_alive() or self._warned.get(lp) == calls:
                continue  # a stopped or crashed loop is not blocked (its host restarts it); or done
            self._warned[lp] = calls
            keep = [ex for ex in lp.executors if ex is not blocking and not self._may_move(ex)]
            kept = "" if not keep else (
                f"; {_names(keep)} stay{'s' if len(keep) == 1 else ''} stalled with it on that thread, as "
                f"topology.executor.blocking.move is false for {'it' if len(keep) == 1 else 'them'}")
            if len(keep) == len(lp.executors) - 1:
                log.warning("worker %s: component [%s] has held its shared loop in user code for over %.1f s%s "
                            "(set topology.executor.blocking.move to true to let the watchdog move them to a "
                            "new thread, or give [%s] its own with topology.executor.own.thread)",
                            self.port, blocking.component, threshold, kept, blocking.component)
                continue
            blocked = self._split(lp, calls, keep)
            if blocked is not None:
                moved.append(blocked.component)
                log.warning("worker %s: component [%s] held its shared loop in user code for over %.1f s; it "
                            "now has that thread to itself, and the worker's other executors moved to a new "
                            "thread%s (give it its own from the start with topology.executor.own.thread; a "
                            "component whose resources are tied to its thread opts out of moves with "
                            "topology.executor.blocking.move: false)",
                            self.port, blocked.component, threshold, kept)
        return moved

    def report_stuck(self, now: float, after: float) -> list[str]:
        """Tell the user of each call into user code that has not returned for over ``after``
        seconds (the topology's message timeout: the tuples its task holds fail meanwhile):
        a warning in the worker's log and an error of the topology (``squall list``, the UI),
        naming the component and task, with the stack the call is stuck in. Once per call.

        Called periodically by the host (the watchdog), as `find_stalls`. A call is the same
        while the first frame of user code the loop's thread was seen in (``execute``,
        ``next_tuple``, ``prepare`` ...) is on its stack: a bolt slow on each of many inputs
        makes a new frame per input, and is not stuck; nor is a call that resets its input's
        timeout (Storm's ``resetTimeout``, the way to hold an input longer on purpose) at least
        once every ``after`` seconds. Returns the components reported."""
        loops = list(self.loops)
        frames = _frames_of(lp.thread for lp in loops)
        reported = []
        for lp in loops:
            ex, thread = lp.current, lp.thread
            frame = frames.get(thread.ident) if ex is not None and thread is not None and thread.ident else None
            entry = _user_entry(frame)
            seen = self._user_calls.get(lp)
            if entry is None:
                self._user_calls.pop(lp, None)
                continue
            assert ex is not None  # (else no frame was read)
            if seen is None or not _on_stack(seen.entry, frame):
                self._user_calls[lp] = _UserCall(entry, now, ex.resets)
                continue
            if seen.resets != ex.resets:  # a sign of life: it holds its input on purpose
                seen.since, seen.resets = now, ex.resets
            if seen.reported or now - seen.since < after:
                continue
            seen.reported = True
            task, component = ex.current_task, ex.component
            stack = "".join(traceback.format_stack(frame))
            # the same words each time (`add_error` counts repeats of a component that keeps sticking)
            waited = waited_for(thread.ident if thread is not None else None)
            if waited is not None:  # not stuck in user code: waiting for a master that does not answer
                text = (f"[{component}] task {task} has been in one call ({seen.entry.f_code.co_name}) for over "
                        f"{after:g} s (topology.message.timeout.secs), waiting for {waited}, which does not "
                        f"answer (cut off by the network, a Nimbus HA failover, down?). The tuples it holds time "
                        f"out and are replayed meanwhile")
            else:
                text = (f"[{component}] task {task} has been in one call of its user code "
                        f"({seen.entry.f_code.co_name}) for over {after:g} s (topology.message.timeout.secs): "
                        f"stuck? The tuples it holds time out and are replayed meanwhile")
            log.warning("worker %s: %s; it is in:\n%s", self.port, text, stack)
            record = error_record(component, task, text, self.port)
            record.traceback = stack
            self._report_error(record)
            reported.append(component)
        return reported

    def _may_move(self, ex: Executor) -> bool:
        """Whether the watchdog may move ``ex`` to another thread (its component's
        ``topology.executor.blocking.move``)."""
        return bool(conf_value(self.plan.component_confs[ex.component], Config.TOPOLOGY_EXECUTOR_BLOCKING_MOVE))

    def _split(self, loop: ExecutorLoop, calls: int, keep: list[Executor]) -> Executor | None:
        """Move the executors of ``loop`` but the blocked one and ``keep`` to a new loop, rewire
        the deliveries to and from them, and start it; returns the blocked executor, or None if
        its call has returned meanwhile."""
        with self._loops_lock:
            if self._stopped or self.crashed:
                return None
        self._splits += 1
        new = ExecutorLoop(f"{loop.name}-{self._splits}", self.state, self.backpressure, self.clock,
                           self.plan.conf, self._crash, self._loop_event())
        new.flush = loop.flush
        new.flush_due = loop.flush_due
        new.poll = loop.poll
        new.track_busy = loop.track_busy
        new.tracker = loop.tracker
        new.start_gate = loop.start_gate
        blocked = loop.take_over(calls, new, keep)
        if blocked is None:
            return None
        for ex in new.executors:
            ex.wiring.loop = new
            for t in ex.task_ids:
                self.loop_of_task[t] = new
        # Rewire in place: collectors hold these dicts and lists, not copies. A producer now on
        # another loop than its consumer must wake it (and report backpressure for it).
        for lp in self.loops + [new]:
            for ex in lp.executors:
                w = ex.wiring
                for t in self.inboxes:
                    w.deliver[t] = self._local_deliver(lp, t)
                w.ackers[:] = [w.deliver[t] for t in self.plan.acker_tasks]
        with self._loops_lock:
            self.loops.append(new)
            if self._stopped or self.crashed:
                new.stop(clean=False)  # its executors stop with the worker, as they would have
            else:
                new.start()
        return blocked

    def opened(self) -> bool:
        """True once every executor has run its user's open/prepare."""
        return all(ex.opened for ex in self.executors)

    def take_refused_errors(self) -> int:
        """Error reports its executors' throttles refused since the last call
        (`ErrorThrottle.take_refused`): errors that happened with no record to show."""
        return sum(ex.error_throttle.take_refused() for ex in self.executors)

    # --- observation --------------------------------------------------------------------------------
    def backlog(self) -> int:
        """Items waiting in this worker's inboxes."""
        return sum(map(len, self.inboxes.values()))

    def fullest_component(self) -> tuple[str, int] | None:
        """The component whose tasks hold the most items in this worker's inboxes, and how
        many (None without tasks)."""
        held: dict[str, int] = {}
        for task, q in list(self.inboxes.items()):
            component = self.plan.task_to_component.get(task, str(task))
            held[component] = held.get(component, 0) + len(q)
        return max(held.items(), key=lambda kv: kv[1], default=None)

    def is_idle(self) -> bool:
        """No backlog and every loop asleep."""
        return not self.backlog() and all(lp.sleeping or lp._stop for lp in self.loops)

    def timers_run(self, now: float) -> bool:
        """Whether every running loop has run its timers due at ``now`` (its clock's time)."""
        return all(lp.timers_run(now) for lp in self.loops
                   if not lp._stop and lp.thread is not None and lp.thread.is_alive())

    def sampled_snapshots(self) -> dict[int, dict]:
        """Every task's cumulative Storm statistics (`squall.engine.stats`)."""
        return {t: ex.sampled_snapshot(t) for ex in self.executors for t in ex.task_ids}

    def statistics(self) -> dict[int, dict[str, Any]]:
        """Counters per task: ``{task: {component, emitted, transferred, acked, failed, ...}}``."""
        out: dict[int, dict[str, Any]] = {}
        for ex in self.executors:
            for t in ex.task_ids:
                st = ex.stats[t]
                by_stream = ex.emitted_by_stream(t)
                out[t] = {
                    "component": ex.component,
                    "worker": self.port,
                    "executor": list(ex.spec.id),
                    "emitted": {s: v[0] for s, v in by_stream.items()},
                    "transferred": {s: v[1] for s, v in by_stream.items()},
                    "acked": st.acked,
                    "failed": st.failed,
                    "executed": st.executed,
                    "complete_latency_sum": st.latency_sum,
                    "complete_latency_count": st.latency_count,
                    "dead_lettered": ex.dead_letters(t),
                    "backlog": len(ex.inboxes[t]),
                }
        return out


def _names(executors: list[Executor]) -> str:
    """``[a], [b]``: the components of ``executors``, once each."""
    return ", ".join(f"[{c}]" for c in sorted({ex.component for ex in executors}))


def _waking_append(q: deque, loop: ExecutorLoop, task: int, bp: Backpressure | None) -> Callable[[Any], None]:
    """Deliver to a task on another loop: wake that loop if it sleeps, and if it is busy (maybe
    blocked in user code, so it cannot report its own backlog) flag backpressure from here."""
    append = q.append
    if bp is None:
        def deliver_unbounded(item: Any) -> None:
            append(item)
            if loop.sleeping:
                loop.wake()
        return deliver_unbounded
    high = bp.high

    def deliver(item: Any) -> None:
        append(item)
        if loop.sleeping:
            loop.wake()  # a woken loop may take a GIL switch interval to run: check anyway
        if len(q) >= high:
            bp.check(task, len(q))
    return deliver
