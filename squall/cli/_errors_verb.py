"""``squall get-errors TOPOLOGY`` (also ``get_errors``): Storm's ``storm get-errors``, each
component's last error as JSON, read through the master's ``info`` verb."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from .._errors import NotAliveException
from ..engine.executor import ErrorRecord
from ._cluster import _master


def last_errors(errors: Iterable[Any]) -> dict[str, str]:
    """Component id -> the text of its last error, from ``info``'s errors (as `ErrorRecord.as_dict`
    makes them), oldest first: a repeat that the master folded into an earlier record moved that
    record to the end, so the last record of a component is its newest error. Components without
    an error are absent, as in Storm's; the master's own records (a worker that could not start)
    come under ``__master``."""
    last: dict[str, str] = {}
    for record in map(ErrorRecord.from_dict, errors):
        last[record.component] = record.error
    return last


def cmd_get_errors(args: argparse.Namespace) -> int:
    """Print Storm's JSON, ``{"Topology Name": NAME, "Comp-Errors": {component: error}}``; for a
    topology the master does not have, Storm's ``{"Failure": "No topologies running with name
    NAME"}`` and exit status 1 (Storm's exits 0: a script should not need to parse the output to
    see that the name was wrong)."""
    with _master(args) as master:
        try:
            info = master.get_topology_info(args.name)
        except NotAliveException:
            print(json.dumps({"Failure": f"No topologies running with name {args.name}"}))
            return 1
    print(json.dumps({"Topology Name": info["name"], "Comp-Errors": last_errors(info["errors"])}))
    return 0
