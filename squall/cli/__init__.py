"""The ``squall`` command, after Storm's ``storm`` (``bin/storm.py``); see docs/cli.md.

Layout: this module holds `main` and the argument parser; each group of verbs is a module of
short functions over the Python API:

- `squall.cli._local`: ``local`` (a topology FILE on an in-process `LocalCluster`, live figures);
- `squall.cli._cluster`: ``nimbus``, ``supervisor``, ``node-health-check``, ``jar``, ``list``, ``info``, ``kill``,
  ``activate``, ``deactivate``, ``rebalance``, ``monitor`` (the master and its clients);
- `squall.cli._logs`: ``logs`` (a topology's worker logs on this machine);
- `squall.cli._ui`: ``ui`` (the UI daemon's REST API for the cluster's master);
- `squall.cli._drpc`: ``drpc`` (Storm's DRPC server; also started by ``nimbus``);
- `squall.cli._trident`: ``trident`` (a Trident topology FILE as a Spark Structured Streaming query);
- `squall.cli._errors_verb`: ``get-errors`` (each component's last error, through the master's ``info``);
- `squall.cli._log_level`: ``set_log_level`` (a topology's log levels in every worker, Storm's syntax);
- `squall.cli._topology_file`: finding the topology in FILE (``local`` and ``jar``);
- `squall.cli._flux`: Flux's options and a Flux FILE.yaml's topology (``local`` and ``jar``; `squall.flux`);
- `squall.cli._options`: ``-c``/``--config`` as configuration, the user error, argparse types.

The parser names each verb's function by its module (`squall.cli._lazy_verbs.VerbFunction`),
imported when the verb runs: ``squall list`` loads the master's client, not the master, the
process host, DRPC or LocalCluster that other verbs need.

Every verb shares ``--config FILE`` (a ``squall.yaml`` to use as the cluster configuration),
``-c key=value`` (repeatable; the value is read as YAML, so ``-c topology.workers=2`` is the
integer 2) and ``--debug`` (tracebacks), declared once in a parent parser. Daemon keys
(``storm.``, ``nimbus.``, ``supervisor.``, ``worker.``, ``ui.`` ... and squall's ``squall.``)
configure the cluster; other keys the topology.

User errors print one line, ``squall: error: ...``, and exit 1 (2 for command-line syntax);
tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import traceback
from typing import Any

from .. import __version__
from .._errors import SquallError
from . import _flux, _sparse_parser, _trident
from ._lazy_verbs import VerbFunction
from ._options import UserError, parse_overrides, port_number, positive_int, positive_seconds, wait_seconds

_SPARK_MASTER_HELP = ("with --host spark: the Spark master (local[N], spark://HOST:7077, yarn, k8s://...; "
                      "default: spark-submit's, else local[*])")


def main(argv: list[str] | None = None) -> int:
    """Run the ``squall`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    try:
        status = _run(argv)
        sys.stdout.flush()  # here, not at exit: a reader gone before the last buffered line is a closed pipe too
        return status
    except BrokenPipeError:
        return _closed_pipe()


# Storm's verbs that squall has no counterpart of, and what to do instead: refused as such,
# rather than with argparse's "invalid choice", which reads as a typo
STORM_ONLY_VERBS = {
    "localconfvalue": "read the key in your squall.yaml (docs/configuration.md)",
    "remoteconfvalue": "read the key in the master's squall.yaml (docs/configuration.md)",
    "upload-credentials": "squall has no credential push (docs/cluster.md)",
    "blobstore": "squall has no blob store; a topology's files ship with it (docs/cluster.md)",
    "logviewer": "the logviewer is part of `squall ui` (docs/ui.md)",
    "kill_workers": "stop the supervisor (its workers stop with it)",
    "drpc-client": "call DRPCClient(...).execute from Python (docs/drpc.md)",
    "shell": "use `squall jar` (docs/cli.md)",
    "sql": "squall has no Storm SQL",
    "admin": "squall has no admin commands",
    "heartbeats": "read `squall info NAME` (docs/cli.md)",
    "classpath": "squall runs Python: no classpath",
}


def _run(argv: list[str] | None) -> int:
    given = sys.argv[1:] if argv is None else argv
    verb = next((a for a in given if not a.startswith("-")), None)
    if verb in STORM_ONLY_VERBS:
        print(f"squall: error: '{verb}' is a Storm verb squall does not have: {STORM_ONLY_VERBS[verb]}",
              file=sys.stderr)
        return 2
    parser = _create_arg_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the verb's parser, with its usage: `squall local: error: ...`
            (getattr(args, "verb_parser", None) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, or a usage error argparse has printed
        return e.code if isinstance(e.code, int) else 1
    if args.verb is None:  # plain `squall`: what it can do, rather than an argparse error
        parser.print_help()
        print(f"\n{_version_line()}")
        return 0
    try:
        return args.run(args)
    except BrokenPipeError as e:
        if _stdout_reader_gone():
            raise  # not an error of the verb's: `main` ends quietly
        return _fail(f"unexpected BrokenPipeError: {e} (run with --debug for the traceback)", e, args.debug, 1)
    except KeyboardInterrupt:
        return 130
    except UserError as e:
        return _fail(str(e), e, args.debug, e.code)
    except SquallError as e:
        return _fail(str(e), e, args.debug, 1)
    except Exception as e:  # noqa: BLE001 (the command line's last resort: one line, or the traceback with --debug)
        hint = "" if args.debug else " (run with --debug for the traceback)"
        return _fail(f"unexpected {type(e).__name__}: {e}{hint}", e, args.debug, 1)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (Linux reports POLLERR on
    its write end), as opposed to a broken pipe elsewhere, such as a connection to the master."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR and POLLHUP are reported unasked
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture): not a pipe of ours
        return False


def _closed_pipe() -> int:
    """The reader of stdout went away (``squall info T | head``): end quietly, as Unix tools do.

    Unix tools die of SIGPIPE, which a shell reports as 141; Python ignores SIGPIPE and raises
    instead. stdout is pointed at /dev/null so that the interpreter's own flush at exit, of what
    is still buffered, does not print "Exception ignored ... BrokenPipeError" after all."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # 128 + SIGPIPE, what the shell shows for `yes | head`


def _fail(message: str, error: BaseException, debug: bool, code: int) -> int:
    if debug:
        shown = error.__cause__ if isinstance(error, UserError) and error.__cause__ else error
        traceback.print_exception(type(shown), shown, shown.__traceback__, file=sys.stderr)
    print(f"squall: error: {message}", file=sys.stderr)
    return code


def _create_arg_parser() -> argparse.ArgumentParser:
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE",
                        help="a squall.yaml to use as the cluster configuration "
                             "(default: $SQUALL_CONF_DIR/squall.yaml, then ./squall.yaml)")
    overrides = argparse.ArgumentParser(add_help=False)
    overrides.add_argument("-c", dest="overrides", action="append", metavar="KEY=VALUE",
                           help="override a configuration key; VALUE is read as JSON, else kept as text (repeatable)")
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    base = argparse.ArgumentParser(add_help=False, parents=[config, debug])  # what every verb shares but -c
    common = argparse.ArgumentParser(add_help=False, parents=[base, overrides])

    parser = argparse.ArgumentParser(
        prog="squall", description="Apache Storm's model in Python. See docs/cli.md.")
    parser.add_argument("--version", action="version", version=_version_line(), help="print squall's version")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    def verb(name: str, run, summary: str, description: str | None = None,
             parents: tuple[argparse.ArgumentParser, ...] = (common,),
             aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, parents=list(parents), help=summary, description=description or summary,
                             aliases=list(aliases))
        p.set_defaults(run=run, verb_parser=p)
        return p

    local = verb("local", VerbFunction("_local", "cmd_local"), "run a topology file on an in-process LocalCluster",
                 "Run the topology that FILE defines on an in-process LocalCluster, showing live "
                 "figures, until --ttl seconds pass or Ctrl-C. FILE defines build() (and "
                 "optionally conf), or topology, or submits with StormSubmitter under "
                 "if __name__ == '__main__' (see docs/cli.md).")
    local.add_argument("file", metavar="FILE", help="a .py file that defines a topology, or a Flux .yaml file")
    local.add_argument("--ttl", type=positive_seconds, metavar="SECONDS",
                       help="stop after this many seconds (default: run until Ctrl-C)")
    local.add_argument("--name", help="the topology's name (default: FILE's stem)")
    local.add_argument("args", nargs="*", metavar="ARGS",
                       help="arguments for a .py FILE (its sys.argv[1:]), as Storm's `storm local` passes them")
    local.add_argument("--ui", nargs="?", const=-1, type=port_number, metavar="PORT",
                       help="serve the UI's REST API for the run on 127.0.0.1:PORT (default: ui.port; 0: a free "
                            "port; needs the ui extra; docs/ui.md)")
    _flux.add_options(local)

    nimbus = verb("nimbus", VerbFunction("_cluster", "cmd_nimbus"), "run the master (Nimbus) in the foreground",
                  "Run the master in the foreground until Ctrl-C or SIGTERM. With --host process it "
                  "also starts a supervisor process for supervisor.slots.ports (or adopts the one "
                  "running for storm.local.dir), and stops it on exit.")
    nimbus.add_argument("--host", choices=("process", "spark"), default="process",
                        help="where workers run: OS processes started by a supervisor (default), "
                             "or Spark tasks, this process being the Spark driver (docs/spark.md)")
    nimbus.add_argument("--spark-master", metavar="URL", help=_SPARK_MASTER_HELP)
    nimbus.add_argument("--no-supervisor", action="store_true",
                        help="start no supervisor (run them with `squall supervisor`)")

    verb("supervisor", VerbFunction("_cluster", "cmd_supervisor"),
         "run a supervisor in the foreground",
         "Run a supervisor in the foreground: it registers supervisor.slots.ports with the master "
         "and starts, watches and stops their worker processes, until Ctrl-C or SIGTERM.")

    verb("node-health-check", VerbFunction("_cluster", "cmd_node_health_check"),
         "run this machine's health checks once; exit 1 if it is unhealthy",
         "Run every executable script in storm.health.check.dir once, each for at most "
         "storm.health.check.timeout.ms, and print each one's verdict. Exit 1 if one printed a line "
         "starting with ERROR, exited non-zero or timed out (unless storm.health.check.fail.on.timeouts "
         "is false), else 0.")

    jar = verb("jar", VerbFunction("_cluster", "cmd_jar"), "submit a topology file to the master",
               "Submit the topology FILE defines to the master, Storm's way: FILE's "
               "if __name__ == '__main__' code runs with ARGS and calls StormSubmitter.submit_topology; "
               "or FILE defines build() or topology (and optionally conf). squall's options go before FILE.")
    jar.add_argument("--name", help="the topology's name (default: FILE's stem, or the name FILE submits)")
    jar.add_argument("--host", choices=("master", "spark"), default="master",
                     help="submit to the running master (default), or start one here in a new Spark "
                          "driver and run FILE's topology on Spark until it is killed (docs/spark.md)")
    jar.add_argument("--spark-master", metavar="URL", help=_SPARK_MASTER_HELP)
    jar.add_argument("file", metavar="FILE", help="a .py file that defines or submits a topology, or a Flux .yaml file")
    jar.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                     help="arguments for FILE (its sys.argv[1:])")
    _flux.add_options(jar)

    verb("ui", VerbFunction("_ui", "cmd_ui"), "run the UI daemon (Storm's REST API) in the foreground",
         "Serve Storm's UI REST API (/api/v1/...) for the cluster's master on ui.host:ui.port "
         "(127.0.0.1:8080) until Ctrl-C or SIGTERM. Actions (POST) need the cluster's secret in the "
         "X-Squall-Secret header, or are off with ui.actions.enabled: false (docs/ui.md).")

    verb("drpc", VerbFunction("_drpc", "cmd_drpc"), "run the DRPC server (Storm's) in the foreground",
         "Serve DRPC for the cluster until Ctrl-C or SIGTERM: callers (DRPCClient) on drpc.port (3772), "
         "the topologies' DRPC spouts and return bolts on drpc.invocations.port (3773), at the entries of "
         "drpc.servers that name this machine; every connection authenticated with the cluster's secret. "
         "squall nimbus starts one itself when drpc.servers names its machine (docs/drpc.md).")

    verb("list", VerbFunction("_cluster", "cmd_list"), "list the topologies on the cluster")

    info = verb("info", VerbFunction("_cluster", "cmd_info"), "print a topology's status and figures as JSON")
    info.add_argument("name", metavar="NAME")

    kill = verb("kill", VerbFunction("_cluster", "cmd_kill"), "kill topologies",
                "Deactivate each topology's spouts for -w seconds (default: its "
                "topology.message.timeout.secs), then shut it down.")
    kill.add_argument("names", nargs="+", metavar="NAME")
    kill.add_argument("-i", "--ignore-errors", action="store_true",
                      help="go on with the next NAME after one fails (exit 1 at the end if any did)")
    kill.add_argument("-w", "--wait-time-secs", dest="wait", type=wait_seconds, metavar="SECS",
                      help="seconds between deactivation and shutdown")

    for name, run, summary in (
            ("activate", VerbFunction("_cluster", "cmd_activate"), "activate a topology's spouts"),
            ("deactivate", VerbFunction("_cluster", "cmd_deactivate"), "deactivate a topology's spouts")):
        verb(name, run, summary).add_argument("name", metavar="NAME")

    rebalance = verb("rebalance", VerbFunction("_cluster", "cmd_rebalance"),
                     "spread a topology over new worker and executor counts",
                     "Deactivate the topology for -w seconds (default: its topology.message.timeout.secs), "
                     "reassign it with the new counts, and restore its previous status.")
    rebalance.add_argument("name", metavar="NAME")
    rebalance.add_argument("-w", "--wait-time-secs", dest="wait", type=wait_seconds, metavar="SECS",
                           help="seconds to wait before reassigning")
    rebalance.add_argument("-n", "--num-workers", dest="workers", type=positive_int, metavar="WORKERS",
                           help="the new number of workers")
    rebalance.add_argument("-e", "--executor", dest="executors", action="append", metavar="COMPONENT=N",
                           help="the new number of executors of COMPONENT (repeatable)")

    monitor = verb("monitor", VerbFunction("_cluster", "cmd_monitor"), "print a topology's throughput every interval",
                   "Poll the master every -i seconds and print, per component, the tuples emitted "
                   "(or transferred) since the last poll and the throughput, until Ctrl-C or --count.")
    monitor.add_argument("name", metavar="NAME")
    monitor.add_argument("-i", "--interval", type=positive_seconds, default=4.0, metavar="SECS",
                         help="seconds between polls (default: 4)")
    monitor.add_argument("-m", "--component", metavar="COMPONENT",
                         help="the component to watch (default: every spout and bolt)")
    monitor.add_argument("-s", "--stream", metavar="STREAM",
                         help="count only this stream (default: every stream of the component but Trident's "
                              "batch counts, named in the stream column)")
    monitor.add_argument("-w", "--watch", choices=("emitted", "transferred", "dead-lettered"), default="emitted",
                         help="what to count (default: emitted); dead-lettered: the records a spout gave up to its "
                              "dead letters (at a bolt, those it failed last), the stream column naming why")
    monitor.add_argument("--count", type=positive_int, metavar="N",
                         help="stop after N intervals (default: run until Ctrl-C)")

    logs = verb("logs", VerbFunction("_logs", "cmd_logs"), "print the last lines of a topology's worker logs",
                "Print the last lines of each worker log of TOPOLOGY (a name the master knows, or a topology "
                "id) kept on this machine, <storm.log.dir>/workers-artifacts/<id>/<port>/worker.log; run it "
                "where the cluster runs (docs/logs.md).", parents=(base,))
    logs.add_argument("topology", metavar="TOPOLOGY")
    logs.add_argument("-c", "--component", dest="component", action=_ComponentOrOverride, metavar="COMPONENT",
                      help="only the lines of this component (from the workers that run it); "
                           "-c KEY=VALUE still overrides a configuration key")
    logs.add_argument("-n", "--lines", type=positive_int, default=50, metavar="LINES",
                      help="lines per worker (default: 50)")
    logs.add_argument("--port", type=positive_int, metavar="PORT", help="only the worker on this port")
    logs.set_defaults(overrides=None)  # filled by -c KEY=VALUE

    _sparse_parser.register(verbs, (config, overrides))  # and its own -d/--debug, which sets topology.debug too
    get_errors = verb("get-errors", VerbFunction("_errors_verb", "cmd_get_errors"),
                      "print the last error of each component of a topology as JSON",
                      "Print the last error of each component of TOPOLOGY that has one, as Storm's get-errors "
                      'does: {"Topology Name": TOPOLOGY, "Comp-Errors": {COMPONENT: ERROR, ...}}. If the master '
                      'has no such topology, print Storm\'s {"Failure": ...} and exit 1.', aliases=("get_errors",))
    get_errors.add_argument("name", metavar="TOPOLOGY")

    log_level = verb("set_log_level", VerbFunction("_log_level", "cmd_set_log_level"),
                     "set a topology's log levels in every worker",
                     "Set the level of each -l LOGGER (ROOT: the root logger) in every worker of TOPOLOGY, "
                     "for TIMEOUT seconds if given (then the level it had comes back), or clear each -r "
                     "LOGGER's setting (its level comes back), as Storm's set_log_level does. LEVEL: ALL, TRACE, "
                     "DEBUG, INFO, WARN, ERROR, FATAL or OFF. The master keeps the levels with the topology.",
                     aliases=("set-log-level",))
    log_level.add_argument("-l", "--log-setting", dest="settings", action="append", metavar="LOGGER=LEVEL[:TIMEOUT]",
                           help="set LOGGER to LEVEL, for TIMEOUT seconds if given (repeatable)")
    log_level.add_argument("-r", "--remove-log-setting", dest="removals", action="append", metavar="LOGGER",
                           help="clear LOGGER's setting: its level before comes back (repeatable)")
    log_level.add_argument("name", metavar="TOPOLOGY")

    help_verb = verb("help", lambda args: _cmd_help(parser, args), "print a verb's usage and description",
                     "Print VERB's usage, description and options, as squall VERB --help does (Storm's "
                     "storm help COMMAND); with no VERB, the list of verbs. A verb's own verbs follow it "
                     "(squall help VERB SUBVERB).", parents=(base,))
    help_verb.add_argument("topic", nargs="*", metavar="VERB")

    _trident.add_verb(verb)
    verb("version", _cmd_version, "print squall's version")
    return parser


class _ComponentOrOverride(argparse.Action):
    """``squall logs -c``: Storm's component option, yet ``-c KEY=VALUE`` (with an ``=``, which
    no component id needs) stays the configuration override every verb takes."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        if option_string == "-c" and "=" in value:
            namespace.overrides = [*(getattr(namespace, "overrides", None) or []), value]
        else:
            namespace.component = value


def _cmd_help(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``squall help [VERB ...]``: the help of the verb (or of a verb's verb) that ``args.topic``
    names, or of ``squall`` itself; a name that is no verb is a usage error listing the verbs."""
    target, said = parser, ["squall"]
    for word in args.topic:
        choices = _verbs_of(target)
        if not choices:
            raise UserError(f"{' '.join(said)} takes no verb after it, got {word!r}", code=2)
        if word not in choices:
            raise UserError(f"{' '.join(said)} has no verb {word!r} (its verbs: {', '.join(sorted(choices))})", code=2)
        target = choices[word]
        said.append(word)
    target.print_help()
    return 0


def _verbs_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The verbs ``parser`` takes (their aliases too), by name; none for a verb without verbs."""
    for action in parser._actions:  # argparse has no public way to list a parser's subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _cmd_version(args: argparse.Namespace) -> int:
    parse_overrides(args.overrides)
    print(_version_line())
    return 0


def _version_line() -> str:
    return f"squall {__version__} (Python {sys.version.split()[0]})"
