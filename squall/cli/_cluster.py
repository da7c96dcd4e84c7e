"""The cluster verbs: the daemons (``nimbus``, ``supervisor``, and ``node-health-check``) and the master's clients (``jar``,
``list``, ``info``, ``kill``, ``activate``, ``deactivate``, ``rebalance``, ``monitor``), each a
short function over `run_nimbus`, `run_process_supervisor`, `StormSubmitter` and `MasterClient`.

A client finds the master with the cluster configuration that ``--config`` and ``-c``'s cluster
keys give (``nimbus.seeds``, else ``nimbus.host``, and ``nimbus.thrift.port``) and proves itself
with the cluster's secret: ``squall.secret``, else the file ``<storm.local.dir>/secret`` that the
master writes. A client never writes that file: without a secret it offers a random one, and a
refusal then says that the secret is missing. Output lines are Storm's (``Killed topology: NAME``,
``storm list``'s table, ``storm monitor``'s columns).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import logging
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._config import Config, conf_value, find_conf_file, submit_warnings
from .._error_lines import cause_line, first_and_last
from .._errors import RpcError, SquallError, transient
from .._redact import redact_logs
from .._submitter import StormSubmitter
from .._system import ACKER_COMPONENT, is_system_id
from .._wire import AuthenticationError
from ..cluster.client import MasterClient, master_address
from ..cluster.seeds import describe_seeds, nimbus_seeds
from ._flux import FluxRun, from_args
from ._options import UserError, cluster_conf_of

if TYPE_CHECKING:
    from ..cluster.view import LaunchCount

# Lazy imports below (each marked): a verb that talks to a running master (list, kill, info...)
# loads only the master's client; the master, the process host, DRPC, LocalCluster, a topology
# FILE's loaders and the engine are loaded by the verbs that use them.


# --- daemons --------------------------------------------------------------------------------------------
def cmd_nimbus(args: argparse.Namespace) -> int:
    """``squall nimbus [--host process|spark] [--spark-master URL] [--no-supervisor]``: the
    master, in the foreground (on Spark: in a new Spark driver, its task slots the workers')."""
    conf, topology_over = cluster_conf_of(args)
    from ..cluster.process import run_nimbus  # lazy: only this verb's (see the imports above)
    from ._drpc import drpc_beside_nimbus

    _daemon_logging(args.debug)
    drpc = drpc_beside_nimbus(conf)  # when drpc.servers names this machine, as `squall drpc` would
    try:
        if args.host == "spark":
            from ..cluster.spark import run_spark_nimbus
            _, settings = spark_settings(topology_over)
            return run_spark_nimbus(conf, args.spark_master, on_ready=_print_ready, settings=settings)
        if args.spark_master:
            raise UserError("--spark-master goes with --host spark", code=2)
        return run_nimbus(conf, supervise=not args.no_supervisor, on_ready=_print_ready)
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        host, port = conf_value(conf, Config.NIMBUS_HOST), conf.get(Config.NIMBUS_THRIFT_PORT)
        raise UserError(f"cannot listen on {host}:{port}: address already in use "
                        f"(is a master already running?)") from e
    finally:
        if drpc is not None:
            drpc.stop()


def _print_ready(host: str, port: int, what: str = "") -> None:
    """The line scripts wait for (docs/cli.md): the master listens, at this address."""
    print(f"squall nimbus ready at {host}:{port}" + (f" ({what})" if what else ""), flush=True)


def cmd_supervisor(args: argparse.Namespace) -> int:
    """``squall supervisor``: ``python -m squall.cluster.supervisor``, with the CLI's options."""
    from ..cluster.process import running_supervisor  # lazy: only this verb's (see the imports above)
    from ..cluster.supervisor import run_process_supervisor

    conf, _ = cluster_conf_of(args)
    local_dir = Path(conf_value(conf, Config.STORM_LOCAL_DIR))
    pid = running_supervisor(local_dir)
    if pid is not None:
        raise UserError(f"a supervisor already runs for storm.local.dir {local_dir} (pid {pid})")
    _daemon_logging(args.debug)
    run_process_supervisor(conf)  # binding storm.local.hostname, else 127.0.0.1
    return 0


def cmd_node_health_check(args: argparse.Namespace) -> int:
    """``squall node-health-check``: run this machine's health checks once (Storm's ``storm
    node-health-check``); exit 1 if the node is unhealthy, 0 if not (a process manager may gate
    the supervisor's start on it)."""
    from ..cluster.health import HealthCheck  # lazy: only this verb's (see the imports above)

    conf, _ = cluster_conf_of(args)
    check = HealthCheck.from_conf(conf)
    report = check.run()
    for result in report.results:
        print(f"{result.script}: {'ok' if result.healthy else result.why}")
    if not report.results:
        print(f"no health check scripts in {check.directory}")
    return 0 if report.healthy else 1


def _daemon_logging(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    redact_logs()


# --- reaching the master --------------------------------------------------------------------------------
def _client_conf(conf: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``conf`` for a client, and whether this machine lacks the cluster's secret (a random
    stand-in is then offered, so that the client creates no secret file of its own)."""
    if conf.get(Config.SQUALL_SECRET) or _secret_file(conf).exists():
        return conf, False
    return {**conf, Config.SQUALL_SECRET: secrets.token_hex(16)}, True


def _secret_file(conf: dict[str, Any]) -> Path:
    return Path(conf_value(conf, Config.STORM_LOCAL_DIR)) / "secret"


@contextlib.contextmanager
def _master_errors(conf: dict[str, Any], missing_secret: bool, args: argparse.Namespace) -> Iterator[None]:
    """An unreachable or refusing master, directly or behind `StormSubmitter`, as one line."""
    try:
        yield
    except RpcError as e:
        raise _after_file(_master_error(e, conf, missing_secret, _conf_file_used(args)), args) from e
    except SquallError as e:
        if isinstance(e.__cause__, RpcError):
            raise _after_file(_master_error(e.__cause__, conf, missing_secret, _conf_file_used(args)), args) from e
        raise


def _after_file(error: UserError, args: argparse.Namespace) -> UserError:
    """``error``, saying so when squall's cluster options came after FILE (``squall jar FILE
    --config X``): FILE got them as its own arguments, and squall used its defaults."""
    misplaced = [a for a in getattr(args, "args", None) or []
                 if a == "-c" or a.partition("=")[0] == "--config" or (a.startswith("-c") and "=" in a)]
    if not misplaced:
        return error
    return UserError(f"{error}; FILE's arguments include {' '.join(misplaced)}: squall's options go before "
                     f"FILE (squall jar --config PATH FILE ARGS)", error.code)


def _conf_file_used(args: argparse.Namespace) -> Path | None:
    """The squall.yaml the verb read: ``--config``, else the one found (None: defaults only)."""
    return Path(args.config) if args.config else find_conf_file()


_POINT_AT_THE_CLUSTER = ("point at the cluster with --config PATH/squall.yaml (the master's), or with "
                         "-c nimbus.seeds=[HOST] -c nimbus.thrift.port=PORT -c storm.local.dir=DIR")


def _master_error(e: RpcError, conf: dict[str, Any], missing_secret: bool, conf_file: Path | None) -> UserError:
    host, port = master_address(conf)
    if isinstance(e, AuthenticationError):
        if missing_secret:
            return UserError(
                f"authentication failed: no cluster secret here (squall.secret is not set and "
                f"{_secret_file(conf).absolute()} does not exist); use the master's squall.yaml (--config), "
                f"or -c storm.local.dir=DIR with the master's storm.local.dir, which holds its secret")
        source = Config.SQUALL_SECRET if conf.get(Config.SQUALL_SECRET) else str(_secret_file(conf))
        return UserError(f"authentication failed: the master at {host}:{port} refused our secret "
                         f"(from {source}); it must be the master's")
    cause = e.__cause__
    reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(e)
    hint = "" if conf_file is not None else (
        f" (no squall.yaml here or in $SQUALL_CONF_DIR, so this is the default address); {_POINT_AT_THE_CLUSTER}")
    if len(nimbus_seeds(conf)) > 1:  # the reason names each seed and what it said
        return UserError(f"cannot reach the leading master among nimbus.seeds {describe_seeds(conf)}: {reason}{hint}")
    if port == 0:  # a master's own setting (any free port), copied into the client's: no port to reach
        return UserError(
            f"cannot reach the master at {host}:0: nimbus.thrift.port is 0"
            f"{f' (read {conf_file})' if conf_file is not None else ''}, which lets a master listen on any "
            f"free port and tells a client nothing: give the port the master listens on, which it printed "
            f"(`squall master on Spark ... at HOST:PORT`) and logged (`squall master listening on HOST:PORT`), "
            f"with -c nimbus.thrift.port=PORT, or set a fixed nimbus.thrift.port in the master's squall.yaml")
    return UserError(f"cannot reach the master at {host}:{port}: {reason}{hint}")


@contextlib.contextmanager
def _master(args: argparse.Namespace) -> Iterator[MasterClient]:
    """A `MasterClient` for the master ``args`` name."""
    conf, _ = cluster_conf_of(args)
    client_conf, missing = _client_conf(conf)
    with _master_errors(conf, missing, args), MasterClient(client_conf) as master:
        yield master


# --- jar --------------------------------------------------------------------------------------------------
class _ToMaster:
    """Submits as `StormSubmitter` does outside ``squall local``: to the master that
    `StormSubmitter.using_conf` names (``client_conf``)."""

    def __init__(self, client_conf: dict[str, Any]) -> None:
        self.client_conf = client_conf

    def submit_topology(self, name: str, conf: dict[str, Any], topology: Any) -> None:
        for warning in submit_warnings(conf, topology, name):  # the master logs these too, but far from here
            print(f"squall: warning: {warning}", file=sys.stderr)
        with StormSubmitter.submitting_to(None):  # past the FileSubmitter, to the master
            StormSubmitter.submit_topology(name, conf, topology)
        print(f"Submitted topology: {name}", flush=True)
        try:
            with MasterClient(self.client_conf) as master:  # placed at once, or waiting for slots?
                row = next((t for t in master.list_topologies() if t["name"] == name), None)
        except RpcError:
            return  # the submit succeeded; only the note about slots is lost
        note = _slots_note(row) if row else None
        if note:
            print(note, flush=True)


class _ToCluster:
    """Submits to an in-process cluster (`SparkCluster`), and keeps the names it submitted or
    resumed (``names``): the topologies of this driver, which it waits on and kills when it
    stops. A topology that its master recovered from ``storm.local.dir`` at start is resumed,
    not submitted again: this driver is one that died with the topology running and was
    started again (Spark's ``--supervise``, a YARN attempt, a restarted pod), and the
    topology's workers, state and ids carry on."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.recovered = {t["name"]: t["id"] for t in cluster.list_topologies()}
        self.names: list[str] = []

    def submit_topology(self, name: str, conf: dict[str, Any], topology: Any) -> None:
        if name in self.recovered:
            self.cluster.ship_modules(topology)  # what its code imports later, on the new executors
            self.names.append(name)
            print(f"Resumed topology: {name} ({self.recovered[name]}, recovered from "
                  f"{self.cluster.conf.get(Config.STORM_LOCAL_DIR)})", flush=True)
            return
        self.cluster.submit_topology(name, conf, topology)
        self.names.append(name)
        print(f"Submitted topology: {name}", flush=True)


class _Recorder:
    """A submit target that only records (name, conf, topology): FILE's submissions, learnt
    before the master that runs them may start (`_FileOnSpark.names`)."""

    def __init__(self) -> None:
        self.submissions: list[tuple[str, dict[str, Any], Any]] = []

    def submit_topology(self, name: str, conf: dict[str, Any], topology: Any) -> None:
        self.submissions.append((name, conf, topology))


class _FileOnSpark:
    """FILE's topologies for ``squall jar --host spark``: `names`, the names FILE submits
    (learnt by running FILE against a `_Recorder`, whose submissions `submit` then hands over
    instead of running FILE again), and `submit`, to the master started here."""

    def __init__(self, args: argparse.Namespace, path: Path, topology_over: dict[str, Any],
                 flux: FluxRun | None) -> None:
        self.args, self.path, self.topology_over, self.flux = args, path, topology_over, flux
        self.recorded: list[tuple[str, dict[str, Any], Any]] | None = None

    def _run(self, target: Any, submitting_to: Any) -> list[str]:
        from ._topology_file import on_sys_path, submit_file  # lazy: only this verb's (jar) (see the imports above)

        with on_sys_path(self.path.parent), StormSubmitter.submitting_to(submitting_to):
            return submit_file(self.path, target, self.topology_over, self.args.name, self.args.args, self.flux)

    def names(self) -> list[str]:
        if self.recorded is None:
            recorder = _Recorder()
            self._run(recorder, recorder)
            self.recorded = recorder.submissions
        return [name for name, _conf, _topology in self.recorded]

    def submit(self, target: _ToCluster) -> None:
        if self.recorded is None:
            self._run(target, target.cluster)
            return
        from ._topology_file import on_sys_path  # lazy: only this verb's (jar) (see the imports above)

        with on_sys_path(self.path.parent):  # what the topologies' code imports (shipped from here)
            for name, conf, topology in self.recorded:
                target.submit_topology(name, conf, topology)


def cmd_jar(args: argparse.Namespace) -> int:
    """``squall jar FILE [ARGS...]``: FILE's topology, submitted to the master; with ``--host
    spark``, to a master started here in a new Spark driver, which runs until the topologies
    are killed (``squall kill``) or Ctrl-C."""
    from ._topology_file import check_file, on_sys_path, submit_file  # lazy: only this verb's (see the imports above)

    _squall_options_after_file(args)
    conf, topology_over = cluster_conf_of(args)
    flux = from_args(args, args.args, "jar")  # a Flux FILE.yaml: built here; its ARGS are Flux's options
    if flux is not None and flux.options.dry_run:
        return 0
    path = flux.path if flux is not None else check_file(args.file)
    if args.host == "spark":
        topology_over, settings = spark_settings(topology_over)
        return _jar_on_spark(args, conf, path, topology_over, flux, settings)
    if args.spark_master:
        raise UserError("--spark-master goes with --host spark", code=2)
    client_conf, missing = _client_conf(conf)
    with on_sys_path(path.parent), StormSubmitter.using_conf(client_conf), _master_errors(conf, missing, args):
        submit_file(path, _ToMaster(client_conf), topology_over, args.name, args.args, flux)
    return 0


def _squall_options_after_file(args: argparse.Namespace) -> None:
    """``squall jar FILE --host spark --spark-master URL -c KEY=VALUE``: these are squall's even
    after FILE (FILE does not see them; Storm takes ``-c`` anywhere on its command line too);
    every other argument after FILE is FILE's."""
    rest, out = list(args.args), []
    while rest:
        arg = rest.pop(0)
        key, eq, value = arg.partition("=")
        if arg == "-c" or arg.startswith("-c") and "=" in arg[2:]:
            item = arg[2:] if arg != "-c" else (rest.pop(0) if rest else None)
            if item is None:
                raise UserError("-c needs KEY=VALUE", code=2)
            args.overrides = [*(args.overrides or []), item]
        elif key in ("--host", "--spark-master"):
            if not eq:
                if not rest:
                    raise UserError(f"{key} needs a value", code=2)
                value = rest.pop(0)
            if key == "--host" and value not in ("master", "spark"):
                raise UserError(f"--host: expected master or spark, got {value!r}", code=2)
            setattr(args, key[2:].replace("-", "_"), value)
        else:
            out.append(arg)
    args.args = out


def _jar_on_spark(args: argparse.Namespace, conf: dict[str, Any], path: Path, topology_over: dict[str, Any],
                  flux: FluxRun | None = None, settings: dict[str, str] | None = None) -> int:
    file = _FileOnSpark(args, path, topology_over, flux)
    return run_on_spark(args, conf, file.submit, file.names, what=path.name, settings=settings)


def spark_settings(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``-c`` topology keys of a verb that starts a Spark driver (``jar``/``nimbus --host
    spark``), split into the others and Spark's own (``spark.*``, as text, as Spark takes them),
    which configure the SparkSession, as ``squall trident``'s do: in the topology's
    configuration they were read by nobody, and Spark never saw them."""
    spark = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items() if k.startswith("spark.")}
    return {k: v for k, v in overrides.items() if k not in spark}, spark


def run_on_spark(args: argparse.Namespace, conf: dict[str, Any], submit: Callable[[_ToCluster], None],
                 names: Callable[[], list[str]], what: str, settings: dict[str, str] | None = None) -> int:
    """A master started here in a new Spark driver (``--spark-master``), to which ``submit``
    sends ``what``'s topologies through the `_ToCluster` it is given (``jar --host spark``,
    ``sparse submit --host spark``). The driver owns the topologies ``what`` submitted (or
    resumed): it runs until they are killed (``squall kill``), or until Ctrl-C or SIGTERM,
    which kill them. Others in its ``storm.local.dir`` are never its: recovered at start,
    they make it refuse to start (`_refuse_others`: ``names`` tells what ``what`` submits);
    submitted to it later by another client, they stay there, for a later master."""
    from ..cluster.spark import SparkCluster, exit_if_spark_gone, stop_on_signals
    _daemon_logging(args.debug)
    local_dir = conf_value(conf, Config.STORM_LOCAL_DIR)
    cluster = SparkCluster(master=args.spark_master, conf=conf, settings=settings,
                           check_recovered=lambda recovered: _refuse_others(recovered, names, what, local_dir))
    target: _ToCluster | None = None
    killed: list[str] = []
    try:
        stop = stop_on_signals()
        target = _ToCluster(cluster)
        submit(target)
        owned = target.names
        where = f"{cluster.conf[Config.NIMBUS_HOST]}:{cluster.conf[Config.NIMBUS_THRIFT_PORT]}"
        print(f"squall master on Spark {cluster.spark.sparkContext.master} at {where}; running until "
              f"{', '.join(owned)} {'is' if len(owned) == 1 else 'are'} killed (squall kill NAME) or Ctrl-C",
              flush=True)
        while not stop.wait(1.0):
            exit_if_spark_gone(cluster)
            if not _alive(cluster, owned):
                break
        else:
            # stopped (Ctrl-C, SIGTERM): its topologies live as long as this driver; a master
            # started later on this storm.local.dir must not bring them back
            killed = _alive(cluster, owned)
    finally:
        owned = target.names if target is not None else []
        others = [t["name"] for t in _rows(cluster) if t["name"] not in owned]
        cluster.shutdown(kill_topologies=owned)  # also what FILE submitted before it failed
    if killed:
        print(f"Killed topology: {', '.join(killed)}", flush=True)
    if others:
        print(f"squall: note: {', '.join(others)} (submitted to this master by another client) "
              f"{'stay' if len(others) > 1 else 'stays'} in storm.local.dir {local_dir}: a master started there "
              f"resumes {'them' if len(others) > 1 else 'it'}", file=sys.stderr, flush=True)
    return 0


def _rows(cluster: Any) -> list[dict[str, Any]]:
    """``list_topologies``, or nothing if the master is gone."""
    try:
        return cluster.list_topologies()
    except (RpcError, SquallError):
        return []


def _alive(cluster: Any, names: list[str]) -> list[str]:
    """Which of ``names`` the cluster still runs."""
    there = {t["name"] for t in cluster.list_topologies()}
    return [name for name in names if name in there]


def _refuse_others(recovered: list[str], names: Callable[[], list[str]], what: str, local_dir: Any) -> None:
    """Refuse to start a driver (its master has just recovered ``recovered`` from
    ``local_dir``) that would take over topologies ``what`` does not submit (``names``): they
    are another master's (a stopped ``squall nimbus --host spark``, or a driver that did not
    stop cleanly). This driver would run them, and kill them when it stops; they are left as
    they are, for their own master. Those ``what`` submits are this driver's, started again
    (``--supervise``, a YARN attempt), and are resumed."""
    if not recovered:
        return
    others = sorted(set(recovered) - set(names()))
    if not others:
        return
    several = len(others) > 1
    raise UserError(
        f"storm.local.dir {local_dir} holds {'topologies' if several else 'topology'} {', '.join(others)}, which "
        f"{what} does not submit: {'they are' if several else 'it is'} another master's (a stopped `squall nimbus "
        f"--host spark`, say), which this driver would run and then kill; nothing was started and "
        f"{'they are' if several else 'it is'} left as {'they were' if several else 'it was'}. Give this driver "
        f"its own storm.local.dir (-c storm.local.dir=DIR), or start `squall nimbus --host spark` there, which "
        f"resumes {'them' if several else 'it'}, and submit {what} to it (this command without --host spark)")


# --- the master's verbs -----------------------------------------------------------------------------------
# Storm's columns (`storm list`'s "%-20s %-10s %-10s %-12s %-12s %-20s %-20s") and the rule under
# them. A value longer than its column (REBALANCING is 11 characters, a topology name or id
# past 20) pushed the rest of its row right, under the wrong headers: a column widens to its
# longest value instead, so that every row lines up under its header; where every value fits,
# the table is Storm's exactly.
_LIST_COLUMNS = (("Topology_name", 20), ("Status", 10), ("Num_tasks", 10), ("Num_workers", 12),
                 ("Uptime_secs", 12), ("Topology_Id", 20), ("Owner", 20))
_LIST_RULE = 85


def list_table(topologies: list[dict[str, Any]]) -> list[str]:
    """``squall list``'s table of ``topologies`` (rows of `MasterClient.list_topologies`): the
    header, the rule, a row each; no trailing blanks."""
    rows = [[h for h, _ in _LIST_COLUMNS]]
    rows += [[str(v) for v in (t["name"], t["status"], t["num_tasks"], t["num_workers"], t["uptime_secs"],
                               t["id"], t.get("owner") or "")] for t in topologies]
    widths = [max(width, *(len(row[i]) for row in rows)) for i, (_, width) in enumerate(_LIST_COLUMNS)]
    lines = [" ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return [lines[0], "-" * _LIST_RULE, *lines[1:]]  # Storm's rule, 85 wide whatever the table's width


def cmd_list(args: argparse.Namespace) -> int:
    """``squall list``: Storm's table, or ``No topologies running.``."""
    with _master(args) as master:
        topologies = master.list_topologies()
        nimbuses = master.nimbus.nimbuses()
        trident = {t["name"]: _trident_note(master, t) for t in topologies}
    if not topologies:
        print("No topologies running.")
        _print_nimbuses(nimbuses)
        return 0
    print("\n".join(list_table(topologies)))
    notes = [n for t in topologies for n in (_slots_note(t), _errors_note(t), trident[t["name"]]) if n]
    if notes:  # below Storm's table, after a blank line, so that the table parses as Storm's
        print()
        print("\n".join(notes))
    _print_nimbuses(nimbuses)
    return 0


def _print_nimbuses(nimbuses: list[dict[str, Any]]) -> None:
    """With several masters (Nimbus HA), each one's status (Leader, Not a Leader, Offline), below
    the rest after a blank line (one master, the usual case, prints nothing: Storm's output)."""
    if len(nimbuses) < 2:
        return
    print()
    print(f"{'Nimbus':<24} {'Status':<12} Uptime_secs")
    for n in nimbuses:
        up = "Not applicable" if n.get("uptime_secs") is None else int(n["uptime_secs"])
        where = f"{n['host']}:{n['port']}"
        print(f"{where:<24} {n['status']!s:<12} {up}".rstrip())


def _slots_note(t: dict[str, Any]) -> str | None:
    """What to say about a topology (a row of ``list``) that runs on fewer workers than it asked for."""
    wanted, have = t.get("workers_wanted"), t["num_workers"]
    if wanted is None or have >= wanted or t["status"] == "KILLED":
        return None
    if have == 0:
        waiting = f"{t['name']}: waiting for {wanted} slot{'s' if wanted != 1 else ''} (topology.workers): "
        if t.get("slots_total") == 0:
            return (waiting + "no supervisor has registered a slot with this master yet (is one running, "
                    "and does its configuration name this master's nimbus.host and nimbus.thrift.port?)")
        return waiting + "every slot is taken; it starts once a topology is killed or a supervisor adds slots"
    return (f"{t['name']}: running on {have} of {wanted} workers (only {have} slot{'s were' if have != 1 else ' was'} "
            f"free); it spreads over more as soon as slots free up")


def _trident_note(master: MasterClient, t: dict[str, Any]) -> str | None:
    """A Trident topology's batches (a row of ``list``): its current txid, in flight, committed
    and their latency, from its topology page (`squall.ui.stats_pages.trident_stats`)."""
    try:
        trident = master.get_topology_page(t["name"])["trident"]
    except SquallError:
        return None  # killed since the list was read
    if not trident:
        return None
    n = trident["batchesInFlight"]
    groups = trident.get("groups") or []
    if len(groups) > 1:  # each batch group numbers its own txids
        txid = "txids " + ", ".join(f"{g['currentTxid']} ({g['coordinator']})" for g in groups)
    else:
        txid = f"txid {trident['currentTxid']}"
    return (f"{t['name']}: Trident {txid}, {n} batch{'es' if n != 1 else ''} in flight "
            f"(at most {trident['maxBatchesInFlight']}), {trident['batchesCommitted']} committed, "
            f"batch latency {trident['batchLatency']} ms")


def _errors_note(t: dict[str, Any]) -> str | None:
    """A topology's error count and last error (a row of ``list``), if it has any: its summary
    on the topology's line, and the line that says what went wrong, if another
    (`squall.engine.executor.ErrorRecord.describe`), indented under it, as ``squall local``'s
    summary puts an error's traceback under its line."""
    if not t.get("errors"):
        return None
    from ..engine.executor import MAX_ERRORS_PER_COMPONENT  # lazy: the engine, for a topology with errors

    n = t["errors"]
    # the kept records (`squall info`, the UI) tell of fewer when a component had more than its
    # newest 10 different errors, or its reports went over the throttle: say how many they do
    kept = t.get("errors_kept", n)
    of_them = (f", {kept:,} of them kept (each component's newest {MAX_ERRORS_PER_COMPONENT}; reports over "
               f"{Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL} are counted only)") if kept < n else ""
    summary, _, rest = str(t.get("last_error") or "").partition("\n")
    last = f"; last: {summary}" if summary else ""
    under = "".join(f"\n    {line}" for line in rest.splitlines() if line.strip())
    return f"{t['name']}: {n:,} error{'s' if n != 1 else ''}{of_them}{last} (squall info {t['name']}){under}"


def cmd_info(args: argparse.Namespace) -> int:
    """``squall info NAME``: `get_topology_info` as JSON."""
    with _master(args) as master:
        info = master.get_topology_info(args.name)
    print(json.dumps(info, indent=2, default=str))
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    """``squall kill NAME [NAME ...] [-w SECS] [-i]`` (Storm's ``KillTopology``)."""
    failed = 0
    with _master(args) as master:
        for name in args.names:
            try:
                master.kill_topology(name, wait_secs=args.wait)
            except SquallError as e:
                if not args.ignore_errors:
                    raise
                print(f"squall: error: {e}", file=sys.stderr)
                failed += 1
                continue
            print(f"Killed topology: {name}")
    if failed:
        raise UserError(f"Failed to successfully kill {failed} topologies", code=1)
    return 0


def cmd_activate(args: argparse.Namespace) -> int:
    """``squall activate NAME``."""
    with _master(args) as master:
        master.activate(args.name)
    print(f"Activated topology: {args.name}")
    return 0


def cmd_deactivate(args: argparse.Namespace) -> int:
    """``squall deactivate NAME``."""
    with _master(args) as master:
        master.deactivate(args.name)
    print(f"Deactivated topology: {args.name}")
    return 0


def cmd_rebalance(args: argparse.Namespace) -> int:
    """``squall rebalance NAME [-w SECS] [-n WORKERS] [-e COMPONENT=N ...]``."""
    executors = {}
    for item in args.executors or ():
        component, _sep, count = item.rpartition("=")
        try:
            executors[component] = int(count)
        except ValueError:
            component = ""
        if not component:
            raise UserError(f"-e {item!r}: expected COMPONENT=N with N an integer, e.g. -e split=4", code=2)
    _, topology_over = cluster_conf_of(args)
    if topology_over:  # Storm's rebalance applies them; said, not dropped without a word
        raise UserError(f"-c {', '.join(sorted(topology_over))}: squall's rebalance changes the workers and "
                        f"executors only, not the topology's configuration (kill and submit it again)", code=2)
    with _master(args) as master:
        if executors:
            _warn_over_tasks(master.get_topology_info(args.name), executors)
        master.rebalance(args.name, num_workers=args.workers, executors=executors or None, wait_secs=args.wait)
    print(f"Topology {args.name} is rebalancing")
    return 0


def _warn_over_tasks(info: dict[str, Any], executors: dict[str, int]) -> None:
    """A component runs at most one executor per task (Storm caps them too): say so, rather
    than let ``-e`` seem ignored."""
    for cid, n in executors.items():
        tasks = info["components"].get(cid, {}).get("tasks")
        if isinstance(tasks, int) and n > tasks:
            print(f"squall: warning: -e {cid}={n}: {cid} has {tasks} task{'s' if tasks != 1 else ''}, and an "
                  f"executor runs at least one, so it gets {tasks} executor{'s' if tasks != 1 else ''} "
                  f"(a component's tasks are fixed at submit: set_num_tasks)", file=sys.stderr)


# Trident's per-batch count reports between its bolts ($coord-<batch group>) and the packs its data
# tuples travel in ($pack-<stream>; the data stream itself counts the tuples): overhead, not data
_BATCH_COUNT_STREAMS = ("$coord-", "$pack-")


def _launches(component: dict[str, Any], count: Callable[[dict[str, Any]], int]) -> dict[str, list[LaunchCount]]:
    """Task id -> its ``count`` (of one task's counters, as its worker reported them) in each
    launch the master knows, oldest first: those that ended (``ended_task_stats``, their last
    heartbeat), then the current one (``task_stats``). A launch is its slot and launch id (each
    slot numbers its own launches): a restarted worker counts from zero again, and so does a
    task moved to another slot by a rebalance, whatever its new launch's number."""
    from ..cluster.view import LaunchCount  # lazy: the master's view (and the engine), for monitor's counts

    out: dict[str, list[LaunchCount]] = {}
    for key in ("ended_task_stats", "task_stats"):
        for task, stats in (component.get(key) or {}).items():
            rows = stats if key == "ended_task_stats" else [stats]
            out.setdefault(str(task), []).extend(
                LaunchCount((st.get("slot"), st.get("launch_id")), count(st)) for st in rows)
    return out


DEAD_LETTERED_WATCH = "dead-lettered"
"""``squall monitor -w dead-lettered``: the records given up to the dead letters (squall's own)."""


def _dead_letter_counts(info: dict[str, Any], cid: str, reason: str | None,
                        reasons: set[str]) -> dict[str, list[LaunchCount]]:
    """Task id -> its count of the dead letters ``cid`` has in each of its launches (`_launches`:
    a spout's own, or a Trident spout's emitter bolt's; a bolt's, the ones it failed last: every
    such task's, as each counts them in its launch), of ``reason`` only if given; adds the
    reasons counted to ``reasons`` (the stream column)."""
    def count(source: str, stats: dict[str, Any]) -> int:
        n = 0
        for by, why, c in stats.get("dead_lettered") or ():
            if cid in (source, by) and (reason is None or why == reason):
                reasons.add(why)
                n += int(c)
        return n
    out = {}
    for source, c in info["components"].items():
        for task, launches in _launches(c, functools.partial(count, source)).items():
            if source != cid and c["type"] != "spout" and not any(lc.total for lc in launches):
                continue  # gives none up (a spout's count from 0)
            out[task] = launches
    return out


def cmd_monitor(args: argparse.Namespace) -> int:
    """``squall monitor NAME [-i SECS] [-m COMPONENT] [-s STREAM] [-w emitted|transferred|dead-lettered] [--count N]``.

    Storm's columns, one line per watched component each interval: the tuples counted on the
    stream (without ``-s``: on each of its streams but Trident's batch counts and packs and the
    system streams, named in the stream column) since the last poll and the throughput in tuples
    per millisecond (thousands a second); with ``-w dead-lettered``, the records given up to the
    dead letters (at a spout, its own; at a bolt, those it failed last), the stream column naming
    the reasons (a failure's kind, or ``unreadable``). The counts are each task's own, as its worker last
    reported them (exact: not the UI's sampled estimates). A task whose worker restarted (its
    counts with it: another launch, or a count that went down) adds the rest of its old launch,
    as the dead worker's last heartbeat left it (the master keeps it), and its new launch from
    zero, while the component's other tasks count on (`counted_across`). Lost: what a dead
    worker counted after its last heartbeat.
    """
    from ..cluster.view import counted_across  # lazy: as in `_launches`

    with _master(args) as master, _interrupted_by_sigint():
        info = master.get_topology_info(args.name)
        watched = _watched(info, args.component)
        print(f"topology\tcomponent\tparallelism\tstream\ttime-diff ms\t{args.watch}\tthroughput (Kt/s)",
              flush=True)

        streams: dict[str, set[str]] = {cid: set() for cid in watched}  # what each one's rows count

        def counts(info: dict[str, Any], cid: str) -> dict[str, list[LaunchCount]]:
            """Task id -> its count of the watched tuples in each launch the master knows."""
            if args.watch == DEAD_LETTERED_WATCH:
                return _dead_letter_counts(info, cid, args.stream, streams[cid])

            def count(stats: dict[str, Any]) -> int:
                by_stream = stats.get(args.watch) or {}
                if args.stream is not None:
                    return int(by_stream.get(args.stream, 0))
                counted = [st for st in by_stream if not st.startswith(_BATCH_COUNT_STREAMS) and not is_system_id(st)]
                streams[cid].update(counted)
                return sum(int(by_stream[st]) for st in counted)
            return _launches(info["components"][cid], count)
        # task -> the launch and count read last (its newest launch the master knew then)
        last: dict[str, dict[str, LaunchCount | None]] = {
            cid: {task: launches[-1] for task, launches in counts(info, cid).items()} for cid in watched}
        if args.stream is not None and args.watch != DEAD_LETTERED_WATCH:  # Storm's Monitor: "stream: X not found"
            known = {st for cid in watched for stats in info["components"][cid].get("task_stats", {}).values()
                     for st in (stats.get(args.watch) or {}) if not is_system_id(st)}
            if known and args.stream not in known:
                raise UserError(f"stream {args.stream!r} not found: {', '.join(watched)} emitted on "
                                f"{', '.join(sorted(known))}")
        seen = _print_errors(info, since=None)
        unreachable = False  # the master did not answer the last poll
        due = then = time.monotonic()
        rounds = 0  # rounds printed (--count): a poll the master did not answer prints none
        try:
            while True:
                due += args.interval
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    due -= delay  # fell behind (a slow master): keep the pace from now on
                try:
                    info = master.get_topology_info(args.name)
                except AuthenticationError:
                    raise
                except (RpcError, SquallError) as e:
                    if not transient(e):
                        raise
                    # a master restarted or failing over: the figures live in the workers, which
                    # go on, so watch on; the next row's time-diff spans the gap
                    if not unreachable:
                        print(f"squall: {args.name}: the master does not answer ({e}); still watching, "
                              f"every {args.interval:g} s", file=sys.stderr, flush=True)
                    unreachable = True
                    continue
                if unreachable:
                    print(f"squall: {args.name}: the master answers again", file=sys.stderr, flush=True)
                    unreachable = False
                seen = _print_errors(info, since=seen)
                now = time.monotonic()
                diff_ms = round(1000 * (now - then))
                for cid in watched:
                    c = info["components"][cid]
                    delta = 0
                    for task, launches in counts(info, cid).items():
                        added, last[cid][task] = counted_across(last[cid].get(task), launches)
                        delta += added
                    throughput = delta / diff_ms if diff_ms else 0.0
                    stream = (args.stream or ",".join(sorted(streams[cid]))
                              or ("-" if args.watch == DEAD_LETTERED_WATCH else "default"))  # -: no dead letter yet
                    print(f"{args.name}\t{cid}\t{c['executors']}\t{stream}\t{diff_ms}\t{delta}\t"
                          f"{throughput:.3f}", flush=True)
                then = now
                rounds += 1
                if args.count is not None and rounds >= args.count:
                    break
        except KeyboardInterrupt:
            pass  # Ctrl-C is how monitor ends
    return 0


@contextlib.contextmanager
def _interrupted_by_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here even if this process started with it ignored.

    A command started with ``&`` by a shell without job control (a script, ``nohup CMD &``) inherits
    SIGINT ignored, and Python then leaves it ignored: monitor, which only Ctrl-C ends, would
    outlive every SIGINT sent to it. The previous handler is put back after (``main`` called in
    a test's process); outside the main thread, where signals cannot be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _print_errors(info: dict[str, Any], since: float | None) -> float:
    """Print to stderr (stdout keeps Storm's columns) the topology's errors that happened (or
    happened again) after ``since`` (None: only its last one, if any), with ``(xN)`` for one that
    repeated N times; returns the time of the newest."""
    from ._local import last_time, times  # lazy: `squall local`'s module (LocalCluster), for monitor

    errors = info.get("errors") or []
    new = [e for e in errors if since is None or last_time(e) > since]
    for e in new[-1:] if since is None else new:
        text = str(e.get("error") or "").strip()
        first, last = first_and_last(text)
        # the line that says what went wrong, if another, under it, as `squall list` shows it
        under = f"\n    {cause_line(text, last)}" if last else ""
        print(f"squall: {info['name']}: error in [{e.get('component')}]: {first}{times(e)}{under}",
              file=sys.stderr, flush=True)
    return max((last_time(e) for e in errors), default=since or 0.0)


def _watched(info: dict[str, Any], component: str | None) -> list[str]:
    from ._local import user_components  # lazy: as in `_print_errors`

    if component is None:
        return [cid for cid, _c in user_components(info)]
    if component not in info["components"]:
        known = ", ".join(cid for cid, _c in user_components(info))
        if component == ACKER_COMPONENT:  # Storm's acker is a bolt; squall's is not (docs/concepts.md)
            raise UserError(f"the acker is not a component in squall, so monitor cannot watch it; `squall info "
                            f"{info['name']}` shows its tasks and executed count under \"acker\" "
                            f"(the components of {info['name']!r}: {known})")
        raise UserError(f"topology {info['name']!r} has no component {component!r} (its components: {known})")
    return [component]
