"""Storm's REST JSON from the master's answers: pure functions, no I/O (the app calls them).

Field names are Storm's (``docs/STORM-UI-REST-API.md``; see ../shared/STORM.md section 7). squall
has no resource-aware scheduler, so Storm's memory and CPU figures are 0 and
``schedulerDisplayResource`` is false, which is what tells Storm's own UI not to show them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .. import __version__
from .._errors import BadParameterError
from .._nimbus import MAX_WAIT_SECS
from .stats_pages import pretty_uptime, url_encoded

WINDOWS = ("600", "10800", "86400", ":all-time")
"""Storm's statistics windows, as ``?window=`` takes them; ``:all-time`` is the default."""


_RESOURCES = ("requestedMemOnHeap", "requestedMemOffHeap", "requestedTotalMem", "requestedCpu",
              "assignedMemOnHeap", "assignedMemOffHeap", "assignedTotalMem", "assignedCpu")


class BadParameter(BadParameterError):
    """A request parameter is malformed; the message names it and says what it must be."""


class PageParams(NamedTuple):
    """The ``?window=`` and ``?sys=`` of a topology, component or visualization page."""

    window: str
    sys: bool


def page_params(query: dict[str, str]) -> PageParams:
    """``window`` (one of `WINDOWS`, default ``:all-time``) and ``sys`` (``0``/``1``, also
    ``true``/``false`` as Storm's parser takes them; default 0) from a query string.

    Raises:
        BadParameter: either is something else (named, with the value given).
    """
    window = query.get("window", ":all-time")
    if window not in WINDOWS:
        raise BadParameter(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
    sys = query.get("sys", "0")
    if sys not in ("0", "1", "true", "false"):
        raise BadParameter(f"sys must be 0 or 1, got {sys!r}")
    return PageParams(window, sys in ("1", "true"))


def cluster_summary(info: dict[str, Any]) -> dict[str, Any]:
    """``/cluster/summary`` from the master's ``cluster_info``."""
    topologies = info["topologies"]
    total, used = int(info["slots_total"]), int(info["slots_used"])
    return {"stormVersion": __version__, "supervisors": int(info["supervisors"]),
            "topologies": len(topologies), "slotsTotal": total, "slotsUsed": used, "slotsFree": max(0, total - used),
            "executorsTotal": sum(int(t["num_executors"]) for t in topologies),
            "tasksTotal": sum(int(t["num_tasks"]) for t in topologies),
            "schedulerDisplayResource": False, "totalMem": 0.0, "totalCpu": 0.0, "availMem": 0.0,
            "availCpu": 0.0, "memAssignedPercentUtil": 0.0, "cpuAssignedPercentUtil": 0.0}


def nimbus_summary(info: dict[str, Any]) -> dict[str, Any]:
    """``/nimbus/summary``: every master (``cluster_info``'s ``nimbuses``): ``Leader``, ``Not a
    Leader``, or ``Offline`` for a seed that does not run, whose uptime and version are
    ``"Not applicable"`` as in Storm's UI. One master without Nimbus HA: the leader."""
    nimbus = info["nimbus"]
    rows = info.get("nimbuses") or [{"host": nimbus["host"], "port": nimbus["port"], "status": "Leader",
                                     "uptime_secs": nimbus["uptime_secs"], "version": __version__}]
    out = []
    for n in rows:
        up = n.get("uptime_secs")
        out.append({"host": n["host"], "port": n["port"], "status": n["status"],
                    "nimbusUpTime": "Not applicable" if up is None else pretty_uptime(float(up)),
                    "nimbusUpTimeSeconds": "Not applicable" if up is None else int(up),
                    "nimbusLogLink": None, "version": n.get("version") or "Not applicable"})
    return {"nimbuses": out}


def supervisor_summary(supervisors: list[dict[str, Any]]) -> dict[str, Any]:
    """``/supervisor/summary`` from the master's ``supervisors``."""
    return {"supervisors": [{"id": s["id"], "host": s["host"], "uptime": pretty_uptime(s["uptime_secs"]),
                             "uptimeSeconds": int(s["uptime_secs"]), "slotsTotal": int(s["slots_total"]),
                             "slotsUsed": int(s["slots_used"]), "totalMem": 0.0, "totalCpu": 0.0,
                             "usedMem": 0.0, "usedCpu": 0.0, "version": __version__}
                            for s in supervisors],
            "schedulerDisplayResource": False}


def topology_summary(info: dict[str, Any]) -> dict[str, Any]:
    """``/topology/summary`` from the master's ``cluster_info``. ``replicationCount``: how many
    masters hold the topology's code (1 without Nimbus HA: the one master holds it)."""
    return {"topologies": [{"id": t["id"], "encodedId": url_encoded(t["id"]), "name": t["name"], "status": t["status"],
                            "uptime": pretty_uptime(t["uptime_secs"]), "uptimeSeconds": int(t["uptime_secs"]),
                            "tasksTotal": int(t["num_tasks"]), "workersTotal": int(t["num_workers"]),
                            "executorsTotal": int(t["num_executors"]),
                            "replicationCount": int(t.get("replication_count", 1)),
                            **{k: 0.0 for k in _RESOURCES}}
                           for t in info["topologies"]],
            "schedulerDisplayResource": False}


def operation(op: str, storm_id: str) -> dict[str, Any]:
    """What a POST action answers once it is done."""
    return {"topologyOperation": op, "topologyId": storm_id, "status": "success"}


class RebalanceOptions(NamedTuple):
    """A rebalance body's ``rebalanceOptions``: None leaves that count as it is."""

    num_workers: int | None
    executors: dict[str, int] | None


def rebalance_options(body: Any) -> RebalanceOptions:
    """The options of a ``/rebalance`` body (`None`: no body, nothing changes but the wait).

    Raises:
        BadParameter: the body is not ``{"rebalanceOptions": {"numWorkers": n, "executors": {c: n}}}``
            with positive integers; the message names the offending part.
    """
    if body is None:
        return RebalanceOptions(None, None)
    if not isinstance(body, dict):
        raise BadParameter(f"the body must be a JSON object, got {_json_kind(body)}")
    extra = sorted(set(body) - {"rebalanceOptions"})
    if extra:
        raise BadParameter(f"unknown key(s) in the body: {', '.join(map(repr, extra))} "
                           f"(expected only \"rebalanceOptions\")")
    options = body.get("rebalanceOptions")
    if options is None:
        return RebalanceOptions(None, None)
    if not isinstance(options, dict):
        raise BadParameter(f"rebalanceOptions must be a JSON object, got {_json_kind(options)}")
    extra = sorted(set(options) - {"numWorkers", "executors"})
    if extra:
        raise BadParameter(f"unknown key(s) in rebalanceOptions: {', '.join(map(repr, extra))} "
                           f"(expected \"numWorkers\", \"executors\")")
    workers = options.get("numWorkers")
    if workers is not None and not _positive_int(workers):
        raise BadParameter(f"rebalanceOptions.numWorkers must be a positive integer, got {workers!r}")
    executors = options.get("executors")
    if executors is not None:
        if not isinstance(executors, dict):
            raise BadParameter(f"rebalanceOptions.executors must be a JSON object of component: count, "
                               f"got {_json_kind(executors)}")
        for component, n in executors.items():
            if not _positive_int(n):
                raise BadParameter(f"rebalanceOptions.executors[{component!r}] must be a positive integer, got {n!r}")
    return RebalanceOptions(workers, dict(executors) if executors is not None else None)


def wait_secs(text: str) -> int:
    """A ``<wait-secs>`` path segment: an integer of seconds from 0 to `MAX_WAIT_SECS`, as
    Storm's ``Integer.parseInt`` takes it.

    Raises:
        BadParameter: it is not one (a longer wait would leave the topology KILLED for ever).
    """
    if not text.isdigit() or not text.isascii():
        raise BadParameter(f"wait-secs must be a non-negative integer of seconds, got {text[:40]!r}")
    if len(text) > len(str(MAX_WAIT_SECS)) or int(text) > MAX_WAIT_SECS:
        raise BadParameter(f"wait-secs must be at most {MAX_WAIT_SECS} seconds, got {text[:40]}"
                           f"{'...' if len(text) > 40 else ''}")
    return int(text)


def debug_args(action: str, pct: str) -> tuple[bool, float]:
    """A ``/debug/<action>/<pct>`` request's (enable, sampling percent); the master clamps it.

    Raises:
        BadParameter: ``action`` is not ``enable``/``disable``, or ``pct`` is not a number.
    """
    if action not in ("enable", "disable"):
        raise BadParameter(f"the debug action must be enable or disable, got {action!r}")
    try:
        value = float(pct)
    except ValueError:
        raise BadParameter(f"the debug sampling percent must be a number, got {pct!r}") from None
    if math.isnan(value):
        raise BadParameter(f"the debug sampling percent must be a number, got {pct!r}")
    return action == "enable", value


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _json_kind(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number")
