"""``squall sparse``'s parser: its verbs (``run``, ``submit``, ``kill``, ``list``, and sparse's
others, answered by `_sparse_only`) and their options, declared without loading what runs them
(`squall.cli._sparse`, which loads streamparse's projects, LocalCluster and the master's client)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .._config import Config
from . import _sparse_only
from ._lazy_verbs import VerbFunction
from ._options import positive_int, wait_seconds


def register(verbs: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add ``squall sparse run|submit`` to the ``squall`` parser's verbs."""
    sparse = verbs.add_parser("sparse", help="run or submit a streamparse project's topology",
                              description="streamparse's sparse run / sparse submit, on squall, in a streamparse "
                                          "project's directory (docs/streamparse.md).")
    sub = sparse.add_subparsers(dest="sparse_verb", metavar="VERB", required=True)
    run = sub.add_parser("run", parents=list(parents), help="run the project's topology on an in-process LocalCluster",
                         description="Run the streamparse project's topology on an in-process LocalCluster, "
                                     "showing live figures, for -t seconds (default: until Ctrl-C).")
    run.set_defaults(run=VerbFunction("_sparse", "cmd_run"), verb_parser=run)
    run.add_argument("-t", "--time", type=int, default=0, metavar="SECS",
                     help="seconds to run; 0 or less: until Ctrl-C (default: 0)")
    submit = sub.add_parser("submit", parents=list(parents), help="submit the project's topology to the cluster",
                            description="Submit the streamparse project's topology to the running squall master "
                                        "(as squall jar), or with --host spark to a master started here in a new "
                                        "Spark driver, which runs until the topology is killed or Ctrl-C.")
    submit.set_defaults(run=VerbFunction("_sparse", "cmd_submit"), verb_parser=submit)
    submit.add_argument("--host", choices=("process", "spark"), default="process",
                        help="the running master (default), or a new Spark driver (docs/spark.md)")
    submit.add_argument("--spark-master", metavar="URL", help="with --host spark: the Spark master")
    submit.add_argument("-f", "--force", action="store_true",
                        help="kill the running topology of that name first and wait until it is gone, as sparse's "
                             "-f (with the running master)")
    submit.add_argument("--wait", type=wait_seconds, default=5.0, metavar="SECS",
                        help="with -f: seconds the killed topology is deactivated before it is removed (default: 5, "
                             "as sparse's)")
    submit.add_argument("-i", "--inactive", action="store_true",
                        help="refused: squall submits active (sparse's -i); run squall deactivate NAME after it")
    submit.add_argument("-N", "--override_name", "--override-name", dest="override_name", metavar="NAME",
                        help="submit the topology under NAME instead of its file's name, as sparse's -N")
    kill = sub.add_parser("kill", parents=list(parents), help="kill the project's topology on the cluster",
                          description="Kill the project's topology (or -n NAME) on the running squall master, as "
                                      "sparse kill: its spouts deactivated for --wait seconds (default: its "
                                      "topology.message.timeout.secs), then removed (as squall kill NAME).")
    kill.set_defaults(run=VerbFunction("_sparse", "cmd_kill"), verb_parser=kill)
    kill.add_argument("-n", "--name", help="the topology's name (default: the project's only topology)")
    kill.add_argument("-e", "--environment", metavar="ENV", help="the env of config.json (checked to exist)")
    kill.add_argument("--wait", type=wait_seconds, metavar="SECS",
                      help="seconds deactivated before it is removed (default: topology.message.timeout.secs)")
    kill.add_argument("--project", metavar="DIR", default=".", help="the project's directory (default: .)")
    listing = sub.add_parser("list", parents=list(parents), help="list the topologies on the cluster",
                             description="List the topologies on the running squall master, as sparse list "
                                         "(the table of squall list).")
    listing.set_defaults(run=VerbFunction("_sparse", "cmd_list"), verb_parser=listing)
    listing.add_argument("-e", "--environment", metavar="ENV", help="the env of config.json (checked to exist)")
    listing.add_argument("--project", metavar="DIR", default=".",
                         help="with -e: the project's directory (default: .)")
    for verb, p in (("run", run), ("submit", submit), ("kill", kill), ("list", listing)):
        _sparse_only.add_options(p, verb)
    _sparse_only.add_verbs(sub)
    for p in (kill, listing):
        p.add_argument("-d", "--debug", action="store_true", help="show tracebacks on errors")
    for p in (run, submit):
        p.add_argument("-n", "--name", help="the topology (topologies/NAME.py); needed when there are several")
        p.add_argument("-e", "--environment", metavar="ENV", help="the env of config.json (needed when it has several)")
        p.add_argument("-o", "--option", dest="options", action="append", metavar="KEY=VALUE",
                       help="a topology option, VALUE read as YAML (repeatable), as sparse's -o")
        # sparse's -d takes an optional value too (-d false): topology.debug as given, over the Topology's
        p.add_argument("-d", "--debug", nargs="?", const=True, default=None, type=_debug_value, metavar="BOOL",
                       help=f"set {Config.TOPOLOGY_DEBUG} (and pystorm.log.level debug), as sparse's -d; and show "
                            f"tracebacks on errors; -d false sets it false")
        p.add_argument("-w", "--workers", type=positive_int, help=Config.TOPOLOGY_WORKERS)
        p.add_argument("-a", "--ackers", type=int, metavar="N", help=Config.TOPOLOGY_ACKER_EXECUTORS)
        p.add_argument("--project", metavar="DIR", default=".", help="the project's directory (default: .)")
        p.add_argument("--multilang", action="store_true",
                       help="run the Python components as streamparse_run subprocesses over the multilang "
                            "protocol (Storm's way) instead of in squall's workers")


# YAML 1.2's booleans, as sparse's -d VALUE reaches topology.debug through its YAML reader
_YAML_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _debug_value(text: str) -> bool:
    """The value of ``-d VALUE``: true or false, as sparse reads it."""
    if text not in _YAML_BOOLS:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false (sparse's -d sets topology.debug)")
    return _YAML_BOOLS[text]
