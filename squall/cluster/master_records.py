"""The small records the master (`squall.cluster.master`) keeps: per slot of a topology, per
heartbeat, per supervisor, and a topology's pending kill or rebalance.

They are named types so that the master's rules read as sentences (``slot.retry_at``), where
they were a dozen parallel dicts keyed by slot and tuples read by position. They stay inside the
master: the RPC operations take and return the same plain dicts as before, converted at the
edges, and `SlotState.to_json` / `PendingAction.to_json` write ``state.json``, whose older form
(``launch_ids``, ``launch_failures``, ``given_up`` as three maps; the pending action as a list)
`slots_from_json` and `PendingAction.from_json` still read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..engine.stats import GAUGES
from ..worker.stats_history import ALL_TIME

if TYPE_CHECKING:
    from ..engine.plan import TopologyPlan
    from .state import TopologyStatus
    from .store import Change

REMOVE_ACTION = "remove"        # a killed topology's wait is over: drop it, free its slots
REBALANCE_ACTION = "rebalance"  # a rebalance's wait is over: apply the new parallelism


@dataclass(frozen=True, slots=True)
class LastBeat:
    """The last word the master has from a slot's current launch (never persisted: a restarted
    master gives every worker the launch timeout to beat again)."""

    time: float                   # master's monotonic time (`Master.mono`) when it came (or when the launch was given)
    starting: bool = False        # no beat from this launch yet: ``nimbus.task.launch.secs`` applies,
                                  # not ``nimbus.task.timeout.secs``
    stats: dict[str, Any] = field(default_factory=dict)  # task -> its exact counters, for ``info``
    windows: dict[Any, Any] = field(default_factory=dict)  # task -> Storm's windowed statistics
    figures: dict[str, Any] | None = None  # the worker process's `WorkerFigures`
    pid: int | None = None        # the worker's process id, for ``info``
    address: str | None = None    # the data address it said it bound
    transport: dict[str, Any] | None = None  # its transport's counts of dropped messages

    @classmethod
    def launched(cls, now: float) -> LastBeat:
        """What a new launch (or one a restarted master does not know yet) counts as: not heard
        from, waiting since ``now``."""
        return cls(now, starting=True)


class SlotBeat(NamedTuple):
    """A slot's last heartbeat (`LastBeat`) and the launch it is of (None: the slot has none
    yet), as Nimbus HA's leader writes it for the followers (`squall.cluster.master_ha`)."""

    storm_id: str
    slot: str
    launch_id: int | None
    beat: LastBeat


MAX_ENDED_LAUNCHES = 64
"""Ended launches a topology keeps the last word of (`EndedLaunch`): a reader polling every few
seconds finds each one that ended since its last poll, unless that many more ended between."""

MAX_KEPT_ENDED_CHARS = 256 * 1024
"""At most this much JSON text of a topology's ended launches goes into its kept record, the
newest launches first (`kept_ended`): the record is written whole at each change (``state.json``,
fsynced; Nimbus HA's ``assignments/<storm-id>`` node, which ZooKeeper caps at 1 MB), and a
topology of many tasks per worker has large last words (~500 bytes a task). A launch that does
not fit is known until the master restarts, as before."""


@dataclass(frozen=True, slots=True)
class EndedLaunch:
    """The last heartbeat the master took from a worker launch that is over (it died, or was
    replaced by a rebalance or a lost machine): its tasks' counters as that beat carried them.

    The master drops a launch's figures from its pages when it ends (the new launch counts from
    zero), but a reader that adds up each launch's counts (`squall monitor`, the UI's history)
    last read them a poll earlier: what the launch counted and reported between that poll and
    its death was dropped with it (5 dead letters written 1 to 4 s before a kill never showed in
    `squall monitor`). Kept here, the reader takes the rest of the launch from its last word;
    only what it counted after its last heartbeat is lost. Kept with the topology's record too
    (`to_json`, within `MAX_KEPT_ENDED_CHARS`): a master restarted, or a Nimbus HA leader that
    took over, before the reader's next poll still has it (before, it had none, and `squall
    monitor` read 100 of 200 emits, the UI's history 90 of 180 acks and 10 of 20 failures)."""

    slot: str
    launch_id: int
    stats: dict[str, Any]                 # task -> its exact counters (the heartbeat's ``stats``)
    windows: dict[Any, Any]               # task -> {":all-time": rows}: the beat's all-time figures
                                          # (the readers add up all-time counts; the 10-minute,
                                          # 3-hour and day windows of a launch that is over are in
                                          # no page, and would triple what is kept)

    def to_json(self) -> dict[str, Any]:
        """The launch as a topology's record keeps it; `from_json` reads it back."""
        return {"slot": self.slot, "launch_id": self.launch_id,
                "stats": {str(t): st for t, st in self.stats.items()},
                "windows": {str(t): w for t, w in self.windows.items()}}

    @classmethod
    def from_json(cls, v: Any) -> EndedLaunch:
        """A launch as `to_json` wrote it, checked: the record is read from a file or a
        ZooKeeper node, and a reader adds these counts to what it shows.

        Raises:
            ValueError: what is wrong with it (its slot, launch id, or which task's figure).
        """
        problem = _launch_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return cls(v["slot"], v["launch_id"], v["stats"], v["windows"])


def _launch_problem(v: Any) -> str | None:
    """What is wrong with an ended launch as a record keeps it (`EndedLaunch.to_json`); None: nothing."""
    if not isinstance(v, dict):
        return "an ended launch is not a map"
    slot, launch = v.get("slot"), v.get("launch_id")
    host, sep, port = slot.rpartition(":") if isinstance(slot, str) else ("", "", "")
    if not (host and sep and _is_decimal(port)):
        return f"an ended launch's slot {slot!r} is not host:port"
    if not _is_count(launch):
        return f"the launch id {launch!r} of an ended launch of {slot} is not a whole number"
    stats, windows = v.get("stats"), v.get("windows")
    if not isinstance(stats, dict) or not isinstance(windows, dict):
        return f"launch {launch} of {slot}: its stats or windows are not maps"
    for task, st in stats.items():
        problem = _task_stats_problem(task, st)
        if problem:
            return f"launch {launch} of {slot}, task {task!r}: {problem}"
    # a row's count or latency below zero (a gauge's may be) would go into the UI history's totals
    for task, w in windows.items():
        if not _is_decimal(str(task)) or not isinstance(w, dict) or set(w) - {ALL_TIME} \
                or not isinstance(w.get(ALL_TIME, []), list) or not all(
                isinstance(r, list) and len(r) == 4 and all(isinstance(x, str) for x in r[:3])
                and _is_number(r[3]) and (r[3] >= 0 or r[0] in GAUGES) for r in w.get(ALL_TIME, [])):
            return f"launch {launch} of {slot}, task {task!r}: its all-time rows are malformed"
    return None


_COUNTS = ("acked", "failed", "executed", "backlog")
_BY_STREAM = ("emitted", "transferred")


def _is_decimal(s: str) -> bool:
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses: every info and page
    # of the topology then failed with a bare ValueError) and "٣" (which int() reads as 3)
    return s.isascii() and s.isdigit()


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _task_stats_problem(task: Any, st: Any) -> str | None:
    """What is wrong with one task's counters (`squall.engine.worker.Worker.statistics`) as an
    ended launch keeps them (None: nothing). The figures readers add up must be counts: a
    negative or fractional one, or a string, would be added to a user's totals."""
    if not _is_decimal(str(task)) or not isinstance(st, dict):
        return "not a task id with a map of counters"
    for key in _COUNTS:
        if key in st and not _is_count(st[key]):
            return f"{key} is {st[key]!r}, not a count"
    for key in _BY_STREAM:
        by = st.get(key, {})
        if not isinstance(by, dict) or not all(isinstance(s, str) and _is_count(n) for s, n in by.items()):
            return f"{key} is not a count per stream"
    for key in ("complete_latency_sum", "complete_latency_count"):
        if key in st and not _is_number(st[key]):
            return f"{key} is {st[key]!r}, not a number"
    dead = st.get("dead_lettered") or []
    if not isinstance(dead, list) or not all(isinstance(d, list) and len(d) == 3 and isinstance(d[1], str)
                                             and (d[0] is None or isinstance(d[0], str)) and _is_count(d[2])
                                             for d in dead):
        return "dead_lettered is not a list of [component, reason, count]"
    return None


def ended_launch(slot: str, launch_id: int, stats: dict[Any, Any], windows: dict[Any, Any]) -> EndedLaunch:
    """The `EndedLaunch` of a heartbeat's ``stats`` and ``windows``: the windows' all-time rows only."""
    all_time = {t: {ALL_TIME: w[ALL_TIME]} for t, w in windows.items() if isinstance(w, dict) and ALL_TIME in w}
    return EndedLaunch(slot, launch_id, stats, all_time)


def kept_ended(ended: list[EndedLaunch]) -> list[dict[str, Any]]:
    """The newest of ``ended`` (oldest first) whose JSON fits in `MAX_KEPT_ENDED_CHARS`, as a
    topology's record keeps them."""
    out: list[dict[str, Any]] = []
    size = 0
    for e in reversed(ended):
        j = e.to_json()
        size += len(json.dumps(j))
        if size > MAX_KEPT_ENDED_CHARS:
            break
        out.append(j)
    return out[::-1]


def ended_from_json(raw: Any) -> list[EndedLaunch]:
    """A topology record's ended launches (`kept_ended`), oldest first; none kept: empty.

    Raises:
        ValueError: what is wrong with them (the first problem found).
    """
    if raw is None:
        return []
    launches = raw if isinstance(raw, list) else None
    if launches is None:
        raise ValueError("the ended launches are not a list")
    return [EndedLaunch.from_json(v) for v in launches][-MAX_ENDED_LAUNCHES:]


@dataclass(slots=True)
class SlotState:
    """What the master knows of one slot ("host:port") of one topology.

    A record lives while its slot is in the topology's assignment (`TopologyRecord.trim_slots` drops it
    when the slot leaves): a slot rebalanced away and back must get a launch id above every
    earlier one, since peers remember each launch's last sequence numbers and would drop a
    reused launch's messages as replayed, and its topology's ``launch_floor``, at least every
    dropped record's launch id, is where a new record's launch ids start. Only ``launch_id``,
    ``failed_starts``, ``given_up``, ``restarts`` and ``errors_kept`` are persisted; the rest is
    learnt again from the workers.
    """

    # --- persisted
    launch_id: int | None = None     # the launch its worker must carry (None: never launched);
                                     # a new one restarts the worker (`TopologyRecord.relaunch`)
    failed_starts: int = 0           # launches in a row that exited before they said they started
    given_up: bool = False           # ``squall.worker.max.launch.attempts`` failed starts: not started again
    restarts: int = 0                # new launches after its worker died (info's ``restarts``): kept, so
                                     # that a restarted master or a new leader does not count from 0
    errors_kept: tuple[int, int] | None = None  # (launch, number) of the last error batch kept: its
                                     # worker sends one again when its beat got no reply, and a
                                     # master that did keep it (before a restart, or the leader
                                     # whose write to ZooKeeper failed) must not count it twice
    # --- learnt from workers and supervisors
    heartbeat: LastBeat | None = None
    ready: bool = False              # heard from since its executors were assigned (spouts wait for all)
    address: str | None = None       # the data address its current launch reported ("tcp://host:port")
    held_launch: int | None = None   # the launch whose address peers may have: its death may lose tuples
    started_launch: int | None = None  # the launch that said its executors opened, and when
    started_at: float | None = None
    reported_launch: int | None = None  # the launch that reported errors (so its exit needs no error of its own)
    fatal_launch: int | None = None  # the launch that reported a fatal error (its exit is a crash)
    retry_at: float = 0.0            # after a failed start or repeated crashes: not started before this
                                     # (master's monotonic time, as is ``started_at``)
    crashes: int = 0                 # crashes in a row, each soon after its start (`crash_backoff`)

    def to_json(self) -> dict[str, Any]:
        """The persisted fields, for ``state.json``."""
        return {"launch_id": self.launch_id, "failed_starts": self.failed_starts, "given_up": self.given_up,
                "restarts": self.restarts,
                "errors_kept": list(self.errors_kept) if self.errors_kept is not None else None}


def slots_from_json(topology: dict[str, Any]) -> dict[str, SlotState]:
    """The slot records of one topology of ``state.json``: its ``slots`` map, or, written by a
    master before it had one, its ``launch_ids``, ``launch_failures`` and ``given_up``."""
    if "slots" in topology:
        return {slot: SlotState(s.get("launch_id"), int(s.get("failed_starts", 0)), bool(s.get("given_up")),
                                int(s.get("restarts", 0)),  # 0 from a master before it was kept
                                _errors_kept(s.get("errors_kept")))
                for slot, s in topology["slots"].items()}
    slots: dict[str, SlotState] = {}
    for slot, launch in topology.get("launch_ids", {}).items():
        slots.setdefault(slot, SlotState()).launch_id = launch
    for slot, failures in topology.get("launch_failures", {}).items():
        slots.setdefault(slot, SlotState()).failed_starts = failures
    for slot in topology.get("given_up", []):
        slots.setdefault(slot, SlotState()).given_up = True
    return slots


def _errors_kept(value: Any) -> tuple[int, int] | None:
    """`SlotState.errors_kept` as `SlotState.to_json` wrote it (None: none, or a state before it)."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value[0], value[1]
    return None


@dataclass(frozen=True, slots=True)
class PendingAction:
    """What happens to a topology once its kill or rebalance wait is over (persisted: the wait
    outlives a restart of the master)."""

    kind: str                        # REMOVE_ACTION or REBALANCE_ACTION
    due: float                       # master's wall time the wait ends
    num_workers: int | None = None   # a rebalance's new ``topology.workers`` (None: unchanged)
    executors: dict[str, int] = field(default_factory=dict)  # a rebalance's component -> executors

    def to_json(self) -> dict[str, Any]:
        """For ``state.json``."""
        return {"kind": self.kind, "due": self.due, "num_workers": self.num_workers, "executors": self.executors}

    @classmethod
    def from_json(cls, data: Any) -> PendingAction | None:
        """Read back `to_json`'s map, or the ``[kind, due, args]`` list an older master wrote."""
        if not data:
            return None
        if isinstance(data, dict):
            return cls(data["kind"], float(data["due"]), data.get("num_workers"), dict(data.get("executors") or {}))
        kind, due, args = data
        return cls(kind, float(due), args.get("num_workers"), dict(args.get("executors") or {}))


@dataclass(slots=True)
class SupervisorInfo:
    """A supervisor the master has heard from (Storm's ``SupervisorInfo``); not persisted, since
    every supervisor syncs each second."""

    host: str
    ports: list[int]                 # its slots' ports
    seen: float                      # master's monotonic time (`Master.mono`) of its last sync
    since: float | None = None       # master's wall time of its first sync under this id (its uptime)
    unhealthy: str | None = None     # why its health checks fail (None: they pass), as it last said
    heard: bool = True               # False: known from the store only (Nimbus HA), not heard by this master

    def slots(self) -> set[str]:
        """Its slots, as the assignment names them."""
        return {f"{self.host}:{p}" for p in self.ports}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one stimulus made of the master (a verb, a monitor tick, a new leader): the ``reply``
    its caller gets, and the ``changes`` its store must keep (`squall.cluster.store`), in order,
    before that reply goes out (`squall.cluster.server.Keeper`). The master does no I/O: it
    hands these over, and whoever serves it keeps them.

    ``submitted``: the name of a topology this stimulus started. If the store cannot keep the
    changes, that topology is dropped again (`Master.unkept`): not kept, so not run."""

    reply: Any = None
    changes: tuple[Change, ...] = ()
    submitted: str | None = None


@dataclass(frozen=True, slots=True)
class Planned:
    """A submission planned and its plan handed to the store, not started yet (Nimbus HA waits
    here for the code to reach other masters): `Master.start` starts it, `Master.abandon` drops it."""

    plan: TopologyPlan
    status: TopologyStatus  # what it starts as
    code: str | None  # its plan's digest (None in memory)
