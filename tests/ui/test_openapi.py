"""schemathesis against the REST API (in-process ASGI, no network), with a running LocalCluster
topology: no request gets a server error (5xx), and every answer matches the OpenAPI document
served at /api/v1/openapi.json (status, content type, schema)."""

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

from squall.ui.server import local_app  # noqa: E402


@pytest.fixture(scope="module")
def api_schema(cluster):
    return schemathesis.openapi.from_asgi("/api/v1/openapi.json", local_app(cluster))


schema = schemathesis.pytest.from_fixture("api_schema")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_matches_the_openapi_document(case, storm_id):
    case.call_and_validate(checks=CHECKS)
    if "id" in (case.path_parameters or {}):
        # random ids find no topology: ask again about the running one (and a real component),
        # so that the pages with figures are checked too (actions: refused, no secret is sent)
        case.path_parameters["id"] = storm_id
        if "component" in case.path_parameters:
            case.path_parameters["component"] = "upper"
        case.call_and_validate(checks=CHECKS)
