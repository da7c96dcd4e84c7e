"""The web UI the daemon serves beside its REST API: static pages (plain HTML, JS and CSS in
``squall/ui/static``, no build step and nothing fetched from elsewhere) at Storm's page addresses
(``/index.html``, ``/topology.html?id=``, ``/component.html?id=&topology_id=``, the ``:link`` of the
visualization), and ``/api/v1/topology/<id>/history``, the last minutes that the page's charts
draw, sampled from the master by a `HistorySampler` while the daemon serves (`WebPages.start`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .._config import Config, setting
from .._errors import NotAliveException
from ..engine.stats import ACKED, DEAD_LETTERED, FAILED
from .app import error_response
from .history import HistorySampler, TaskCounts, Totals
from .link import MasterUnavailable

if TYPE_CHECKING:
    from .link import UiMasterLink

STATIC = Path(__file__).with_name("static")
PAGES = ("index.html", "topology.html", "component.html")
ALL_TIME = ":all-time"


def read_totals(link: UiMasterLink) -> Iterator[Totals]:
    """Every running topology's all-time spout totals, from the master's topology page (one
    source of figures: the same numbers the page's tables show), with each spout task's own
    counts from its ``statistics`` (the figures ``/metrics`` serves), so that the history counts
    a task whose worker restarted from zero instead of reading no acks and no failures."""
    for t in link.read("list"):
        try:
            page = link.read("topology_page", name=t["name"], window=ALL_TIME, sys=False)
            statistics = link.read("statistics", name=t["name"])
        except NotAliveException:
            continue  # killed between the calls
        spouts = {s["spoutId"] for s in page["spouts"]}
        ended: dict[int, list[TaskCounts]] = {}
        for launch in statistics.get("ended", []):  # oldest first
            launch_of = {int(row[1]): (launch["launch_id"], launch["slot"]) for row in launch["tasks"]}
            for task, counts in _spout_task_counts(launch["tasks"], spouts, launch_of).items():
                ended.setdefault(task, []).append(counts)
        for stats in page["topologyStats"]:
            if stats["window"] == ALL_TIME:
                launch_of = {int(row[0]): (row[1], row[2]) for row in statistics.get("launches", [])}
                yield Totals(t["id"], int(stats["acked"] or 0), int(stats["failed"] or 0),
                             float(stats["completeLatency"] or 0.0),
                             _spout_task_counts(statistics["tasks"], spouts, launch_of),
                             int(stats.get("deadLettered") or 0), ended)


def _spout_task_counts(rows: list[list[Any]], spouts: set[str],
                       launch_of: Mapping[int, tuple[Any, Any]]) -> dict[int, TaskCounts]:
    """Spout task id -> its all-time acked, failed and dead-lettered counts, from the
    ``statistics`` verb's task rows (`squall.ui.stats_pages.TaskRow` as lists), over the streams
    the topology page counts (system streams left out; the dead letters of every task that gives
    records up, as the page counts them), with the worker launch that counted them: ``(launch
    id, slot)``, as slots number their launches each on its own, so a task moved to another
    slot by a rebalance is a new launch even when the number is the same."""
    # every task that reported, though it counted none yet (a spout whose first figure comes
    # after its worker's restart): known, its next launch is told from it
    counts: dict[int, list[int]] = {task: [0, 0, 0] for task in launch_of}
    for component, task, metric, _source, stream, value in rows:
        if component in spouts and metric in (ACKED, FAILED) and not stream.startswith("__"):
            figures = counts.setdefault(int(task), [0, 0, 0])
            figures[metric == FAILED] += int(value)
        elif metric == DEAD_LETTERED:
            counts.setdefault(int(task), [0, 0, 0])[2] += int(value)
    return {task: TaskCounts(acked, failed, launch_of.get(task), dead)
            for task, (acked, failed, dead) in counts.items()}


class WebPages:
    """The pages' routes and the history sampler behind their charts, over one master link."""

    def __init__(self, link: UiMasterLink, conf: Mapping[str, Any]) -> None:
        self._link = link
        self.sampler = HistorySampler(lambda: list(read_totals(link)),
                                      interval_secs=float(setting(conf, Config.SQUALL_UI_HISTORY_INTERVAL_SECS)),
                                      keep_secs=float(setting(conf, Config.SQUALL_UI_HISTORY_SECS)))

    def routes(self) -> list[BaseRoute]:
        """``/`` (to the cluster page), the three pages, ``/static/*`` and the history endpoint."""
        pages: list[BaseRoute] = [Route(f"/{p}", _page(p), methods=["GET", "HEAD"]) for p in PAGES]
        return [Route("/", _home, methods=["GET", "HEAD"]), *pages,
                Route("/api/v1/topology/{id}/history", self.history, methods=["GET"]),
                Mount("/static", StaticFiles(directory=STATIC), name="static")]

    async def history(self, request: Request) -> Response:
        """``{"topologyId", "intervalSecs", "samples": [HistorySample.to_json()...]}``, oldest first
        (empty until the first sample of a new topology)."""
        storm_id = request.path_params["id"]
        samples = self.sampler.samples(storm_id)
        if not samples:
            try:
                known = any(t["id"] == storm_id for t in await run_in_threadpool(self._link.read, "list"))
            except MasterUnavailable as e:
                return error_response(503, str(e))
            if not known:
                return error_response(404, f"topology {storm_id!r} not found")
        return JSONResponse({"topologyId": storm_id, "intervalSecs": self.sampler.history.interval_secs,
                             "samples": [s.to_json() for s in samples]})

    def start(self) -> None:
        """Start sampling (the daemon calls this when it starts serving)."""
        self.sampler.start()

    def stop(self) -> None:
        """Stop sampling."""
        self.sampler.stop()


def _page(name: str):
    path = STATIC / name

    async def page(request: Request) -> Response:
        return FileResponse(path, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache"})
    page.__name__ = name.replace(".", "_")
    return page


async def _home(request: Request) -> Response:
    return RedirectResponse("/index.html")
