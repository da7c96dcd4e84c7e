"""``squall sparse run`` and ``squall sparse submit``: streamparse's ``sparse run`` and ``sparse
submit``, on squall, in a streamparse project's directory (docs/streamparse.md).

``run`` runs the project's topology on an in-process `LocalCluster` with ``squall local``'s
live figures and summary, for ``-t`` seconds (0, the default: until Ctrl-C), as ``sparse run``
does on Storm's local mode. ``submit`` sends it to the running squall master (``squall jar``'s
way: ``--config``/``-c`` name the cluster) or, with ``--host spark``, to a master started here
in a new Spark driver. sparse's options keep their letters: ``-n NAME``, ``-e ENV``,
``-o KEY=VALUE`` (VALUE read as YAML, as sparse reads it), ``-d`` (``topology.debug``, and
tracebacks), ``-w WORKERS``, ``-a ACKERS``; ``submit`` also ``-f`` (kill the topology of that
name first, after ``--wait`` seconds, and wait until it is gone) and ``-N NAME`` (submit under
NAME); ``kill`` and ``list`` are sparse's, to the running master (``squall kill``, ``squall list``);
``--multilang`` runs the Python components as ``streamparse_run`` subprocesses over Storm's
multilang protocol, as Storm does, instead of in squall's workers. sparse's other verbs and
options are answered by name (`_sparse_only`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._config import Config
from .._errors import InvalidTopologyException, NotAliveException
from .._submitter import StormSubmitter
from ..cluster.client import MasterClient
from ..cluster.local import LocalCluster
from ..sparse import LoadedTopology, load
from ..sparse.project import environment, find_project, topology_file
from . import _cluster, _sparse_only
from ._cluster import _client_conf, _master, _master_errors, _ToCluster, _ToMaster, run_on_spark
from ._local import _LiveView, _PlainView, _print_summary, _sigterm_stops, _squall_logging, _watch
from ._options import UserError, cluster_conf_of, conf_file, parse_overrides, positive_int, wait_seconds

# how long ``-f`` waits, beyond ``--wait``, for the master to remove the topology it killed
_GONE_SECS = 60.0


def register(verbs: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """Add ``squall sparse run|submit`` to the ``squall`` parser's verbs."""
    sparse = verbs.add_parser("sparse", help="run or submit a streamparse project's topology",
                              description="streamparse's sparse run / sparse submit, on squall, in a streamparse "
                                          "project's directory (docs/streamparse.md).")
    sub = sparse.add_subparsers(dest="sparse_verb", metavar="VERB", required=True)
    run = sub.add_parser("run", parents=list(parents), help="run the project's topology on an in-process LocalCluster",
                         description="Run the streamparse project's topology on an in-process LocalCluster, "
                                     "showing live figures, for -t seconds (default: until Ctrl-C).")
    run.set_defaults(run=cmd_run, verb_parser=run)
    run.add_argument("-t", "--time", type=int, default=0, metavar="SECS",
                     help="seconds to run; 0 or less: until Ctrl-C (default: 0)")
    submit = sub.add_parser("submit", parents=list(parents), help="submit the project's topology to the cluster",
                            description="Submit the streamparse project's topology to the running squall master "
                                        "(as squall jar), or with --host spark to a master started here in a new "
                                        "Spark driver, which runs until the topology is killed or Ctrl-C.")
    submit.set_defaults(run=cmd_submit, verb_parser=submit)
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
    kill.set_defaults(run=cmd_kill, verb_parser=kill)
    kill.add_argument("-n", "--name", help="the topology's name (default: the project's only topology)")
    kill.add_argument("-e", "--environment", metavar="ENV", help="the env of config.json (checked to exist)")
    kill.add_argument("--wait", type=wait_seconds, metavar="SECS",
                      help="seconds deactivated before it is removed (default: topology.message.timeout.secs)")
    kill.add_argument("--project", metavar="DIR", default=".", help="the project's directory (default: .)")
    listing = sub.add_parser("list", parents=list(parents), help="list the topologies on the cluster",
                             description="List the topologies on the running squall master, as sparse list "
                                         "(the table of squall list).")
    listing.set_defaults(run=cmd_list, verb_parser=listing)
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


def yaml_value(item: str, text: str) -> Any:
    """The VALUE of ``-o KEY=VALUE`` (``item``) as sparse reads it: YAML, safe, with ruamel's
    YAML 1.2 reader (streamparse's ``_StoreDictAction``), so ``False`` is false, ``[a, b]`` a
    list and ``{rows: 5}`` a dict, as the topology gets them under Storm (``-c`` reads JSON)."""
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError
    except ImportError as e:  # streamparse needs ruamel.yaml: without it, there is no sparse either
        raise UserError(f"-o {item!r}: reading its VALUE as YAML, as sparse does, needs ruamel.yaml "
                        f"(pip install 'squall[streamparse]'): {e}", code=2) from e
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as e:
        problem = " ".join(str(getattr(e, "problem", None) or type(e).__name__).split())
        raise UserError(f"-o {item!r}: VALUE is not YAML ({problem})", code=2) from e


# YAML 1.2's booleans, as sparse's -d VALUE reaches topology.debug through its YAML reader
_YAML_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _debug_value(text: str) -> bool:
    """The value of ``-d VALUE``: true or false, as sparse reads it."""
    if text not in _YAML_BOOLS:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false (sparse's -d sets topology.debug)")
    return _YAML_BOOLS[text]


def _check_config_is_squalls(args: argparse.Namespace) -> None:
    """sparse's ``--config`` names the project's ``config.json``; here, as on every squall verb,
    the cluster's ``squall.yaml``: a ``config.json`` given there (a JSON object with sparse's
    ``envs`` or ``topology_specs``) is refused, saying so, rather than read as the cluster's."""
    if args.config is None or not Path(args.config).is_file():
        return  # conf_file says it is missing
    try:
        data = json.loads(Path(args.config).read_text())
    except (ValueError, OSError):
        return  # not JSON: a squall.yaml
    if isinstance(data, dict) and ("envs" in data or "topology_specs" in data):
        raise UserError(f"--config {args.config}: that is a streamparse config.json; squall's --config names the "
                        f"cluster's squall.yaml (docs/cli.md). The project's config.json is read from its directory: "
                        f"--project {Path(args.config).parent or '.'}", code=2)


def _load(args: argparse.Namespace, topology_over: dict[str, Any]) -> LoadedTopology:
    topology_keys, other_keys = parse_overrides(args.options, "-o", yaml_value)
    options = {**topology_keys, **other_keys}  # sparse's -o: every key is the topology's
    if args.debug is not None:  # -d, or -d true|false
        options[Config.TOPOLOGY_DEBUG] = args.debug
    if args.workers is not None:
        options[Config.TOPOLOGY_WORKERS] = args.workers
    if args.ackers is not None:
        options[Config.TOPOLOGY_ACKER_EXECUTORS] = args.ackers
    return load(args.project, args.name, env_name=args.environment, options={**options, **topology_over},
                multilang=args.multilang)


def cmd_run(args: argparse.Namespace) -> int:
    """``squall sparse run [-n NAME] [-t SECS] ...``: sparse run on a LocalCluster."""
    _check_config_is_squalls(args)
    _sparse_only.answer(args, "run")
    topology_over, daemon_over = parse_overrides(args.overrides)
    config = conf_file(args.config)
    loaded = _load(args, topology_over)
    ttl = float(args.time) if args.time > 0 else None
    with _squall_logging(args.debug), _sigterm_stops():
        cluster = LocalCluster(daemon_over, conf_file=config)
        try:
            cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
            view = _LiveView() if sys.stdout.isatty() else _PlainView()
            final, reason = _watch(cluster, [loaded.name], ttl, view)
            reason = reason.replace("--ttl", "-t")  # the summary names sparse's option
            with contextlib.suppress(NotAliveException):
                cluster.kill_topology(loaded.name, wait_secs=0)
        finally:
            cluster.shutdown()
    _print_summary(final, reason, args.debug)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    """``squall sparse submit [-n NAME] [--host process|spark] ...``: sparse submit to squall."""
    _check_config_is_squalls(args)
    _sparse_only.answer(args, "submit")
    if args.inactive:  # as squall jar refuses Flux's -i: a submit is active, deactivating is a verb of its own
        raise UserError("-i/--inactive: squall sparse submit submits active; run `squall deactivate NAME` after it",
                        code=2)
    conf, topology_over = cluster_conf_of(args)
    loaded = _load(args, topology_over)
    if args.override_name and args.override_name != loaded.name:
        print(f'Deploying "{loaded.name}" topology with name "{args.override_name}"...', flush=True)
        loaded = dataclasses.replace(loaded, name=args.override_name)
    if args.host == "spark":
        if args.force:  # a new driver's master runs only what it recovers or is given
            raise UserError("-f goes with the running master: a --host spark driver starts its own", code=2)
        return _submit_on_spark(args, conf, loaded)
    if args.spark_master:
        raise UserError("--spark-master goes with --host spark", code=2)
    client_conf, missing = _client_conf(conf)
    with StormSubmitter.using_conf(client_conf), _master_errors(conf, missing, args):
        if args.force:
            _kill_existing(client_conf, loaded, args.wait)
        _ToMaster(client_conf).submit_topology(loaded.name, loaded.conf, loaded.topology)
    return 0


def _kill_existing(client_conf: dict[str, Any], loaded: LoadedTopology, wait: float) -> None:
    """sparse's ``-f``: kill the topology of ``loaded``'s name if the master has one (``wait``
    seconds deactivated first) and return once the master no longer lists it, so that the submit
    after takes the name; an error if it is still listed `_GONE_SECS` after its wait. The master
    checks ``loaded`` first, as if the running one were gone: a replacement it would refuse (a
    bad setting, more workers than the slots, a component it cannot load) kills nothing, where
    sparse's -f leaves the cluster without either."""
    name = loaded.name
    with MasterClient(client_conf) as master:
        def listed() -> bool:
            return any(t["name"] == name for t in master.list_topologies())

        if not listed():
            return
        try:
            master.check_submit(name, loaded.conf, loaded.topology, replacing=True)
        except InvalidTopologyException as e:
            raise UserError(f"{e}\nnothing was killed: the running topology {name!r} goes on", code=1) from None
        print(f'Killing current "{name}" topology.', flush=True)
        with contextlib.suppress(NotAliveException):  # killed already, and waiting to go
            master.kill_topology(name, wait_secs=wait)
        deadline = time.monotonic() + wait + _GONE_SECS
        while listed():
            if time.monotonic() > deadline:
                raise UserError(f"topology {name!r} is still on the cluster {wait + _GONE_SECS:.0f} s after -f "
                                f"killed it (squall list); nothing was submitted", code=1)
            time.sleep(0.2)
        print("Killed.", flush=True)


def cmd_kill(args: argparse.Namespace) -> int:
    """``squall sparse kill [-n NAME] [--wait SECS]``: sparse kill, to the running master. Any
    NAME may be given (as sparse allows, for a topology not in this checkout); without it, the
    project's only topology."""
    _check_config_is_squalls(args)
    _sparse_only.answer(args, "kill")
    project = find_project(args.project)
    environment(project, args.environment)
    name = args.name if args.name is not None else topology_file(project, None)[0]
    with _master(args) as master:
        master.kill_topology(name, wait_secs=args.wait)
    print(f"Killed topology: {name}", flush=True)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``squall sparse list [-e ENV]``: sparse list, as ``squall list``; ``-e`` (sparse's way to pick
    a cluster) is checked to name an env of the project's config.json, as kill's is: the cluster
    is the one ``--config`` names."""
    _check_config_is_squalls(args)
    _sparse_only.answer(args, "list")
    if args.environment is not None:
        environment(find_project(args.project), args.environment)
    return _cluster.cmd_list(args)


def _submit_on_spark(args: argparse.Namespace, conf: dict[str, Any], loaded: LoadedTopology) -> int:
    def submit(target: _ToCluster) -> None:
        target.submit_topology(loaded.name, loaded.conf, loaded.topology)
    return run_on_spark(args, conf, submit, lambda: [loaded.name], what=f"topology {loaded.name}")
