"""What spout, bolt and acker executors share: per-task statistics, error records, wiring.

An executor runs one component's tasks (a contiguous range) on one `ExecutorLoop`. It is driven
by its loop only: ``open`` once the topology is first active, ``drain`` to process its inboxes,
``timers`` for ticks and timeouts, ``close`` on a clean shutdown.
"""

from __future__ import annotations

import gc
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._config import Config, conf_value
from .._error_lines import cause_line, error_traceback, exception_text, first_and_last
from .._native import TaskStatsBase
from .._redact import shown_text
from .plan import ExecutorSpec, TopologyPlan
from .stats import DEAD_LETTERED, TaskStatistics, component_figures, sample_freq

if TYPE_CHECKING:
    from .load_mapping import LoadMapping
    from .stateful_progress import StatefulInput

log = logging.getLogger("squall.engine")
debug_log = logging.getLogger("squall.debug")


MAX_ERROR_CHARS = 10_000
"""The longest `ErrorRecord.error` kept (its exception's type and message): longer is cut."""

MAX_TRACEBACK_CHARS = 100_000
"""The longest `ErrorRecord.traceback` kept: longer keeps its head (the frames) and its tail."""


CUT_MARGIN = 1_000
"""How far past each side of a cut `shown_cut` masks before it cuts."""


def shown_cut(text: str, limit: int) -> str:
    """``text`` as a record shows it (`shown_text`: credentials masked) in at most ``limit``
    characters: longer, its head and its tail around a note of how long it was.

    Masked before it is cut, as `squall._failure.shown_values` is, but only around what it keeps,
    so that a 20 MB text costs what a short one does: cut first, a cut between ``password=`` and
    its value left the whole value in the tail, and one through ``redis://u:hunter2@db`` left
    ``redis://u:hunte`` in the head, neither of which masking recognised any more. And at most
    ``limit`` characters, note included, so that cutting it again changes nothing: the master
    makes each worker's record again (`ErrorRecord.from_dict`), and a restarted master each
    saved one, whose note then said the length of the first cut instead of the text's."""
    if len(text) <= limit:
        shown = shown_text(text)
        if len(shown) <= limit:
            return shown
        text = shown  # grown by its masks (a short secret gets all of MASK)
    note = f" ... ({len(text)} characters, cut) ... "
    # a few characters spare: masking the result again may complete a mask the cut went through
    half = max(0, (limit - len(note) - 8) // 2)
    head = shown_text(text[:half + CUT_MARGIN])[:half]
    tail = shown_text(text[-(half + CUT_MARGIN):])[-half:] if half else ""
    return f"{head}{note}{tail}"


@dataclass
class ErrorRecord:
    """An error reported by, or escaping from, a task's user code.

    ``count`` is how many times its component reported it (`add_error` folds an identical
    repeat into the component's record of it, other errors between or not), ``time`` when it
    first did and ``last_time`` when it last did. ``host`` and ``worker`` (its port) name the worker, whose log
    `squall.cluster.logs.worker_log_link` links to (Storm's ``errorHost``/``errorPort``).
    """

    component: str
    task: int
    time: float
    error: str
    traceback: str
    worker: int = 0
    fatal: bool = False
    count: int = 1
    last_time: float = -1.0  # -1: the same as ``time``
    host: str = ""  # the worker's host, set by the master from the reporting slot ("": unknown)

    def __post_init__(self) -> None:
        # every record is shown (UI, REST, squall info) and saved: a user's exception naming a
        # URL with its password is masked here, once, whichever way the record was made; cut
        # too (`shown_cut`), so that a record costs the same whatever its exception quotes (a bolt raising
        # ValueError(f"bad record {record!r}") on a 20 MB record: its worker, on the process
        # host, missed its heartbeats sending and masking the 40 MB record, and was restarted)
        self.error = shown_cut(self.error, MAX_ERROR_CHARS)
        self.traceback = shown_cut(self.traceback, MAX_TRACEBACK_CHARS)
        self.last_time = max(self.last_time, self.time)

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form, as `get_topology_info` returns it."""
        return {"component": self.component, "task": self.task, "time": self.time, "error": self.error,
                "traceback": self.traceback, "worker": self.worker, "fatal": self.fatal,
                "count": self.count, "last_time": self.last_time, "host": self.host}

    @classmethod
    def from_dict(cls, d: Any) -> ErrorRecord:
        """The record whose `as_dict` form is ``d`` (a worker's report, a state file); a field
        that is missing or of the wrong type gets a neutral value, never an exception."""
        d = d if isinstance(d, dict) else {"error": repr(d)}

        def get(key: str, kind: type, default: Any) -> Any:
            try:
                v = d.get(key, default)
                return default if v is None or isinstance(v, (dict, list)) else kind(v)
            except (TypeError, ValueError, OverflowError):
                return default
        when = get("time", float, 0.0)
        return cls(get("component", str, "?"), get("task", int, -1), when, get("error", str, ""),
                   get("traceback", str, ""), get("worker", int, 0), d.get("fatal") is True,
                   max(1, get("count", int, 1)), get("last_time", float, when), get("host", str, ""))

    def describe(self) -> str:
        """``squall list``'s last error: a summary line, ``[component]``, the error's first line
        and ``(xN)`` if it repeated; then, on a line of its own, the line that says what went
        wrong, when another does (`first_and_last`: a shell subprocess's error, whose first line
        says only that it exited, ends with the exception its stderr ended with, named as its
        stderr's: `cause_line`). The two were joined by " ... ", which read as one sentence."""
        first, last = first_and_last(self.error)
        first = first or "(no message)"
        # an error that names its component first already (the watchdog's "[slow] task 7 has
        # been in one call ...", state's "component [count] task 3: ...") is not named again:
        # "[slow] [slow] task 7 ..."
        named = f"[{self.component}]"
        said = first.startswith((named + " ", f"component {named} "))
        line = f"{'' if said else named + ' '}{first}{f' (x{self.count})' if self.count > 1 else ''}"
        return f"{line}\n{cause_line(self.error, last)}" if last else line


MAX_ERRORS_PER_COMPONENT = 10  # as Storm's cluster state keeps: the newest 10 of each component


def add_error(errors: list[ErrorRecord], record: ErrorRecord) -> ErrorRecord:
    """Add ``record`` to ``errors`` (oldest first), or fold it into the record of its component
    that says the same (the task and time aside) and is as fatal: a worker that crashes on the same value each
    time it restarts, or a bolt that reports the same failure for every tuple, makes one record
    with a count, not a list that pushes every other error out, also when other errors come
    between the repeats (a stalled Trident batch's attempts with a store's timeouts between
    them). The record that holds it moves to the end, so the list stays in the order of each
    error's last time; returns it. Each component keeps its newest `MAX_ERRORS_PER_COMPONENT`
    records, on every host. A crash of the worker folds only into a crash, so that a fatal
    record's count is how many times the worker died of it (a report of the same text that the
    worker lived through keeps a record of its own)."""
    for i in range(len(errors) - 1, -1, -1):
        last = errors[i]
        if last.component != record.component or last.error != record.error or last.fatal != record.fatal:
            continue
        last.count += record.count
        last.last_time = max(last.last_time, record.last_time)
        last.traceback = record.traceback or last.traceback
        del errors[i]
        errors.append(last)
        return last
    errors.append(record)
    mine = [i for i, e in enumerate(errors) if e.component == record.component]
    for i in reversed(mine[:-MAX_ERRORS_PER_COMPONENT]):
        del errors[i]
    return record


def error_record(component: str, task: int, error: BaseException | str, worker: int = 0,
                 fatal: bool = False, now: float | None = None) -> ErrorRecord:
    """An `ErrorRecord` for ``error`` (an exception keeps its traceback)."""
    if isinstance(error, BaseException):
        text = exception_text(error)
        tb = error_traceback(error)  # a shell subprocess's death: its own words, not squall's frames
    else:
        text = str(error)
        tb = ""
    return ErrorRecord(component, task, time.time() if now is None else now, text, tb, worker, fatal)


class ErrorThrottle:
    """Storm's error-report throttle (``ReportError``): at most ``limit`` reports in each
    ``interval`` seconds (``topology.max.error.report.per.interval`` per
    ``topology.error.throttle.interval.secs``); time is passed in. Thread-safe: a bolt may
    report from its own threads.

    The reports it refuses make no record, but they happened: it counts them (`take_refused`),
    so that the topology's error count (``squall list``) says how many errors there were, not
    how many got through."""

    __slots__ = ("_count", "_lock", "_refused", "_start", "interval", "limit")

    def __init__(self, interval: float, limit: int) -> None:
        self.interval = interval
        self.limit = limit
        self._start = float("-inf")
        self._count = 0
        self._refused = 0
        self._lock = threading.Lock()

    def allow(self, now: float) -> bool:
        """Whether a report at ``now`` may go out (and count it if so)."""
        with self._lock:
            if now - self._start >= self.interval:
                self._start, self._count = now, 0
            if self._count >= self.limit:
                self._refused += 1
                return False
            self._count += 1
            return True

    def take_refused(self) -> int:
        """The reports refused since the last call (the worker's heartbeat takes them)."""
        with self._lock:
            n, self._refused = self._refused, 0
            return n


class TaskStats(TaskStatsBase):
    """Counters of one task. Per-stream emitted/transferred counts live in its routers."""

    __slots__ = ()  # TaskStatsBase holds them (squall._native): the compiled paths add to them in C

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.executed = 0
        self.latency_sum = 0.0
        self.latency_count = 0


@dataclass
class Wiring:
    """What the executors of one loop are handed by their worker.

    ``deliver`` maps every task id of the topology to a function that puts an item in that
    task's inbox: a bare ``deque.append`` for tasks on the same loop, a function that also wakes
    the other loop, or the transport's sender for tasks in other workers.
    """

    plan: TopologyPlan
    deliver: dict[int, Callable[[Any], None]]
    clock: Any
    state: Any                      # TopologyActivation: active flag shared by the topology's loops
    backpressure: Any               # Backpressure: throttles spouts when inboxes overflow
    report_error: Callable[[ErrorRecord], None]
    worker_port: int
    worker_tasks: list[int]
    seed: int
    inboxes: dict[int, deque]       # the worker's inbox of each local task
    loop: Any = None                # the ExecutorLoop, set when executors are placed on it
    loads: LoadMapping | None = None  # every task's load, if this worker's shuffles are load-aware
    ackers: list[Callable[[Any], None]] = field(default_factory=list)
    tracker: Any = None             # this worker's WorkerCounts of a tracked topology (squall.engine.tracking), or None
    executing: Any = None           # a bolt executor's line on the worker's board (squall.engine.executing), or None
    reach: Any = None               # the PeerReach of the worker's wire (squall.engine.transport), or None
    # the data inputs the stateful bolts executed so far on the inputs named, over their tasks
    # in this worker and the others, else None if one is not known (`Worker.executed_by`);
    # None: the worker cannot tell
    executed_by: Callable[[Sequence[StatefulInput]], int | None] | None = None

    def __post_init__(self) -> None:
        self.ackers = [self.deliver[t] for t in self.plan.acker_tasks]


def unshare_dict(obj: Any) -> Any:
    """Give an unpickled component an instance dict of its own keys, in place of the one that
    unpickling left it (its attributes, values and identity are the same).

    Unpickling sets a component's state through its ``__dict__``, which makes CPython (3.11)
    turn the instance's inline values into a dict that shares its keys with the class (a split
    table). CPython never specialises an attribute read on such an instance: every
    ``self.x`` in ``next_tuple`` or ``execute`` went the generic way (``dis(..., adaptive=True)``
    after a run showed ``LOAD_ATTR_ADAPTIVE``), where a dict of its own is read through
    ``LOAD_ATTR_WITH_HINT``. Called before ``open``/``prepare``, when no user code can hold
    the old dict (the worker calls it on each component it unpickles; returns ``obj``); an object
    without a plain ``__dict__`` is left as it is, and so is one whose
    attributes are still its own inline values (unpickled with no state: W1's bolts), which
    CPython reads fastest (``LOAD_ATTR_INSTANCE_VALUE``) and which reading ``__dict__`` would
    turn into a dict.
    """
    if not any(type(r) is dict for r in gc.get_referents(obj)):
        return obj  # no dict made yet (a dict among its values would only cost the copy below)
    d = getattr(obj, "__dict__", None)
    if type(d) is dict:
        try:
            obj.__dict__ = dict(d)  # a new dict's keys are its own
        except (AttributeError, TypeError):  # a class that does not let its __dict__ be set
            pass
    return obj


class Executor:
    """Base of the three executors: tasks, inboxes, stats and the contract with the loop."""

    kind = "?"

    def __init__(self, spec: ExecutorSpec, wiring: Wiring) -> None:
        self.spec = spec
        self.component = spec.component
        self.task_ids = list(spec.tasks)
        self.wiring = wiring
        self.inboxes: dict[int, deque] = {t: wiring.inboxes[t] for t in self.task_ids}
        self.stats: dict[int, TaskStats] = {t: TaskStats() for t in self.task_ids}
        # Storm's sampled statistics (exact counters above are for the engine's own use)
        freq = sample_freq(wiring.plan.conf) if conf_value(wiring.plan.conf, Config.TOPOLOGY_STATS_ENABLED) else 0
        self.sampled: dict[int, TaskStatistics] = {
            t: TaskStatistics(freq, random.Random((wiring.seed << 8) ^ t), self.kind == "spout") for t in self.task_ids}
        self.current_task = self.task_ids[0]  # the task whose user code is running (for crashes)
        self.resets = 0  # its tasks' reset_timeout calls: a long call making them is not stuck (Worker.report_stuck)
        self.opened = False
        # the loop's entries for `timers`, [due, period, callback, executor]: made once, they move
        # with the executor if the watchdog moves it to another loop (ExecutorLoop.take_over)
        self.schedule: list[list] | None = None
        # Storm's ReportError, one per executor: every error its tasks report (the collectors'
        # report_error, an exception escaping execute) counts against it
        conf = wiring.plan.conf
        self.error_throttle = ErrorThrottle(float(conf_value(conf, Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS)),
                                            int(conf_value(conf, Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL)))

    def report_error(self, task: int, error: BaseException | str,
                     what: str = "reported an error") -> ErrorRecord | None:
        """Report ``error`` of ``task`` (shown in the topology's errors, and in the worker's log
        with its traceback, as Storm's ``ReportError`` logs each) unless this executor has
        reported ``topology.max.error.report.per.interval`` errors already in this
        ``topology.error.throttle.interval.secs``, as Storm throttles every report (the log too
        here, so that a bolt reporting an error a tuple cannot fill the disk); returns the record
        reported, or None. ``what`` says in the log what happened. Any thread may call this."""
        w = self.wiring
        if not self.error_throttle.allow(w.clock.now()):
            return None
        record = error_record(self.component, task, error, w.worker_port)
        w.report_error(record)
        log.error("[%s] task %s %s:\n%s", self.component, task, what, record.traceback or record.error)
        return record

    def open(self) -> None:
        """Run the user's open/prepare for every task (called on the loop's thread)."""
        self.opened = True

    def drain(self, limit: int) -> int:
        """Process up to ``limit`` items per task; return how many were processed."""
        return 0

    def timers(self) -> list[tuple[float, Callable[[], None]]]:
        """``(period_secs, callback)`` pairs the loop calls periodically."""
        return []

    def backlog(self) -> int:
        """Items waiting in this executor's inboxes."""
        return sum(map(len, self.inboxes.values()))

    def close(self) -> None:
        """Run the user's close/cleanup (clean shutdown only)."""

    def emitted_by_stream(self, task: int) -> dict[str, tuple[int, int]]:
        """``{stream: (emitted, transferred)}`` for ``task``."""
        return {}

    def dead_letters(self, task: int) -> list[list[Any]]:
        """``task``'s dead letters by who failed each record last and why, ``[[component or "",
        reason, count], ...]``: a spout's, and a bolt's that gives records up itself (a Trident
        spout's emitter bolt: `squall.trident.coordinator.SpoutEmitterBody`). Read on the
        heartbeat thread from what the component counts (``component_statistics``), nothing
        counted here."""
        objs = getattr(self, "objs", None)  # an acker has no user component
        if objs is None:
            return []
        return [[component, reason, int(n)] for (metric, component, reason), n
                in component_figures(objs[task]).items() if metric == DEAD_LETTERED]

    def sampled_snapshot(self, task: int) -> dict:
        """``task``'s cumulative statistics (`TaskStatistics.snapshot`)."""
        by_stream = self.emitted_by_stream(task)
        return self.sampled[task].snapshot({s: v[0] for s, v in by_stream.items()},
                                           {s: v[1] for s, v in by_stream.items()})
