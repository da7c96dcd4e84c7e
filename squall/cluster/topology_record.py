"""`TopologyRecord`: what the master (`squall.cluster.master`) keeps about one topology.

Its plan and status, the scheduler's assignment (slot -> executor indexes), a record per slot it
holds (`SlotState`: launch ids, restarts, the last heartbeat), its errors, its pending kill or
rebalance, the UI's debug switches and its log levels: Storm's ``StormBase`` and
``Assignment`` in one object. Its methods are the bookkeeping of one topology's launches: a
slot relaunched, retired with its machine, or dropped from the assignment; a death told to the
other workers (`WorkerLost`); a worker's data address. They change this record only: the master
decides when, and keeps the changes (`to_json`, `from_json`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._nimbus import LogConfig, LogLevel, WorkerLost, decode, encode
from ..engine.executor import ErrorRecord, add_error
from ..engine.plan import TopologyPlan
from ..worker.log_levels import config_digest
from .master_records import (
    MAX_ENDED_LAUNCHES,
    EndedLaunch,
    LastBeat,
    PendingAction,
    SlotState,
    ended_from_json,
    ended_launch,
    kept_ended,
    slots_from_json,
)
from .state import TopologyStatus

MAX_LOST = 100  # deaths a topology remembers for workers that have not heard yet


class TopologyRecord:
    """What the master keeps about one topology (persisted, except what `SlotState` says is not)."""

    def __init__(self, plan: TopologyPlan, status: TopologyStatus, launched: float) -> None:
        self.plan = plan
        self.status = status
        self.previous: TopologyStatus | None = None
        self.launched = launched
        # slot "host:port" -> executor indexes in plan: the scheduler's output, replaced whole
        self.assignment: dict[str, list[int]] = {}
        # the records of the slots it holds (and of a slot a worker exit or a relaunch is being
        # told of): a slot that leaves the assignment loses its record (`trim_slots`), so that
        # machines that come and go over days do not grow the master's state, its saved state
        # and every worker's launch table without bound
        self.slots: dict[str, SlotState] = {}
        # at least every launch id of a record dropped (`trim_slots`): a new record's first
        # launch is above it, and workers take it for the launch of every slot their table does
        # not name, so a worker still running on a dropped slot (cut off from the master when
        # its machine was taken for lost) stays a replaced launch for its peers
        self.launch_floor = 0
        self.errors: list[ErrorRecord] = []
        # every error that happened, which ``errors`` (each component's newest records, a repeat
        # folded into its record's count) undercounts: a bolt reporting 5,000 different errors
        # keeps 10 records; and the reports its executor's throttle refused make none
        self.errors_happened = 0
        self.pending_action: PendingAction | None = None
        # component id (the storm id for the whole topology) -> {"enable", "samplingpct"}: the
        # UI's debug switch, as Storm's StormBase ``component->debug`` (see `Master.op_debug`)
        self.debug: dict[str, dict[str, Any]] = {}
        # logger -> its level in every worker (Storm's topology log config, `Master.op_set_log_config`)
        self.log_config: dict[str, LogLevel] = {}
        # counts changes of the slots' data addresses (on Spark one is known only once the task
        # runs, and changes when the task restarts elsewhere): workers fetch the table only anew
        self.addresses_version = 0
        # the deaths workers are told of in their heartbeat replies (`WorkerLost`)
        self.lost: list[WorkerLost] = []
        self.lost_generation = 0
        # the last word of the launches that ended, oldest first (`EndedLaunch`): kept with the
        # record (the newest that fit, `kept_ended`), so a restarted master or a new leader has them
        self.ended: list[EndedLaunch] = []
        self.code: str | None = None  # the digest of its sealed plan file (Nimbus HA: `squall.cluster.ha`)

    def slot(self, slot: str) -> SlotState:
        """The record of ``slot``, a new one if the master knows nothing of it yet."""
        state = self.slots.get(slot)
        if state is None:
            state = self.slots[slot] = SlotState()
        return state

    @property
    def launch_ids(self) -> dict[str, int]:
        """Slot -> the launch id its worker must carry, for every slot with a record: the table
        workers drop replaced launches' messages by (with `launch_floor` for the others)."""
        return {slot: s.launch_id for slot, s in self.slots.items() if s.launch_id is not None}

    def trim_slots(self) -> None:
        """Drop the records of the slots outside the assignment, raising `launch_floor` to their
        launch ids: a slot that comes back gets a launch above every one it had (peers remember
        each launch's last sequence numbers), and the peers drop what a dropped slot's old
        launch still sends, as they did while its record was kept."""
        for slot in [s for s in self.slots if s not in self.assignment]:
            self.end_launch(slot)
            launch = self.slots.pop(slot).launch_id
            if launch is not None and launch > self.launch_floor:
                self.launch_floor = launch

    def end_launch(self, slot: str) -> None:
        """``slot``'s current launch is over (dead, or replaced): keep its last heartbeat's
        counters as an `EndedLaunch` (readers that add up launches take its rest from it), and
        drop them from the slot, whose next launch counts from zero."""
        state = self.slots.get(slot)
        hb = state.heartbeat if state is not None else None
        if state is None or hb is None or state.launch_id is None or not (hb.stats or hb.windows):
            return
        self.ended.append(ended_launch(slot, state.launch_id, hb.stats, hb.windows))
        del self.ended[:-MAX_ENDED_LAUNCHES]
        state.heartbeat = dataclasses.replace(hb, stats={}, windows={})

    def note_lost(self, slot: str, now: float, executing: tuple[tuple[int, int], ...] = (), how: str = "") -> None:
        """``slot``'s current launch died (the master learned it at wall time ``now``): tell the other workers (`WorkerLost`), if it may have
        held tuples. One that died before it reported its data address was sent none (one that
        failed in ``prepare`` had reported it): a slot that keeps dying that early must not make
        the spouts fail their whole pending set each time. ``executing``: ``(task, root)`` of
        the inputs its bolts were executing when it died (its host's word, from what the dead
        worker wrote: only a root of 64 bits on a bolt task of the slot, one per bolt executor,
        is passed on), ``how`` it ended."""
        idx = self.assignment.get(slot)
        if idx is None or self.slot(slot).held_launch != self.slot(slot).launch_id:
            return
        self.lost_generation += 1
        tasks = [t for i in idx for t in self.plan.executors[i].tasks]
        bolt_ids = self.plan.topology.bolts
        bolts = [self.plan.executors[i] for i in idx if self.plan.executors[i].component in bolt_ids]
        bolt_tasks = {t for e in bolts for t in e.tasks}
        named = tuple((t, r) for t, r in executing
                      if type(t) is int and type(r) is int and t in bolt_tasks and 0 < r < 1 << 64)[:len(bolts)]
        self.lost.append(WorkerLost(self.lost_generation, slot, tasks, now, named, how if named else "",
                                    self.slot(slot).launch_id or 0))
        del self.lost[:-MAX_LOST]

    def retire(self, slot: str) -> None:
        """``slot``'s machine is lost to the master, its executors about to move: its launch is
        replaced with none, so that a worker still running there, cut off from the master only,
        has what it still sends dropped by its peers (``stale_launch``) rather than taken beside
        its executors' new copies (two copies of a spout emitting at once)."""
        self.end_launch(slot)  # its figures are the old launch's: never the new one's
        state = self.slot(slot)
        if state.launch_id is not None:
            state.launch_id += 1
        self.note_address(slot, None)
        self.addresses_version += 1  # the peers fetch the launch table again

    def relaunch(self, slot: str, wall: float, mono: float, died: bool = True,
                 executing: tuple[tuple[int, int], ...] = (), how: str = "") -> None:
        """Give ``slot`` a new launch id, which its supervisor obeys by (re)starting its worker;
        peers tell the new launch's messages from the old one's by it. ``died``: the old launch
        is dead (not replaced on purpose), so the spouts are told what it may have held (at
        wall time ``wall``; ``executing`` and ``how``: `note_lost`'s); the new launch's start
        timeout runs from ``mono`` (`Master.mono`)."""
        if died:
            self.note_lost(slot, wall, executing, how)
        state = self.slot(slot)
        if died:
            state.restarts += 1
        self.end_launch(slot)
        state.launch_id = (state.launch_id or self.launch_floor) + 1
        state.heartbeat = LastBeat.launched(mono)
        self.note_address(slot, None)

    def lost_since(self, generation: int) -> tuple[WorkerLost, ...]:
        """The deaths a worker that knows up to ``generation`` has not heard of. A generation
        ahead of ours is from before this master restarted: all we know is new to it."""
        if generation > self.lost_generation:
            generation = 0
        return tuple(lost for lost in self.lost if lost.generation > generation)

    def note_address(self, slot: str, address: str | None) -> None:
        """``slot``'s current launch reported its data address (None: it is restarting)."""
        state = self.slot(slot)
        if address and state.launch_id is not None:
            state.held_launch = state.launch_id  # from now on peers may send to it
        if state.address != address:
            state.address = address or None
            self.addresses_version += 1

    def peers(self) -> dict[int, str | None]:
        """Task -> the data address of the worker running it (None: not reported yet)."""
        out: dict[int, str | None] = {}
        for slot, idx in self.assignment.items():
            addr = self.slot(slot).address
            for i in idx:
                for t in self.plan.executors[i].tasks:
                    out[t] = addr
        return out

    def components_on(self, slot: str) -> list[str]:
        """The components of the executors ``slot`` runs, sorted (none: not assigned)."""
        return sorted({self.plan.executors[i].component for i in self.assignment.get(slot, ())})

    def bolt_tasks(self, slot: str) -> dict[int, str]:
        """Task -> its bolt, for the bolt tasks ``slot`` runs (none: not assigned)."""
        return {t: e.component for i in self.assignment.get(slot, ()) for e in [self.plan.executors[i]]
                if e.component in self.plan.topology.bolts for t in e.tasks}

    def add_error(self, record: ErrorRecord) -> None:
        """Keep ``record`` (`squall.engine.executor.add_error`) and count the errors it tells of."""
        add_error(self.errors, record)
        self.errors_happened += record.count

    def given_up(self) -> list[str]:
        """The slots given up after too many failed starts."""
        return sorted(slot for slot, s in self.slots.items() if s.given_up)

    def to_json(self) -> dict[str, Any]:
        """The record ``state.json`` (or ZooKeeper, with Nimbus HA) keeps: all but what
        `SlotState` says is not persisted; `from_json` reads it back."""
        return {"status": self.status.value, "previous": self.previous.value if self.previous else None,
                "launched": self.launched, "assignment": self.assignment,
                "slots": {slot: s.to_json() for slot, s in self.slots.items()},
                "launch_floor": self.launch_floor,
                "errors": [e.as_dict() for e in self.errors], "errors_happened": self.errors_happened,
                "pending_action": self.pending_action.to_json() if self.pending_action else None,
                "debug": self.debug, "code": self.code,
                # the readers that add up launches (`squall monitor`, the UI's history) take a dead
                # launch's rest from its last word: a master that restarts before their next poll
                # must still have it (`EndedLaunch`)
                "ended": kept_ended(self.ended),
                # a rebalance changes these, never the code (Storm's StormBase holds them too): a
                # follower that holds the submitted code can lead after a rebalance
                "num_workers": self.plan.num_workers, "parallelism": dict(self.plan.parallelism),
                "log_config": {name: encode(level) for name, level in self.log_config.items()}}

    @classmethod
    def from_json(cls, plan: TopologyPlan, t: dict[str, Any], now: float) -> TopologyRecord:
        """A topology as `to_json` saved it, for a master that takes over its workers
        (restarted, or the new leader): they get the launch timeout to beat again, from ``now``
        (the master's monotonic time, `Master.mono`).

        Raises:
            KeyError, TypeError, ValueError: a malformed record.
        """
        topo = cls(plan, TopologyStatus(t["status"]), t["launched"])
        topo.previous = TopologyStatus(t["previous"]) if t.get("previous") else None
        topo.code = t.get("code") or None
        topo.assignment = t["assignment"]
        topo.slots = slots_from_json(t)
        topo.launch_floor = int(t.get("launch_floor") or 0)
        topo.trim_slots()  # a state an earlier squall saved kept every slot ever used
        topo.errors = [ErrorRecord.from_dict(e) for e in t.get("errors", [])]
        topo.ended = ended_from_json(t.get("ended"))  # checked by the master first (`Master._ended_checked`)
        kept = sum(e.count for e in topo.errors)  # a state saved before the count was kept: its records'
        happened = t.get("errors_happened")
        topo.errors_happened = max(kept, happened) if isinstance(happened, int) else kept
        topo.pending_action = PendingAction.from_json(t.get("pending_action"))
        topo.debug = {c: {"enable": bool(d.get("enable")), "samplingpct": int(d.get("samplingpct", 10))}
                      for c, d in (t.get("debug") or {}).items() if isinstance(d, dict)}
        topo.log_config = decode(LogConfig, {"named_logger_level": t.get("log_config") or {}},
                                 f"the log config of {plan.name}").named_logger_level
        # heartbeats are not persisted: give running workers the launch timeout to report
        for slot in topo.assignment:
            state = topo.slot(slot)
            state.heartbeat = LastBeat.launched(now)
            state.ready = True  # they were running: do not pause their spouts
        for state in topo.slots.values():
            state.held_launch = state.launch_id  # and their peers may have sent them tuples
        return topo

    def log_levels(self) -> tuple[LogConfig, str]:
        """Its `LogConfig` and that config's digest (what a worker's beat says it applied)."""
        config = LogConfig(dict(self.log_config))
        return config, config_digest(config)
