"""The master (Storm's Nimbus) for the process host: submissions, assignments, the topology
state machine, heartbeats and restarts. What must outlive it goes to its store
(`squall.cluster.store`: ``storm.local.dir``; with ``storm.zookeeper.servers``, ZooKeeper, one of
several masters, `squall.cluster.master_ha`; in memory for a `LocalCluster`), as the changes each
operation made: every verb and tick returns an `Outcome` (its reply and its changes), and the
master's server keeps those changes before the reply goes out (`squall.cluster.server.Keeper`).
The master itself does no I/O but reads (its start, ``code``, Trident's transactional state).

Who talks to it, all over the authenticated RPC channel (`squall._wire`):

- clients (`StormSubmitter`, the CLI): ``submit``, ``kill``, ``activate``, ``deactivate``,
  ``rebalance``, ``list``, ``info``;
- supervisors (`squall.cluster.supervisor`, one per machine, owning the worker processes of its
  slots): ``supervisor_sync`` every second, which registers the slots and returns which
  topology (and which launch) each slot must run, as Storm's supervisors read assignments;
- workers: ``get_assignment`` once at start, then ``heartbeat`` every second with their
  statistics and errors; the reply carries whether the topology is active, and which workers
  died since the worker last heard (`WorkerLost`).

The master never holds a worker: if it dies, supervisors keep their workers and workers keep
processing (the Storm paper's key property); when it restarts it reloads its state and picks
the heartbeats up again. A worker that stops heartbeating for ``nimbus.task.timeout.secs``
(``nimbus.task.launch.secs`` while it starts) gets a new launch id, which its supervisor obeys by
restarting it; if its supervisor fell silent that long too, the machine is taken for dead (it
died, or its link was cut) and the executors move to the other machines, as Storm reassigns
timed-out executors; but not when ZooKeeper still hears the machine's supervisor (Nimbus HA: only
the master's link to it is down, `squall.cluster.liveness`), nor when every machine fell silent
at once, which the master takes for its own link cut (or itself paused): it moves and restarts
nothing (`squall.cluster.silence`).
A supervisor whose node fails its health checks (`squall.cluster.health`)
is given no slots, and what ran there moves at once. A worker that exits before its heartbeat
said it started (its executors opened; its loops take no tuple before that beat is answered,
`squall.engine.start_gate`, so one that dies on its first tuple had said so) failed to start,
whatever the cause: its slot waits 1, 2,
4 ... 30 s before the next start, for ever unless ``squall.worker.max.launch.attempts`` caps
the failed starts in a row (then it is given up); the error (the worker's own, else the last lines of its output, which
its supervisor sends) shows in ``list``.
A worker that started and then crashed is restarted at once, unless it crashed within a minute
of its start after a crash that did too: then it waits 1, 2, 4 ... 30 s (`crash_backoff`), and
is never given up. An error that repeats one its component has a record of is counted on that
record (`add_error`), not added again.
The scheduler runs again whenever slots may have freed or appeared: a kill's removal, a
rebalance, a supervisor that joins or leaves.

Beyond Storm: when the master learns that a worker died (its supervisor reports the exit, its
heartbeats time out, or its supervisor is gone), it records a `WorkerLost` under the topology's
next "lost generation". Every worker's heartbeat says the last generation it knows, and the reply
lists the deaths since; the worker's spouts then fail at once the pending tuples that may have
been in the dead worker, rather than one to two message timeouts later. Only a worker that may
have held tuples counts: one whose data address its peers may have had (it reported it, or it
started). Generations are not persisted: they come with the master's ``epoch`` (new at each start
of the master), and a worker that knows another epoch is told every death this master knows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import cloudpickle

from .._config import (
    Config,
    conf_value,
    setting,
    submit_warnings,
    topology_conf,
    visible_to_topology,
    with_whole_numbers,
)
from .._error_lines import exception_text
from .._errors import (
    AlreadyAliveException,
    BadParameterError,
    IllegalStateTransition,
    InvalidTopologyException,
    NotAliveException,
    NotLeaderException,
    SquallError,
    UnknownComponentError,
)
from .._nimbus import (
    MAX_WAIT_SECS,
    Assignment,
    Heartbeat,
    HeartbeatReply,
    Launch,
    LogConfig,
    MasterAddress,
    RunningWorker,
    SupervisorSync,
    SyncReply,
    TxWrite,
    WorkerExit,
    WorkerLost,
    decoded_request,
)
from .._ratelimit import RateLimitedLog
from .._redact import redact
from .._system import ACKER_COMPONENT
from .._topology import StormTopology, not_a_topology
from .._transactional import LaunchRefusedError, TransactionalStateError
from ..engine.clock import Clock
from ..engine.executor import ErrorRecord
from ..engine.plan import ExecutorSpec, TopologyPlan, make_plan
from ..engine.worker import component_blobs
from ..worker.log_levels import merge_log_config
from . import features  # noqa: F401 (the extension points make_plan reads: the metrics consumers)
from .backoff import crash_backoff, launch_backoff
from .ha import LEADER, NOT_A_LEADER, OFFLINE, check_assignment, check_saved_topology
from .liveness import PresenceReads, read_presences
from .machines import (
    Forgotten,
    Instruction,
    MachineLost,
    Machines,
    NodeLost,
    Renew,
    RenewMachine,
    Restart,
    Say,
    Timeouts,
    WorkerAt,
    WorkerWait,
)
from .master_records import (
    REBALANCE_ACTION,
    REMOVE_ACTION,
    LastBeat,
    Outcome,
    PendingAction,
    Planned,
    SlotBeat,
    SlotState,
    SupervisorInfo,
    ended_from_json,
)
from .persisted import Persisted
from .scheduler import SchedulerCluster, SchedulerTopology, load_scheduler
from .seeds import NimbusAddress, nimbus_seeds
from .shipping import pickle_topology
from .state import ACTIVATE, DO_REBALANCE, INACTIVATE, KILL, REBALANCE, REMOVE, TopologyStatus, next_status, transition
from .store import (
    Change,
    DeleteTxState,
    MasterStore,
    PutPlan,
    PutTxState,
    RemovePlan,
    StoredPlan,
    StoredState,
    store_for,
)
from .topology_record import TopologyRecord
from .view import NoPagesError, StatisticsPages, TopologyView, WorkerView, parse_windows
from .worker_ends import (
    executing_text,
    exit_error,
    exit_text,
    lost_error,
    master_error,
    reported_ends,
    silent_error,
    slot_address,
)

if TYPE_CHECKING:
    from .ha import Coordinator

log = logging.getLogger("squall.master")

_NAME_RE = re.compile(r"^[^/.:\\]+$")
_PLAN = b"plan"  # the kind plans are sealed as (squall._sealed)


class News(NamedTuple):
    """What a topology's workers learn from the master's heartbeat replies (`Master.news_marks`)."""

    status: TopologyStatus
    active: bool                 # whether spouts may run
    addresses_version: int       # peers moved
    lost_generation: int         # peers died
    launch_ids: tuple            # (slot, launch id) pairs: peers restarted
    slots: tuple                 # the assignment's slots: workers moved
    log_config: str = ""         # the digest of its log levels (`Master.op_set_log_config`)


class Leadership(Protocol):
    """What a master whose store several masters share (Nimbus HA) asks of its election: who
    leads, and whether this master may change the state now. `squall.cluster.master_ha.Election`
    is one; the master's server (`squall.cluster.server.MasterServer`) makes it and sets it as
    the master's ``election``, so this module imports neither."""

    ha: Coordinator

    def assert_leader(self) -> None:
        """Refuse (`NotLeaderException`, naming the leader) unless this master leads now."""

    def hold_plan(self, digest: str, plan: TopologyPlan) -> None:
        """This master wrote ``plan`` (code ``digest``): it holds that code."""


def _rebalanced(plan: TopologyPlan, t: Mapping[str, Any]) -> TopologyPlan | None:
    """``plan`` (as submitted) with the workers and executors a rebalance gave it, as its
    saved record ``t`` says (a record from before they were saved: as submitted); None, said,
    if the record's counts do not fit the plan."""
    workers, parallelism = t.get("num_workers"), t.get("parallelism")
    if workers is None and parallelism is None:
        return plan
    if workers == plan.num_workers and parallelism == plan.parallelism:
        return plan
    try:
        return plan.with_parallelism(workers, parallelism)
    except (InvalidTopologyException, TypeError) as e:
        log.error("the saved parallelism of %s does not fit its plan (%s); it was not loaded", plan.storm_id, e)
        return None


class _KeptPlan(NamedTuple):
    """A plan the store kept, and how (its sealed bytes, where they were)."""

    plan: TopologyPlan
    kept: StoredPlan


def _running_plan(name: str, code: Any, kept: list[_KeptPlan]) -> TopologyPlan | None:
    """Which of the plans of topology ``name`` the store kept is the one it runs: the one whose
    sealed bytes have the digest its record names (``code``). Another plan of the same name, one
    of an earlier submission of it (a backup of the directory restored over it, a file put back),
    is sealed by this cluster too: taken by name, the last storm id in sorted order won (t-9-...
    over t-10-...), and the master ran the old code in place of the topology, or dropped the
    topology as malformed when the executors differed. A record without a code (a store in
    memory, a state.json of an older squall) takes the plan of its name, as before."""
    if not code:
        return kept[-1].plan if kept else None
    chosen = None
    for k in kept:
        if k.kept.sealed and hashlib.sha256(k.kept.sealed).hexdigest() == code:
            chosen = k.plan
        else:
            log.warning("skipped %s: a plan of topology %s (%s) that is not the one it runs (an earlier "
                        "submission's?); it was not loaded", k.kept.where, name, k.plan.storm_id)
    return chosen


class WorkerDeaths(NamedTuple):
    """`Master.worker_deaths`: ``restarts``, the topology's workers' restarts after a death so
    far; ``newest``, its newest fatal error (a component's that ended its worker, or a worker's
    own), if any; ``held``, every worker of it waits out a crash backoff now (it crash-loops)."""

    name: str
    restarts: int
    newest: ErrorRecord | None
    held: bool


class Master:
    """Nimbus's state and verbs; see the module docstring. Served by a
    `squall.cluster.server.MasterServer` (``squall nimbus``), or called directly by a
    `LocalCluster` (`squall.cluster.inprocess.DirectMaster`); with a `ZooKeeperStore`, one of
    several (Nimbus HA: its ``election``, `squall.cluster.master_ha`)."""

    def __init__(self, conf: dict[str, Any], strict_slots: Any = None, clock: Clock | None = None,
                 store: MasterStore | None = None, pages: StatisticsPages | None = None,
                 memory_capped: bool = True) -> None:
        """``clock``: the master's times. What is persisted or shown (kill and rebalance waits,
        uptimes, errors) is its ``wall()``; how long a worker or a supervisor has been silent, and
        a slot's restart backoff, are measured on its monotonic ``now()`` (`mono`), so that a
        step of the wall clock (NTP, a resumed VM) neither takes every worker for silent nor hides
        one that is. A test passes a `SimulatedClock` to move them without waiting. ``strict_slots``: when given, a topology that needs more workers than there are free
        slots is refused (Spark, where a worker waiting for a task slot would wait silently);
        it is called with the number of slots and returns what to tell the user. Without it,
        as in Storm, the topology runs on the slots there are. ``store``: where the state is
        kept and resumed from at the next start (`squall.cluster.store`; default `store_for`
        ``conf``: ``storm.local.dir``, or ZooKeeper with ``storm.zookeeper.servers``; a
        `LocalCluster` passes a `MemoryStore`). Its secret is the cluster's. ``pages``: what
        answers the statistics pages' verbs (``topology_page`` ...: `squall.cluster.view`); the
        hosts pass `squall.cluster.served_ui.statistics_pages()`, and a master given none refuses
        those verbs with a `NoPagesError` naming the verb. ``memory_capped``: the host's workers
        apply the memory caps (``worker.heap.memory.mb``, ``topology.worker.max.heap.size.mb``);
        a `LocalCluster`'s (threads of one process) do not, and a submission setting one is
        warned of."""
        self.conf = conf
        self.memory_capped = memory_capped
        self.clock = clock or Clock()
        self.strict_slots = strict_slots
        self.pages = pages
        self.store = store if store is not None else store_for(conf)
        self.secret = self.store.secret
        self.port: int | None = None  # the port its server listens on, once it does (`serve`)
        self.topologies: dict[str, TopologyRecord] = {}
        self.supervisors: dict[str, SupervisorInfo] = {}  # by supervisor id
        self.counter = 0
        self.started = self.clock.wall()
        # new at every start: lost generations (not persisted) are only compared within one
        self.epoch = os.urandom(8).hex()
        self.scheduler = load_scheduler(conf)
        # one line a minute at most: two supervisors that claim one address sync every second
        self._clash_log = RateLimitedLog(log, limit=1, period=60.0)
        # which machines it hears, held or lost, and what it does when it does not hear one: held
        # while ZooKeeper hears it (`squall.cluster.liveness`) or every machine fell silent with
        # it (`squall.cluster.silence`), else lost (`squall.cluster.machines`)
        self.machines = Machines.of(conf)
        self._unasked_log = RateLimitedLog(log, limit=1, period=10.0)
        # what the store was last handed (`_outcome`): the next outcome carries what differs
        self._persisted = Persisted()
        self._dirty = False  # the persisted part may have changed since the last outcome
        self._noted: list[Change] = []  # changes that are not a diff of the state (plans, Trident's state)
        self._submitted: str | None = None  # the topology this stimulus started, if one
        # (topology, where, problem) of each refusal of kept ended launches said (`_ended_checked`)
        self._ended_refused: set[tuple[str, str, str]] = set()
        # Nimbus HA (`squall.cluster.ha`): with a store several masters share, this master leads
        # or follows. Its server gives it its ``election`` (`Leadership`) and joins the election
        # once it listens; only the leader hands over its state
        self.election: Leadership | None = None
        self.leading = not self.store.shared
        # how many times it took the lead: what it failed to write in an earlier term is not
        # written after it (`squall.cluster.server.Keeper`)
        self.terms = 0
        if self.leading:
            self._load()

    def mono(self) -> float:
        """The master's monotonic time: what every timeout and backoff is measured on (never
        persisted, and meaningless on another machine)."""
        return self.clock.now()

    @property
    def ha(self) -> Coordinator | None:
        """This master's ZooKeeper session, with Nimbus HA (None: a lone master)."""
        return None if self.election is None else self.election.ha

    @property
    def local_dir(self) -> Path:
        """The directory the store keeps plans in (``<storm.local.dir>/nimbus``).

        Raises:
            ValueError: the store keeps everything in memory.
        """
        if self.store.directory is None:
            raise ValueError("this master keeps its state in memory: it has no directory")
        return self.store.directory

    # --- what is kept (`squall.cluster.store`) -------------------------------------------------------
    # Every stimulus (a verb: `handle`; a tick: `monitor`; a leader's second: `pending`) returns an
    # `Outcome`: its reply and the changes its store must keep. The master itself never writes:
    # its server (`squall.cluster.server.Keeper`) hands the store those changes before the reply
    # goes out. It reads its store only to resume (`_load`), to serve a plan (`op_code`) and
    # for Trident's transactional reads.
    def _changed(self) -> None:
        """The persisted part of the state may have changed: the next outcome carries the diff."""
        self._dirty = True

    def _note(self, change: Change) -> None:
        """A change that is not a diff of the state (a plan, Trident's state): the next outcome carries it."""
        self._noted.append(change)

    def _outcome(self, reply: Any = None, full: bool = False) -> Outcome:
        """``reply``, with the changes made since the last outcome (``full``: the whole persisted
        part compared, changed or not, as Nimbus HA's leader does each second). A follower hands
        over no state: only the leader writes it."""
        changes, self._noted = self._noted, []
        if self.leading and (self._dirty or full):
            diff, self._persisted = self._changes()
            changes += diff
            self._dirty = False
        submitted, self._submitted = self._submitted, None
        return Outcome(reply, tuple(changes), submitted)

    def pending(self, full: bool = False) -> Outcome:
        """What changed and is not handed over yet (a new leader's whole state; with ``full``,
        anything a verb changed without saying so)."""
        return self._outcome(None, full)

    def unkept(self, outcome: Outcome) -> Outcome:
        """The store could not keep ``outcome``'s changes (a full disk: its caller is told).
        A topology it submitted is dropped (not kept, so not run), and its plan goes; what else it
        changed stays, and its server hands it over again with the next changes."""
        topo = self.topologies.get(outcome.submitted or "")
        if topo is not None:
            del self.topologies[topo.plan.name]
            self._note(RemovePlan(topo.plan.storm_id))
            self._changed()
            log.error("topology %s was not started: the master could not keep it", topo.plan.name)
        return self._outcome()

    def adopt(self, state: StoredState, plans: Mapping[str, TopologyPlan]) -> bool:
        """A Nimbus HA follower takes the leader's ``state`` (as it read it from ZooKeeper) for
        its own; ``plans``: the code it holds, by digest. Whether every topology's code was held
        (a topology whose code is not is left out until it is fetched)."""
        complete = True
        topologies = {}
        for name, t in state.topologies.items():
            storm_id = t["storm_id"]
            plan = plans.get(t["code"])
            if plan is None or plan.storm_id != storm_id:
                complete = False  # not fetched yet
                continue
            plan = _rebalanced(plan, t)
            if plan is None:
                continue
            problem = check_assignment(t, len(plan.executors))
            if problem:
                log.warning("the assignment of %s in ZooKeeper ignored: %s", storm_id, problem)
                t.update(assignment={}, slots={})
            self._ended_checked(name, t, f"ZooKeeper's node assignments/{storm_id}")
            topo = TopologyRecord.from_json(plan, t, self.mono())
            for slot, beat in state.beats.get(storm_id, {}).items():
                if slot not in topo.assignment:
                    continue
                slot_state = topo.slot(slot)
                if beat.get("launch_id", slot_state.launch_id) != slot_state.launch_id:
                    # a slot whose launch ended keeps the dead launch's last beat in its node until
                    # the next launch beats: taken for the current launch, its counts were counted
                    # twice by `squall monitor` and the UI's history, as that launch's and as the
                    # ended one's (`EndedLaunch`). An older leader's beat names no launch: taken
                    continue
                # the leader's time of the beat is on its own monotonic clock: "heard now" here
                slot_state.heartbeat = LastBeat(self.mono(), stats=beat["stats"], figures=beat.get("figures"),
                                              pid=beat.get("pid"), address=beat.get("address"))
            topologies[name] = topo
        self.topologies = topologies
        self.counter = max(self.counter, state.counter)
        now = self.mono()
        # known from the store only: a newcomer on one's address and ports is that machine's
        # supervisor restarted (not a second machine), however recently the leader heard the old
        # one (`op_supervisor_sync`); one this master heard itself stays as it was
        self.supervisors = {sid: SupervisorInfo(s["host"], list(s["ports"]), now, s.get("since"), heard=False)
                            for sid, s in state.supervisors.items()}
        return complete

    def heartbeats(self) -> list[SlotBeat]:
        """The last heartbeat of each assigned worker that has beaten, with the launch it is of
        (Nimbus HA's leader writes them for the followers' pages), its time the wall time it came at."""
        to_wall = self.clock.wall() - self.mono()
        return [SlotBeat(t.plan.storm_id, slot, state.launch_id, dataclasses.replace(hb, time=hb.time + to_wall))
                for t in self.topologies.values() for slot in t.assignment
                if (hb := (state := t.slot(slot)).heartbeat) is not None]

    def _changes(self) -> tuple[list[Change], Persisted]:
        """What changed in the persisted part of the state since the last outcome, and that part now."""
        now = Persisted.of(self.counter, self.topologies, self.supervisors)
        return now.changes_since(self._persisted), now

    def lead(self) -> None:
        """This master leads from now (Nimbus HA): the workers get the launch timeout to find it,
        as after a restart, and its next outcome hands over the whole state (another master may
        have written since)."""
        now = self.mono()
        for topo in self.topologies.values():
            for slot in topo.assignment:
                state = topo.slot(slot)
                hb = state.heartbeat
                state.heartbeat = LastBeat.launched(now) if hb is None else dataclasses.replace(
                    hb, time=now, starting=True)
        self._persisted = Persisted()
        self.machines.lead()  # every machine has its timeout anew anyway (`adopt`)
        self.leading = True
        self.terms += 1
        self._changed()
        log.info("this master (%s) is the leader now: %d topologies, %d supervisors", self.me(),
                 len(self.topologies), len(self.supervisors))

    def _save_plan(self, plan: TopologyPlan) -> str | None:
        """Keep ``plan`` (`PutPlan`); its digest (the code's version, which Nimbus HA's followers
        fetch when theirs differs), None in memory, where it is kept as it is."""
        # by value, as the client sent it: a master in the user's own process (the Spark host's
        # driver) has the user's modules imported, and cloudpickle would otherwise pickle their
        # classes by reference, which a later master or a worker elsewhere cannot import.
        # Sealed: `_load` unpickles only what carries our MAC
        if self.store.directory is None:
            self._note(PutPlan(plan.storm_id, b"", None, plan))
            return None
        from .._sealed import seal  # with OpenSSL's hmac: loaded by a master that writes files only
        sealed = seal(self.secret, _PLAN, pickle_topology(plan.topology, plan))
        digest = hashlib.sha256(sealed).hexdigest()
        self._note(PutPlan(plan.storm_id, sealed, digest))
        if self.election is not None:
            self.election.hold_plan(digest, plan)
        return digest

    def _load(self) -> None:
        """Resume what the store holds (a lone master, at its start)."""
        stored = self.store.load()
        self.counter = stored.counter
        plans: dict[str, list[_KeptPlan]] = {}
        refused: dict[str, StoredPlan] = {}  # digest -> a sealed plan that did not load
        for storm_id in sorted(stored.plans):
            kept = stored.plans[storm_id]
            plan = self._stored_plan(kept)
            if plan is not None:
                plans.setdefault(plan.name, []).append(_KeptPlan(plan, kept))
            elif kept.sealed:
                refused[hashlib.sha256(kept.sealed).hexdigest()] = kept
        for name, t in stored.topologies.items():
            plan = _running_plan(name, t.get("code"), plans.get(name, []))
            if plan is None:
                named = refused.get(t.get("code") or "")
                self._check_secret_sealed(name, named)
                if named is not None:  # there, sealed by this cluster, but not a plan that loads
                    log.error("state names topology %s, whose plan %s did not load (said above); dropped", name,
                              named.where)
                else:
                    log.error("state names topology %s but its plan is missing; dropped", name)
                continue
            # before anything reads it: a malformed record stopped the master at start, or made it
            # answer every list and info with a bare TypeError. Its form first (its counts are
            # read to rebalance the plan), then its executor indexes against the plan as
            # rebalanced: checked against the plan as submitted, a `rebalance -e comp=N` that
            # gave a component more executors dropped the topology at the master's next start
            # (and the supervisor stopped its workers)
            problem = check_saved_topology(t, None)
            if problem is None:
                rebalanced = _rebalanced(plan, t)
                if rebalanced is None:
                    continue
                plan = rebalanced
                problem = check_saved_topology(t, len(plan.executors))
            if problem is not None:
                log.error("the state's record of topology %s in %s is malformed (%s); dropped", name,
                          self.store.directory / "state.json" if self.store.directory else "memory", problem)
                continue
            self._ended_checked(name, t, str(self.store.directory / "state.json") if self.store.directory else "memory")
            try:
                self.topologies[name] = TopologyRecord.from_json(plan, t, self.mono())
            except (KeyError, TypeError, ValueError) as e:
                log.error("the state's record of topology %s in %s is malformed (%s: %s); dropped",
                          name, self.store.directory or "memory", type(e).__name__, e)
        self._persisted = Persisted.of(self.counter, self.topologies, self.supervisors)
        if stored.topologies:
            log.info("recovered %d topologies from %s", len(self.topologies), self.store.directory or "memory")

    def _check_secret_sealed(self, name: str, kept: StoredPlan | None) -> None:
        """Stop the master if ``kept``, topology ``name``'s plan as ``state.json`` names it (the
        very bytes: their digest is the record's ``code``), did not load because it is sealed
        under another secret. Its bytes are the master's own, so the secret changed (the file
        removed, cut short, or ``squall.secret`` set since), not the plan: dropped as "missing",
        every topology stopped (all are sealed under the old secret) with an error blaming its
        plan, though plans and states were all there for the secret they were sealed with, and
        a topology submitted meanwhile was sealed under the wrong secret.

        Raises:
            SquallError: it is so, naming the plan, the topology and what to do.
        """
        if kept is None:
            return
        from .._sealed import SealError, unseal
        try:
            unseal(self.secret, _PLAN, kept.sealed)
        except SealError as e:
            raise SquallError(
                f"the plan {kept.where} of topology {name} is the one the master's state.json names (the same "
                f"bytes), but it is not sealed under this cluster's secret ({e}): the secret changed since it was "
                f"written (squall.secret, else <storm.local.dir>/secret). Put back the secret the cluster ran with "
                f"(its plans, states and supervisors' files are sealed under it), or, to start without the "
                f"topologies, move state.json and the *.plan files aside") from None

    def _ended_checked(self, name: str, t: dict[str, Any], where: str) -> None:
        """Refuse the ended launches of topology ``name``'s kept record ``t`` (read from
        ``where``) if they are malformed (`squall.cluster.master_records.EndedLaunch.from_json`),
        with an error naming the topology, the place and the problem, said once per problem (a
        follower reads the state every second): their counts would be added to what `squall
        monitor` and the UI's history show. The topology itself is kept: its readers count its
        current launches on, as they did before ended launches were kept."""
        try:
            ended_from_json(t.get("ended"))
        except ValueError as e:
            t["ended"] = None
            said = (name, where, str(e))
            if said not in self._ended_refused:
                self._ended_refused.add(said)
                log.error("the ended launches' figures of topology %s in %s are refused (%s): squall monitor and the "
                          "UI's history count on from its current launches", name, where, e)

    def _stored_plan(self, stored: StoredPlan) -> TopologyPlan | None:
        """The plan a store kept (unsealed if sealed: see `unseal_plan`)."""
        return stored.plan if stored.plan is not None else self.unseal_plan(stored.sealed, stored.where)

    def unseal_plan(self, blob: bytes, path: Any) -> TopologyPlan | None:
        """The plan sealed in ``blob`` (from ``path``: a file, or the master it was fetched
        from) if this cluster's master sealed it, else None with a warning naming ``path``."""
        from .._sealed import SealError, unseal
        try:
            payload = unseal(self.secret, _PLAN, blob)
        except SealError as e:
            log.warning("skipped %s: not a plan this cluster's master wrote (%s); it was not loaded", path, e)
            return None
        try:
            plan = cloudpickle.loads(payload)
        except Exception as e:  # noqa: BLE001 (unpickling the user's plan can raise anything: the plan is skipped, said)
            log.warning("skipped %s: its topology cannot be loaded: %s: %s", path, type(e).__name__, e)
            return None
        if not isinstance(plan, TopologyPlan):
            log.warning("skipped %s: it holds a %s, not a plan", path, type(plan).__name__)
            return None
        return plan

    # --- what any master answers -----------------------------------------------------------------
    def me(self) -> NimbusAddress:
        """Where this master listens."""
        return NimbusAddress(str(conf_value(self.conf, Config.NIMBUS_HOST)), int(self.port or 0))

    def op_get_leader(self) -> MasterAddress | None:
        """Where the master that leads listens (Storm's ``getLeader``), None while an election is
        under way. A lone master (no ZooKeeper) leads. A master cut off from ZooKeeper cannot
        know, and says so (as Storm's throws): a client asks its next seed."""
        if self.ha is not None and not self.ha.connected:
            raise NotLeaderException(f"this master ({self.ha.me}) cannot reach ZooKeeper: it does not know who leads")
        leader = self.me() if self.ha is None else self.ha.leader()
        return None if leader is None else MasterAddress(leader.host, leader.port)

    def op_nimbuses(self) -> list[dict[str, Any]]:
        """Each master, as Storm's UI nimbus summary lists them: ``host``, ``port``, ``status``
        (``Leader``, ``Not a Leader``, or ``Offline`` for a seed that does not run),
        ``uptime_secs`` and ``version`` (None when offline). Who leads is read from the
        election now, not from a stored flag."""
        from .. import __version__
        now = self.clock.wall()
        if self.ha is None:
            return [{"host": self.me().host, "port": self.me().port, "status": LEADER,
                     "uptime_secs": now - self.started, "version": __version__}]
        leader = self.ha.leader()
        alive = self.ha.nimbuses()
        out = [{"host": n.host, "port": n.port, "status": LEADER if n.address == leader else NOT_A_LEADER,
                "uptime_secs": max(0.0, now - n.started), "version": n.version}
               for n in sorted(alive, key=lambda n: n.address)]
        running = {n.address for n in alive}
        out += [{"host": s.host, "port": s.port, "status": OFFLINE, "uptime_secs": None, "version": None}
                for s in nimbus_seeds(self.conf) if s not in running]
        return out

    def replication_count(self, topo: Any) -> int:
        """How many masters hold ``topo``'s current code (Storm's UI ``replicationCount``); a
        lone master holds all."""
        if self.ha is None or not topo.code:
            return 1
        try:
            return len(self.ha.holders(topo.plan.storm_id, topo.code))
        except Exception:  # noqa: BLE001 (ZooKeeper unreachable, whatever kazoo raises: a summary still answers)
            return 0

    def op_code(self, storm_id: str) -> bytes:
        """The sealed plan of ``storm_id`` that this master holds (another master fetches it).

        Raises:
            NotAliveException: this master holds no code for ``storm_id``.
        """
        if not isinstance(storm_id, str) or not _NAME_RE.match(storm_id):  # storm ids: no path separators
            raise NotAliveException(f"no code for {storm_id!r}")
        sealed = self.store.sealed_plan(storm_id)
        if sealed is None:
            raise NotAliveException(f"this master holds no code for {storm_id}")
        return sealed

    # --- requests ---------------------------------------------------------------------------------------
    def handle(self, op: str, args: Mapping[str, Any]) -> Outcome:
        """One verb (``op_<op>``): its reply and the changes it made (`Outcome`), which its server
        keeps before the reply goes out. ``args``: the request as it arrived over RPC (its wire
        map), or its arguments as `squall._nimbus.NimbusIface` declares them (records and all:
        a master in this process); either way `squall._nimbus.decoded_request` makes the
        arguments of ``op_<op>`` once, checked against the verb's declaration:
        `ProtocolError` (a `ValueError`) names the verb and the field that is wrong, or an
        unknown ``op``. The reply is as the verb declares it (a record where it declares one).
        With Nimbus HA a follower refuses the `LEADER_ONLY` verbs (`NotLeaderException`); its
        server runs ``submit`` itself, waiting for the code's replication
        (`squall.cluster.master_ha.Election`).

        Raises:
            Exception: what the verb raises (its changes so far go with the next outcome).
        """
        verb, request = decoded_request(op, args)
        if verb.leader_only and self.election is not None:
            self.election.assert_leader()  # Storm's assertIsLeader
        return self._outcome(getattr(self, f"op_{op}")(**request))

    def _get(self, name: str) -> TopologyRecord:
        topo = self.topologies.get(name)
        if topo is None:
            raise NotAliveException(f"Topology {name!r} is not alive")
        return topo

    def op_submit(self, name: str, conf: dict[str, Any], topology: bytes, initial_status: str = "ACTIVE") -> str:
        """Storm's ``submitTopology`` over RPC: the pickled ``topology``, unpickled only once
        ``name`` passed its checks, planned and started; returns the storm id. Raises as `submit` does."""
        return self._start(self._planned(name, conf, topology, initial_status))

    def op_check_submit(self, name: str, conf: dict[str, Any], topology: bytes, replacing: bool = False) -> None:
        """Whether `op_submit` would take ``topology`` under ``name``, without submitting it: raises
        as `submit` does. With ``replacing``, as if the topology of that name were gone (its
        name and slots free): ``squall sparse submit -f`` asks before it kills the running one."""
        if not (replacing and name in self.topologies):
            self._check_new_name(name)
        self._checked_plan(name, conf, self._unpickled(name, topology), TopologyStatus.ACTIVE.value, replacing)

    def _planned(self, name: str, conf: dict[str, Any], topology: bytes, initial_status: str) -> Planned:
        self._check_new_name(name)
        return self._new_plan(name, conf, self._unpickled(name, topology), initial_status)

    def _unpickled(self, name: str, topology: bytes) -> Any:
        # only once ``name`` passed its checks
        try:
            loaded = cloudpickle.loads(topology)  # an authenticated client's
        except ImportError as e:
            raise InvalidTopologyException(
                f"the master cannot load topology {name!r}: {type(e).__name__}: {e}. Its code refers to a "
                f"module that did not travel with it (squall ships the user modules its components reach, but "
                f"not one installed in site-packages, imported inside a function or named in a string): make "
                f"it importable where the master and the workers run (install it, or put its directory on "
                f"their PYTHONPATH)") from None
        except SquallError:
            raise  # squall's own words already (a class shipped by value that cannot be rebuilt)
        except Exception as e:  # noqa: BLE001 (a component's own __reduce__ or __setstate__, run by cloudpickle)
            # raised bare, the client read a RemoteError with the user's message alone, which
            # said neither that the topology could not be loaded nor where
            raise InvalidTopologyException(
                f"the master cannot load topology {name!r}: unpickling one of its components raised "
                f"{exception_text(e)} (squall copies each component per task, so it "
                f"must unpickle as well as pickle: see its __setstate__ or __reduce__)") from None
        return loaded

    def plan_submission(self, name: str, conf: dict[str, Any], topology: bytes,
                        initial_status: str = "ACTIVE") -> Outcome:
        """``submit``'s first half, for Nimbus HA's leader: the checks and the plan, its reply a
        `Planned` whose plan is among the changes (kept, it is offered to the other masters), not
        started yet (`start`). Raises as `submit` does."""
        return self._outcome(self._planned(name, conf, topology, initial_status))

    def start(self, planned: Planned) -> Outcome:
        """``submit``'s second half: start ``planned``; the reply is its storm id.

        Raises:
            AlreadyAliveException: a topology of its name was submitted meanwhile.
        """
        return self._outcome(self._start(planned))

    def abandon(self, planned: Planned) -> Outcome:
        """``planned`` will not start (its code did not replicate, or this master lost the lead): its plan goes."""
        self._note(RemovePlan(planned.plan.storm_id))
        self._changed()  # the counter it took stays taken
        return self._outcome()

    def _check_new_name(self, name: Any) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidTopologyException(f"Topology name {name!r} is invalid: it must match ^[^/.:\\\\]+$")
        if name in self.topologies:
            raise self._name_taken(name)

    def _name_taken(self, name: str) -> AlreadyAliveException:
        """Storm's refusal of a name in use; for a topology still in its kill's wait (`squall kill
        -w`), also that, and when the name is free. Storm's words alone left a user who had just
        killed the topology (and seen `Killed topology`) to guess why its name was still taken."""
        message = f"Topology with name `{name}` already exists on cluster"
        topo = self.topologies[name]
        if topo.status is TopologyStatus.KILLED and self._waiting(topo):
            message += f" ({self._waiting(topo)}; submit it again after that)"
        return AlreadyAliveException(message)

    def _waiting(self, topo: TopologyRecord) -> str:
        """What ``topo``'s pending kill or rebalance waits for, and how long yet ("" none)."""
        action = topo.pending_action
        if action is None:
            return ""
        left = math.ceil(max(0.0, action.due - self.clock.wall()))
        if action.kind == REMOVE_ACTION:
            return f"it is being killed: status KILLED, removed in {left} s, when its kill's wait ends"
        return (f"it is being rebalanced: status REBALANCING for {left} s more, until its rebalance's wait "
                f"ends, then {topo.previous or TopologyStatus.ACTIVE} again")

    def _next_status(self, topo: TopologyRecord, event: str) -> TopologyStatus:
        """`next_status` for a user's verb on ``topo``; its refusal keeps Storm's words and adds
        the wait that blocks the verb and how long it lasts: Storm's alone (`No transition for
        event: activate, status: REBALANCING`) left a script that ran `squall rebalance` then
        `squall activate` to guess when to try again."""
        try:
            return next_status(topo.status, event)
        except IllegalStateTransition as e:
            waiting = self._waiting(topo)
            if not waiting:
                raise
            raise IllegalStateTransition(f"{e} ({waiting})") from None

    def submit(self, name: str, conf: dict[str, Any] | None, topology: Any, initial_status: str = "ACTIVE") -> Outcome:
        """Validate, plan and place ``topology`` under ``name`` (Storm's ``submitTopology``,
        ``initial_status`` its ``SubmitOptions``; a `LocalCluster`'s, with the topology object
        itself); the reply is its storm id.

        Raises:
            AlreadyAliveException: a topology of that name is alive.
            InvalidTopologyException: bad name, configuration or component (named).
        """
        return self._outcome(self._start(self._new_plan(name, conf, topology, initial_status)))

    def _checked_plan(self, name: str, conf: dict[str, Any] | None, topology: Any, initial_status: str,
                      replacing: bool = False) -> tuple[TopologyPlan, TopologyStatus]:
        """`submit`'s checks and the plan they make, changing nothing. With ``replacing``, as
        if the topology of that name were gone: its name free and its slots too (`op_check_submit`)."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidTopologyException(f"Topology name {name!r} is invalid: it must match ^[^/.:\\\\]+$")
        if not isinstance(topology, StormTopology):
            raise not_a_topology(topology)
        if initial_status not in (TopologyStatus.ACTIVE.value, TopologyStatus.INACTIVE.value):
            raise InvalidTopologyException(f"initial_status must be \"ACTIVE\" or \"INACTIVE\", got {initial_status!r}")
        status = TopologyStatus(initial_status)
        replaced = self.topologies.get(name) if replacing else None
        if name in self.topologies and replaced is None:
            raise self._name_taken(name)
        conf = with_whole_numbers(conf or {})  # a Config's 2.0 for an integer key is its 2, as in Storm
        merged = topology_conf(self.conf, conf)
        if not replacing:  # a check's warnings are the client's to print
            for warning in submit_warnings(conf, topology, name, memory_capped=self.memory_capped):
                log.warning("%s", warning)
        # the submitted name, whatever the Config says (Storm's Nimbus): tasks key their
        # transactional and persistent state by it, and a Config copied from another topology
        # would otherwise share that one's Trident coordinator state while both run
        merged[Config.TOPOLOGY_NAME] = conf[Config.TOPOLOGY_NAME] = name
        storm_id = f"{name}-{self.counter + 1}-{int(self.clock.wall())}"
        plan = make_plan(name, storm_id, topology, merged, conf)
        component_blobs(plan)  # names a component that cannot be pickled
        self._check_state_layouts(plan)
        self._check_slots(name, plan.num_workers, releasing=0 if replaced is None else len(replaced.assignment))
        return plan, status

    def _check_state_layouts(self, plan: TopologyPlan) -> None:
        """Refuse a submission that gives a component other than the number of tasks an earlier
        submission under its name kept its states in (`squall.state._names.state_namespace`'s
        records): a fields grouping picks a task by that number, so its keys would go to tasks
        whose state does not hold them. Its tasks refuse to start as well; said here, the
        submitter gets the error, not a worker restarted until its launches run out. Only a
        component that keeps such states now is held to them (`squall.state._names.keeps_task_states`):
        a stateful bolt replaced by a stateless one of the same id (or a Trident bolt whose
        generated name now holds no window) goes with any count, as its tasks would."""
        from ..state._names import earlier_task_counts, keeps_task_states, task_count_change_error
        for component, tasks in plan.component_tasks.items():
            spec = plan.topology.components.get(component)  # None: the ackers
            if spec is None or not keeps_task_states(spec.obj):
                continue  # keeps no states by task (now): its tasks never read an earlier layout's
            if setting(plan.component_confs.get(component, plan.conf), Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE,
                       where=f"configuration of component [{component}]"):
                continue
            earlier = earlier_task_counts(self.store.tx_list, self.store.tx_get, plan.name, component, len(tasks))
            if earlier:
                raise InvalidTopologyException(task_count_change_error(
                    f"component [{component}]", component, plan.name, len(tasks), earlier))

    def _new_plan(self, name: str, conf: dict[str, Any] | None, topology: Any,
                  initial_status: str) -> Planned:
        """`submit`'s checks, and the plan under a new storm id (handed to the store: written to
        ``storm.local.dir``, and with Nimbus HA offered to the other masters); not started yet."""
        plan, status = self._checked_plan(name, conf, topology, initial_status)
        self.counter += 1
        self._changed()
        return Planned(plan, status, self._save_plan(plan))

    def _start(self, planned: Planned) -> str:
        """Start the topology of a `_new_plan`: place it, and save."""
        plan = planned.plan
        if plan.name in self.topologies:  # submitted under the same name meanwhile (Nimbus HA's wait)
            raise self._name_taken(plan.name)
        topo = TopologyRecord(plan, planned.status, self.clock.wall())
        topo.code = planned.code
        self.topologies[plan.name] = topo
        self._changed()
        self._submitted = plan.name  # not kept, it is dropped again (`unkept`): not run
        self._schedule()
        log.info("Submitted topology %s (%s) on %d workers", plan.name, plan.storm_id, len(topo.assignment))
        return plan.storm_id

    def _check_slots(self, name: str, workers: int, releasing: int = 0) -> None:
        if self.strict_slots is None:
            return
        total = self._slots_total()
        used = sum(len(t.assignment) for t in self.topologies.values())  # a killed one's until removed
        free = total - used + releasing
        if workers > free:
            raise InvalidTopologyException(
                f"topology {name!r} needs {workers} workers (topology.workers) but only {free} of "
                f"{total} task slots are free: {self.strict_slots(total)}")

    def _schedule(self) -> None:
        """Let the scheduler place every topology that needs it (new, rebalanced, or waiting
        for slots); a slot whose executors changed gets a new launch id, so it restarts."""
        machines: dict[str, list[int]] = {}
        for sup in self.supervisors.values():
            if sup.unhealthy is None:  # a node that fails its health checks runs nothing
                machines.setdefault(sup.host, []).extend(sup.ports)
        assignments = {t.plan.storm_id: {slot: [t.plan.executors[i] for i in idx]
                                         for slot, idx in t.assignment.items()}
                       for t in self.topologies.values()}
        live = [t for t in self.topologies.values() if t.status != TopologyStatus.KILLED]
        cluster = SchedulerCluster(machines, assignments)
        self.scheduler.schedule([SchedulerTopology(t.plan.storm_id, t.plan.name, t.plan.num_workers,
                                                   t.plan.executors, t.plan.conf) for t in live], cluster)
        for t in live:
            index = {e: i for i, e in enumerate(t.plan.executors)}
            new = {slot: [index[e] for e in execs]
                   for slot, execs in cluster.assignments.get(t.plan.storm_id, {}).items()}
            if new == t.assignment:
                continue
            for slot, idx in new.items():
                if t.assignment.get(slot) != idx:
                    t.relaunch(slot, self.clock.wall(), self.mono(), died=False)
                    t.slot(slot).ready = False  # the new executors must report in before spouts run
            t.assignment = new
            # a slot the topology left (rebalanced away) keeps no record: nor its last, stale
            # figures, which would hide the figures of the tasks' new workers in op_info
            t.trim_slots()
            log.info("assigned %s to %s", t.plan.name, sorted(new))
            self._changed()

    def op_kill(self, name: str, wait_secs: float | None = None) -> None:
        """Storm's ``killTopology``: ``name`` goes KILLED (its spouts stop) and is removed after
        ``wait_secs`` (default: ``topology.message.timeout.secs``; 0: at once). Raises
        `NotAliveException` if there is no such topology."""
        topo = self._get(name)
        wait = _wait(topo, wait_secs)
        topo.status = self._next_status(topo, KILL)
        topo.pending_action = PendingAction(REMOVE_ACTION, self.clock.wall() + wait)
        self._changed()
        log.info("Killing topology %s (%s): spouts deactivated, removing it in %g s", name, topo.plan.storm_id, wait)
        if wait == 0:
            self._run_due_actions()

    def op_activate(self, name: str) -> None:
        """Storm's ``activate``: ``name``'s spouts may run again (workers learn it from their heartbeat
        replies). Raises `NotAliveException`, or `IllegalStateTransition` if it is killed or rebalancing."""
        topo = self._get(name)
        topo.status = self._next_status(topo, ACTIVATE)
        self._changed()
        log.info("Activated topology %s", name)

    def op_deactivate(self, name: str) -> None:
        """Storm's ``deactivate``: ``name``'s spouts stop emitting (workers learn it from their heartbeat
        replies). Raises `NotAliveException`, or `IllegalStateTransition` if it is killed or rebalancing."""
        topo = self._get(name)
        topo.status = self._next_status(topo, INACTIVATE)
        self._changed()
        log.info("Deactivated topology %s", name)

    def op_rebalance(self, name: str, num_workers: int | None = None, executors: dict[str, int] | None = None,
                     wait_secs: float | None = None) -> None:
        """Storm's ``rebalance``: ``name`` goes REBALANCING (spouts stop) for ``wait_secs`` (default:
        its message timeout), then is re-planned to ``num_workers``/``executors`` and placed afresh,
        back in its previous status. Raises `NotAliveException`, `InvalidTopologyException` (checked
        at once: the acker, an unknown component or bad count, too few slots), `IllegalStateTransition`."""
        topo = self._get(name)
        if ACKER_COMPONENT in (executors or {}):
            raise InvalidTopologyException("rebalance: the acker's executors cannot be changed")
        new_plan = topo.plan.with_parallelism(num_workers, executors)  # validate now, apply after the wait
        self._check_slots(name, new_plan.num_workers, releasing=len(topo.assignment))
        wait = _wait(topo, wait_secs)
        previous = topo.status
        topo.status = self._next_status(topo, REBALANCE)
        topo.previous = previous
        topo.pending_action = PendingAction(REBALANCE_ACTION, self.clock.wall() + wait, num_workers,
                                            dict(executors or {}))
        self._changed()
        log.info("Rebalancing topology %s: spouts deactivated, placing it on %d workers%s in %g s", name,
                 new_plan.num_workers, "".join(f", {c}={n} executors" for c, n in sorted((executors or {}).items())),
                 wait)
        if wait == 0:
            self._run_due_actions()

    def _run_due_actions(self) -> None:
        now = self.clock.wall()
        for name, topo in list(self.topologies.items()):
            action = topo.pending_action
            if action is None or action.due > now:
                continue
            topo.pending_action = None
            if action.kind == REMOVE_ACTION:
                transition(topo.status, REMOVE)
                del self.topologies[name]
                self._note(RemovePlan(topo.plan.storm_id))
                log.info("Killed topology: %s", name)
                self._schedule()  # its slots are free: place topologies that wait for some
            else:
                status = next_status(topo.status, DO_REBALANCE, topo.previous)
                topo.plan = topo.plan.with_parallelism(action.num_workers, action.executors)
                topo.assignment = {}  # placed afresh; a reused slot gets a new launch id
                topo.status = status
                if topo.code is None:  # in memory, the plan is kept as it is
                    self._save_plan(topo.plan)
                self._schedule()
                log.info("Rebalanced topology %s: %d workers", name, len(topo.assignment))
            self._changed()

    def op_cluster_info(self) -> dict[str, Any]:
        """A summary of the cluster: its slots, supervisors and topologies."""
        topologies = []
        for name, topo in sorted(self.topologies.items()):
            plan = topo.plan
            topologies.append({"id": plan.storm_id, "name": name, "status": topo.status.value,
                               "replication_count": self.replication_count(topo),
                               "uptime_secs": self.clock.wall() - topo.launched,
                               "num_workers": len(topo.assignment), "num_executors": len(plan.executors),
                               "num_tasks": len(plan.task_to_component)})
        return {"supervisors": len(self.supervisors), "slots_total": self._slots_total(),
                "slots_used": sum(t["num_workers"] for t in topologies), "topologies": topologies,
                "nimbuses": self.op_nimbuses(),
                "nimbus": {"host": conf_value(self.conf, Config.NIMBUS_HOST), "port": self.port,
                           "uptime_secs": self.clock.wall() - self.started}}

    def op_supervisors(self) -> list[dict[str, Any]]:
        """Each supervisor: its id, host, uptime and slots (all, and those a topology uses)."""
        used = {slot for t in self.topologies.values() for slot in t.assignment}
        now = self.clock.wall()
        return [{"id": sid, "host": sup.host, "uptime_secs": now - (sup.since if sup.since is not None else now),
                 "slots_total": len(sup.ports), "slots_used": len(sup.slots() & used),
                 "healthy": sup.unhealthy is None, "health_problem": sup.unhealthy}
                for sid, sup in sorted(self.supervisors.items())]

    def op_configuration(self) -> dict[str, Any]:
        """The master's configuration as it may be shown: `redact` leaves out ``squall.secret`` and
        every key naming a credential, and masks credentials in values (a URL's password)."""
        return redact(self.conf)

    def op_debug(self, name: str, component: str | None, enable: bool, pct: float) -> dict[str, Any]:
        """Storm's ``debug(name, component, enable, samplingPct)``: record the UI's debug switch of
        ``name``'s ``component`` (None or "": the whole topology, kept under its storm id as
        Storm's StormBase keeps it), ``pct`` clamped to 0..100; returns the record
        (``{"enable", "samplingpct"}``). The topology and component pages show it (``debug``,
        ``samplingPct``); it is kept across restarts of the master. Like Storm's without event
        logger executors, it changes no worker: ``topology.debug`` is read when a worker starts.

        Raises:
            NotAliveException: no topology ``name``.
            UnknownComponentError: ``component`` is not one of its components (named).
        """
        topo = self._get(name)
        if component and component not in topo.plan.topology.components:
            raise UnknownComponentError(f"topology {name!r} has no component {component!r}")
        record = {"enable": bool(enable), "samplingpct": int(min(100.0, max(0.0, float(pct))))}
        topo.debug[component or topo.plan.storm_id] = record
        self._changed()
        return dict(record)

    def op_set_log_config(self, name: str, config: LogConfig) -> LogConfig:
        """Storm's ``setLogConfig``: merge ``config`` into ``name``'s log levels
        (`merge_log_config`: a timeout ends at this master's wall time plus its seconds); its
        workers learn them from their next heartbeat reply (at once in a `LocalCluster`), and
        they are kept with the topology. Returns the topology's `LogConfig`.

        Raises:
            NotAliveException: no topology ``name``.
            BadParameterError: an empty logger name or a level that is none of Storm's (named).
        """
        topo = self._get(name)
        topo.log_config = merge_log_config(topo.log_config, config, self.clock.wall())
        log.info("log config of %s: %s", name, {n: lvl.target_log_level for n, lvl in topo.log_config.items()})
        self._changed()
        return topo.log_levels()[0]

    def op_get_log_config(self, name: str) -> LogConfig:
        """Storm's ``getLogConfig``: ``name``'s log levels; a setting whose timeout passed stays
        listed, as in Storm, though workers restored its logger.
        Raises `NotAliveException` if no such topology."""
        return self._get(name).log_levels()[0]

    def op_list(self) -> list[dict[str, Any]]:
        """A summary of each topology, by name (``squall list``, the UI's index): id, status, tasks,
        workers (assigned and wanted), slots, uptime, error count (every error that happened:
        ``errors``; those the kept records count: ``errors_kept``), last error."""
        out = []
        for name, topo in sorted(self.topologies.items()):
            out.append({"name": name, "id": topo.plan.storm_id, "status": topo.status.value,
                        "num_tasks": len(topo.plan.task_to_component), "num_workers": len(topo.assignment),
                        "uptime_secs": int(self.clock.wall() - topo.launched),
                        # a worker holds one executor at least: more are never placed (acking off)
                        "workers_wanted": min(topo.plan.num_workers, len(topo.plan.executors)),
                        "slots_total": self._slots_total(),
                        # how many happened, and how many of them the kept records tell of
                        "errors": topo.errors_happened, "errors_kept": sum(e.count for e in topo.errors),
                        "last_error": topo.errors[-1].describe() if topo.errors else None})
        return out

    def _slots_total(self) -> int:
        """Slots of every registered supervisor whose health checks pass (0: none has synced
        yet): an unhealthy node's slots can take no worker, as Storm's unhealthy supervisor
        leaves the cluster."""
        return sum(len(sup.ports) for sup in self.supervisors.values() if sup.unhealthy is None)

    def op_info(self, name: str) -> dict[str, Any]:
        """Storm's ``getTopologyInfo``: ``name``'s status, counts, per-component figures from the last
        heartbeats, errors, configuration and workers (the keys: `LocalCluster.get_topology_info`).
        Raises `NotAliveException` if no such topology."""
        topo = self._get(name)
        plan = topo.plan
        tasks: dict[int, dict[str, Any]] = {}
        for slot, state in topo.slots.items():
            for t, st in (state.heartbeat.stats if state.heartbeat else {}).items():
                # the launch that counted them (a relaunch drops the slot's heartbeat, and only the
                # current launch's are taken): a reader that sees it change knows the task counts
                # from zero again, even when its new counts are already above its old ones. A slot
                # numbers its own launches: a task a rebalance moved to another slot may find the
                # same launch id there, so the launch is the slot and its id together
                tasks[int(t)] = {**st, "launch_id": state.launch_id, "slot": slot}
        # each task's counters as the launches that ended last reported them, oldest first:
        # a reader that adds up launches (`squall monitor`) takes the rest of each from there
        ended: dict[int, list[dict[str, Any]]] = {}
        for e in topo.ended:
            for t, st in e.stats.items():
                ended.setdefault(int(t), []).append({**st, "launch_id": e.launch_id, "slot": e.slot})
        # every task's dead letters (a spout's; a Trident spout's emitter bolt's), each row
        # counted at the component that gave the records up and at the one that failed them
        # last, once where they are the same (a bolt's row counts the ones it failed: the same
        # records as its spouts' rows)
        dead_at: dict[str, int] = {}
        for task, st in tasks.items():
            source = plan.task_to_component.get(task, "")
            for by, _reason, n in st.get("dead_lettered") or ():
                for cid in {source, by}:
                    dead_at[cid] = dead_at.get(cid, 0) + int(n)
        components = {}
        for cid, spec in plan.topology.components.items():
            stats = [tasks[t] for t in plan.component_tasks[cid] if t in tasks]
            lat_sum = sum(s["complete_latency_sum"] for s in stats)
            lat_n = sum(s["complete_latency_count"] for s in stats)
            components[cid] = {
                "type": spec.kind, "executors": sum(1 for e in plan.executors if e.component == cid),
                "tasks": len(plan.component_tasks[cid]),
                "emitted": sum(sum(s["emitted"].values()) for s in stats),
                "transferred": sum(sum(s["transferred"].values()) for s in stats),
                "acked": sum(s["acked"] for s in stats), "failed": sum(s["failed"] for s in stats),
                "executed": sum(s["executed"] for s in stats),
                "dead_lettered": dead_at.get(cid, 0),
                "backlog": sum(s["backlog"] for s in stats),
                "complete_latency_ms": (1000.0 * lat_sum / lat_n) if lat_n else 0.0,
                "errors": [e.as_dict() for e in topo.errors if e.component == cid],
                "task_stats": {t: tasks[t] for t in plan.component_tasks[cid] if t in tasks},
                "ended_task_stats": {t: ended[t] for t in plan.component_tasks[cid] if t in ended},
            }
        return {"id": plan.storm_id, "name": name, "status": topo.status.value,
                "uptime_secs": self.clock.wall() - topo.launched, "num_workers": len(topo.assignment),
                "num_executors": len(plan.executors), "num_tasks": len(plan.task_to_component),
                "components": components, "errors": [e.as_dict() for e in topo.errors],
                "acker": {"tasks": len(plan.acker_tasks),
                          "executed": sum(tasks[t]["executed"] for t in plan.acker_tasks if t in tasks)},
                "configuration": redact({k: v for k, v in plan.conf.items() if visible_to_topology(k)}),
                "workers": [_worker_info(s, topo.slot(s), [plan.executors[i] for i in topo.assignment[s]])
                            for s in sorted(topo.assignment)]}

    # --- Storm's statistics pages: computed by the pages the host gave (`squall.cluster.view`) ---------
    def op_topology_page(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm's topology page JSON (``GET /api/v1/topology/:id``) for ``window``."""
        return self._pages("topology_page").topology_page(self._view(name), window, bool(sys))

    def op_component_page(self, name: str, component: str, window: str | None = None,
                          sys: bool = False) -> dict[str, Any]:
        """Storm's component page JSON; an `UnknownComponentError` names an unknown component."""
        return self._pages("component_page").component_page(self._view(name), component, window, bool(sys))

    def op_visualization(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm's visualization JSON (``GET /api/v1/topology/:id/visualization``)."""
        return self._pages("visualization").visualization(self._view(name), window, bool(sys))

    def op_visualization_init(self, name: str, sys: bool = False) -> dict[str, Any]:
        """Storm's ``visualization-init`` JSON: the input streams to draw."""
        return self._pages("visualization_init").visualization_init(self._view(name), bool(sys))

    def op_statistics(self, name: str, window: str | None = None) -> dict[str, Any]:
        """Every task's figures (``tasks``: `squall.ui.stats_pages.TaskRow` as lists) and every
        worker's row, for exporters."""
        return self._pages("statistics").statistics(self._view(name), window)

    def _pages(self, verb: str) -> StatisticsPages:
        if self.pages is None:
            raise NoPagesError(
                f"{verb}: this master serves no statistics pages; its host gives them "
                f"(Master(pages=squall.cluster.served_ui.statistics_pages()))")
        return self.pages

    def _view(self, name: str) -> TopologyView:
        topo = self._get(name)
        plan = topo.plan
        now = self.clock.wall()
        supervisor_of = {slot: sid for sid, sup in self.supervisors.items() for slot in sup.slots()}
        workers = []
        for slot in sorted(topo.assignment):
            state = topo.slot(slot)
            hb = state.heartbeat
            host, port = slot.rsplit(":", 1)
            figures = hb.figures if hb is not None and isinstance(hb.figures, dict) else None
            workers.append(WorkerView(
                host=host, port=int(port), supervisor_id=supervisor_of.get(slot, ""),
                executors=[plan.executors[i] for i in topo.assignment[slot]],
                uptime_secs=float((figures or {}).get("uptime_secs", 0.0)), restarts=state.restarts,
                launch_id=state.launch_id, figures=figures,
                windows=parse_windows(hb.windows if hb is not None else {})))
        ended = []
        for e in topo.ended:
            host, port = e.slot.rsplit(":", 1)
            tasks = {int(t) for t in e.windows}
            ended.append(WorkerView(host=host, port=int(port), supervisor_id="",
                                    executors=[ex for ex in plan.executors if tasks & set(ex.tasks)],
                                    launch_id=e.launch_id, windows=parse_windows(e.windows)))
        return TopologyView(plan=plan, status=topo.status.value, uptime_secs=now - topo.launched,
                            workers=workers, errors=list(topo.errors), now=now, debug=dict(topo.debug),
                            ended=ended)

    # --- supervisors and workers -------------------------------------------------------------------------
    def op_supervisor_sync(self, sync: SupervisorSync) -> SyncReply:
        """Register a supervisor's slots and tell it what each must run (the `Launch` of each of
        its ports that runs one); it reports worker exits, the workers it runs (``running``;
        None from a supervisor too old to say), and (``unhealthy``) why its node fails its
        health checks, if it does: such a node is given nothing, and what it ran moves to
        healthy nodes at once."""
        supervisor_id, host, ports, unhealthy = sync.supervisor_id, sync.host, sync.ports, sync.unhealthy
        now, wall = self.mono(), self.clock.wall()
        before = self.supervisors.get(supervisor_id)
        if self.machines.holds(supervisor_id):
            self._carry_out(self.machines.reached(supervisor_id, host, ports, now, self._workers_at()), now, wall)
        for sid, sup in list(self.supervisors.items()):
            clash = sorted(set(sup.ports) & set(ports))
            if sid == supervisor_id or sup.host != host or not clash:
                continue
            if sup.heard and now - sup.seen <= self._replaced_after():
                # the other one is alive: two machines that both say they are ``host`` (each
                # would replace the other, and every slot would restart at every sync)
                self._clash_log.error(
                    "supervisors %s and %s both claim %s ports %s: the newcomer %s is given no slots "
                    "until %s is silent for %g s (two machines: give each its own address, "
                    "storm.local.hostname)", sid, supervisor_id, host, ",".join(map(str, clash)),
                    supervisor_id, sid, self._replaced_after())
                return self._sync_reply({})
            # the same machine's slots under a new id, the old one silent (or known to this
            # master only from the store: a leader that took over while the machine's supervisor
            # restarted, or a whole cluster started again): that supervisor was restarted, and
            # its slots must not be taken for lost when the old id times out
            log.info("supervisor %s replaces %s on %s", supervisor_id, sid, host)
            del self.supervisors[sid]
            self._supervisor_replaced(sup)
        sup = self.supervisors[supervisor_id] = SupervisorInfo(host, list(ports), now, before.since if before else wall,
                                                               None if unhealthy is None else str(unhealthy))
        for ex in sync.exits:
            self._worker_exited(ex)
        health_changed = before is not None and (before.unhealthy is None) != (unhealthy is None)
        if sup.unhealthy is not None and (before is None or health_changed):
            log.warning("supervisor %s on %s fails its health checks (%s): moving its workers to healthy nodes",
                        supervisor_id, host, sup.unhealthy)
            self._drop_slots(sup.slots(), wall)
        elif health_changed:
            log.info("supervisor %s on %s passes its health checks again", supervisor_id, host)
        if before is None or before.ports != list(ports) or health_changed:
            self._schedule()  # new slots (or slots gone unhealthy): place what waits for some
            self._changed()  # a new supervisor is kept too (Nimbus HA's followers list it)
        if sync.running is not None:
            self._relaunch_not_running(host, ports, sync.running, wall, now)
        desired = {}
        for name, topo in self.topologies.items():
            for slot in topo.assignment:
                h, p = slot.rsplit(":", 1)
                state = topo.slot(slot)
                launch = state.launch_id  # every assigned slot has one (`_schedule`)
                if h == host and int(p) in ports and not state.given_up and state.retry_at <= now \
                        and launch is not None:
                    desired[p] = Launch(topo.plan.storm_id, name, launch)
        return self._sync_reply(desired)

    def _sync_reply(self, slots: dict[str, Launch]) -> SyncReply:
        return SyncReply(slots, MasterAddress(self.conf.get(Config.NIMBUS_HOST), self.conf.get(Config.NIMBUS_THRIFT_PORT)))

    def _replaced_after(self) -> float:
        """How long a supervisor must have been silent for a new one on its host and ports to
        take it for restarted (rather than for a second machine that claims the same address)."""
        return 2 * float(conf_value(self.conf, Config.SUPERVISOR_MONITOR_FREQUENCY_SECS))

    def _relaunch_not_running(self, host: str, ports: list[int], running: tuple[RunningWorker, ...],
                              wall: float, now: float) -> None:
        """Give a new launch id to each slot of this supervisor whose current launch may have run
        (peers may have had its address: `SlotState.held_launch`) but is not among the workers it runs. It
        died unseen: while this master was down (its supervisor restarted then, or a master
        stopped cleanly stopped its workers and starts again with the launch ids it saved).
        Started again under the same id, its worker would number its messages from 0 again,
        and the peers that remember the old one's numbers would drop them all as replayed. A
        launch never held has not run: its supervisor is about to start it for the first time."""
        alive = {(f"{host}:{r.port}", r.storm_id, r.launch_id) for r in running}
        changed = False
        for topo in self.topologies.values():
            for slot in topo.assignment:
                h, p = slot.rsplit(":", 1)
                state = topo.slot(slot)
                launch = state.launch_id
                if h != host or int(p) not in ports or state.given_up or state.held_launch != launch \
                        or (slot, topo.plan.storm_id, launch) in alive:
                    continue
                log.warning("worker %s of %s (launch %s) is not running on its supervisor: starting a new launch",
                            slot, topo.plan.name, launch)
                topo.relaunch(slot, wall, now)
                changed = True
        if changed:
            self._changed()

    def _supervisor_replaced(self, sup: SupervisorInfo) -> None:
        """A supervisor's workers died with it: each of its slots gets a new launch id, so
        that the new supervisor's workers are told from the dead ones (whose last sequence
        numbers their peers remember: reusing the launch id, every message from the new worker
        would be dropped as replayed), and the spouts fail what the dead ones held."""
        slots = sup.slots()
        wall, now = self.clock.wall(), self.mono()
        for topo in self.topologies.values():
            for slot in slots & set(topo.assignment):
                topo.relaunch(slot, wall, now)
        self._changed()

    def plan_of(self, storm_id: str) -> TopologyPlan:
        """The plan of the topology ``storm_id`` (for workers in the master's own process)."""
        topo = self._find(storm_id)
        if topo is None:
            raise NotAliveException(f"no topology {storm_id}")
        return topo.plan

    def news_marks(self) -> dict[str, News]:
        """Per topology, what its workers learn from heartbeat replies: a master in the workers'
        own process compares it across a call to tell them at once when it changed
        (`squall.cluster.inprocess.DirectMaster`)."""
        return {t.plan.storm_id: News(t.status, self._active(t), t.addresses_version, t.lost_generation,
                                      tuple(sorted(t.launch_ids.items())), tuple(sorted(t.assignment)),
                                      t.log_levels()[1])
                for t in self.topologies.values()}

    def storm_id_of(self, name: str) -> str:
        """The storm id of the topology ``name``. Raises `NotAliveException`."""
        return self._get(name).plan.storm_id

    def unready_slots(self, storm_id: str) -> set[str]:
        """The slots of ``storm_id`` whose worker has not reported in since it was assigned
        (none once the topology is gone)."""
        topo = self._find(storm_id)
        return set() if topo is None else {s for s in topo.assignment if not topo.slot(s).ready}

    def slot_components(self, storm_id: str) -> dict[str, list[str]]:
        """Each slot of ``storm_id``'s assignment and the components of its executors, sorted
        (empty once the topology is gone): what a host names a worker by."""
        topo = self._find(storm_id)
        if topo is None:
            return {}
        return {slot: sorted({topo.plan.executors[i].component for i in idx}) for slot, idx in topo.assignment.items()}

    def topology_names(self) -> list[str]:
        """Names of the topologies (killed ones until removed)."""
        return sorted(self.topologies)

    def has_topology(self, storm_id: str) -> bool:
        """Whether ``storm_id`` is still on the cluster."""
        return self._find(storm_id) is not None

    def workers_wanted(self) -> int:
        """The workers every topology asks for (``topology.workers``), killed ones until removed."""
        return sum(t.plan.num_workers for t in self.topologies.values())

    def worker_deaths(self, storm_id: str) -> WorkerDeaths | None:
        """How ``storm_id``'s workers have died so far (None: no such topology): for a host that
        must tell a waiting caller at once (`LocalCluster`'s `LocalDRPC` requests)."""
        topo = self._find(storm_id)
        if topo is None:
            return None
        states = [topo.slot(slot) for slot in topo.assignment]
        fatal = [e for e in topo.errors if e.fatal]
        newest = max(fatal, key=lambda e: max(e.time, e.last_time), default=None)
        now = self.mono()
        return WorkerDeaths(topo.plan.name, sum(s.restarts for s in states), newest,
                            bool(states) and all(s.retry_at > now for s in states))

    def _find(self, storm_id: str) -> TopologyRecord | None:
        for topo in self.topologies.values():
            if topo.plan.storm_id == storm_id:
                return topo
        return None

    def _worker_exited(self, ex: WorkerExit) -> None:
        """A supervisor saw a worker end. Unless a newer launch already replaced it, the slot
        gets a fresh launch id: the supervisor starts it again, and a copy of the old launch
        that turns up later (Spark re-running a lost task on its own) is told to stop."""
        topo = self._find(ex.storm_id)
        slot = ex.slot
        if topo is None or slot not in topo.slots:
            return  # of a topology gone since, or a slot never launched: nothing to record
        launch = ex.launch_id
        now, wall = self.mono(), self.clock.wall()
        state = topo.slot(slot)
        current = slot in topo.assignment and launch == state.launch_id
        if current:
            topo.relaunch(slot, wall, now, executing=ex.executing, how=exit_text(ex.status))
        # started: its executors opened, as its own heartbeat said before any tuple ran (the
        # supervisor's word alone is not enough: a worker that dies before it reaches the
        # master, on a bad import or a bad configuration, exits like any crash; nor is its
        # "not started", read from the exit status 3 that user code may exit with too: a bolt's
        # os._exit(3) on a poison record was counted as failed starts until the slot was given up)
        # an exit of the launch the master still wants running was asked for by no one, whatever
        # its status: a library's os._exit(0) is a crash too, not a silent restart loop
        unasked = current and ex.status == 0
        if state.started_launch == launch:
            state.failed_starts = 0
            # a crash that said nothing of itself (user code's os._exit(7), a SIGSEGV in C, the
            # OOM killer's SIGKILL) left the topology's errors empty while its restarts climbed:
            # its exit is the error, unless the worker reported why it dies (a fail-fast
            # exception, its memory cap)
            silent = state.reported_launch != launch if unasked else state.fatal_launch != launch
            if (unasked or (current and ex.status != 0)) and silent:
                topo.add_error(exit_error(slot, ex, wall, started=True,
                                           doing=executing_text(topo.bolt_tasks(slot), ex.executing),
                                           reported=reported_ends(topo.errors)))
            if current and (ex.status != 0 or unasked or state.fatal_launch == launch):
                self._hold_after_crash(topo, slot, now)
        elif ex.status != 0 or unasked:
            failures = state.failed_starts = state.failed_starts + 1
            if state.reported_launch != launch:
                topo.add_error(exit_error(slot, ex, wall))  # it died before it could say why
            # null (the default): never given up, as Storm's supervisor retries a launch for ever:
            # what fails a start may be outside the topology (a database down for a minute)
            limit = conf_value(self.conf, Config.SQUALL_WORKER_MAX_LAUNCH_ATTEMPTS)
            if limit is not None and failures >= limit:
                state.given_up = True
                topo.add_error(master_error("__master", -1, f"worker on {slot} failed to start {limit} times; "
                                                            f"gave up (see the errors above)", wall))
            else:
                state.retry_at = now + launch_backoff(failures)
        self._changed()

    def _hold_after_crash(self, topo: TopologyRecord, slot: str, now: float) -> None:
        """``slot``'s worker crashed after it had started: restart it at once, or after 1, 2, 4 ...
        30 s while it keeps crashing soon after each start (`crash_backoff`; the first wait is
        ``squall.worker.crash.backoff.secs``). A value that
        crashes the worker each time it is replayed would otherwise restart it every second.
        These are not failed starts: the slot is never given up."""
        state = topo.slot(slot)
        ran = now - (now if state.started_at is None else state.started_at)
        base = float(conf_value(self.conf, Config.SQUALL_WORKER_CRASH_BACKOFF_SECS))
        state.crashes, delay = crash_backoff(state.crashes, ran, base=base)
        if delay:
            state.retry_at = now + delay
            log.warning("worker %s of %s crashed %d times in a row, each soon after it started: restarting it "
                        "in %.1f s (see the topology's errors)", slot, topo.plan.name, state.crashes, delay)

    def op_get_assignment(self, storm_id: str, slot: str, address: str | None = None,
                          launch_id: int | None = None, want_plan: bool = True) -> Assignment:
        """A starting worker's assignment; it reports the data ``address`` it bound. ``peers``
        (task -> address) holds None for workers that have not reported theirs yet: the worker
        asks again until none is missing (``plan`` is sent only with ``want_plan``); ``launch_ids``
        (slot -> launch id) lets it drop messages from replaced launches of its peers."""
        topo = self._find(storm_id)
        state = None if topo is None or slot not in topo.assignment else topo.slot(slot)
        if topo is None or state is None or state.launch_id is None:  # an assigned slot has a launch id
            raise NotAliveException(f"no assignment for {storm_id} on {slot}")
        if launch_id is None or launch_id == state.launch_id:
            topo.note_address(slot, address)
        log_config, digest = topo.log_levels()
        return Assignment(plan=pickle_topology(topo.plan.topology, topo.plan) if want_plan else None,
                          executors=topo.assignment[slot], peers=topo.peers(),
                          addresses_version=topo.addresses_version, lost_generation=topo.lost_generation,
                          epoch=self.epoch, launch_ids=topo.launch_ids, launch_id=state.launch_id,
                          active=self._active(topo), log_config=log_config, log_config_digest=digest,
                          launch_floor=topo.launch_floor)

    def op_heartbeat(self, beat: Heartbeat) -> HeartbeatReply:
        """A worker's beat (`Heartbeat`: ``stats``, its exact engine counters; ``windows``, Storm's
        windowed statistics of its tasks, `squall.worker.stats_history`; ``figures``, its
        process's `WorkerFigures`; ``transport``, its data transport's counts of dropped
        messages). The reply says whether to stop, whether spouts may run (``activating``: not
        yet, only because other workers have not beaten yet), when a peer moved or restarted
        since the worker's ``addresses_version``, the new ``peers`` and ``launch_ids`` tables,
        and when workers died since its ``lost_generation`` of this master's ``epoch`` (another
        epoch: since ever), which (``lost``, with the current generation and epoch), and when
        the topology's log levels differ from its ``log_config_digest``, them (``log_config``)."""
        topo = self._find(beat.storm_id)
        slot, launch_id = beat.slot, beat.launch_id
        if topo is None or slot not in topo.assignment or topo.slot(slot).launch_id != launch_id:
            return HeartbeatReply(stop=True)  # killed, rebalanced away, or superseded by a newer launch
        state = topo.slot(slot)
        if beat.address and state.address is None:
            topo.note_address(slot, beat.address)  # a master restarted since learns them again
        now = self.mono()
        state.heartbeat = LastBeat(now, stats=beat.stats or {}, windows=beat.windows or {}, figures=beat.figures,
                                    pid=beat.pid, address=beat.address, transport=beat.transport)
        if beat.started:
            if state.started_launch != launch_id:
                state.started_launch = launch_id
                state.started_at = now
            state.held_launch = launch_id  # it got its peers' addresses, so they have its own
            state.failed_starts = 0
        if (beat.errors or beat.errors_unrecorded) and not self._kept_before(state, launch_id, beat.errors_seq):
            self._add_errors(topo, slot, launch_id, beat.errors or [], beat.errors_unrecorded)
        state.ready = True
        active = self._active(topo)
        # not active only because the other workers have not beaten yet: this one learns of its
        # activation only from a beat's reply, so it should beat again soon, not a period later
        activating = not active and topo.status == TopologyStatus.ACTIVE
        peers = launch_ids = addresses_version = launch_floor = None
        if beat.addresses_version is not None and beat.addresses_version != topo.addresses_version:
            peers, launch_ids, addresses_version = topo.peers(), topo.launch_ids, topo.addresses_version
            launch_floor = topo.launch_floor
        lost: tuple[WorkerLost, ...] = ()
        lost_generation = epoch = None
        other_epoch = beat.epoch is not None and beat.epoch != self.epoch
        if beat.lost_generation is not None and (other_epoch or beat.lost_generation != topo.lost_generation):
            lost = topo.lost_since(0 if other_epoch else beat.lost_generation)
            lost_generation, epoch = topo.lost_generation, self.epoch
        log_config, digest = topo.log_levels()
        changed_levels = beat.log_config_digest is not None and beat.log_config_digest != digest
        return HeartbeatReply(stop=False, active=active, activating=activating, peers=peers, launch_ids=launch_ids,
                              launch_floor=launch_floor,
                              addresses_version=addresses_version, lost=lost, lost_generation=lost_generation,
                              epoch=epoch, log_config=log_config if changed_levels else None,
                              log_config_digest=digest if changed_levels else None)

    def _kept_before(self, state: SlotState, launch_id: int, seq: int | None) -> bool:
        """Whether the error batch ``seq`` of ``launch_id`` was kept already (a worker sends a
        batch again, as it was, when its beat got no reply: a master killed after keeping it, a
        leader whose write to ZooKeeper failed, a reply that timed out); else it is noted as kept
        now, with the errors it comes with, in the same persisted record."""
        if seq is None:
            return False
        kept = state.errors_kept
        if kept is not None and kept[0] == launch_id and seq <= kept[1]:
            return True
        state.errors_kept = (launch_id, seq)
        return False

    def _add_errors(self, topo: TopologyRecord, slot: str, launch_id: int, errors: list[Any], unrecorded: int = 0) -> None:
        """Record a worker's errors (an identical repeat counts on its record), count them with
        the ``unrecorded`` ones that came without a record, and save."""
        if errors:
            topo.slot(slot).reported_launch = launch_id
        topo.errors_happened += max(0, int(unrecorded))
        host, port = slot_address(slot)
        for e in errors:
            new = ErrorRecord.from_dict(e)
            new.host, new.worker = host, port  # the slot that reported it, whatever the record says
            topo.add_error(new)
            if new.fatal:  # not the record it folds into, which may be an earlier launch's crash
                topo.slot(slot).fatal_launch = launch_id
        self._changed()

    def _active(self, topo: TopologyRecord) -> bool:
        """Whether a topology's spouts may run: ACTIVE, and (as Storm activates a topology only
        once its workers are up) every slot of the assignment has reported in once. Without
        this, the first worker up would flood peers that are still starting. A worker that
        restarts later does not pause the others."""
        return topo.status == TopologyStatus.ACTIVE and all(topo.slot(slot).ready for slot in topo.assignment)

    def op_report_errors(self, storm_id: str, slot: str, launch_id: int, errors: list[dict[str, Any]]) -> None:
        """A worker that could not start says why."""
        topo = self._find(storm_id)
        if topo is not None and slot in topo.assignment:
            self._add_errors(topo, slot, launch_id, errors)

    # --- Trident's transactional state (`squall.trident.txstate`) ------------------------------------------
    def _check_transactional(self, topology: Any, storm_id: Any = None, slot: Any = None, launch_id: Any = None) -> str:
        """``topology``, checked before its transactional state (kept by the store) is read or
        written: that it is a topology name and, when the caller says which worker launch it is (a
        worker's `squall._transactional.MasterBackend` always does), that this launch runs now
        and belongs to ``topology``. A worker of another topology, or one killed, moved or
        relaunched since (a copy left running on a supervisor the master gave up on), would
        otherwise write the coordinator state of the one running now: a txid's metadata
        replaced under its replay, an attempt id saved lower than one in use. Values are opaque
        bytes here, never unpickled."""
        if not isinstance(topology, str) or not _NAME_RE.match(topology):
            raise ValueError(f"transactional state: {topology!r} is not a topology name")
        if storm_id is not None or slot is not None or launch_id is not None:
            topo = self._find(storm_id) if isinstance(storm_id, str) else None
            if topo is None or slot not in topo.assignment or topo.slot(slot).launch_id != launch_id:
                raise LaunchRefusedError(
                    f"transactional state of topology {topology!r}: worker {slot!r} launch {launch_id!r} of "
                    f"{storm_id!r} is not running now (killed, moved or relaunched); refused")
            if topo.plan.name != topology:
                raise TransactionalStateError(
                    f"transactional state: a worker of topology {topo.plan.name!r} ({storm_id}) may not reach "
                    f"topology {topology!r}'s")
        return topology

    def op_trident_state_get(self, topology: str, key: str, storm_id: str | None = None, slot: str | None = None,
                             launch_id: int | None = None) -> bytes | None:
        """The value of ``key`` in ``topology``'s transactional state, None if none (the worker
        launch asking: see `_check_transactional`). Read from the store at each call, not from a
        copy the master keeps: under Nimbus HA the store (ZooKeeper) is the authority, and a
        node changed there behind the leader's back (a forged or stale value) must be refused by
        the store's checks on every read, not served from memory."""
        return self.store.tx_get(self._check_transactional(topology, storm_id, slot, launch_id), key)

    def op_trident_state_put(self, topology: str, key: str, value: bytes, storm_id: str | None = None,
                             slot: str | None = None, launch_id: int | None = None) -> None:
        """Set ``key`` of ``topology``'s transactional state to ``value`` (durable once the reply
        goes: its server keeps the change first)."""
        self._note(PutTxState(self._check_transactional(topology, storm_id, slot, launch_id), key, value))

    def op_trident_state_delete(self, topology: str, key: str, prefix: bool = False, storm_id: str | None = None,
                                slot: str | None = None, launch_id: int | None = None) -> None:
        """Remove ``key`` of ``topology``'s transactional state (``prefix``: and every key under it)."""
        self._note(DeleteTxState(self._check_transactional(topology, storm_id, slot, launch_id), key, bool(prefix)))

    def op_trident_state_write(self, topology: str, writes: list[TxWrite], storm_id: str | None = None,
                               slot: str | None = None, launch_id: int | None = None) -> None:
        """Apply ``writes`` to ``topology``'s transactional state in their order (each as
        `op_trident_state_put`, or with no value `op_trident_state_delete` of it and every key
        under it): kept, in that order, before the reply goes."""
        topology = self._check_transactional(topology, storm_id, slot, launch_id)
        for w in writes:
            self._note(PutTxState(topology, w.key, w.value) if w.value is not None
                       else DeleteTxState(topology, w.key, True))

    def op_trident_state_list(self, topology: str, prefix: str = "", storm_id: str | None = None,
                              slot: str | None = None, launch_id: int | None = None) -> list[str]:
        """The keys of ``topology``'s transactional state that start with ``prefix``, sorted."""
        return self.store.tx_list(self._check_transactional(topology, storm_id, slot, launch_id), prefix)

    # --- monitoring -----------------------------------------------------------------------------------------
    def monitor(self) -> Outcome:
        """The master's timer (Storm's nimbus monitor, every ``nimbus.monitor.freq.secs`` at most a
        second, run by its server): restart workers that stopped heartbeating, take silent
        machines for lost, run due kills and rebalances; the changes are the `Outcome`'s."""
        self._check_timeouts()
        return self._outcome()

    def _check_timeouts(self) -> None:
        """Ask `Machines` what to make of the machines and workers not heard (`squall.cluster.
        machines`), feeding in what ZooKeeper says of the silent machines, and do it."""
        self._run_due_actions()
        now, wall = self.mono(), self.clock.wall()
        t = Timeouts.of(self.conf)
        machines = self.machines
        self._carry_out(machines.heard_again(now, self.supervisors, self._workers_at(), t), now, wall, t)
        reads = self._ask_zookeeper(machines.to_ask(now, self.supervisors, t))
        self._carry_out(machines.silent_machines(now, self.supervisors, reads, t), now, wall, t)
        waits = []
        for topo in self.topologies.values():
            for slot in topo.assignment:
                state = topo.slot(slot)
                if state.given_up or state.retry_at > now:
                    continue  # given up, or held back after a failed start: nothing runs there yet
                hb = state.heartbeat
                if hb is None:  # never heard of (a follower's adopted slot): waiting from now
                    hb = state.heartbeat = LastBeat.launched(now)
                waits.append(WorkerWait(topo.plan.storm_id, slot, max(hb.time, state.retry_at), hb.starting))
        self._carry_out(machines.silent_workers(now, self.supervisors, waits, t), now, wall, t)

    def _workers_at(self) -> list[WorkerAt]:
        """Each assigned worker that has a last heartbeat, and its time."""
        return [WorkerAt(topo.plan.storm_id, slot, hb.time) for topo in self.topologies.values()
                for slot in topo.assignment if (hb := topo.slot(slot).heartbeat) is not None]

    def _ask_zookeeper(self, quiet: list[str]) -> PresenceReads | None:
        """What ZooKeeper says of the supervisors ``quiet`` (`squall.cluster.liveness`: whether
        their ephemeral node lives); None without ZooKeeper, or with none to ask. All are asked
        in one round trip (`read_presences`): this runs on the server's event loop. Those it could
        not be asked about are said (at most every 10 s): none is taken for lost until it answers."""
        ha = self.ha
        if ha is None or not quiet:
            return None
        try:
            reads = read_presences(ha, quiet)
        except Exception as e:  # noqa: BLE001 (whatever else kazoo raises: not heard, as without ZooKeeper)
            log.warning("cannot ask ZooKeeper whether supervisors %s live: %s", ",".join(sorted(quiet)), e)
            return PresenceReads({}, {})
        if reads.unanswered:
            sids = sorted(reads.unanswered)
            self._unasked_log.warning("cannot ask ZooKeeper whether supervisors %s live (%s): none is taken for "
                                      "lost until it answers", ",".join(sids), reads.unanswered[sids[0]])
        return reads

    def _carry_out(self, instructions: list[Instruction], now: float, wall: float, t: Timeouts | None = None) -> None:
        """Do what `Machines` decided, in order: say it, move heartbeats' times, restart a worker
        in place, forget a lost machine and move its executors (then schedule again)."""
        lost = False
        for i in instructions:
            if isinstance(i, Say):
                log.warning("this master (%s) %s", self.me(), i.what)
                if not i.logged_only:
                    for topo in self.topologies.values():
                        if topo.assignment and (i.slots is None or i.slots & set(topo.assignment)):
                            topo.add_error(master_error("__master", -1, f"the master {i.what}", wall))  # counted too
                    self._changed()
            elif isinstance(i, Forgotten):
                log.warning("ZooKeeper no longer hears supervisor %s on %s either (its session ended): it is taken "
                            "for lost as a silent machine is", i.held.supervisor_id, i.held.host)
            elif isinstance(i, RenewMachine):
                self.supervisors[i.supervisor_id].seen = i.seen
            elif isinstance(i, Renew):
                state = self._topology(i.storm_id).slot(i.slot)
                hb = state.heartbeat
                if hb is not None:
                    starting = hb.starting if i.starting is None else i.starting
                    state.heartbeat = dataclasses.replace(hb, time=i.time, starting=starting)
            elif isinstance(i, Restart):
                topo = self._topology(i.storm_id)
                log.warning("worker %s of %s missed heartbeats for %.0f s: restarting it",
                            i.slot, topo.plan.name, i.silent_for)
                topo.add_error(silent_error(i.slot, topo.components_on(i.slot), i.starting, i.limit, wall))
                topo.relaunch(i.slot, wall, now)
                self._changed()
            elif isinstance(i, MachineLost):
                assert t is not None
                sup = self.supervisors.pop(i.supervisor_id)
                log.warning("supervisor %s silent for %.0f s: rescheduling its slots", i.supervisor_id, i.silent_for)
                self._drop_slots(sup.slots(), wall, f"its supervisor was unheard for nimbus.supervisor.timeout.secs "
                                                    f"({t.supervisor:g} s)")
                lost = True
            elif isinstance(i, NodeLost):
                # workers silent on machines whose supervisors are silent too (the machine died,
                # or its link was cut): as Storm reassigns timed-out executors to live slots,
                # their executors move; a machine that comes back registers again, and its
                # stale workers, assigned nothing, are stopped
                assert t is not None
                for sid in i.supervisor_ids:
                    sup = self.supervisors.pop(sid)
                    log.warning("supervisor %s on %s and its workers silent for over %g s (nimbus.task.timeout.secs): "
                                "moving their executors to other machines", sid, sup.host, t.task)
                self._drop_slots(set(i.slots), wall, f"the worker and its supervisor were unheard for "
                                                     f"nimbus.task.timeout.secs ({t.task:g} s)")
                lost = True
        if lost:
            self._schedule()

    def _topology(self, storm_id: str) -> TopologyRecord:
        topo = self._find(storm_id)
        assert topo is not None, storm_id  # `Machines` names only the workers it was given, this stimulus
        return topo

    def _drop_slots(self, lost: set[str], wall: float, silent: str | None = None) -> None:
        """Slots that are gone (their machine died, fell silent or fails its health checks):
        their workers are lost (`WorkerLost`: the spouts fail what they held), and their
        executors are left for `_schedule` to place elsewhere. ``silent``: how long what was
        unheard from the machine, for the error each topology records (None: none)."""
        changed = False
        for topo in self.topologies.values():
            for slot in lost & set(topo.assignment):
                if silent is not None:
                    topo.add_error(lost_error(slot, topo.components_on(slot), silent, wall))
                topo.note_lost(slot, wall)
                topo.retire(slot)
                changed = True
            topo.assignment = {s: i for s, i in topo.assignment.items() if s not in lost}
            topo.trim_slots()
        if changed:
            self._changed()


def check_wait_secs(wait_secs: Any) -> float | None:
    """A kill's or rebalance's ``wait_secs``: None (the message timeout) or seconds from 0 to
    `MAX_WAIT_SECS`.

    Raises:
        BadParameterError: anything else, naming it (NaN ran at once, infinity never, a string
            raised from deep in a comparison).
    """
    if wait_secs is None:
        return None
    if isinstance(wait_secs, bool) or not isinstance(wait_secs, (int, float)) \
            or not 0 <= wait_secs <= MAX_WAIT_SECS:  # NaN fails this too
        raise BadParameterError(f"wait_secs must be a number of seconds from 0 to {MAX_WAIT_SECS}, got {wait_secs!r}")
    return float(wait_secs)


def _wait(topo: TopologyRecord, wait_secs: Any) -> float:
    wait = check_wait_secs(wait_secs)
    return float(topo.plan.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]) if wait is None else wait


def _worker_info(slot: str, state: SlotState, executors: list[ExecutorSpec]) -> dict[str, Any]:
    """One worker of ``info``'s ``workers`` list."""
    hb = state.heartbeat
    return {"slot": slot, "port": int(slot.rsplit(":", 1)[1]), "executors": [list(e.id) for e in executors],
            "restarts": state.restarts, "launch_id": state.launch_id, "alive": hb is None or not hb.starting,
            "pid": hb.pid if hb else None, "address": state.address,
            "transport": hb.transport if hb else None, "given_up": state.given_up}
