"""The OpenAPI 3 description of the REST API, served at ``/api/v1/openapi.json``.

Written by hand from Storm's field names (../shared/STORM.md section 7), so that it says what
a client may rely on; tests/ui/test_openapi.py runs schemathesis against the app with it, and
fails on any answer the document does not describe.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import __version__
from .storm_json import WINDOWS

_INT = {"type": "integer"}
_NUM = {"type": "number"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_NUM_OR_STR = {"type": ["number", "string"]}  # Storm prints latencies and capacity as "%.3f" strings


def _obj(required: dict[str, Any], extra: bool = True) -> dict[str, Any]:
    """An object with these required properties (more allowed unless ``extra`` is False)."""
    return {"type": "object", "required": sorted(required), "properties": required, "additionalProperties": extra}


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


_ERROR = _obj({"error": {"type": "string", "pattern": r"^\d{3} "}, "errorMessage": _STR}, extra=False)

_CLUSTER = _obj({k: _INT for k in ("supervisors", "topologies", "slotsTotal", "slotsUsed", "slotsFree",
                                   "executorsTotal", "tasksTotal")}
                | {"stormVersion": _STR, "schedulerDisplayResource": _BOOL}
                | {k: _NUM for k in ("totalMem", "totalCpu", "availMem", "availCpu", "memAssignedPercentUtil",
                                     "cpuAssignedPercentUtil")})

_HISTORY = _obj({"topologyId": _STR, "intervalSecs": _NUM,
                 "samples": _array(_obj({k: _NUM for k in ("time", "ackedPerSec", "failedPerSec", "completeLatency",
                                                           "deadLetteredPerSec")}
                                        | {"acked": _INT, "failed": _INT, "deadLettered": _INT}))})

_NIMBUS = _obj({"nimbuses": _array(_obj({"host": _STR, "port": {"type": ["integer", "null"]},
                                         # Offline: a seed that does not run (Storm's UI; its REST docs say Dead)
                                         "status": {"enum": ["Leader", "Not a Leader", "Offline", "Dead"]},
                                         "nimbusUpTime": _STR, "nimbusUpTimeSeconds": {"type": ["integer", "string"]},
                                         "nimbusLogLink": {"type": ["string", "null"]}, "version": _STR}))})

_SUPERVISORS = _obj({"supervisors": _array(_obj({"id": _STR, "host": _STR, "uptime": _STR, "uptimeSeconds": _INT,
                                                 "slotsTotal": _INT, "slotsUsed": _INT, "totalMem": _NUM,
                                                 "totalCpu": _NUM, "usedMem": _NUM, "usedCpu": _NUM})),
                     "schedulerDisplayResource": _BOOL})

_STATUS = {"enum": ["ACTIVE", "INACTIVE", "KILLED", "REBALANCING"]}

_TOPOLOGIES = _obj({"topologies": _array(_obj({"id": _STR, "name": _STR, "status": _STATUS, "uptime": _STR,
                                               "uptimeSeconds": _INT, "tasksTotal": _INT, "workersTotal": _INT,
                                               "executorsTotal": _INT, "replicationCount": _INT}
                                              | {k: _NUM for k in ("requestedMemOnHeap", "requestedMemOffHeap",
                                                                   "requestedTotalMem", "requestedCpu",
                                                                   "assignedMemOnHeap", "assignedMemOffHeap",
                                                                   "assignedTotalMem", "assignedCpu")})),
                    "schedulerDisplayResource": _BOOL})

_WINDOW_STATS = _obj({"window": _STR, "windowPretty": _STR, "emitted": _INT, "transferred": _INT,
                      "acked": _INT, "failed": _INT})

_TRIDENT_GROUP = _obj({"coordinator": _STR, "currentTxid": _INT, "batchesInFlight": _INT,
                       "maxBatchesInFlight": _INT, "batchesCommitted": _INT, "batchLatency": _NUM_OR_STR})
_TRIDENT = _obj({"coordinators": _array(_STR), "currentTxid": {"type": ["integer", "null"]},
                 "batchesInFlight": _INT, "maxBatchesInFlight": _INT, "batchesCommitted": _INT,
                 "batchLatency": _NUM_OR_STR, "groups": _array(_TRIDENT_GROUP),
                 "stats": _array(_obj({"window": _STR, "windowPretty": _STR, "batchesCommitted": _INT,
                                       "batchLatency": _NUM_OR_STR}))})

_TOPOLOGY_PAGE = _obj({
    "id": _STR, "name": _STR, "status": _STATUS, "uptime": _STR, "uptimeSeconds": _INT, "tasksTotal": _INT,
    "workersTotal": _INT, "executorsTotal": _INT, "msgTimeout": _INT, "windowHint": _STR, "debug": _BOOL,
    "samplingPct": _NUM,
    # deadLettered (squall's): records the spouts (and Trident spouts' emitter bolts) gave up to their dead
    # letters; a bolt's, those it failed last, and those it gave up itself (a Trident spout's)
    "topologyStats": _array(_WINDOW_STATS | {"required": ["window", "windowPretty", "emitted", "transferred",
                                                           "completeLatency", "acked", "failed", "deadLettered"],
                                             "properties": _WINDOW_STATS["properties"]
                                             | {"completeLatency": _NUM_OR_STR, "deadLettered": _INT}}),
    "spouts": _array(_obj({"spoutId": _STR, "executors": _INT, "tasks": _INT, "emitted": _INT, "transferred": _INT,
                           "completeLatency": _NUM_OR_STR, "acked": _INT, "failed": _INT, "deadLettered": _INT})),
    "bolts": _array(_obj({"boltId": _STR, "executors": _INT, "tasks": _INT, "emitted": _INT, "transferred": _INT,
                          "acked": _INT, "failed": _INT, "executed": _INT, "capacity": _NUM_OR_STR,
                          "executeLatency": _NUM_OR_STR, "processLatency": _NUM_OR_STR, "deadLettered": _INT})),
    "workers": _array({"type": "object"}),
    # squall's: the master's records of the workers (``__worker``, ``__master``), newest first
    "workerErrors": _array(_obj({"component": _STR, "errorTime": _NUM, "error": _STR, "errorCount": _INT})),
    "configuration": {"type": "object"},
    "trident": {"anyOf": [{"type": "null"}, _TRIDENT]},   # squall's: the Trident batches, null without
})

_COMPONENT_PAGE = _obj({"id": _STR, "name": _STR, "componentType": {"enum": ["spout", "bolt"]}, "executors": _INT,
                        "tasks": _INT, "topologyId": _STR, "topologyStatus": _STATUS, "window": _STR,
                        "windowHint": _STR, "debug": _BOOL, "samplingPct": _NUM,
                        "componentErrors": _array(_obj({"errorTime": _NUM, "error": _STR})),
                        "outputStats": _array(_obj({"stream": _STR, "emitted": _INT, "transferred": _INT})),
                        # squall's: the dead letters of a spout (or a Trident spout's emitter bolt), or of
                        # the records a bolt failed last, by the component that gave them up ("spout"), the
                        # component that failed them last ("" none) and reason
                        "deadLetterStats": _array(_obj({"spout": _STR, "failedBy": _STR, "reason": _STR,
                                                        "deadLettered": _INT}, extra=False)),
                        "executorStats": _array(_obj({"id": _STR, "host": _STR, "port": _INT}))})

_VIS_COMPONENT = _obj({":type": {"enum": ["spout", "bolt"]}, ":capacity": _NUM_OR_STR, ":latency": _NUM_OR_STR,
                       ":transferred": _NUM, ":stats": _array({"type": "object"}), ":link": _STR,
                       ":inputs": _array(_obj({":component": _STR, ":stream": _STR, ":sani-stream": _STR,
                                               ":grouping": _STR}))})
_VISUALIZATION = {"type": "object", "additionalProperties": _VIS_COMPONENT}

_VIS_INIT = _obj({"visualizationTable": _array(_obj({"row": _array(_obj({"stream": _STR, "sani-stream": _STR,
                                                                          "checked": _BOOL}, extra=False))}))})

_OPERATION = _obj({"topologyOperation": _STR, "topologyId": _STR, "status": {"const": "success"}}, extra=False)

_REBALANCE_BODY = _obj({"rebalanceOptions": {
    "type": "object", "additionalProperties": False,
    "properties": {"numWorkers": {"type": "integer", "minimum": 1},
                   "executors": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}}}},
    extra=False) | {"required": []}

_REASONS = {200: "OK", 400: "Bad request: a parameter or the body is malformed (named in errorMessage)",
            403: "Refused: actions are switched off, the request is cross-site, or X-Squall-Secret is "
                 "missing or wrong; nothing was done",
            404: "No such topology or component (named in errorMessage)",
            409: "The topology's state does not allow this action now (e.g. activating a killed topology)",
            503: "The master is unreachable; the UI goes on serving and answers again once it is back"}


def _param(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema, "description": description}


_ID = _param("id", "path", _STR, "the topology's storm id (``get_topology_info(name)[\"id\"]``)")
_COMPONENT = _param("component", "path", _STR, "a component id of the topology")
_WINDOW = _param("window", "query", {"enum": list(WINDOWS), "default": ":all-time"},
                 "the statistics window in seconds, or :all-time")
_SYS = _param("sys", "query", {"enum": ["0", "1", "true", "false"], "default": "0"},
              "1: include system components and streams (__acker, __ack_init, ...)")
_WAIT = _param("wait", "path", {"type": "string", "pattern": "^[0-9]+$"}, "seconds to wait before acting")
_ACTION = _param("action", "path", {"enum": ["enable", "disable"]}, "switch debug on or off")
_PCT = _param("pct", "path", {"type": "string"}, "sampling percent (a number, clamped to 0..100)")
_SECRET = _param("X-Squall-Secret", "header", _STR, "the cluster's secret (squall.secret or <storm.local.dir>/secret)")


def _responses(ok: dict[str, Any], *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": _REASONS[200], "content": {"application/json": {"schema": ok}}}}
    for status in (*errors, 503):
        out[str(status)] = {"description": _REASONS[status], "content": {"application/json": {"schema": _ERROR}}}
    return out


def _get(summary: str, ok: dict[str, Any], params: list[dict[str, Any]], *errors: int) -> dict[str, Any]:
    return {"get": {"summary": summary, "parameters": params, "responses": _responses(ok, *errors)}}


def _post(summary: str, params: list[dict[str, Any]], body: dict[str, Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "parameters": [*params, _SECRET],
                          "responses": _responses(_OPERATION, 400, 403, 404, 409)}
    if body is not None:
        op["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
    return {"post": op}


def _logviewer_paths() -> dict[str, Any]:
    """Storm's logviewer routes (`squall.ui.logviewer`), over the workers' artifacts directory."""
    file = _param("file", "query", _STR, "a log file relative to the artifacts directory, "
                                         "<topology-id>/<port>/worker.log")
    ints = [_param(n, "query", {"type": "string", "pattern": "^[0-9]+$"}, d) for n, d in
            (("start", "byte offset of the page (default: the tail)"), ("length", "page length in bytes"))]
    errors = {str(status): {"description": _REASONS[status], "content": {"application/json": {"schema": _ERROR}}}
              for status in (400, 404)}

    def ok(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"200": {"description": "OK", "content": {kind: {"schema": schema}}}, **errors}

    search = _obj({"searchString": _STR, "startByteOffset": _INT,
                   "matches": _array(_obj({"byteOffset": _INT, "beforeString": _STR, "matchString": _STR,
                                           "afterString": _STR, "logviewerURL": _STR}))})
    return {
        "/api/v1/log": {"get": {"summary": "A page of a worker's log (HTML)",
                                "parameters": [file, *ints, _param("grep", "query", _STR, "only lines with this")],
                                "responses": ok("text/html", _STR)}},
        "/api/v1/download": {"get": {"summary": "A worker's log file", "parameters": [file],
                                     "responses": ok("text/plain", _STR)}},
        "/api/v1/search/{file}": {"get": {"summary": "Matches of a string in one log file", "parameters": [
            _param("file", "path", _STR, "as file above"),
            _param("search-string", "query", _STR, "1 to 1024 UTF-8 bytes"),
            _param("num-matches", "query", {"type": "string", "pattern": "^[0-9]+$"}, "matches to return"),
            _param("start-byte-offset", "query", {"type": "string", "pattern": "^[0-9]+$"}, "where to start")],
            "responses": ok("application/json", search)}},
        "/api/v1/listLogs": {"get": {"summary": "The log files, of one topology and port if given", "parameters": [
            _param("topoId", "query", _STR, "a topology id"),
            _param("port", "query", {"type": "string", "pattern": "^[0-9]+$"}, "a worker port")],
            "responses": ok("application/json", _array(_STR))}},
    }


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every endpoint under ``/api/v1``."""
    t = "/api/v1/topology/{id}"
    page = [_ID, _WINDOW, _SYS]
    paths = {
        "/api/v1/cluster/configuration": _get("The master's configuration, secrets left out",
                                              {"type": "object"}, []),
        "/api/v1/cluster/summary": _get("Slots, executors and tasks of the cluster", _CLUSTER, []),
        "/api/v1/nimbus/summary": _get("The master", _NIMBUS, []),
        "/api/v1/supervisor/summary": _get("Each supervisor and its slots", _SUPERVISORS, []),
        "/api/v1/topology/summary": _get("Each topology", _TOPOLOGIES, []),
        t: _get("A topology's statistics, components, workers and configuration", _TOPOLOGY_PAGE, page, 400, 404),
        f"{t}/component/{{component}}": _get("A component's statistics per window, stream and executor",
                                             _COMPONENT_PAGE, [*page, _COMPONENT], 400, 404),
        f"{t}/visualization": _get("The topology's graph with figures (Storm's keys, colon-prefixed)",
                                   _VISUALIZATION, page, 400, 404),
        f"{t}/visualization-init": _get("The graph's stream check boxes", _VIS_INIT, page, 400, 404),
        f"{t}/history": _get("squall's own: the last minutes of spout totals and rates, sampled by the daemon",
                             _HISTORY, [_ID], 404),
        f"{t}/activate": _post("Activate the topology's spouts", [_ID]),
        f"{t}/deactivate": _post("Deactivate the topology's spouts", [_ID]),
        f"{t}/rebalance/{{wait}}": _post("Rebalance after wait seconds, to the body's counts", [_ID, _WAIT],
                                         _REBALANCE_BODY),
        f"{t}/kill/{{wait}}": _post("Kill the topology after wait seconds", [_ID, _WAIT]),
        f"{t}/debug/{{action}}/{{pct}}": _post("Switch the topology's debug flag", [_ID, _ACTION, _PCT]),
        f"{t}/component/{{component}}/debug/{{action}}/{{pct}}": _post("Switch a component's debug flag",
                                                                       [_ID, _COMPONENT, _ACTION, _PCT]),
    }
    paths.update(_logviewer_paths())
    paths["/api/v1/openapi.json"] = {"get": {"summary": "This document", "responses": {
        "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    return {"openapi": "3.1.0",
            "info": {"title": "squall UI REST API (Storm's /api/v1)", "version": __version__,
                     "description": "Apache Storm's UI REST API as squall serves it; see docs/ui.md."},
            "paths": paths}
