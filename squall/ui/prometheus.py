"""``GET /metrics``: Storm's statistics and the workers' process figures in Prometheus's text
exposition format (prometheus-client), read from the master at each scrape.

Counts are all time since each worker started (Prometheus takes rates itself, and treats a
count that goes down, a restarted worker, as a counter reset); they are Storm's sampled
statistics, the same figures as the UI's pages. Latencies are the all-time averages, as
gauges, in seconds (Prometheus's base unit: ``squall_complete_latency_seconds``; the pages say
ms); a spout task's max spout pending now is a gauge too. Labels: ``topology`` (name),
``component``, ``task``, ``worker`` (the slot, ``host:port``, whose worker counted the figure)
and ``launch`` (that worker's launch in its slot): a task a rebalance moves, or whose worker is
launched again in its slot after a death, is a new series counting from zero, which Prometheus
would otherwise take for the old one going on whenever its new count had passed the old by the
next scrape (its ``rate()`` reads a counter reset only from a count that went down: 10
failures, a ``kill -9``, 10 more by the next scrape read 0 failed; a worker process's own
figures, its CPU seconds and collector runs, carry the launch for the same reason), ``stream``, and ``source`` (the component a bolt's input came from, "" for a task's own
streams). ``squall_dead_lettered`` is a spout task's records given up to its
dead letters (or a Trident spout's emitter bolt task's: its ``component`` is the bolt,
``spout-<txid>``; or a sink task's rows put on its ``dead_letter`` stream, reason ``bad-row``): there ``source`` is the component that failed each record last ("" when none
did) and ``stream`` the reason (a failure's kind, or ``unreadable``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._errors import NotAliveException
from ..engine.stats import GAUGES, LATENCIES
from .app import error_response
from .link import MasterUnavailable, UiMasterLink

_TASK_LABELS = ["topology", "component", "task", "worker", "launch", "source", "stream"]
_WORKER_LABELS = ["topology", "host", "port"]
# a process's own figures count from zero in each launch, as a task's do: the launch is a label
_PROCESS_LABELS = [*_WORKER_LABELS, "launch"]
_HELP = {
    "emitted": "Tuples emitted (Storm's statistics)",
    "transferred": "Tuple copies sent to tasks (Storm's statistics)",
    "acked": "Spouts: trees completed (every one); bolts: inputs acked (sampled, scaled)",
    "failed": "Spouts: trees failed or timed out; bolts: inputs failed (every one)",
    "executed": "Bolt inputs executed (sampled, scaled)",
    "complete_latency": "Spouts: mean complete latency in seconds (all time)",
    "process_latency": "Bolts: mean process latency in seconds (all time)",
    "execute_latency": "Bolts: mean execute latency in seconds (all time)",
    "dead_lettered": ("Spouts, Trident spouts' emitter bolts and sinks: records given up to the dead letters "
                      "(source: the component that failed each "
                      "last, \"\" if none did; stream: why, the failure's kind or unreadable)"),
    "max_spout_pending": "Spouts: the task's max spout pending now (fixed, automatic or found by the tuner)",
    "trident_current_txid": "Trident's master batch coordinator: the oldest txid not committed",
    "trident_batches_in_flight": "Trident's master batch coordinator: the batches in flight now",
    "trident_max_batches_in_flight": "Trident's master batch coordinator: its limit of batches in flight",
    "trident_batches_committed": "Trident's master batch coordinator: the batches committed",
    "trident_batch_latency": "Trident's master batch coordinator: mean seconds from a txid's first $batch to its commit (all time)",
}
_WORKER_FIGURES = [  # (the worker row's key, the metric, its help, a counter?, labelled by launch?)
    ("cpuSecs", "squall_worker_cpu_seconds", "CPU time of the worker's process", True, True),
    ("rssBytes", "squall_worker_resident_memory_bytes", "Resident memory of the worker's process", False, True),
    ("gcCollections", "squall_worker_gc_collections", "Garbage collector runs in the worker's process", True, True),
    ("uptimeSeconds", "squall_worker_uptime_seconds", "Seconds since the worker started", False, True),
    # the slot's, across its launches
    ("restarts", "squall_worker_restarts", "Times the worker's slot was launched again after a death", True, False),
]


class _Snapshot:
    """A collector over one scrape's figures (prometheus-client calls ``collect``)."""

    def __init__(self, topologies: list[tuple[str, dict[str, Any]]]) -> None:
        self._topologies = topologies

    def collect(self):
        families: dict[str, Any] = {}
        for metric, text in _HELP.items():
            if metric in LATENCIES:
                # Prometheus's base unit is the second (its naming conventions); the pages say ms
                families[metric] = GaugeMetricFamily(f"squall_{metric}_seconds", text, labels=_TASK_LABELS)
            elif metric in GAUGES:
                families[metric] = GaugeMetricFamily(f"squall_{metric}", text, labels=_TASK_LABELS)
            else:
                families[metric] = CounterMetricFamily(f"squall_{metric}", text, labels=_TASK_LABELS)
        workers = {key: (CounterMetricFamily if counter else GaugeMetricFamily)(
                       name, text, labels=_PROCESS_LABELS if per_launch else _WORKER_LABELS)
                   for key, name, text, counter, per_launch in _WORKER_FIGURES}
        for name, stats in self._topologies:
            # the worker launch that counted each task's figures: each launch counts from zero
            launch_of = {task: (slot, "" if launch is None else str(launch))
                         for task, launch, slot in stats.get("launches", ())}
            for component, task, metric, source, stream, value in stats["tasks"]:
                family = families.get(metric)
                if family is not None:
                    slot, launch = launch_of.get(task, ("", ""))
                    family.add_metric([name, component, str(task), slot, launch, source, stream],
                                      value / 1000.0 if metric in LATENCIES else value)
            for w in stats["workers"]:
                launch = "" if w.get("launchId") is None else str(w["launchId"])
                for key, _name, _text, _counter, per_launch in _WORKER_FIGURES:
                    labels = [name, w["host"], str(w["port"]), *([launch] if per_launch else [])]
                    workers[key].add_metric(labels, float(w.get(key) or 0))
        yield from families.values()
        yield from workers.values()


def _scrape(link: UiMasterLink) -> bytes:
    topologies = []
    for t in link.read("list"):
        try:
            topologies.append((t["name"], link.read("statistics", name=t["name"])))
        except NotAliveException:
            continue  # removed since the list: left out of this scrape
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(topologies))
    return generate_latest(registry)


def metrics_route(link: UiMasterLink) -> Route:
    """The ``/metrics`` route over ``link``; 503 (Storm's error JSON) while the master is down."""
    async def metrics(request: Request) -> Response:
        try:
            body = await run_in_threadpool(_scrape, link)
        except MasterUnavailable as e:
            return error_response(503, str(e))
        return Response(body, media_type=CONTENT_TYPE_LATEST)
    return Route("/metrics", metrics, methods=["GET"])
