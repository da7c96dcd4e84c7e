"""``squall trident FILE --host spark --checkpoint DIR``: a Trident topology as one Spark
Structured Streaming query (`squall.trident.spark.start`), this process being its driver.

FILE defines ``build()`` returning a `TridentTopology`, or a module-level ``topology`` that is
one; a module-level ``conf`` (a dict), if present, is what the operations and spouts are
prepared with, and ``-c key=value`` overrides it; ``-c spark.KEY=VALUE`` configures the
SparkSession instead (``-c spark.sql.shuffle.partitions=4``). The driver runs until Ctrl-C or SIGTERM (the
query stops; a start on the same ``--checkpoint`` resumes it; exit 0, whether the signal came to
the driver alone or to its whole process group, JVM included: `squall.trident.spark.stopping`) or
until the query fails (exit 1, with Spark's error).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._lazy_verbs import VerbFunction
from ._options import UserError, parse_overrides

if TYPE_CHECKING:
    from ..trident.spark.stopping import StopRequest


def add_verb(verb: Callable[..., argparse.ArgumentParser]) -> None:
    """Declare the ``trident`` verb with ``verb`` (`squall.cli._create_arg_parser`'s helper)."""
    p = verb("trident", VerbFunction("_trident", "cmd_trident"), "run a Trident topology file as a Spark Structured Streaming query",
             "Compile the TridentTopology FILE defines (build() or topology, and optionally conf) into one "
             "Structured Streaming query and run it in this process, its Spark driver, until Ctrl-C or "
             "SIGTERM; each micro-batch is one Trident batch, its offsets and commits kept in --checkpoint, "
             "where a new start resumes (docs/trident.md, \"On Spark's engine\").")
    p.add_argument("file", metavar="FILE", help="a .py file that defines a TridentTopology")
    p.add_argument("--host", choices=("spark",), default="spark",
                   help="the engine: spark (Spark's own; squall's engine runs a Trident topology with "
                        "`squall local` or `squall jar`)")
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="the query's checkpoint location (a path or a URI Spark can write)")
    p.add_argument("--spark-master", metavar="URL",
                   help="the Spark master (local[N], spark://HOST:7077, yarn, k8s://...; default: "
                        "spark-submit's, else local[*])")
    p.add_argument("--name", help="the query's name (default: FILE's stem)")
    p.add_argument("--trigger", metavar="INTERVAL",
                   help="a processing-time trigger, e.g. '2 seconds' (default: Spark's, a batch as soon as "
                        "the previous one ended and a spout has more)")


def trident_in(path: Path) -> tuple[Any, dict[str, Any]]:
    """The `TridentTopology` FILE defines and its ``conf``, or a `UserError` saying what it holds."""
    from ..trident import TridentTopology
    from ._topology_file import _a, import_file  # lazy: the parser imports this module (`add_verb`)

    module = import_file(path)
    where = path.name
    if hasattr(module, "build"):
        try:
            topology = module.build()
        except Exception as e:
            raise UserError(f"{where}: build() raised {type(e).__name__}: {e}") from e
        what = "build() returned"
    elif hasattr(module, "topology"):
        topology, what = module.topology, "topology is"
    else:
        raise UserError(f"{where} defines neither build() nor topology (a TridentTopology)")
    if not isinstance(topology, TridentTopology):
        raise UserError(f"{where}: {what} {_a(topology)}, expected a TridentTopology")
    conf = getattr(module, "conf", None)
    if conf is not None and not isinstance(conf, Mapping):
        raise UserError(f"{where}: conf is {_a(conf)}, expected a dict")
    return topology, dict(conf or {})


def cmd_trident(args: argparse.Namespace) -> int:
    """``squall trident FILE --host spark --checkpoint DIR [--spark-master URL]``."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UserError("squall trident --host spark needs pyspark 4.2 or later (pip install 'squall[trident-spark]')") \
            from None
    from ..cluster.spark import checked_master, quiet_accumulator_hangups
    from ..trident.spark import compile_topology, start
    from ..trident.spark.checkpoint import CheckpointDamaged, check_checkpoint
    from ..trident.spark.launcher import use_installed_pyspark
    from ..trident.spark.stopping import StopRequest
    from ._topology_file import check_file, on_sys_path, topology_name  # lazy: as in `trident_in`

    topology_over, daemon_over = parse_overrides(args.overrides)
    overrides = {**daemon_over, **topology_over}
    spark_conf = {k: v for k, v in overrides.items() if k.startswith("spark.")}
    # before the JVM (Spark's refusal read as a Java missing) and the file: -c spark.master=URL too
    master = checked_master(args.spark_master, spark_conf)
    path = check_file(args.file)
    name = args.name or topology_name(path)
    with on_sys_path(path.parent):
        topology, conf = trident_in(path)
        try:
            compile_topology(topology)  # what cannot run is refused before a JVM starts
        except ValueError as e:
            raise UserError(f"{path.name}: {e}") from None
        try:
            check_checkpoint(args.checkpoint)  # a damaged offsets/commits file named before a JVM starts
        except CheckpointDamaged as e:
            raise UserError(str(e)) from None
        builder = SparkSession.builder.appName(name)
        if args.spark_master:
            builder = builder.master(args.spark_master)
        # Spark's Python processes import the installed, compiled pyspark (see the module); -c overrides
        builder = builder.config("spark.python.daemon.module", "squall.trident.spark.daemon")
        # and so do the ones the driver starts without the daemon (the Data Source's planners),
        # unless the user chose Spark's Python (PYSPARK_PYTHON, -c spark.pyspark.python)
        use_installed_pyspark(spark_conf, master)
        for key, value in spark_conf.items():
            builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
        spark = builder.getOrCreate()
        quiet_accumulator_hangups(spark.sparkContext)
        stop = StopRequest()
        stop.install()  # after the SparkContext, which installs pyspark's own SIGINT handler
        shipped = tempfile.TemporaryDirectory(prefix="squall-ship-")
        try:
            ship_user_modules(spark, topology, shipped.name)

            def start_query() -> Any:
                try:
                    query = start(topology, spark, args.checkpoint, trigger=args.trigger, query_name=name,
                                  conf={**conf, **{k: v for k, v in overrides.items() if k not in spark_conf}})
                except ValueError as e:
                    raise UserError(f"{path.name}: {e}") from None
                print(f"squall trident: query {name} ({query.id}) running on {spark.sparkContext.master}; "
                      f"checkpoint {args.checkpoint}", file=sys.stderr, flush=True)
                return query

            ended: list[bool] = []

            def end_spark() -> None:
                ended.append(True)
                _stop_spark(spark, stop)

            return _run_until_stopped(start_query, name=name, checkpoint=args.checkpoint, stop=stop,
                                      end_spark=end_spark)
        finally:
            # once only: a second spark.stop() after the driver's last line, into a JVM ending on
            # the signal, logged py4j's broken connection below that line
            if not ended:
                _stop_spark(spark, stop)
            shipped.cleanup()


def _stop_spark(spark: Any, stop: StopRequest) -> None:
    """``spark.stop()`` (harmless when done before), unless the JVM is gone (a signal to the
    driver's process group ended it too or is ending it, or it died and the query's failure
    says so): pyspark's stop then fails with ``ConnectionRefusedError``, and there is nothing
    left to stop. While stopping, a JVM that refused the call is given the time its shutdown
    hooks take to end, or to show it is running them."""
    from ..trident.spark.stopping import JVM_EXIT_WAIT_SECS, gateway_jvm

    try:
        spark.stop()
    except Exception:
        jvm = gateway_jvm(JVM_EXIT_WAIT_SECS if stop.is_set() else 0.0, stop)
        if jvm is not None and (jvm.status is not None or jvm.handling is not None):
            return
        raise


def ship_user_modules(spark: Any, topology: Any, directory: str) -> list[str]:
    """Make the user's modules that ``topology``'s operations, spouts and states reach (FILE
    itself, a module beside it, a package of the user's: `squall.cluster.shipping.user_modules`)
    importable in Spark's Python processes (``addPyFile``; a package zipped into ``directory``,
    which must outlive the session), as the Spark host ships a topology's. The query pickles
    them by reference, and an executor whose path lacks FILE's directory (a driver started from
    another directory, any cluster) failed every batch with ``No module named '<FILE>'``.
    Returns the names of the modules shipped."""
    from ..cluster.shipping import add_py_file, user_modules

    return [m.__name__ for m in user_modules([topology]) if add_py_file(spark.sparkContext, m, directory)]


class _Failed(Exception):
    """The running query's own failure (``query.exception()``), raised out of `_wait` so that
    `run_restarting` can tell a missed connect-back from the rest; its message is the failure's."""


def _wait(query: Any, stop: StopRequest) -> BaseException | None:
    """Wait for ``query`` until it ends or ``stop`` is set (SIGTERM, Ctrl-C). Raises `_Failed`
    when it failed while running; returns its failure, if any, when it was stopped."""
    from pyspark.errors import StreamingQueryException

    try:
        while not stop.is_set() and query.isActive:
            try:
                query.awaitTermination(0.5)
            except StreamingQueryException:  # it failed: query.exception() says how, below
                break
    except KeyboardInterrupt:
        stop.set()
    failed = query.exception()
    if failed is not None and not stop.is_set():
        raise _Failed(str(failed)) from failed
    return failed


def _run_until_stopped(start_query: Callable[[], Any], retries: int | None = None, name: str = "trident",
                       checkpoint: str | None = None, stop: StopRequest | None = None,
                       end_spark: Callable[[], None] = lambda: None) -> int:
    """Start the query (``start_query``) and wait for it; SIGTERM or Ctrl-C (``stop``, installed
    here when not given) stops it, with a line saying so, printed after ``end_spark()`` (the
    JVM logs its query's end a moment after the stop: those lines came after the driver's
    last). A query that
    failed because Spark's Python source process did not connect back in time is started again,
    up to ``retries`` times, and one whose state's store did not answer on the driver after a
    wait, while it does not (default START_RETRIES, STORE_RESTARTS: `squall.trident.spark.restart`, imported here
    and not with the CLI, which would import squall.trident for every verb). 0 when stopped, 1
    when it failed; then, when ``checkpoint`` (local) cannot be written, why and what to do.
    A failure that follows a signal and is that signal's work (`signalled_too`: the signal came
    to the driver's process group and ended Spark's JVM or its Python processes as well) is the
    stop, not a failure: 0, and the line says what ended with it."""
    from ..trident.spark.checkpoint import checkpoint_unwritable
    from ..trident.spark.restart import START_RETRIES, ConnectBackMissed, SourceProcessDied, run_restarting
    from ..trident.spark.stopping import JVM_EXIT_WAIT_SECS, StopRequest, gateway_jvm, let_jvm_end, signalled_too

    restore = None
    if stop is None:
        stop = StopRequest()
        restore = stop.install()
    try:
        try:
            failed: BaseException | None = run_restarting(
                start_query, lambda query: _wait(query, stop), name=name,
                retries=START_RETRIES if retries is None else retries,
                on_restart=lambda line: print(f"squall trident: {line}", file=sys.stderr, flush=True),
                wait=stop.wait)  # SIGTERM while waiting for a store stops the driver
        except (_Failed, ConnectBackMissed, SourceProcessDied) as e:
            failed = e
        except Exception as e:  # a call into the JVM (py4j) failed: was the JVM gone?
            if not stop.is_set():
                jvm = gateway_jvm(JVM_EXIT_WAIT_SECS) if _unreachable(e) else None
                if jvm is None or jvm.status is None:
                    raise
                failed = _Failed(f"Spark's JVM (pid {jvm.pid}) ended with status {jvm.status} while the query "
                                 f"ran ({type(e).__name__}: {e})")
                failed.__cause__ = e
            else:
                failed = e
    finally:
        if restore is not None:
            restore()
    end_spark()
    if stop.is_set():
        how = "" if stop.signal_name is None else f" on {stop.signal_name}"
        why = None if failed is None else signalled_too(stop)
        if failed is None or why is not None:
            let_jvm_end(stop)  # a JVM ending on the same signal says its last words first
            print(f"squall trident: query {name} stopped{how}{'' if why is None else f' ({why})'}; "
                  f"a start on the same checkpoint resumes it", file=sys.stderr, flush=True)
            return 0
    if failed is not None:
        text = str(failed)
        cause = _cause_of(text)
        # Spark's failure to write a batch's offsets or commit says only "No space left on
        # device", naming no file: the checkpoint itself is asked, and said next to the failure
        unwritable = None if checkpoint is None else checkpoint_unwritable(checkpoint)
        why = "" if unwritable is None else f"\nsquall trident: {unwritable}"
        if cause is None:
            first, newline, rest = text.partition("\n")
            print(f"squall trident: the query failed: {first}{why}{newline}{rest}", file=sys.stderr)
        else:  # what failed first, then Spark's whole report (tracebacks, the query's plan)
            print(f"squall trident: the query failed: {cause}{why}\nsquall trident: Spark's report of it:\n{text}",
                  file=sys.stderr)
        return 1
    return 0


def _unreachable(error: BaseException) -> bool:
    """Whether ``error`` is py4j's or the socket's for a JVM that does not answer."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(error, (ConnectionError, Py4JNetworkError))


# A Python (or Java) exception's last line, ``module.Name: message``, at the start of a line
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\w*: .+$",
                             re.MULTILINE)


def _cause_of(text: str) -> str | None:
    """The exception that failed the query, out of Spark's report: the last exception line
    before the query's description (``=== Streaming Query ===``), where a batch's Python
    traceback ends. None when the report has more than one line and no such line, or is one
    line (said as it is). Spark's report opens with py4j's ``An exception was raised by the
    Python Proxy. Return Message: Traceback (most recent call last):`` and the exception comes
    some 40 lines further, above the query's plan: a state's table that turned read-only
    (``FailedException: DeltaMapState /data/t: MERGE of txid 2 failed: ...``) was that far down."""
    head = text.split("=== Streaming Query ===", 1)[0]
    if "\n" not in head.strip():
        return None
    found = _EXCEPTION_LINE.findall(head)
    return found[-1] if found else None
