"""`WorkerAgent`: one launch of one worker slot, from its assignment to its exit status.

The same on every host: a worker process (`squall.cluster.worker_process`), a Spark task
(`squall.cluster.spark_task`) and a `LocalCluster`'s in-process worker
(`squall.cluster.inprocess`) each run one. It asks the master for its assignment, opens its
transport and reports the transport's address, waits until every peer has reported its own,
builds the engine's `Worker` and heartbeats its statistics and errors (at once when every
executor has opened: its loops take no tuple until that beat is answered, so the master knows
a worker that dies on its first tuple had started, `squall.engine.start_gate`); the replies say whether
the topology is active, when a peer moved or died (its spouts then fail what it may have held)
and when to stop. While the master is unreachable it keeps processing and retries. What differs
between hosts comes in: the link to the master (RPC or a direct call), how the plan arrives
(pickled in the assignment, or the master's own object in-process), and the transport.

A crash in user code (Storm's fail-fast) is reported and ends the run with `EXIT_CRASHED`; a
worker that cannot start (its topology cannot be loaded, or user code fails before every
executor has opened, say on a bad import in ``prepare``) reports why and ends with
`EXIT_CANNOT_START`. Where the host runs each worker as a process of its own (``cap_memory``) and
a memory cap is set (`squall.worker.memory_cap`), a worker past it reports so and ends with
`EXIT_OVER_MEMORY`, which the master takes for a crash.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import cloudpickle

from .._config import Config, conf_value
from .._errors import NotAliveException, RemoteError, RpcError, SquallError, transient
from .._nimbus import Assignment, Heartbeat
from .._transactional import KeptAnswers, MasterBackend, StoredKey, WorkerLaunch
from .._worker_resources import LAUNCH, LaunchView
from ..engine.clock import Clock
from ..engine.dropped_items import DroppedItemsLink
from ..engine.executing import ExecutingBoard, ExecutingInput
from ..engine.executor import ErrorRecord, add_error, error_record
from ..engine.load_mapping import LoadLink, is_load_message
from ..engine.loop import Backpressure, TopologyActivation
from ..engine.plan import TopologyPlan
from ..engine.remote_backpressure import BackpressureLink
from ..engine.stateful_progress import ProgressLink, is_progress_message, progress_of
from ..engine.transport import Origin, Transport
from ..engine.worker import Worker, component_blobs
from .calls import MasterCalls, nimbus_of
from .log_levels import LogLevelManager
from .memory_cap import EXIT_OVER_MEMORY, MemoryCap
from .stats_history import StatsHistory, WorkerFigures, rss_bytes

log = logging.getLogger("squall.worker")

EXIT_CRASHED = 1
EXIT_CANNOT_START = 3
# How often the watchdog looks for a loop held by user code: twice per blocking threshold (it
# needs two looks that far apart to see a call that has not returned), at most every 0.5 s and
# never more often than every 50 ms
STALL_TICK_SECS = 0.5
MIN_STALL_TICK_SECS = 0.05
# How soon a worker beats again while the master waits for the other workers' first beats to
# activate the topology: at the heartbeat's period (1 s), the worker that beat first started its
# spouts up to a second after the others (0.84-0.91 s measured, W1 on 2 workers)
ACTIVATION_POLL_SECS = 0.05
# How long the loops of a worker whose executors opened wait for the master to record its start
# before their first tuple (`squall.engine.start_gate`). The beat that tells it is sent at once and
# answered in milliseconds; a master that has not answered by then is down or cut off (its RPC
# waits 10 s to fail), and the worker processes rather than wait for it.
START_RECORD_SECS = 5.0
# How a starting worker waits between its calls for its assignment while the master cannot
# answer them (unreachable, or leading but unable to write the cluster state): doubling from
# the first to the most, until nimbus.task.launch.secs
RETRY_SECS = 0.5
MAX_RETRY_SECS = 4.0



# (plan, origin, receive) -> the worker's transport, bound and receiving into ``receive``
R = TypeVar("R")

TransportFactory = Callable[[TopologyPlan, Origin, Callable[[int, Any], None]], Transport]


class KeptAssignment(Protocol):
    """Where a worker keeps a copy of its assignment, to start from again while no master
    answers (the process host's `squall.cluster.local_assignment.AssignmentCopy`)."""

    def save(self, storm_id: str, slot: str, assignment: Assignment,
             answers: dict[StoredKey, bytes] | None = None) -> None:
        """Keep ``assignment`` (its ``plan`` pickled), with the master's ``answers`` for keys it
        writes once that the launch got (`squall._transactional.KeptAnswers`)."""

    def load(self, storm_id: str, slot: str, launch_id: int) -> Assignment:
        """The kept assignment of that launch; raises `squall._errors.SquallError` if none is."""

    def load_answers(self, storm_id: str, slot: str, launch_id: int) -> dict[StoredKey, bytes]:
        """The answers kept with that launch's assignment; raises as `load`."""

    def discard(self, storm_id: str, slot: str, launch_id: int) -> None:
        """Remove the kept assignment of that launch, if that is what is kept (the master told
        the launch to stop: nothing may start it again); raises `OSError` if it cannot."""


class WorkerAgent:
    """Runs one launch of a worker slot; see the module docstring.

    Args:
        master: the link to the master.
        storm_id, slot, launch_id: what to run (``slot`` is ``"host:port"``).
        conf: the cluster's settings (``nimbus.task.launch.secs``, ``worker.heartbeat.frequency.secs``).
        make_transport: opens this worker's transport.
        load_plan: the plan from the assignment's ``plan`` (default: unpickled; a master in this
            process hands its own object).
        clock: the engine's clock (default: real time).
        stop: set from outside to stop the worker cleanly (SIGTERM from the supervisor).
        peer_poll_secs: how often to ask again while peers have not reported their address.
        stop_loop_secs: how long each loop may take to stop (user ``close``/``cleanup``) before
            it is abandoned.
        seed: seed for tuple ids and shuffles (default: from the system's randomness).
        state_home: what the host lends stateful bolts' state providers (`squall.state.StateHome`).
        transactional_link: the link to the master that Trident's transactional state goes
            through (`squall._transactional.MasterBackend`; default ``master``): a link of its
            own where ``master`` takes one call at a time (RPC), so a coordinator's call never
            waits behind a heartbeat.
        cap_memory: apply the memory cap (``worker.heap.memory.mb``,
            ``topology.worker.max.heap.size.mb``) to this process's resident size: a host whose
            workers are processes of their own (not LocalCluster's threads).
        kept: where to keep a copy of the assignment (once every peer's address is in it, and
            again when a heartbeat's reply changes it), for a start while no master answers.
        resumes: above 0, this is that local restart of ``launch_id`` by a supervisor that no
            master answers: the assignment is ``kept``'s, and the transport numbers its messages
            from ``first_seq`` (above every number an earlier process of this launch sent).
        first_seq: the first sequence number of this launch's messages (with ``resumes``).
        board_memory: ``size -> writable buffer``, the memory of the worker's board of the inputs
            its bolts are executing (`squall.engine.executing`): where the host reads it after
            the worker died (a mapped file on the process host); default a ``bytearray``.
    """

    def __init__(self, master: MasterCalls, storm_id: str, slot: str, launch_id: int, conf: dict[str, Any], *,
                 make_transport: TransportFactory, load_plan: Callable[[Any], TopologyPlan] = cloudpickle.loads,
                 clock: Any = None, stop: threading.Event | None = None, peer_poll_secs: float = 0.2,
                 stop_loop_secs: float = 2.0, seed: int | None = None, state_home: Any = None,
                 transactional_link: MasterCalls | None = None, cap_memory: bool = False,
                 kept: KeptAssignment | None = None, resumes: int = 0, first_seq: int = 0,
                 board_memory: Callable[[int], Any] = bytearray) -> None:
        self.master = master
        self.nimbus = nimbus_of(master)  # the verbs, typed (records passed as they are to a master in this process)
        self.storm_id, self.slot, self.launch_id = storm_id, slot, launch_id
        self.port = int(slot.rsplit(":", 1)[1])
        self.conf = conf
        self.make_transport = make_transport
        self.load_plan = load_plan
        self.clock = clock or Clock()
        self.stop_event = stop or threading.Event()
        # set as the worker stops, however (SIGTERM, the master's word, a crash): a Trident
        # state call retrying a master that no longer answers then gives up, so that its loop
        # stops with the others instead of being abandoned mid-retry
        self._stopping = threading.Event()
        self.peer_poll_secs = peer_poll_secs
        self.stop_loop_secs = stop_loop_secs
        self.seed = random.SystemRandom().getrandbits(64) if seed is None else seed
        self.state_home = state_home
        self.cap_memory = cap_memory
        self.kept = kept
        self.resumes, self.first_seq = resumes, first_seq
        self.board_memory = board_memory
        self._kept_copy: Assignment | None = None  # the assignment as ``kept`` holds it now
        # ``kept`` is written by the beat thread (a reply's changes) and by executor threads (a
        # stateful task's namespace, `_keep_answers`): one at a time, each with the other's news
        self._copy_lock = threading.RLock()
        # the master's answers for keys it writes once (the stateful tasks' namespaces), kept in
        # the copy: a local restart of this launch reads them there while no master answers
        self._answers = KeptAnswers(on_learned=self._keep_answers)
        self._memory_cap: MemoryCap | None = None
        # Trident's coordinators keep their state with the master's (squall.trident.txstate)
        self.transactional_home = MasterBackend(
            transactional_link or master, retries=int(conf_value(conf, Config.STORM_ZOOKEEPER_RETRY_TIMES)),
            interval=float(conf_value(conf, Config.STORM_ZOOKEEPER_RETRY_INTERVAL)) / 1000.0,
            caller=WorkerLaunch(storm_id, slot, launch_id), answers=self._answers, stopping=self._stopping)
        self.worker: Worker | None = None
        self._launch_view: LaunchView | None = None  # set once the assignment is known
        self.transport: Transport | None = None
        self.state: TopologyActivation | None = None
        self._errors: deque[dict[str, Any]] = deque()  # appended by executor threads, drained by beats
        self._unsent: ErrorBatch | None = None  # the errors a beat sent and got no reply for
        # errors that happened and will reach the master with no record: records folded away
        # while the master was unreachable (`_as_master_keeps`); the next batch carries them
        self._unrecorded = 0
        # the number of the last `ErrorBatch` made: a local restart of the launch (``resumes``)
        # numbers above every earlier process of it, whose batches the master may have kept
        self._errors_seq = self.resumes << 32
        self._crashed = threading.Event()
        self._wake = threading.Event()
        self._beat_lock = threading.Lock()
        # when (monotonic) heartbeats began failing, and when that was last said: None while they reach the master
        self._unheard: tuple[float, float] | None = None
        self._told_stop = False
        self._activating = False  # the master waits for other workers' first beats to activate
        self._addresses_version = 0
        self._lost_generation = 0
        self._epoch: str | None = None
        self._peers: dict[int, str] = {}
        self._dropped: DroppedItemsLink | None = None
        self._history = StatsHistory(self.clock.wall())  # Storm's windows start with the worker
        # the topology's log levels (squall set_log_level), restored when their timeouts pass
        self.log_levels = LogLevelManager()
        self._log_config_digest: str | None = None  # of the config applied (None: before the assignment)

    # --- from outside -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the worker cleanly (``close`` and ``cleanup`` run); `run` returns 0."""
        self.stop_event.set()
        self._stopping.set()
        self._wake.set()

    def wake(self) -> None:
        """Heartbeat now rather than at the next period (the master has news for this worker)."""
        self._wake.set()

    # --- the run --------------------------------------------------------------------------------------
    def run(self) -> int:
        """Run until the master says stop, `stop`, or user code crashes; the exit status."""
        deadline = time.monotonic() + float(conf_value(self.conf, Config.NIMBUS_TASK_LAUNCH_SECS))
        # Storm's "Launching worker for ...": the slot's worker.log keeps every launch's lines, one
        # after the other (a dead worker's last words above, its successor's below), and this
        # line is where one launch's begin
        log.info("launching worker %s of %s, launch %s%s, pid %d", self.slot, self.storm_id, self.launch_id,
                 f" (local restart {self.resumes} without the master)" if self.resumes else "", os.getpid())
        if self.resumes:
            return self._resume()
        try:
            a = self._call_until(deadline, self.nimbus.get_assignment, self.storm_id, self.slot,
                                 launch_id=self.launch_id)
            if a is None:
                if self.stop_event.is_set():
                    return 0  # stopped while it started
                log.error("worker %s cannot reach the master", self.slot)
                return EXIT_CANNOT_START
            if a.launch_id != self.launch_id:
                return 0  # superseded while starting
            early = _EarlyItems()
            first_plan = a.plan
            try:
                plan = self.load_plan(a.plan)
                executors = [plan.executors[i] for i in a.executors]
                if self.cap_memory:  # a bad value names its key, as this worker's error
                    self._memory_cap = MemoryCap.of(self.conf, plan.conf)
                blobs = component_blobs(plan)
                self.transport = self.make_transport(plan, self._origin(), early)
            except Exception as e:  # noqa: BLE001 (reported by _cannot_start) the user's plan, unpickled, or the transport: logged and reported as this worker's error
                return self._cannot_start(e)
            # report our address, and wait for every peer's (on Spark they bind as their tasks start)
            while True:
                a = self._call_until(deadline, self.nimbus.get_assignment, self.storm_id, self.slot,
                                     launch_id=self.launch_id, address=self.transport.address, want_plan=False)
                if a is None or a.launch_id != self.launch_id:
                    return 0 if self.stop_event.is_set() or a is not None else EXIT_CANNOT_START
                if all(addr is not None for addr in a.peers.values()):
                    break
                if time.monotonic() > deadline:
                    log.error("peers of %s did not report within nimbus.task.launch.secs", self.slot)
                    return EXIT_CANNOT_START
                time.sleep(self.peer_poll_secs)
            self._keep(replace(a, plan=first_plan))
            return self._run_started(plan, executors, blobs, early, a)
        except RemoteError as e:
            if e.type == NotAliveException.__name__:  # "no assignment": killed or moved while this worker started
                log.info("%s; exiting", e)
                return 0
            # the master refused for another reason: a failed start (which the master counts),
            # or, once running, the end of this worker as a crash's
            log.error("worker %s ends: the master refused its %s: %s (%s)", self.slot,
                      "heartbeat" if self.worker is not None else "assignment", e, e.type)
            return EXIT_CRASHED if self.worker is not None else EXIT_CANNOT_START
        finally:
            if self.transport is not None:
                self.transport.close()

    def _cannot_start(self, e: Exception) -> int:
        """Report ``e``, which keeps this launch from starting, as this worker's error (fatal),
        and log it; returns the exit status of a worker that could not start."""
        rec = error_record("__worker", -1, e, self.port, fatal=True)
        rec.error = f"worker on {self.slot} cannot start: {rec.error}"
        # in its own log too, as Storm's worker logs what ended it: its supervisor's log
        # has only the exit status (a slot port another process bound read "exited with
        # status 3" there, and nothing in worker.log)
        log.exception("%s", rec.error, exc_info=e)
        self._report([rec.as_dict()])
        return EXIT_CANNOT_START

    def _origin(self) -> Origin:
        return Origin(self.storm_id, self.slot, self.launch_id, self.first_seq)

    def _resume(self) -> int:
        """Start from the kept copy of the assignment, without the master (a local restart by a
        supervisor that no master answers): the peers' addresses are the copy's (on the process
        host a slot's address is its own, whatever the launch), and the master learns this
        process's address from its first beat that reaches it."""
        try:
            if self.kept is None:
                raise SquallError(f"worker {self.slot} is resumed but keeps no copy of its assignment")
            a = self.kept.load(self.storm_id, self.slot, self.launch_id)
            # the stateful tasks' namespaces the master told this launch: no master to ask now
            self._answers.restore(self.kept.load_answers(self.storm_id, self.slot, self.launch_id))
            self._kept_copy = a
            early = _EarlyItems()
            plan = self.load_plan(a.plan)
            executors = [plan.executors[i] for i in a.executors]
            if self.cap_memory:
                self._memory_cap = MemoryCap.of(self.conf, plan.conf)
            blobs = component_blobs(plan)
            self.transport = self.make_transport(plan, self._origin(), early)
        except Exception as e:  # noqa: BLE001 (a missing or unreadable copy, or the user's plan: this launch cannot start)
            rec = error_record("__worker", -1, e, self.port, fatal=True)
            # logged only (no master hears it now): its supervisor counts the failed start, and
            # leaves the slot to the master after squall.worker.max.launch.attempts of them
            log.error("worker on %s cannot start again without the master: %s", self.slot, rec.error)
            if self.transport is not None:
                self.transport.close()
            return EXIT_CANNOT_START
        log.info("worker %s resumes launch %s of %s without the master (local restart %d)",
                 self.slot, self.launch_id, self.storm_id, self.resumes)
        try:
            return self._run_started(plan, executors, blobs, early, a)
        finally:
            self.transport.close()

    def _keep(self, a: Assignment) -> None:
        """Keep ``a`` (its plan pickled) where a local restart finds it (best effort: a worker that
        cannot write it runs on, and only its restart without a master is lost)."""
        if self.kept is None or not isinstance(a.plan, bytes):
            return
        with self._copy_lock:
            try:
                self.kept.save(self.storm_id, self.slot, a, self._answers.all())
                self._kept_copy = a
            except Exception as e:  # noqa: BLE001 (a full disk must not stop the worker)
                log.warning("worker %s could not keep a copy of its assignment: %s", self.slot, e)

    def _keep_answers(self, answers: dict[StoredKey, bytes]) -> None:
        """The master answered a key it writes once (`KeptAnswers`): keep it in the copy, if
        there is one (one written later takes it too; none once the master told the launch to stop)."""
        with self._copy_lock:
            if self._kept_copy is not None:
                self._keep(self._kept_copy)

    def _discard_copy(self) -> None:
        """Remove this launch's kept copy (the master told it to stop), saying so if it cannot."""
        if self.kept is None:
            return
        with self._copy_lock:
            try:
                self.kept.discard(self.storm_id, self.slot, self.launch_id)
            except OSError as e:
                log.error("worker %s, told by the master to stop, could not remove the copy of its assignment (%s): "
                          "its supervisor may start it again while no master answers", self.slot, e)
            self._kept_copy = None

    def _keep_changes(self, **changes: Any) -> None:
        """A heartbeat's reply changed ``changes`` of the assignment: keep them in the copy."""
        with self._copy_lock:
            if self._kept_copy is not None:
                new = replace(self._kept_copy, **changes)
                if new != self._kept_copy:
                    self._keep(new)

    def _call_until(self, deadline: float, verb: Callable[..., R], *args: Any, **kwargs: Any) -> R | None:
        """A verb of `nimbus` retried, with backoff, while the master cannot answer it (`transient`:
        unreachable, or unable to write the cluster state); None once past ``deadline`` or stopped.
        A refusal of another kind (`RemoteError`: no assignment, say) is raised."""
        delay = RETRY_SECS
        while not self.stop_event.is_set():
            try:
                return verb(*args, **kwargs)
            except (RpcError, RemoteError) as e:
                if not transient(e):
                    raise
                if time.monotonic() > deadline:
                    log.error("%s failed: %s", verb.__name__, e)
                    return None
                log.info("worker %s: %s failed (%s); asking again in %.1f s", self.slot, verb.__name__, e, delay)
                self.stop_event.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECS)
        return None

    def _report(self, errors: list[dict[str, Any]]) -> None:
        try:
            self.nimbus.report_errors(self.storm_id, self.slot, self.launch_id, errors)
        except Exception as e:  # noqa: BLE001 (reporting is best effort: the worker goes on, or exits, either way)
            log.error("could not report to the master: %s", e)

    def _run_started(self, plan: TopologyPlan, executors: list, blobs: dict[str, bytes], early: _EarlyItems,
                     a: Assignment) -> int:
        transport = self.transport
        assert transport is not None
        self._addresses_version = a.addresses_version
        self._lost_generation = a.lost_generation
        self._epoch = a.epoch  # the master's: a restarted master counts generations afresh
        self._set_peers(a.peers)
        transport.set_launches(a.launch_ids, a.launch_floor)
        # what the state stores fence a replaced launch's writes by (a worker cut off from the
        # master while its tasks moved elsewhere: squall.state.redis)
        self._launch_view = LaunchView(self.slot, self.launch_id, a.launch_ids, a.launch_floor)
        self.state = TopologyActivation(active=a.active)
        bp = Backpressure(plan.conf[Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE], self.clock)

        def crashed(w: Any, rec: Any) -> None:
            self._crashed.set()
            self._wake.set()
        try:
            worker = Worker(plan, self.port, executors, blobs, transport, self.clock, self.state, bp,
                            lambda rec: self._errors.append(rec.as_dict()), crashed, self.seed, self.state_home,
                            self.transactional_home,
                            lambda lines: ExecutingBoard(self.storm_id, self.launch_id, lines, self.board_memory),
                            on_opened=self._wake.set, start_wait_secs=START_RECORD_SECS)
        except Exception as e:  # noqa: BLE001 (user code run here: a component's unpickling, a custom grouping's prepare)
            return self._cannot_start(e)
        early.hand_over(worker.receive)
        transport.set_receiver(worker.receive, worker.receive_batch, worker.receive_into)
        transport.on_arrival = worker.wake_loops
        refused_tasks: set[int] = set()

        def refused(task: int, why: str) -> None:  # an item too large to send: say so once per emitting task
            if task not in refused_tasks:
                refused_tasks.add(task)
                self._errors.append(error_record(plan.task_to_component.get(task, "__transport"), task, why,
                                                 self.port).as_dict())
        transport.on_refused = refused
        # backpressure across workers: this worker's own state, told to and by its peers
        # items dropped on their way to a moved peer, told to and by the peers (their spouts'
        # tuples may be among them)
        self._dropped = dropped = DroppedItemsLink(worker.tasks_lost, transport)
        # the links below each start a thread: made inside the try whose finally stops them, so
        # that a start that fails after them (worker.start refusing a gc threshold, the log
        # config) does not leave them running in this process (before, every failed start on
        # LocalCluster left its backpressure link's thread behind, one more per relaunch)
        loads: LoadLink | None = None
        progress: ProgressLink | None = None
        link: BackpressureLink | None = None
        status = 0
        try:
            try:
                # the bolt tasks' loads, told to and by the peers, for the load-aware shuffles
                if worker.load_aware:
                    loads = LoadLink(worker.load_mapping, worker.bolt_loads, transport, name=f"squall-load-{self.port}")
                # the stateful tasks' data inputs, told to and by the peers, for the spouts' automatic
                # max pending (a stateful task in another worker than its spouts was not known at all)
                if plan.num_workers > 1 and worker.hosts_stateful_tasks():
                    progress = ProgressLink(worker.stateful_counts, transport, name=f"squall-progress-{self.port}")

                def others(sender: Any, message: Any) -> None:  # control messages other than backpressure
                    if loads is not None and is_load_message(message):
                        loads.heard(sender, message)
                    elif is_progress_message(message):
                        worker.stateful_progress.heard(progress_of(message))
                    else:
                        dropped.heard(sender, message)
                link = BackpressureLink(bp, transport, name=f"squall-backpressure-{self.port}", others=others)
                # a peer that does not take what is sent to it holds this worker's spouts, and through
                # the link every worker's, before the transport's bounded backlog for it gives any up
                transport.on_held = bp.hold
                self.worker = worker
                view = self._launch_view
                worker.resources.get_or_make(LAUNCH, lambda: view)
                worker.start()
                if a.log_config is not None:  # from here on the finally gives the loggers back
                    self.log_levels.apply(a.log_config, self.clock.wall())
                self._log_config_digest = a.log_config_digest
                freq = float(conf_value(self.conf, Config.WORKER_HEARTBEAT_FREQUENCY_SECS))
                stall_after = float(conf_value(plan.conf, Config.TOPOLOGY_EXECUTOR_BLOCKING_WARN_MILLIS)) / 1000.0
                stall_tick = max(MIN_STALL_TICK_SECS, min(STALL_TICK_SECS, stall_after / 2))
                stuck_after = float(conf_value(plan.conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
            except Exception as e:  # noqa: BLE001 (reported by _cannot_start) a setting the loops or links refused
                status = EXIT_CANNOT_START  # no close/cleanup for loops that never ran the topology
                return self._cannot_start(e)
            next_beat = 0.0  # the first beat at once: the master activates the topology once all have beaten
            while True:
                now = time.monotonic()
                self._wake.wait(max(0.0, min(next_beat - now, stall_tick)))
                woken = self._wake.is_set()
                self._wake.clear()
                if self._crashed.is_set():
                    status = EXIT_CRASHED
                elif self.stop_event.is_set() or self._told_stop:
                    return 0
                worker.find_stalls(time.monotonic(), stall_after)  # moves a blocking component off the shared loop
                worker.report_stuck(time.monotonic(), stuck_after)  # names a call that does not return
                if not status and self._over_memory(worker):
                    status = EXIT_OVER_MEMORY
                # the loops wait for the beat that says every executor opened (a wake from
                # on_opened can be lost in the clear above: looked at every stall tick too)
                start_due = not worker.start_gate.released and worker.opened()
                if not (status or woken or start_due or time.monotonic() >= next_beat):
                    continue
                self.beat()
                next_beat = time.monotonic() + (min(self.peer_poll_secs, ACTIVATION_POLL_SECS)
                                                if self._activating else freq)
                if status:
                    # a crash before every executor opened is a failed start (say, a bad import in
                    # prepare): the master stops retrying those after a bounded number of attempts
                    return status if worker.opened() else EXIT_CANNOT_START
                if self._told_stop:
                    return 0
        finally:
            # ending on its own (a stop, a reported crash, its memory cap): nothing it was
            # executing is to blame; only a death that skips this (os._exit, a signal) is read
            if worker.board is not None:
                worker.board.end()
            self._stopping.set()
            worker.stop(clean=status == 0, timeout=self.stop_loop_secs)
            with self._beat_lock:  # a host's own beat (advance_cluster_time) may be applying meanwhile
                self.log_levels.close()
            if link is not None:  # after the worker: the "under" it forgot on stopping reaches the peers first
                link.stop()
            if loads is not None:
                loads.stop()
            if progress is not None:
                progress.stop()

    def _over_memory(self, worker: Worker) -> bool:
        """Whether this process is past its memory cap (read once a second); if so the error,
        naming the slot, the cap and its key, is logged and goes with the next beat."""
        cap, now = self._memory_cap, time.monotonic()
        if cap is None or not cap.due(now):
            return False
        rss = rss_bytes()
        if not cap.exceeded(now, rss):
            return False
        rec = error_record("__worker", -1, cap.message(self.slot, rss, worker.fullest_component()), self.port,
                           fatal=True)
        log.error("%s", rec.error)
        self._errors.append(rec.as_dict())
        return True

    UNHEARD_REPEAT_SECS = 60.0
    """While heartbeats fail, how often the worker says so again."""

    def _beat_failed(self, error: Exception) -> None:
        """A heartbeat did not reach the master: say so at once, naming the master and why (the
        error names its address), then once a minute while it lasts. Before, nothing was said:
        a worker whose link to the master was cut or lossy, restarted by the master for
        "missed heartbeats ... user code holding the interpreter?", left no trace of the
        network in its log."""
        now = time.monotonic()
        if self._unheard is None:
            self._unheard = (now, now)
            log.warning("worker %s: its heartbeat did not reach the master: %s; the master takes a worker unheard for "
                        "%s (%s s) for dead (it restarts it, or moves its executors), so this worker may be "
                        "stopped", self.slot, error, Config.NIMBUS_TASK_TIMEOUT_SECS,
                        conf_value(self.conf, Config.NIMBUS_TASK_TIMEOUT_SECS))
        elif now - self._unheard[1] >= self.UNHEARD_REPEAT_SECS:
            self._unheard = (self._unheard[0], now)
            log.warning("worker %s: its heartbeats have not reached the master for %.0f s: %s", self.slot,
                        now - self._unheard[0], error)

    def beat(self) -> None:
        """Send one heartbeat now and act on the reply (thread-safe: a host in this process may
        call it to refresh the master's figures)."""
        worker, transport, state = self.worker, self.transport, self.state
        if worker is None or transport is None or state is None:
            return
        with self._beat_lock:
            if self._unsent is None:
                self._unrecorded += worker.take_refused_errors()
            if self._unsent is None and (self._errors or self._unrecorded):
                pending = []
                while self._errors:  # popleft, not a copy and a clear: an executor may append meanwhile
                    pending.append(self._errors.popleft())
                self._errors_seq += 1
                kept, dropped = _as_master_keeps(pending)
                self._unsent = ErrorBatch(self._errors_seq, kept, self._unrecorded + dropped)
                self._unrecorded = 0
            now = self.clock.wall()
            self.log_levels.expire(now)  # whether or not the master answers
            # read before the beat: only a beat that said so lets the loops take their first
            # tuples, once the master has its answer (or cannot be told)
            started = worker.opened()
            try:
                self._send_beat(worker, transport, self._unsent, now, started)
            finally:
                if started:
                    worker.start_gate.release()

    def _send_beat(self, worker: Worker, transport: Transport, batch: ErrorBatch | None, now: float,
                   started: bool) -> None:
        """One heartbeat (under ``_beat_lock``) and what its reply says."""
        state = self.state
        assert state is not None
        try:
            snapshots = worker.sampled_snapshots()
            self._history.record(now, snapshots)
            windows = self._history.render(now, snapshots)
            reply = self.nimbus.heartbeat(Heartbeat(
                self.storm_id, self.slot, self.launch_id, stats=worker.statistics(), windows=windows,
                figures=WorkerFigures.read(self._history.start, now)._asdict(),
                errors=batch.errors if batch is not None else [],
                errors_seq=batch.seq if batch is not None else None,
                errors_unrecorded=batch.unrecorded if batch is not None else 0, started=started, address=transport.address,
                addresses_version=self._addresses_version, pid=os.getpid(),
                lost_generation=self._lost_generation, epoch=self._epoch, transport=transport.statistics(),
                log_config_digest=self._log_config_digest))
        except (RpcError, RemoteError) as e:
            if not transient(e):
                raise
            self._beat_failed(e)
            # the batch is sent again as it is, under its number: the master may have kept it
            # (killed before its reply, a leader whose write to ZooKeeper failed) and keeps a
            # number once. What came since waits, folded as the master folds them: a bolt
            # failing through an outage of hours must not grow the worker by a record a
            # failure, nor make one heartbeat carry them all. A leader that cannot write the
            # cluster state is as good as away (before, its refusal ended the worker)
            waiting = []
            while self._errors:
                waiting.append(self._errors.popleft())
            kept, dropped = _as_master_keeps(waiting)
            self._errors.extendleft(reversed(kept))
            self._unrecorded += dropped
            return
        self._unsent = None  # the master has them
        if self._unheard is not None:
            log.info("worker %s: its heartbeats reach the master again, after %.0f s", self.slot,
                     time.monotonic() - self._unheard[0])
            self._unheard = None
        if reply.stop:
            # the master ended this launch (a kill, a rebalance, a new launch for the slot): its
            # copy goes first, so that no supervisor starts it again while no master answers
            self._discard_copy()
            self._told_stop = True
            self._wake.set()
            return
        # the deaths before the peers' moves, whose drops fail the spouts' tuples as lost
        # too: a tuple a dead worker's bolt was executing must fail for that first
        for lost in reply.lost:
            executing = [ExecutingInput(task, root) for task, root in lost.executing]
            # not the tuples emitted since its next launch took what this worker sends: a notice
            # that comes after it answers must not fail what it answers (a DRPC call's error)
            ago = transport.loss_age(lost.tasks, lost.slot, lost.launch)
            if worker.tasks_lost(lost.tasks, executing=executing, how=lost.how, ago=ago):
                log.info("worker %s died %.1f s ago: failing the spouts' pending tuples that may "
                         "have been in it%s%s", lost.slot, max(0.0, time.time() - lost.time),
                         f", emitted until {ago:.1f} s ago" if ago else "",
                         f" ({len(executing)} being executed when it died, {lost.how})" if executing else "")
        if reply.peers is not None:  # a peer restarted elsewhere: before spouts may (re)start
            may_be_lost = self._set_peers(reply.peers)
            if self._dropped is not None:
                self._dropped.moved(may_be_lost)
            transport.set_launches(reply.launch_ids or {}, reply.launch_floor or 0)
            if self._launch_view is not None:
                self._launch_view.set_launches(reply.launch_ids or {}, reply.launch_floor or 0)
            self._addresses_version = reply.addresses_version or self._addresses_version
            # the addresses known last (a peer restarting has none for now; on the process
            # host it comes back at the same one)
            self._keep_changes(peers=dict(self._peers), launch_ids=dict(reply.launch_ids or {}),
                               launch_floor=reply.launch_floor or 0, addresses_version=self._addresses_version)
        if reply.lost_generation is not None:
            self._lost_generation = reply.lost_generation
        if reply.epoch is not None:
            self._epoch = reply.epoch
        if reply.log_config is not None:
            self.log_levels.apply(reply.log_config, now)
            self._log_config_digest = reply.log_config_digest
        self._activating = reply.activating
        state.set_active(reply.active)
        if reply.log_config is not None:
            self._keep_changes(active=reply.active, log_config=reply.log_config,
                               log_config_digest=reply.log_config_digest or "")
        else:
            self._keep_changes(active=reply.active)

    def _set_peers(self, table: dict[Any, Any]) -> list[int]:
        """Give the transport the peers' addresses (``table``: task -> address, None while a peer
        restarts) and return the tasks whose worker moved and to which something sent may have
        been lost in the move. The transport sends what it held for a moved worker's old address
        (a dead worker's) to the new one; what it may have lost there (`Transport.set_peers`:
        written into a connection not seen to break, or what ZeroMQ held) the spouts, this
        worker's and its peers', must fail at once (`DroppedItemsLink.moved`), or wait a message
        timeout for it. Not the rest: the master's notice of the death failed what was sent
        before it, and failing the replays it made again would deliver each lost tuple a third
        time to every live branch."""
        transport = self.transport
        assert transport is not None
        new = {int(t): addr for t, addr in table.items() if addr is not None and addr != transport.address}
        moved = [t for t, addr in new.items() if self._peers.get(t, addr) != addr]
        lost = transport.set_peers(new)
        self._peers.update(new)
        return [t for t in moved if t in lost]


class _EarlyItems:
    """The transport's receiver until the worker exists. Peers may send as soon as they know
    this worker's address, which it reports before it builds its executors; what arrives
    meanwhile (on the process host, a restarted worker's port at once gets what its peers
    queued for it) is kept and handed to the worker, not dropped."""

    def __init__(self) -> None:
        self._items: list[tuple[int, Any]] = []
        self._receive: Any = None
        self._lock = threading.Lock()

    def __call__(self, task: int, item: Any) -> None:
        with self._lock:
            if self._receive is None:
                self._items.append((task, item))
                return
        self._receive(task, item)

    def hand_over(self, receive: Any) -> None:
        """Deliver what was kept to ``receive``, and from now on everything."""
        with self._lock:
            for task, item in self._items:
                try:
                    receive(task, item)
                except KeyError:
                    pass  # not a task of this worker (the transport drops those too)
            self._items = []
            self._receive = receive


@dataclass(frozen=True)
class ErrorBatch:
    """Errors a beat carries, numbered within the launch (``seq``: from 1, and from ``resumes
    << 32`` + 1 in a local restart of it): sent again, number and all, until a beat's reply
    comes, so that a master that kept them once keeps them once. ``unrecorded``: how many more
    errors happened that have no record in it (refused by the report throttle, or folded out of
    a component's newest records here): the master adds them to the topology's count."""

    seq: int
    errors: list[dict[str, Any]]
    unrecorded: int = 0


def _as_master_keeps(errors: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``errors`` (oldest first) as the master would keep them (`add_error`): a repeat of the
    same error folded into its record's count, and each component's newest
    `MAX_ERRORS_PER_COMPONENT` records, Storm's bound. The master folds what it is sent into
    what it holds the same way, so it ends as if it had heard every error one by one. Also
    how many errors the records left out counted, which the topology's error count keeps."""
    records = [ErrorRecord.from_dict(e) for e in errors]
    happened = sum(r.count for r in records)  # before folding, which adds counts into earlier records
    kept: list[ErrorRecord] = []
    for r in records:
        add_error(kept, r)
    return [e.as_dict() for e in kept], happened - sum(e.count for e in kept)

