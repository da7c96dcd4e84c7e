"""What the master hands the statistics pages: one topology as read-only records (`TopologyView`),
and the seam the pages plug into (`StatisticsPages`).

The pages (Storm's topology, component and visualization JSON, `squall.ui.stats_pages`) read the
master; they are not the master. So the master only builds the view (`Master._view`) and serves
the read verbs ``topology_page``, ``component_page``, ``visualization``, ``visualization_init``
and ``statistics`` by calling the `StatisticsPages` its host gave it (``Master(pages=...)``; the
hosts find `squall.ui.stats_pages` by its name, `squall.cluster.served_ui.statistics_pages`), so
that the import points from the UI to the cluster, never back. A master given none (a bare
`Master` in a unit test) answers those verbs with a `NoPagesError` naming the verb.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from .._errors import SquallError
from ..engine.executor import ErrorRecord
from ..engine.plan import ExecutorSpec, TopologyPlan
from ..worker.stats_history import WINDOW_NAMES


class Stat(NamedTuple):
    """One windowed figure of one task: ``component`` is the input's source at bolts, "" for the
    task's own streams; latencies are averages in ms."""

    metric: str
    component: str
    stream: str
    value: float


@dataclass
class WorkerView:
    """What the master knows of one worker, for the pages."""

    host: str
    port: int
    supervisor_id: str
    executors: list[ExecutorSpec]
    uptime_secs: float = 0.0
    restarts: int = 0
    # the launch whose heartbeat ``windows`` come from (a relaunch drops the slot's heartbeat):
    # another one than at an earlier reading means its tasks count from zero again
    launch_id: int | None = None
    figures: dict[str, Any] | None = None
    # task -> window -> its figures (from the last heartbeat; empty before the first)
    windows: dict[int, dict[str, list[Stat]]] = field(default_factory=dict)


@dataclass
class TopologyView:
    """One topology as the pages need it."""

    plan: TopologyPlan
    status: str
    uptime_secs: float
    workers: list[WorkerView]
    errors: list[ErrorRecord]        # oldest first
    now: float                       # wall time, for errors' lapsed seconds
    debug: dict[str, Any] = field(default_factory=dict)   # component id or storm id -> {enable, samplingpct}
    # the launches that ended, oldest first, as their last heartbeat left them (the master's
    # `EndedLaunch`): in no page's figures, for readers that add up launches (the UI's history)
    ended: list[WorkerView] = field(default_factory=list)


def parse_windows(raw: Any) -> dict[int, dict[str, list[Stat]]]:
    """A heartbeat's ``windows`` as records; anything malformed (a worker's bytes are checked,
    but not trusted to be well formed) is left out rather than raised."""
    out: dict[int, dict[str, list[Stat]]] = {}
    if not isinstance(raw, dict):
        return out
    for task, windows in raw.items():
        try:
            t = int(task)
        except (TypeError, ValueError):
            continue
        if not isinstance(windows, dict):
            continue
        per: dict[str, list[Stat]] = {}
        for w, rows in windows.items():
            if w not in WINDOW_NAMES or not isinstance(rows, list):
                continue
            per[w] = [Stat(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows
                      if isinstance(r, (list, tuple)) and len(r) == 4 and isinstance(r[3], (int, float))]
        out[t] = per
    return out


def counted_since(count: int, before: int, restarted: bool) -> int:
    """What a task's all-time counter added since it read ``before``: all of ``count`` when its
    worker restarted since (``restarted``: another launch counted it) or when it went down (a
    restart not otherwise known, as Prometheus's ``rate()`` reads a counter reset), else the
    difference. `squall monitor`, `squall local` and the UI's history read a restart so."""
    return count if restarted or count < before else count - before


class LaunchCount(NamedTuple):
    """A task's all-time count of something in one worker launch, as the master last heard it:
    ``launch`` names the launch (its slot and launch id: slots number their own launches)."""

    launch: Hashable
    total: int


def counted_across(before: LaunchCount | None, launches: Sequence[LaunchCount]) -> tuple[int, LaunchCount | None]:
    """What a task counted since a reader read ``before``, and what the reader reads next time
    from: ``launches`` are the task's launches the master knows now, oldest first (those that
    ended, with their last heartbeat's count, then the current one if it reported).

    The launch read before, still current or ended since, adds what it counted after that
    reading (`counted_since`: all of it if the count went down); each later one adds its whole
    count. Only the current launch was read before this (the master dropped an ended launch's
    figures at once): what the dead one counted between a poll and its last heartbeat was lost,
    though the master had heard it. A launch read before that the master no longer keeps (more
    than 64 ended since, or, after a restart, it did not fit its kept record's 256 KiB) leaves
    the later ones' order unknown: the current
    launch is counted whole, as before. A task new to the reader counts its current launch."""
    if not launches:
        return 0, before
    newest = launches[-1]
    if before is None:
        return newest.total, newest
    at = next((i for i in range(len(launches) - 1, -1, -1) if launches[i].launch == before.launch), None)
    if at is None:
        return newest.total, newest
    added = counted_since(launches[at].total, before.total, False)
    return added + sum(lc.total for lc in launches[at + 1:]), newest


class StatisticsPages(Protocol):
    """The pages a master serves, one function per read verb of the same name; ``window`` is
    Storm's ``?window=`` (None: all time), refused with a `BadParameterError` naming the choices.
    `squall.ui.stats_pages` (the module) is the one implementation."""

    def topology_page(self, view: TopologyView, window: str | None, sys: bool) -> dict[str, Any]:
        """Storm's topology page JSON."""

    def component_page(self, view: TopologyView, component: str, window: str | None, sys: bool) -> dict[str, Any]:
        """Storm's component page JSON; an `UnknownComponentError` names an unknown component."""

    def visualization(self, view: TopologyView, window: str | None, sys: bool) -> dict[str, Any]:
        """Storm's visualization JSON."""

    def visualization_init(self, view: TopologyView, sys: bool) -> dict[str, Any]:
        """Storm's ``visualization-init`` JSON."""

    def statistics(self, view: TopologyView, window: str | None) -> dict[str, Any]:
        """Every task's figures and every worker's row, for exporters (Prometheus)."""


class NoPagesError(SquallError):
    """A master with no `StatisticsPages` was asked for one of them (the message names the verb)."""
