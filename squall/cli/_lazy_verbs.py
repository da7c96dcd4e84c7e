"""A verb's function, named by its module and imported when the verb runs.

The parser (`squall.cli._create_arg_parser`) declares every verb, but running one needs only
its own module: ``squall list`` talks to a running master through `squall.cli._cluster` and
needs none of the master, the process host, DRPC, LocalCluster, streamparse or Spark that
other verbs load. Measured on a 2-core machine (best of 10), ``squall list --help`` took 0.21 s
when the parser imported every verb's module, 0.08 s now.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class VerbFunction:
    """``squall.cli.<module>.<name>(args)``, looked up when called: so a test that replaces the
    module's function (``monkeypatch.setattr(_cluster, "cmd_list", ...)``) replaces the verb's."""

    module: str  # the module under squall.cli, e.g. "_cluster"
    name: str

    def __call__(self, args: argparse.Namespace) -> int:
        function = getattr(importlib.import_module(f"squall.cli.{self.module}"), self.name)
        return function(args)
