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
from ._options import UserError, cluster_conf_of, conf_file, parse_overrides

# how long ``-f`` waits, beyond ``--wait``, for the master to remove the topology it killed
_GONE_SECS = 60.0


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
