"""Storm's statistics pages from the workers' windowed statistics (Storm's ``StatsUtil``).

The master keeps, per worker, the windows its last heartbeat carried (`squall.worker.stats_history`);
these pure functions aggregate them by Storm's rules into the JSON of Storm's UI REST API
(STORM.md section 7): the topology page, the component page and the visualization. One source of
figures: the REST API, the web UI, ``squall monitor``, ``squall local``'s live table and the
Prometheus exposition all read these.

The master serves them as its read verbs of the same names (``topology_page``, ``component_page``,
``visualization``, ``visualization_init``, ``statistics``): it builds the `TopologyView`
(`squall.cluster.view`) and calls these functions, this module being the `StatisticsPages` its
host gives it (`squall.cluster.served_ui.statistics_pages` finds it by name, as the cluster
imports nothing of the UI). Pure, and needing no library: a `LocalCluster` loads it without the
``ui`` extra.

Storm's rules kept here: topology acked, failed and complete latency come from spouts only;
emitted and transferred sum every executor; latency averages are weighted by their counts
(complete by acked, execute by executed, process by acked on the component page and by
executed on the topology page); capacity is always from the 10-minute window:
``sum(execute latency x executed) / (1000 x min(uptime, 600))`` per executor, the component's the
highest of its executors'; latencies and capacity are ``"%.3f"`` strings; components and streams
whose id starts with ``__`` show only with ``sys``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

from .._config import Config, shown_configuration, visible_to_topology
from .._errors import BadParameterError, UnknownComponentError
from ..cluster.logs import worker_log_link
from ..cluster.view import Stat, TopologyView, WorkerView
from ..engine.executor import ErrorRecord
from ..engine.plan import ExecutorSpec
from ..engine.stats import (
    ACKED,
    COMPLETE_LATENCY,
    DEAD_LETTERED,
    EMITTED,
    EXECUTE_LATENCY,
    EXECUTED,
    FAILED,
    MAX_SPOUT_PENDING,
    PROCESS_LATENCY,
    TASK_FIGURES,
    TRANSFERRED,
    TRIDENT_BATCH_LATENCY,
    TRIDENT_BATCHES_COMMITTED,
    TRIDENT_BATCHES_IN_FLIGHT,
    TRIDENT_CURRENT_TXID,
    TRIDENT_MAX_BATCHES_IN_FLIGHT,
)
from ..worker.stats_history import ALL_TIME, WINDOW_NAMES

_INPUT_METRICS = frozenset((EXECUTED, EXECUTE_LATENCY, PROCESS_LATENCY))  # a bolt's, per input stream

ACKER = "__acker"
WINDOW_PRETTY = {"600": "10m 0s", "10800": "3h 0m 0s", "86400": "1d 0h 0m 0s", ALL_TIME: "All time"}
CAPACITY_WINDOW = "600"


def check_window(window: Any) -> str:
    """Storm's ``?window=``: 600, 10800, 86400 or ``:all-time``; a `BadParameterError` names the choices."""
    w = ALL_TIME if window in (None, "") else str(window)
    if w not in WINDOW_NAMES:
        raise BadParameterError(f"window must be one of {', '.join(WINDOW_NAMES)}, not {window!r}")
    return w


def pretty_uptime(secs: float) -> str:
    """Storm's ``UIHelpers.prettyUptimeSec``: 358 -> ``"5m 58s"``, 10800 -> ``"3h 0m 0s"``,
    86400 -> ``"1d 0h 0m 0s"``; 0 (and less) -> ``""``, as Storm's."""
    left = int(secs)
    parts: list[str] = []
    for div, unit in ((60, "s"), (60, "m"), (24, "h")):
        if left > 0:
            parts.insert(0, f"{left % div}{unit}")
            left //= div
    if left > 0:
        parts.insert(0, f"{left}d")
    return " ".join(parts)


def sani_stream(stream: str) -> str:
    """Storm 2's ``sanitizeStreamName``: only ``[A-Za-z0-9_-.]``, starting with a letter."""
    s = re.sub(r"[^A-Za-z0-9_\-.]", "_", stream)
    return s if s[:1].isalpha() else "_s" + s


def url_encoded(s: str) -> str:
    """Storm's ``Utils.urlEncodeUtf8`` (Java's ``URLEncoder.encode(s, "UTF-8")``), the value of
    every ``encoded*`` field: letters, digits and ``.-*_`` as they are, a space as ``+``, every
    other byte of the UTF-8 as ``%XX`` ("/" too: ``in/put`` -> ``in%2Fput``)."""
    return quote_plus(s, safe="*").replace("~", "%7E")


def _f3(x: float | None) -> str:
    return "%.3f" % (x or 0.0)


def _visible(name: str, sys: bool) -> bool:
    return sys or not name.startswith("__")


class _Acc:
    """Sums of counts and count-weighted latencies, over tasks and keys."""

    __slots__ = ("counts", "lat_sum", "lat_weight")

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.lat_sum: dict[str, float] = {}
        self.lat_weight: dict[str, float] = {}

    def count(self, metric: str) -> int:
        return round(self.counts.get(metric, 0))

    def latency(self, metric: str) -> float:
        w = self.lat_weight.get(metric, 0)
        return self.lat_sum.get(metric, 0.0) / w if w else 0.0


def _accumulate(acc: _Acc, stats: Iterable[Stat], sys: bool, weights: dict[str, str]) -> None:
    """Add one task's figures of one window into ``acc``; ``weights`` names the count that
    weights each latency."""
    stats = [s for s in stats if _visible(s.stream, sys)]
    counts: dict[tuple[str, str, str], float] = {}
    for s in stats:
        if s.metric in weights:
            continue
        acc.counts[s.metric] = acc.counts.get(s.metric, 0) + s.value
        counts[(s.metric, s.component, s.stream)] = s.value
    for s in stats:
        weight_metric = weights.get(s.metric)
        if weight_metric is None:
            continue
        w = counts.get((weight_metric, s.component, s.stream), 0)
        acc.lat_sum[s.metric] = acc.lat_sum.get(s.metric, 0.0) + s.value * w
        acc.lat_weight[s.metric] = acc.lat_weight.get(s.metric, 0) + w


SPOUT_WEIGHTS = {COMPLETE_LATENCY: ACKED}
BOLT_WEIGHTS_TOPOLOGY = {EXECUTE_LATENCY: EXECUTED, PROCESS_LATENCY: EXECUTED}
BOLT_WEIGHTS_COMPONENT = {EXECUTE_LATENCY: EXECUTED, PROCESS_LATENCY: ACKED}


class _DeadLetters(NamedTuple):
    """Records a spout (or a Trident spout's emitter bolt, or a sink) gave up to its dead
    letters in a window: ``failed_by`` the component that failed them last ("" when none did), ``reason`` the
    failure's kind or ``unreadable``."""

    spout: str
    failed_by: str
    reason: str
    records: int

    def row(self) -> dict[str, Any]:
        """The REST API's form (the component page's ``deadLetterStats``)."""
        return {"spout": self.spout, "failedBy": self.failed_by, "reason": self.reason, "deadLettered": self.records}


class _Index:
    """Where each task runs and its figures, for one topology."""

    def __init__(self, view: TopologyView) -> None:
        self.view = view
        self.worker_of: dict[int, WorkerView] = {}
        self.executor_of: dict[int, ExecutorSpec] = {}
        for w in view.workers:
            for ex in w.executors:
                for t in ex.tasks:
                    self.worker_of[t] = w
                    self.executor_of[t] = ex

    def task_stats(self, task: int, window: str) -> list[Stat]:
        w = self.worker_of.get(task)
        return w.windows.get(task, {}).get(window, []) if w else []

    def component_acc(self, component: str, window: str, sys: bool, weights: dict[str, str],
                      tasks: Iterable[int] | None = None) -> _Acc:
        acc = _Acc()
        for t in self.view.plan.component_tasks.get(component, []) if tasks is None else tasks:
            _accumulate(acc, self.task_stats(t, window), sys, weights)
        return acc

    def capacity(self, tasks: Iterable[int]) -> float:
        """Storm's capacity of the executor running ``tasks``: from the 10-minute window."""
        busy_ms = 0.0
        uptime = 0.0
        for t in tasks:
            w = self.worker_of.get(t)
            if w is None:
                continue
            uptime = max(uptime, w.uptime_secs)
            stats = self.task_stats(t, CAPACITY_WINDOW)
            executed = {(s.component, s.stream): s.value for s in stats if s.metric == EXECUTED}
            busy_ms += sum(s.value * executed.get((s.component, s.stream), 0)
                           for s in stats if s.metric == EXECUTE_LATENCY)
        span = min(uptime, 600.0)
        return busy_ms / (1000.0 * span) if span > 0 else 0.0

    def dead_letters(self, window: str) -> list[_DeadLetters]:
        """Every task's dead letters in ``window`` (a spout's, or a Trident spout's emitter
        bolt's), by the component that gave the records up, the component that failed them last
        ("" when none did) and reason."""
        out: dict[tuple[str, str, str], float] = {}
        for spout in self.view.plan.topology.components:
            for t in self.view.plan.component_tasks.get(spout, []):
                for s in self.task_stats(t, window):
                    if s.metric == DEAD_LETTERED:
                        key = (spout, s.component, s.stream)
                        out[key] = out.get(key, 0) + s.value
        return [_DeadLetters(spout, by, reason, round(n)) for (spout, by, reason), n in sorted(out.items())]

    def dead_lettered(self, component: str, window: str) -> int:
        """``component``'s dead-letter count in ``window``: a spout's, the records it gave up (a
        Trident spout's emitter bolt's too); a bolt's, those it failed last (where a bolt failed
        them: not a timeout, a lost worker, a record unreadable)."""
        return sum(d.records for d in self.dead_letters(window) if component in (d.spout, d.failed_by))

    def component_capacity(self, component: str) -> float:
        return max((self.capacity(ex.tasks) for ex in self.view.plan.executors if ex.component == component),
                   default=0.0)

    def kind(self, component: str) -> str:
        if component == ACKER:
            return "bolt"
        spec = self.view.plan.topology.components.get(component)
        return spec.kind if spec is not None else "bolt"

    def components(self, sys: bool) -> list[str]:
        comps = list(self.view.plan.topology.components)
        if sys and ACKER in self.view.plan.component_tasks:
            comps.append(ACKER)
        return sorted(c for c in comps if _visible(c, sys))

    def last_error(self, component: str) -> dict[str, Any]:
        errors = [e for e in self.view.errors if e.component == component]
        if not errors:
            # Storm's UIHelpers.getComponentLastErrorInfo: no error is "" and null, the port null
            return {"lastError": "", "errorHost": "", "errorPort": None, "errorTime": None,
                    "errorLapsedSecs": None, "errorWorkerLogLink": "", "errorCount": None}
        e = errors[-1]
        host = e.host or self.host_of_port(e.worker)
        # errorCount (squall's, as on the component page's errors): an identical error repeated
        # is one record counted (`add_error`), where Storm lists each; without it three read one
        return {"lastError": e.error, "errorHost": host, "errorPort": e.worker, "errorTime": int(e.last_time),
                "errorLapsedSecs": int(max(0.0, self.view.now - e.last_time)),
                "errorWorkerLogLink": worker_log_link(self.view.plan.storm_id, e.worker), "errorCount": e.count}

    def host_of_port(self, port: int) -> str:
        return next((w.host for w in self.view.workers if w.port == port), "")

    def error_rows(self, records: Iterable[ErrorRecord]) -> list[dict[str, Any]]:
        """``records`` newest first, as the component page's ``componentErrors`` lists them
        (``errorTime`` in ms, as Storm's), each with the ``component`` it is recorded under."""
        storm_id = self.view.plan.storm_id
        return [{"component": e.component, "errorTime": int(e.last_time * 1000),
                 "errorHost": e.host or self.host_of_port(e.worker), "errorPort": e.worker, "error": e.error,
                 "errorTask": e.task, "errorCount": e.count,
                 "errorLapsedSecs": int(max(0.0, self.view.now - e.last_time)),
                 "errorWorkerLogLink": worker_log_link(storm_id, e.worker)}
                for e in reversed(list(records))]

    def worker_errors(self) -> list[dict[str, Any]]:
        """The topology's errors that are no component's (`error_rows`): those the master records
        of its workers (``__worker``: a worker that died unasked, by a signal such as SIGKILL, an
        exit or its memory cap; ``__master``: one restarted for its silence, given up after
        failed starts, a machine lost). Storm shows no such record; without this list the pages
        showed none either (only a worker's ``restarts``), where ``squall list``, ``squall
        info`` and ``squall monitor`` name them."""
        return self.error_rows(e for e in self.view.errors if e.component not in self.view.plan.component_tasks)



def _window_entry(window: str) -> dict[str, Any]:
    return {"window": window, "windowPretty": WINDOW_PRETTY[window]}


def topology_page(view: TopologyView, window: str | None = ALL_TIME, sys: bool = False) -> dict[str, Any]:
    """Storm's ``GET /api/v1/topology/:id`` JSON."""
    window = check_window(window)
    plan = view.plan
    idx = _Index(view)
    stats = []
    for w in WINDOW_NAMES:
        all_acc = _Acc()
        spout_acc = _Acc()
        for comp in idx.components(sys):
            for t in plan.component_tasks.get(comp, []):
                ts = idx.task_stats(t, w)
                _accumulate(all_acc, ts, sys, {})
                if idx.kind(comp) == "spout":
                    _accumulate(spout_acc, ts, sys, SPOUT_WEIGHTS)
        stats.append({**_window_entry(w), "emitted": all_acc.count(EMITTED),
                      "transferred": all_acc.count(TRANSFERRED),
                      "completeLatency": _f3(spout_acc.latency(COMPLETE_LATENCY)),
                      "acked": spout_acc.count(ACKED), "failed": spout_acc.count(FAILED),
                      # every component's that gives records up: the spouts', a Trident spout's
                      # emitter bolt's (the master batch coordinator is the only spout there)
                      "deadLettered": sum(d.records for d in idx.dead_letters(w))})
    spouts, bolts = [], []
    for comp in idx.components(sys):
        kind = idx.kind(comp)
        n_exec = sum(1 for e in plan.executors if e.component == comp)
        base = {"executors": n_exec, "tasks": len(plan.component_tasks.get(comp, [])), **idx.last_error(comp)}
        if kind == "spout":
            acc = idx.component_acc(comp, window, sys, SPOUT_WEIGHTS)
            spouts.append({"spoutId": comp, "encodedSpoutId": url_encoded(comp), **base, "emitted": acc.count(EMITTED),
                           "transferred": acc.count(TRANSFERRED),
                           "completeLatency": _f3(acc.latency(COMPLETE_LATENCY)),
                           "acked": acc.count(ACKED), "failed": acc.count(FAILED),
                           "deadLettered": acc.count(DEAD_LETTERED)})
        else:
            acc = idx.component_acc(comp, window, sys, BOLT_WEIGHTS_TOPOLOGY)
            bolts.append({"boltId": comp, "encodedBoltId": url_encoded(comp), **base, "emitted": acc.count(EMITTED),
                          "transferred": acc.count(TRANSFERRED), "acked": acc.count(ACKED),
                          "failed": acc.count(FAILED), "executed": acc.count(EXECUTED),
                          "deadLettered": idx.dead_lettered(comp, window),
                          "capacity": _f3(idx.component_capacity(comp)),
                          "executeLatency": _f3(acc.latency(EXECUTE_LATENCY)),
                          "processLatency": _f3(acc.latency(PROCESS_LATENCY))})
    debug = view.debug.get(plan.storm_id, {})
    return {"id": plan.storm_id, "encodedId": url_encoded(plan.storm_id), "name": plan.name, "status": view.status,
            "uptime": pretty_uptime(view.uptime_secs), "uptimeSeconds": int(view.uptime_secs),
            "tasksTotal": len(plan.task_to_component), "workersTotal": len(view.workers),
            "executorsTotal": len(plan.executors),
            "msgTimeout": plan.conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS),
            "window": window, "windowHint": WINDOW_PRETTY[window],
            "debug": bool(debug.get("enable", False)), "samplingPct": debug.get("samplingpct", 10),
            "replicationCount": 1, "topologyStats": stats, "spouts": spouts, "bolts": bolts,
            "trident": trident_stats(idx, window),
            "workers": [_worker_row(view, w) for w in view.workers],
            "workerErrors": idx.worker_errors(),
            "configuration": shown_configuration({k: v for k, v in plan.conf.items() if visible_to_topology(k)})}


def trident_stats(idx: _Index, window: str) -> dict[str, Any] | None:
    """squall's ``trident`` of the topology page: its Trident master batch coordinators' figures
    (`squall.trident.stats`), None for a topology that has none (or before its first heartbeat).
    A coordinator numbers the batches of one batch group (a connected part of the topology), so
    ``groups`` gives each one's own: ``currentTxid`` (the oldest txid not committed),
    ``batchesInFlight`` and ``maxBatchesInFlight`` as they are now, the batches committed and
    their mean completion latency in ms (from a txid's first ``$batch`` to its commit) in the
    chosen window. The top level adds them up, but for ``currentTxid``: each group counts its own
    txids, so it is the one group's, and None when there are several. ``stats``: the batches
    committed and their latency per window, over every group."""
    coordinators = [c for c in idx.components(True)
                    if any(s.metric == TRIDENT_CURRENT_TXID for t in idx.view.plan.component_tasks.get(c, [])
                           for s in idx.task_stats(t, ALL_TIME))]
    if not coordinators:
        return None
    weights = {TRIDENT_BATCH_LATENCY: TRIDENT_BATCHES_COMMITTED}

    def acc(w: str, *components: str) -> _Acc:
        a = _Acc()
        for c in components:
            for t in idx.view.plan.component_tasks[c]:
                _accumulate(a, idx.task_stats(t, w), True, weights)
        return a

    def figures(a: _Acc) -> dict[str, Any]:
        return {"currentTxid": a.count(TRIDENT_CURRENT_TXID), "batchesInFlight": a.count(TRIDENT_BATCHES_IN_FLIGHT),
                "maxBatchesInFlight": a.count(TRIDENT_MAX_BATCHES_IN_FLIGHT),
                "batchesCommitted": a.count(TRIDENT_BATCHES_COMMITTED),
                "batchLatency": _f3(a.latency(TRIDENT_BATCH_LATENCY))}
    groups = [{"coordinator": c, **figures(acc(window, c))} for c in coordinators]
    total = figures(acc(window, *coordinators))
    if len(groups) > 1:
        total["currentTxid"] = None
    stats = [{**_window_entry(w), "batchesCommitted": a.count(TRIDENT_BATCHES_COMMITTED),
              "batchLatency": _f3(a.latency(TRIDENT_BATCH_LATENCY))}
             for w, a in ((w, acc(w, *coordinators)) for w in WINDOW_NAMES)]
    return {"coordinators": coordinators, **total, "groups": groups, "stats": stats}


def _worker_row(view: TopologyView, w: WorkerView) -> dict[str, Any]:
    plan = view.plan
    num_tasks: dict[str, int] = {}
    for ex in w.executors:
        num_tasks[ex.component] = num_tasks.get(ex.component, 0) + len(ex.tasks)
    fig = w.figures or {}
    return {"supervisorId": w.supervisor_id, "host": w.host, "port": w.port, "topologyId": plan.storm_id,
            "topologyName": plan.name, "executorsTotal": len(w.executors), "componentNumTasks": num_tasks,
            "uptime": pretty_uptime(w.uptime_secs), "uptimeSeconds": int(w.uptime_secs),
            "workerLogLink": worker_log_link(plan.storm_id, w.port),
            "restarts": w.restarts, "launchId": w.launch_id, "pid": fig.get("pid"), "cpuSecs": round(float(fig.get("cpu_secs", 0.0)), 3),
            "rssBytes": int(fig.get("rss_bytes", 0)), "gcCollections": int(fig.get("gc_collections", 0))}


def component_page(view: TopologyView, component: str, window: str | None = ALL_TIME,
                   sys: bool = False) -> dict[str, Any]:
    """Storm's ``GET /api/v1/topology/:id/component/:component`` JSON; an `UnknownComponentError`
    names an unknown component."""
    window = check_window(window)
    plan = view.plan
    idx = _Index(view)
    if component not in plan.component_tasks or (component != ACKER and component not in plan.topology.components):
        raise UnknownComponentError(f"component {component!r} is not in topology {plan.name!r}")
    kind = idx.kind(component)
    weights = SPOUT_WEIGHTS if kind == "spout" else BOLT_WEIGHTS_COMPONENT
    tasks = plan.component_tasks[component]
    debug = view.debug.get(component) or view.debug.get(plan.storm_id, {})
    out: dict[str, Any] = {
        "id": component, "encodedId": url_encoded(component), "name": plan.name, "componentType": kind,
        "executors": sum(1 for e in plan.executors if e.component == component), "tasks": len(tasks),
        "topologyId": plan.storm_id, "encodedTopologyId": url_encoded(plan.storm_id), "topologyStatus": view.status,
        "window": window, "windowHint": WINDOW_PRETTY[window],
        "debug": bool(debug.get("enable", False)), "samplingPct": debug.get("samplingpct", 10),
        "eventLogLink": "", "profilingAndDebuggingCapable": False, "profileActionEnabled": False,
        "profilerActive": [],
        "componentErrors": idx.error_rows(e for e in view.errors if e.component == component)}
    summary = []
    for w in WINDOW_NAMES:
        acc = idx.component_acc(component, w, sys, weights)
        row = {**_window_entry(w), "emitted": acc.count(EMITTED), "transferred": acc.count(TRANSFERRED),
               "acked": acc.count(ACKED), "failed": acc.count(FAILED),
               "deadLettered": idx.dead_lettered(component, w)}
        if kind == "spout":
            row.update(completeLatency=_f3(acc.latency(COMPLETE_LATENCY)), maxSpoutPending=_max_pending(acc))
        else:
            row.update(executed=acc.count(EXECUTED), executeLatency=_f3(acc.latency(EXECUTE_LATENCY)),
                       processLatency=_f3(acc.latency(PROCESS_LATENCY)),
                       capacity=_f3(idx.component_capacity(component)))
        summary.append(row)
    out["spoutSummary" if kind == "spout" else "boltStats"] = summary
    # why: the dead letters of this spout, or of the records this bolt failed last, by spout,
    # failing component and reason, in the chosen window
    out["deadLetterStats"] = [d.row() for d in idx.dead_letters(window) if component in (d.spout, d.failed_by)]
    # per stream: outputs (and a spout's acks by stream), inputs at bolts
    outputs: dict[str, _Acc] = {}
    inputs: dict[tuple[str, str], _Acc] = {}
    for t in tasks:
        for s in idx.task_stats(t, window):
            if not _visible(s.stream, sys):
                continue
            if s.component == "" and s.metric not in TASK_FIGURES and s.metric not in _INPUT_METRICS:
                _accumulate(outputs.setdefault(s.stream, _Acc()), [s], sys, {})
        # an input's figures with no source component are the acker's acks and fails, which
        # reach it without their sender: inputs still, so that they add up to its executed
        ts = [s for s in idx.task_stats(t, window) if s.component != "" or s.metric in _INPUT_METRICS]
        for key in {(s.component, s.stream) for s in ts}:
            _accumulate(inputs.setdefault(key, _Acc()),
                        [s for s in ts if (s.component, s.stream) == key], sys, weights)
    out["outputStats"] = [
        {"stream": stream, "emitted": a.count(EMITTED), "transferred": a.count(TRANSFERRED),
         **({"acked": a.count(ACKED), "failed": a.count(FAILED),
             "completeLatency": _f3(_stream_latency(idx, tasks, window, stream))} if kind == "spout" else {})}
        for stream, a in sorted(outputs.items())]
    if kind != "spout":
        out["inputStats"] = [
            {"component": c, "encodedComponentId": url_encoded(c), "stream": s, "executeLatency": _f3(a.latency(EXECUTE_LATENCY)),
             "processLatency": _f3(a.latency(PROCESS_LATENCY)), "executed": a.count(EXECUTED),
             "acked": a.count(ACKED), "failed": a.count(FAILED)}
            for (c, s), a in sorted(inputs.items()) if _visible(s, sys) and _visible(c, sys)]
    out["executorStats"] = [_executor_row(idx, ex, kind, window, sys, weights)
                            for ex in plan.executors if ex.component == component]
    out["taskStats"] = [{"task": t, **_executor_row(idx, ExecutorSpec(component, (t,)), kind, window, sys, weights)}
                        for t in tasks]
    return out


def _stream_latency(idx: _Index, tasks: list[int], window: str, stream: str) -> float:
    acc = _Acc()
    for t in tasks:
        _accumulate(acc, [s for s in idx.task_stats(t, window) if s.stream == stream], True, SPOUT_WEIGHTS)
    return acc.latency(COMPLETE_LATENCY)


def _executor_row(idx: _Index, ex: ExecutorSpec, kind: str, window: str, sys: bool,
                  weights: dict[str, str]) -> dict[str, Any]:
    acc = idx.component_acc(ex.component, window, sys, weights, tasks=ex.tasks)
    w = idx.worker_of.get(ex.tasks[0])
    row: dict[str, Any] = {
        "id": f"[{ex.tasks[0]}-{ex.tasks[-1]}]", "encodedId": url_encoded(f"[{ex.tasks[0]}-{ex.tasks[-1]}]"),
        "host": w.host if w else "", "port": w.port if w else 0,
        "uptime": pretty_uptime(w.uptime_secs if w else 0), "uptimeSeconds": int(w.uptime_secs if w else 0),
        "emitted": acc.count(EMITTED), "transferred": acc.count(TRANSFERRED),
        "acked": acc.count(ACKED), "failed": acc.count(FAILED),
        # the records the executor's tasks gave up (a spout's; a Trident spout's emitter bolt's)
        "deadLettered": acc.count(DEAD_LETTERED),
        "workerLogLink": worker_log_link(idx.view.plan.storm_id, w.port) if w else ""}
    if kind == "spout":
        row.update(completeLatency=_f3(acc.latency(COMPLETE_LATENCY)), maxSpoutPending=_max_pending(acc))
    else:
        row.update(executed=acc.count(EXECUTED), executeLatency=_f3(acc.latency(EXECUTE_LATENCY)),
                   processLatency=_f3(acc.latency(PROCESS_LATENCY)), capacity=_f3(idx.capacity(ex.tasks)))
    return row


def _max_pending(acc: _Acc) -> int | None:
    """squall's own ``maxSpoutPending``: the sum of the tasks' limits now (fixed, automatic or
    found by the tuner), None (null) where none applies (acking off)."""
    return acc.count(MAX_SPOUT_PENDING) if MAX_SPOUT_PENDING in acc.counts else None


def visualization(view: TopologyView, window: str | None = ALL_TIME, sys: bool = False) -> dict[str, Any]:
    """Storm's ``GET /api/v1/topology/:id/visualization`` JSON (keys keep Storm's colons)."""
    window = check_window(window)
    plan = view.plan
    idx = _Index(view)
    out: dict[str, Any] = {}
    for comp in idx.components(sys):
        kind = idx.kind(comp)
        acc = idx.component_acc(comp, window, sys, SPOUT_WEIGHTS if kind == "spout" else BOLT_WEIGHTS_COMPONENT)
        per_executor = []
        for ex in plan.executors:
            if ex.component != comp:
                continue
            w = idx.worker_of.get(ex.tasks[0])
            transferred: dict[str, dict[str, int]] = {}
            for win in WINDOW_NAMES:
                by_stream: dict[str, int] = {}
                for t in ex.tasks:
                    for s in idx.task_stats(t, win):
                        if s.metric == TRANSFERRED and _visible(s.stream, sys):
                            key = sani_stream(s.stream)
                            by_stream[key] = by_stream.get(key, 0) + int(s.value)
                transferred[win] = by_stream
            per_executor.append({":host": w.host if w else "", ":port": w.port if w else 0,
                                 ":uptime_secs": int(w.uptime_secs) if w else 0, ":transferred": transferred})
        spec = plan.topology.components.get(comp)
        inputs = []
        for (src, stream), grouping in (spec.inputs.items() if spec is not None else ()):
            if _visible(src, sys) and _visible(stream, sys):
                inputs.append({":component": src, ":stream": stream, ":sani-stream": sani_stream(stream),
                               ":grouping": _grouping_name(grouping.kind)})
        out[comp] = {":type": kind,
                     ":capacity": 0 if kind == "spout" else round(idx.component_capacity(comp), 3),
                     ":latency": round(acc.latency(COMPLETE_LATENCY if kind == "spout" else PROCESS_LATENCY), 3),
                     ":transferred": acc.count(TRANSFERRED), ":stats": per_executor,
                     ":link": f"/component.html?id={quote(comp, safe='')}&topology_id={quote(plan.storm_id, safe='')}",
                     ":inputs": inputs}
    return out


def visualization_init(view: TopologyView, sys: bool = False) -> dict[str, Any]:
    """Storm's ``visualization-init``: one checkbox per distinct input stream, four per row."""
    streams = sorted({stream for spec in view.plan.topology.components.values()
                      for (src, stream) in spec.inputs if _visible(stream, sys)})
    boxes = [{"stream": s, "sani-stream": sani_stream(s), "checked": not s.startswith("__")} for s in streams]
    return {"visualizationTable": [{"row": boxes[i:i + 4]} for i in range(0, len(boxes), 4)]}


def _grouping_name(kind: str) -> str:
    """The Thrift union field Storm's visualization names a grouping by."""
    return {"custom": "custom_object", "partial_key": "custom_serialized"}.get(kind, kind)


class TaskRow(NamedTuple):
    """One figure of one task, for exporters (Prometheus): every label a flat value."""

    component: str
    task: int
    metric: str
    source: str          # the input's component at bolts, "" for the task's own streams
    stream: str
    value: float


def task_rows(view: TopologyView, window: str | None = ALL_TIME) -> list[TaskRow]:
    """Every task's figures in ``window``, system components and streams included."""
    window = check_window(window)
    idx = _Index(view)
    return [TaskRow(view.plan.task_to_component.get(t, ""), t, *idx.task_stats(t, window)[i])
            for t in sorted(idx.worker_of) for i in range(len(idx.task_stats(t, window)))]


def worker_rows(view: TopologyView) -> list[dict[str, Any]]:
    """Every worker's row of the topology page (host, port, uptime, restarts, CPU, memory, GC)."""
    return [_worker_row(view, w) for w in view.workers]


def statistics(view: TopologyView, window: str | None = ALL_TIME) -> dict[str, Any]:
    """The ``statistics`` verb: every task's figures (``tasks``: `TaskRow` as lists), every
    worker's row, for exporters, and ``launches``: ``[task, launch id, slot]`` of each task that
    reported, the worker launch that counted its figures (a reader that sees it change knows the
    task counts from zero again, even when its new counts are above its old ones). A slot numbers
    its own launches, so a task a rebalance moved to another slot may come back with the same
    launch id: the slot (``host:port``) tells that launch apart. ``ended``: each launch that
    ended (the master's last few), oldest first, as ``{"launch_id", "slot", "tasks"}`` with its
    task rows as its last heartbeat left them: in no other figure here, so that a reader adding
    up launches (the UI's history) takes what a dead worker counted since its last reading."""
    launches = [[t, w.launch_id, f"{w.host}:{w.port}"] for w in view.workers for t in sorted(w.windows)]
    ended = [{"launch_id": w.launch_id, "slot": f"{w.host}:{w.port}",
              "tasks": [list(r) for r in task_rows(dataclasses.replace(view, workers=[w], ended=[]), window)]}
             for w in view.ended]
    return {"id": view.plan.storm_id, "tasks": [list(r) for r in task_rows(view, window)],
            "workers": worker_rows(view), "launches": launches, "ended": ended}
