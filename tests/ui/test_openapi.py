"""schemathesis against the REST API (in-process ASGI, no network), with a running LocalCluster
topology: no request gets a server error (5xx), and every answer matches the OpenAPI document
served at /api/v1/openapi.json (status, content type, schema). Once without the secret (every
action refused), and once with it on a throwaway cluster, so that the actions run."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.checks import not_a_server_error  # noqa: E402

from squall import LocalCluster  # noqa: E402
from squall.ui.server import local_app  # noqa: E402

from .conftest import AUTH, BASE, SECRET, small_topology  # noqa: E402

# schemathesis's ASGI client names the app "testserver"; the UI answers only its own names
HOST = {"Host": BASE.split("//", 1)[1]}


@pytest.fixture(scope="module")
def api_schema(cluster):
    return schemathesis.openapi.from_asgi("/api/v1/openapi.json", local_app(cluster), headers=HOST)


@pytest.fixture(scope="module")
def throwaway():
    """A cluster of this module's own, whose topologies the actions may change: (its schema, the
    storm id of the topology to change, of the one to kill)."""
    with LocalCluster({"squall.secret": SECRET}) as c:
        for name in ("victim", "doomed"):
            c.submit_topology(name, {"topology.message.timeout.secs": 5}, small_topology())
        yield (schemathesis.openapi.from_asgi("/api/v1/openapi.json", local_app(c), headers=HOST),
               c.get_topology_info("victim")["id"], c.get_topology_info("doomed")["id"])


@pytest.fixture(scope="module")
def actions_schema(throwaway):
    return throwaway[0]


schema = schemathesis.pytest.from_fixture("api_schema")
actions = schemathesis.pytest.from_fixture("actions_schema").include(method="POST")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_matches_the_openapi_document(case, storm_id):
    if (case.path_parameters or {}).get("id") == "summary":
        # /api/v1/topology/summary is Storm's route for the list of topologies, not a topology
        # whose id is "summary" (a storm id is "<name>-<counter>-<time>"): ask for an unknown id
        case.path_parameters["id"] = "summary-0-0"
    case.call_and_validate(checks=CHECKS, headers=HOST)
    if "id" in (case.path_parameters or {}):
        # random ids find no topology: ask again about the running one (and a real component),
        # so that the pages with figures are checked too (actions: refused, no secret is sent)
        case.path_parameters["id"] = storm_id
        if "component" in case.path_parameters:
            case.path_parameters["component"] = "upper"
        case.call_and_validate(checks=CHECKS, headers=HOST)


@actions.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_action_with_the_secret_answers_as_the_openapi_document_says(case, throwaway):
    _, storm_id, doomed_id = throwaway
    # the real topologies' ids, so that the actions run; kill has one of its own, so that the
    # actions after it in the document still find theirs
    case.path_parameters["id"] = doomed_id if "/kill/" in case.path else storm_id
    if "component" in case.path_parameters:
        case.path_parameters["component"] = "upper"
    case.call_and_validate(checks=CHECKS, headers={**HOST, **AUTH})
