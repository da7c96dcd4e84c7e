"""The Spark host: Nimbus in the Spark driver, each worker a long-running Spark task.

Storm's concepts map onto Spark's as follows: Nimbus is the driver (this process), a
supervisor's slots are the application's task slots, and a worker is one Spark task, run as its
own single-task job (SPARK.md, section 5). The master is the process host's `Master`, with the
same scheduling, state machine, heartbeats and restarts, and the supervisor its `Supervisor`
loop; only the launcher differs: `SparkLauncher` lives in the driver and starts a worker by
submitting a job (from a `pyspark.InheritableThread`, each in its own job group
``squall-<storm id>-w<slot>-g<launch>``) and stops one by asking it (the master's heartbeat
reply) and, if it does not end within ``squall.spark.stop.grace.secs``, by cancelling its job
group.

Workers bind their data port on their executor and report it to the master, which hands every
worker its peers' addresses and the changes when one restarts elsewhere.

`SparkCluster` runs all of this inside a Python program (tests, notebooks, ``squall jar --host
spark``); `run_spark_nimbus` is ``squall nimbus --host spark``, to which ``squall jar`` and the
other client verbs then talk as to any master.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Self

from .._config import Config, cluster_conf, conf_value
from .._errors import SquallError
from .._nimbus import EXIT_LOST, SPARK_HOST
from .._topology import StormTopology
from .._wire import ReconnectingClient, rpc_settings
from ..worker.agent import EXIT_CANNOT_START
from .client import MasterClient, master_address
from .launcher import Launch, Launcher, WorkerExit
from .master import Master
from .served_ui import statistics_pages
from .server import MasterServer
from .shipping import add_py_file, make_ship_dir, remove_orphaned_ship_dirs, topology_modules
from .spark_task import worker_task
from .store import hold_master_lock
from .supervisor import Supervisor
from .worker_ends import exit_text, killed_by

log = logging.getLogger("squall.spark")


# Settings SPARK.md says a long-running worker needs. Forced on a session squall creates;
# checked, with a warning, on one it is given.
FORCED = {
    "spark.speculation": "false",              # a speculative copy would be a second worker
    "spark.dynamicAllocation.enabled": "false",  # slots must stay while workers live
    "spark.task.maxFailures": "1",             # the master decides restarts, not Spark
    "spark.python.worker.reuse": "false",      # a worker's Python process ends with its task
    "spark.ui.showConsoleProgress": "false",   # the progress bar garbles the console
    # Spark 4: a Python worker that sends nothing back for idleTimeoutSeconds is logged about and,
    # with killOnIdleTimeout, killed; a worker's task sends its one record when the worker ends
    "spark.python.worker.idleTimeoutSeconds": "0",
    "spark.python.worker.killOnIdleTimeout": "false",
}
_IDLE_TIMEOUT, _KILL_ON_IDLE = "spark.python.worker.idleTimeoutSeconds", "spark.python.worker.killOnIdleTimeout"


def require_spark() -> Any:
    """Import pyspark, or say how to get it and Java."""
    try:
        import pyspark
    except ImportError:
        raise SquallError("the Spark host needs pyspark: pip install 'pyspark>=3.5' (or, in squall's checkout, "
                          "pip install -e '.[spark]')") from None
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise SquallError("the Spark host needs Java (17 or 21 for pyspark 4; 8, 11 or 17 for pyspark 3.5), "
                          "and none was found: install a JDK (Debian/Ubuntu: apt-get install "
                          "openjdk-17-jre-headless) or set JAVA_HOME to one")
    return pyspark


# Spark's own forms of a master URL (SparkMasterRegex, SparkSubmit): what SparkContext parses
_LOCAL_MASTER = re.compile(r"local(\[(?P<n>[0-9]+|\*)(\s*,\s*[0-9]+)?\])?"
                           r"|local-cluster\[\s*(?P<e>[0-9]+)\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]")
_SPARK_MASTER = re.compile(r"spark://(\[[^\]]+\]|[^,/:\[\]\s]+):[0-9]+(,(\[[^\]]+\]|[^,/:\[\]\s]+):[0-9]+)*")
_SPARK_MASTER_KEY = "spark.master"  # Spark's key, not squall's: a -c setting may give the master
_MASTER_FORMS = ("local, local[N], local[*], local[N,F], local-cluster[E,C,M], spark://HOST:PORT "
                 "(standby masters: spark://HOST1:PORT1,HOST2:PORT2), yarn or k8s://https://HOST:PORT")


def check_master(master: str) -> None:
    """Refuse a Spark master URL that Spark would refuse, before Spark's JVM starts, naming it.
    spark-submit refuses one that does not start with local, spark, k8s or yarn by exiting before
    pyspark hears from it (pyspark says only that its Java gateway exited, which read as a Java
    missing); one SparkContext cannot parse (``local[x]``, ``spark://HOST`` without a port) failed
    seconds later as a Py4J error from inside the JVM's constructor."""
    m = _LOCAL_MASTER.fullmatch(master)
    if m and m.group("n") != "0" and m.group("e") != "0":
        return
    if (_SPARK_MASTER.fullmatch(master) or master == "yarn"
            or master.startswith(("k8s://", "mesos://"))):  # mesos: pyspark 3.5 still has it
        return
    why = ("it asks for no thread or executor" if m else
           "a spark:// master needs HOST:PORT, each standby master's too" if master.startswith("spark") else
           "not a form Spark knows")
    raise SquallError(f"the Spark master {master!r} is not a master URL Spark accepts ({why}): give one of "
                      f"{_MASTER_FORMS}")


def checked_master(master: str | None, settings: Mapping[str, Any] | None) -> str | None:
    """The master a session asked for with ``master`` (``--spark-master``) and Spark settings
    (``-c spark.master=URL``) gets, checked (`check_master`): a ``spark.master`` setting went
    past the check, to fail as a Java missing, and, applied after ``master``, won over it
    without a word, so two different masters are refused."""
    given = (settings or {}).get(_SPARK_MASTER_KEY)
    if given is not None:
        given = str(given)
        if master and given != master:
            raise SquallError(f"two Spark masters given: {master!r} (--spark-master) and {given!r} "
                              f"(-c {_SPARK_MASTER_KEY}): give one")
        master = given
    if master:
        check_master(master)
    return master


def spark_session(master: str | None = None, app_name: str = "squall", settings: dict[str, str] | None = None) -> Any:
    """A SparkSession for squall: the active one (checked, see `check_session`), else a new one
    on ``master`` (else ``spark.master`` from spark-submit, else ``local[*]``) with `FORCED`.
    A ``master`` Spark would refuse is refused first (`check_master`), and so is a
    ``spark.master`` among ``settings`` (``-c spark.master=URL``), or one that contradicts
    ``master``: given after it, it won without a word."""
    master = checked_master(master, settings)
    require_spark()
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        warn_once(check_session(active.sparkContext))
        if settings:
            warn_once([(f"a Spark session runs already in this process: {', '.join(sorted(settings))} "
                        f"{'were' if len(settings) > 1 else 'was'} not applied (give Spark's settings to "
                        f"whatever started that session: spark-submit's --conf, say)")])
        return active
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    # the executors must run this same Python, with squall and the user's libraries
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {"spark.pyspark.python": sys.executable, **FORCED, **(settings or {})}.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as e:
        if "JAVA_GATEWAY_EXITED" in str(e) or "Java gateway" in str(e):
            raise SquallError(f"Spark could not start its JVM ({e}); check that JAVA_HOME or the java on "
                              f"PATH is a Java that pyspark supports (17 or 21 for pyspark 4)") from e
        said = stopped_at_start(master or _submitted_master(), e)
        if said:
            raise SquallError(said) from e
        raise
    session.sparkContext.setLogLevel("WARN")
    quiet_accumulator_hangups(session.sparkContext)
    # the caller's settings (-c spark.*) may override FORCED: checked as a given session's are
    warn_once(check_session(session.sparkContext) if settings else
              [w for w in [security_warning(session.sparkContext)] if w])
    return session


def quiet_accumulator_hangups(sc: Any) -> None:
    """Keep pyspark's accumulator server quiet when the JVM hangs up on it.

    The driver's accumulator server reads updates from a connection the JVM holds open for the
    SparkContext's life. A JVM that ends first (a SIGTERM to the driver's process group reaches it
    too: systemd's stop, ``kill -TERM -PGID``) closes it, the server's read raises ``EOFError``,
    and socketserver printed "Exception occurred during processing of request" and pyspark's
    traceback into the driver's stderr on every such stop, above a clean "stopped on SIGTERM".
    Nothing is lost there: an ended JVM sends no more updates. Every other error is still
    printed as before."""
    server = getattr(sc, "_accumulatorServer", None)  # pyspark's; None once the context stopped
    if server is None or not callable(getattr(server, "handle_error", None)):
        return
    loud = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (EOFError, ConnectionResetError)):  # the JVM's end of it closed
            return
        loud(request, client_address)

    server.handle_error = handle_error


def stopped_at_start(master: str | None, error: BaseException) -> str | None:
    """What to tell the user when the SparkContext ``getOrCreate`` made was stopped before the
    session was: on a standalone master (``spark://``), Spark's client stops the application when
    no master answered its registration (three tries, 20 s apart: ``All masters are unresponsive!
    Giving up.``) or the master removed it. pyspark then raised a Py4JJavaError with the JVM's
    stack, ``Cannot call methods on a stopped SparkContext``, naming neither the master nor why."""
    if not (master or "").startswith("spark://") or "stopped SparkContext" not in str(error):
        return None
    return (f"Spark stopped the application before it started: the standalone master {master} did not take it. "
            f"Spark's log above says why: 'All masters are unresponsive! Giving up.' when no master answered "
            f"there for 60 s (check the URL against the one the master's log prints, 'Starting Spark master "
            f"at spark://HOST:PORT', that the master runs, and that this machine reaches that port), or 'Master "
            f"removed our application' with the master's reason")


def _submitted_master() -> str | None:
    """``spark.master`` as spark-submit set it (a session started without ``master``)."""
    try:
        from pyspark import SparkConf
        return SparkConf().get("spark.master", None)
    except Exception:  # noqa: BLE001 (only to name the master in an error: without it the error is Spark's own)
        return None


def check_session(sc: Any) -> list[str]:
    """What in a given session's settings conflicts with long-running workers."""
    conf = sc.getConf()
    out = []
    for key, want in FORCED.items():
        if key in ("spark.ui.showConsoleProgress", "spark.python.worker.reuse", _IDLE_TIMEOUT, _KILL_ON_IDLE):
            continue  # cosmetic, or only tidiness; the idle timeout: below
        have = conf.get(key, None)
        if key == "spark.task.maxFailures":
            continue  # our tasks never fail to Spark (they catch everything); a retried one ends at once (spark_task)
        if have is not None and have.lower() != want:
            out.append(f"the Spark session sets {key}={have}; squall's workers need {want} "
                       f"(a second copy of a worker, or slots taken away, would disturb the topology)")
    idle = str(conf.get(_IDLE_TIMEOUT, "0") or "0").strip()
    if _on(conf, _KILL_ON_IDLE) and idle.rstrip("s").strip() not in ("0", ""):
        out.append(f"the Spark session sets {_KILL_ON_IDLE}=true with {_IDLE_TIMEOUT}={idle}: Spark would kill "
                   f"each squall worker's task after {idle}{'' if idle.endswith('s') else ' s'} (a worker's task "
                   f"sends Spark nothing until the worker ends), and the master restart it, again and again; "
                   f"set {_KILL_ON_IDLE}=false")
    python = conf.get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON")
    if sc.master.startswith("local") and python and os.path.realpath(python) != os.path.realpath(sys.executable):
        out.append(f"spark.pyspark.python is {python} but the driver runs {sys.executable}: "
                   f"executors may lack squall or run another Python")
    security = security_warning(sc)
    if security:
        out.append(security)
    return out


def security_warning(sc: Any) -> str | None:
    """What is wrong, if anything, with the protection of Spark's own channels: each worker's
    Spark task carries the cluster's secret (``squall.secret``) from the driver to its executor,
    and Spark authenticates and encrypts that traffic only with ``spark.authenticate`` and
    ``spark.network.crypto.enabled`` (or, on Spark 4, ``spark.ssl.rpc.enabled``). None in the
    local modes (``local[...]``, ``local-cluster[...]``), where it stays on this machine."""
    if sc.master.startswith("local"):
        return None
    conf = sc.getConf()
    missing = [key for key, on in (("spark.authenticate", _on(conf, "spark.authenticate")),
                                   ("spark.network.crypto.enabled", _on(conf, "spark.network.crypto.enabled")
                                    or _on(conf, "spark.ssl.rpc.enabled"))) if not on]
    if not missing:
        return None
    return (f"Spark master {sc.master}: {' and '.join(f'{key} is off' for key in missing)}, so squall.secret, "
            f"which each worker's Spark task carries to its executor, crosses the network unprotected and "
            f"anyone who can reach or watch Spark's ports can take it and control the squall cluster: set "
            f"spark.authenticate=true and spark.network.crypto.enabled=true (see docs/spark.md, Security)")


def _on(conf: Any, key: str) -> bool:
    return str(conf.get(key, "false") or "false").strip().lower() == "true"


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(warnings: list[str]) -> None:
    """Log each of ``warnings`` that this process has not logged yet (a driver that creates
    several clusters on one session hears of its settings once)."""
    for warning in warnings:
        with _warned_lock:
            if warning in _warned:
                continue
            _warned.add(warning)
        log.warning("%s", warning)


def task_slots(sc: Any) -> int:
    """How many tasks the application can run at once (each worker holds one, for its life)."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        n = int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001 (older Spark, whichever py4j error says so: the default parallelism is the number of cores)
        n = int(sc.defaultParallelism)
    return n


def expected_slots(sc: Any) -> int | None:
    """The task slots the application asked for, when its settings say: ``local-cluster[N,C,M]``,
    or ``spark.executor.instances`` x ``spark.executor.cores`` / ``spark.task.cpus``."""
    conf = sc.getConf()
    cpus = int(conf.get("spark.task.cpus", "1") or 1)
    m = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]", sc.master)
    if m:
        return int(m.group(1)) * int(m.group(2)) // cpus
    instances = conf.get("spark.executor.instances", None)
    if instances and not sc.master.startswith("local"):
        return int(instances) * int(conf.get("spark.executor.cores", "1") or 1) // cpus
    return None


def _describe_slots(sc: Any, n: int) -> str:
    return (f"the Spark application ({sc.master}) has {n} task slot{'s' if n != 1 else ''}: each worker holds "
            f"one for its life; give Spark more (local[N], or more executors or spark.executor.cores) "
            f"or ask for fewer workers (topology.workers)")


_PYTHON_TRACEBACK = "Traceback (most recent call last):"
_JVM_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(.*\)$|^\s*SQLSTATE: \w+$|^\s*\.\.\. \d+ more$")
_DRIVER_STACK = "Driver stacktrace:"
_BARE_CAUSE = re.compile(r"^\s*Caused by: [\w$.]+:?\s*$")  # a cause that is a JVM class and no message
_FAILURE_LINES = 40  # a worker's output on the process host is its last lines too
_PY4J_PREFIX = ": "  # Py4J puts it before the Java exception's text: "An error occurred ...\n: org.apache..."
# Spark's word for a task whose executor died: "ExecutorLostFailure (executor 0 exited caused by
# one of the running tasks) Reason: Command exited with code 137"
_EXECUTOR_LOST = re.compile(r"ExecutorLostFailure \(executor (?P<id>\S+) (?P<how>[^)]*)\)(?: Reason: (?P<reason>.*))?")
_EXIT_CODE = re.compile(r"exited with code (?P<code>\d+)")


def spark_failure(error: BaseException) -> str:
    """What a worker's Spark job that failed says about why, for the master's error record: the
    Python traceback its executor raised (an ImportError where squall's dependencies are
    missing, say), which a py4j ``Py4JJavaError`` or pyspark's ``PythonException`` carries
    among the JVM's stack frames, from its ``Traceback`` line to its ``XxxError: ...`` line;
    else the error's text without the JVM's frames (an executor lost, a job cancelled, a
    Python worker that crashed), up to its driver's stack, and without the causes that name
    only a JVM class: a crashed Python worker's ends ``Caused by: java.io.EOFException``, where
    Spark's own line before it says what happened ("Python worker exited unexpectedly
    (crashed)"), and the master's error shows the last line. At most its last
    ``_FAILURE_LINES`` lines. Py4J's ``": "`` before the Java exception is left out (the
    master's error read "...without being asked to stop: : org.apache.spark..."); a job that
    failed because its executor was lost ends with what became of the executor
    (`executor_loss`), as the master's error shows the last line."""
    text = str(error).strip() or type(error).__name__
    start = text.rfind(_PYTHON_TRACEBACK)  # the last: Spark may quote a cause's too
    lines = []
    for line in (text[start:] if start >= 0 else text).splitlines():
        if _JVM_FRAME.match(line):
            if start >= 0:
                break  # the Python traceback ends where the JVM's frames begin
            continue
        if start < 0 and line.strip() == _DRIVER_STACK:
            break  # the driver's side of the same failure: its frames and the causes again
        if start < 0 and _BARE_CAUSE.match(line):
            continue
        lines.append(line.removeprefix(_PY4J_PREFIX).rstrip())
    while lines and not lines[-1].strip():
        lines.pop()
    lost = executor_loss(lines[-1]) if lines and start < 0 else None
    if lost is not None:
        lines.append(lost)
    return "\n".join(lines[-_FAILURE_LINES:])


def executor_loss(line: str) -> str | None:
    """What became of the executor a worker's task ran in, from Spark's ``ExecutorLostFailure``
    in ``line`` (None: none there): ``its Spark executor 0 was killed by SIGKILL (the kernel's
    OOM killer, or a kill -9)`` for Spark's "Command exited with code 137" (a process that
    exits with 128 + N was killed by signal N), ``... exited with status 3``, or ``... was lost``
    with Spark's reason (a Spark worker lost with it, say). A worker killed with its executor
    said "was lost by its host, without an exit status", with Spark's exit code 137 beside it
    and no word of what SIGKILL usually means, as the Python worker's own SIGKILL had."""
    m = _EXECUTOR_LOST.search(line)
    if m is None:
        return None
    reason = (m["reason"] or m["how"]).strip()
    code = _EXIT_CODE.search(reason)
    what = f"its Spark executor {m['id']}"
    if code is None:
        return f"{what} was lost ({reason})"
    status = int(code["code"])
    if status > 128:
        return f"{what} was {killed_by(status - 128)}, and the worker with it (Spark: {reason})"
    return f"{what} exited with status {status}, and the worker with it (Spark: {reason})"


@dataclass
class _Job:
    """A worker's Spark job: the thread that submitted it, and what its task returned."""

    launch: Launch
    group: str
    thread: threading.Thread
    record: dict[str, Any]


class SparkLauncher(Launcher):
    """Workers as Spark jobs of the application's task slots, submitted from the driver (see the
    module docstring). Its slots are the application's task slots, offered as executors
    register (never fewer: an executor lost for a while must not make the master move
    workers). A worker is stopped by the master's heartbeat reply (clean: ``close`` and
    ``cleanup`` run); its job group is cancelled only if it is still there after
    ``squall.spark.stop.grace.secs``. The cluster's secret reaches workers in their task's
    closure (Spark's own channel), never in a file."""

    host = SPARK_HOST

    def __init__(self, conf: dict[str, Any], sc: Any, slots: int) -> None:
        self.conf = conf
        self.sc = sc
        self._ports = list(range(slots))
        self.grace = float(conf_value(conf, Config.SQUALL_SPARK_STOP_GRACE_SECS))
        self.jobs: dict[int, _Job] = {}
        self._leaving: list[tuple[_Job, float]] = []  # stopped jobs, and when to cancel them

    def slots(self) -> list[int]:
        n = task_slots(self.sc)
        if n > len(self._ports):
            self._ports = list(range(n))
        return list(self._ports)

    def start(self, port: int, launch: Launch) -> None:
        from pyspark import InheritableThread
        mhost, mport = master_address(self.conf)
        group = f"squall-{launch.storm_id}-w{port}-g{launch.launch_id}"
        slot = f"{SPARK_HOST}:{port}"
        run = worker_task(f"{mhost}:{mport}", launch.storm_id, slot, launch.launch_id, dict(self.conf))
        record: dict[str, Any] = {}

        def job() -> None:
            # the job group is set in the submitting thread: one set elsewhere would not reach it
            self.sc.setJobGroup(group, f"squall worker {slot} of {launch.name}", interruptOnCancel=True)
            try:
                record.update(self.sc.parallelize([port], 1).mapPartitions(run).collect()[0])
            except Exception as e:  # noqa: BLE001 (cancelled, or the task's Python worker or executor died: the worker is lost)
                record.update(status=EXIT_LOST, error=spark_failure(e))

        thread = InheritableThread(target=job, name=f"squall-spark-{group}", daemon=True)
        thread.start()
        self.jobs[port] = _Job(launch, group, thread, record)
        log.info("started worker %s for %s (launch %s) as Spark job group %s", slot, launch.storm_id,
                 launch.launch_id, group)

    def stop(self, port: int) -> None:
        job = self.jobs.pop(port, None)
        if job is not None and job.thread.is_alive():
            self._leaving.append((job, time.monotonic() + self.grace))

    def running(self) -> dict[int, Launch]:
        return {port: job.launch for port, job in self.jobs.items()}

    def exits(self) -> list[WorkerExit]:
        """The jobs that ended; also cancels the stopped ones past their grace (this is the
        supervisor's one call per sync)."""
        out = []
        for port, job in list(self.jobs.items()):
            if job.thread.is_alive():
                continue
            del self.jobs[port]
            rc = job.record.get("status", EXIT_LOST)
            error = str(job.record.get("error") or "").rstrip()
            log.log(logging.INFO if rc == 0 else logging.WARNING, "worker %s:%s of %s ended: %s%s",
                    SPARK_HOST, port, job.launch.storm_id, exit_text(rc), f" ({error.splitlines()[-1]})" if error else "")
            # the error is the exit's output, as a worker process's last lines are on the process
            # host: the master's record of an exit names its last line (the ImportError, say)
            # what its bolts were executing if it died (its task read its board: spark_task.run_watched)
            executing = tuple(job.record.get("executing", ()))
            out.append(WorkerExit(job.launch.storm_id, f"{SPARK_HOST}:{port}", job.launch.launch_id, rc,
                                  rc != EXIT_CANNOT_START, error, executing))
        self._cancel_overdue()
        return out

    def _cancel_overdue(self) -> None:
        now = time.monotonic()
        still = []
        for job, due in self._leaving:
            if not job.thread.is_alive():
                continue
            if now >= due:
                log.warning("cancelling Spark job group %s: its worker did not stop", job.group)
                self.sc.cancelJobGroup(job.group)
                due = float("inf")
            still.append((job, due))
        self._leaving = still

    def busy(self, storm_ids: Collection[str] | None = None) -> bool:
        """Whether any worker's job (of ``storm_ids``' topologies, if given) is still running (a
        stopped one included, until it ends)."""
        jobs = list(self.jobs.values()) + [job for job, _ in list(self._leaving)]
        return any(job.thread.is_alive() for job in jobs if storm_ids is None or job.launch.storm_id in storm_ids)

    def stop_all(self, timeout: float = 10.0) -> None:
        """Cancel every worker's job and wait (up to ``timeout``) for the jobs to end."""
        jobs = [job for job in list(self.jobs.values()) + [j for j, _ in self._leaving] if job.thread.is_alive()]
        for job in jobs:
            self.sc.cancelJobGroup(job.group)
        self.jobs.clear()
        self._leaving = []
        deadline = time.monotonic() + timeout
        for job in jobs:
            job.thread.join(max(0.0, deadline - time.monotonic()))


def port_taken(conf: Mapping[str, Any], error: OSError) -> str:
    """Why a master on Spark cannot listen, and what to do. Not "use another port": a master
    already running on this ``storm.local.dir`` (the usual cause: this command run twice) is
    the one to use, and a second master there, on any port, would resume and run every one of
    its topologies a second time."""
    host, port = conf.get(Config.NIMBUS_HOST), conf.get(Config.NIMBUS_THRIFT_PORT)
    local_dir = conf_value(conf, Config.STORM_LOCAL_DIR)
    return (f"the master cannot listen on {host}:{port}: {error.strerror or error} (is a master already running "
            f"on storm.local.dir {local_dir}? `squall list` with the same configuration reaches it; a second "
            f"master needs its own storm.local.dir, and its own nimbus.thrift.port, since a master resumes "
            f"every topology it finds in its storm.local.dir)")


class _MasterThread:
    """The master's asyncio server in a thread of the driver."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task | None = None
        self._thread = threading.Thread(target=self._run, name="squall-master", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if isinstance(self._error, OSError):
            raise SquallError(port_taken(master.conf, self._error))
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise SquallError("the master did not start within 30 s")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        ready = asyncio.Event()

        async def main() -> None:
            self._task = asyncio.create_task(MasterServer(self.master).serve(ready))
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if self._task.done():
                self._task.result()  # serve ended at once (the port is taken, say): raise why
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            # the clients' connections: end them here, not in a closed loop's finaliser
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
        try:
            self._loop.run_until_complete(main())
        except BaseException as e:  # noqa: BLE001 (raised in the caller's thread)
            if not self._ready.is_set():
                self._error = e
                self._ready.set()

    def stop(self) -> None:
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)


class SparkCluster(MasterClient):
    """A squall cluster in this Spark driver: the master and a supervisor (`SparkLauncher`) run in
    threads of this process, workers run as Spark tasks. Its verbs are `MasterClient`'s
    (``submit_topology``, ``kill_topology``, ``activate``, ``deactivate``, ``rebalance``,
    ``list_topologies``, ``get_topology_info``); use it as a context manager, or call `shutdown`.

    Args:
        spark: a SparkSession to run in (checked; see `check_session`); None creates one on
            ``master`` with the settings squall needs.
        master: the Spark master URL for a new session (``local[2]``, ``spark://host:7077``,
            ``yarn``, ``k8s://...``); None: spark-submit's, else ``local[*]``.
        conf: cluster settings (``storm.local.dir``, ``nimbus.thrift.port``: 0 for any free
            port, ``squall.secret``, ...) over ``squall.yaml`` and the defaults.
        slots: task slots to offer workers; None: all the application's
            (`task_slots`), waiting up to ``squall.spark.executor.wait.secs`` for executors.
        ui_port: serve the UI daemon's REST API (docs/ui.md) in this driver on
            ``ui.host``:``ui_port`` (0: a free port; needs the ``ui`` extra) until `shutdown`;
            `ui_port` is then the bound port. It reaches the master over RPC, as ``squall ui``.
        settings: Spark settings (``spark.*``) for the new session, over those squall forces
            (`FORCED`); not applied to ``spark`` or to a session already running.
        check_recovered: called with the names of the topologies the master recovered from
            ``storm.local.dir`` (none: an empty list) before the master listens and before any
            worker starts; what it raises ends the start, with nothing recovered run or
            changed (``squall jar --host spark`` refuses another master's topologies so).
    """

    def __init__(self, spark: Any = None, master: str | None = None, conf: dict[str, Any] | None = None,
                 slots: int | None = None, ui_port: int | None = None,
                 check_recovered: Callable[[list[str]], None] | None = None,
                 settings: Mapping[str, str] | None = None) -> None:
        if spark is None:
            require_spark()
            from pyspark.sql import SparkSession
            self._own_session = SparkSession.getActiveSession() is None
            spark = spark_session(master, settings=dict(settings or {}))
        else:
            self._own_session = False
            warn_once(check_session(spark.sparkContext))
        self.spark = spark
        try:
            self._start(conf, slots, ui_port, check_recovered)
        except BaseException:
            self._stop_started()
            raise

    def _start(self, conf: dict[str, Any] | None, slots: int | None, ui_port: int | None,
               check_recovered: Callable[[list[str]], None] | None) -> None:
        """`__init__`'s work once the session is there: the master, the slots, the supervisor,
        the UI."""
        sc = self.spark.sparkContext
        base = cluster_conf(conf)
        listen, advertised = _master_addresses(sc, str(conf_value(base, Config.NIMBUS_HOST)))
        self._lock: int | None = hold_master_lock(base)  # released by shutdown: one master a storm.local.dir
        # The executors first, then the master: a master that recovers topologies (this driver
        # was started again) gives their workers nimbus.task.timeout.secs from its start to be
        # heard, and their machine, the supervisor below, registers only once the slots are up.
        # Those workers died with the last application; waited for in the master's time, an
        # executor wait longer than the timeout made it take both machines for lost, an error
        # per worker in the topology's errors ("its machine is taken for lost ...") after every
        # driver restart whose executors took longer than the timeout to come.
        n = slots if slots is not None else self._wait_for_slots(sc, base)
        self._master = Master({**base, Config.NIMBUS_HOST: listen}, strict_slots=lambda n: _describe_slots(sc, n),
                              pages=statistics_pages())
        if check_recovered is not None:
            check_recovered(sorted(self._master.topologies))
        self._server = _MasterThread(self._master)
        # the secret travels to the tasks in their closure (Spark's own channel), not by file
        self.conf = {**base, Config.NIMBUS_HOST: advertised, Config.NIMBUS_SEEDS: [advertised],
                     Config.NIMBUS_THRIFT_PORT: self._master.port, Config.SQUALL_SECRET: self._master.secret.decode()}
        self.launcher = SparkLauncher(self.conf, sc, n)
        assert self._master.port is not None  # it listens
        link = ReconnectingClient(advertised, self._master.port, self._master.secret, rpc_settings(self.conf), timeout=5)
        self.supervisor = Supervisor(self.conf, self.launcher, link)
        self.supervisor.sync()  # register the slots before the first submission
        self._sup_thread = threading.Thread(target=self.supervisor.run, name="squall-spark-supervisor", daemon=True)
        self._sup_thread.start()
        self._shipped: set[str] = set()
        remove_orphaned_ship_dirs()  # those of drivers SIGKILLed on this machine
        self._tmp = make_ship_dir()
        super().__init__(self.conf)
        self._ui: Any = None
        if ui_port is not None:
            from .served_ui import serve_remote_ui  # loads the UI (the ui extra) only when asked for
            self._ui = serve_remote_ui(self.conf, str(conf_value(self.conf, Config.UI_HOST)), ui_port)
        log.info("squall on Spark %s: master at %s:%s, %d task slots", sc.master, advertised, self._master.port, n)

    @staticmethod
    def _wait_for_slots(sc: Any, conf: dict[str, Any]) -> int:
        """The task slots, once the executors the application asked for have registered (they
        come up one by one after the session starts), or whatever there is after
        ``squall.spark.executor.wait.secs``."""
        want = expected_slots(sc)
        deadline = time.monotonic() + float(conf_value(conf, Config.SQUALL_SPARK_EXECUTOR_WAIT_SECS))
        n = task_slots(sc)
        while n < (want or 1) and time.monotonic() < deadline:
            time.sleep(0.25)
            n = task_slots(sc)
        if n == 0:
            raise SquallError(f"no Spark executor registered within squall.spark.executor.wait.secs "
                              f"({sc.master}): squall has no task slot to run workers in")
        if want and n < want:
            log.warning("only %d of the %d task slots the Spark application asked for are up; more are "
                        "offered to topologies as their executors register", n, want)
        return n

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology,
                        initial_status: str = "ACTIVE") -> str:
        """Ship the user's modules to the executors (``addPyFile``), then submit."""
        self.ship_modules(topology)
        return super().submit_topology(name, conf, topology, initial_status)

    def ship_modules(self, topology: Any) -> None:
        """``addPyFile`` the user's modules that ``topology``'s code reaches (see `_ship`)."""
        if isinstance(topology, StormTopology):
            for module in topology_modules(topology):
                self._ship(module)

    def _ship(self, module: Any) -> None:
        """``SparkContext.addPyFile`` a user's top-level module (a .py) or package (zipped), so
        that what the pickled topology imports later on an executor is there too."""
        if module.__name__ in self._shipped:
            return
        self._shipped.add(module.__name__)
        add_py_file(self.spark.sparkContext, module, self._tmp.name)

    def remove_shipped(self) -> None:
        """Remove the directory of the packages zipped for ``addPyFile`` (`_ship`), as this
        driver ends. Never raises (a driver ending on a lost JVM calls it)."""
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()

    def _stop_started(self) -> None:
        """Stop what a failed `__init__` had started, and the session if it created it. A
        session left active would be handed to the next SparkCluster made in this process,
        which would then run on that session's master, not on the one it was asked for."""
        if getattr(self, "_sup_thread", None) is not None:
            self.supervisor.stop()
            self._sup_thread.join(30)
        if getattr(self, "_server", None) is not None:
            self._server.stop()
        self.remove_shipped()
        if "_ui" in vars(self):  # set right after MasterClient.__init__
            self.close()
        self._release_lock()
        if self._own_session:
            self.spark.stop()

    def _release_lock(self) -> None:
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            os.close(lock)

    def shutdown(self, kill_topologies: bool | Collection[str] = True) -> None:
        """Kill every topology (as `LocalCluster.shutdown` does), letting their workers stop
        cleanly (``close``, ``cleanup``) for up to ``squall.spark.stop.grace.secs``; then cancel
        what still runs, stop the supervisor and the master, and stop the SparkSession too if
        this cluster created it (and the UI, if it serves one). With ``kill_topologies`` False
        (a Nimbus stopping), the topologies stay in ``storm.local.dir``, and a master started
        there later resumes them; given names (``squall jar --host spark``: the ones its FILE
        submitted), only those are killed, and the others stay so."""
        if kill_topologies is not False:
            with contextlib.suppress(Exception):  # a master that is gone already: stop the rest anyway
                doomed = [t for t in self.list_topologies() if kill_topologies is True or t["name"] in kill_topologies]
                for t in doomed:
                    self.kill_topology(t["name"], wait_secs=0)
                # the workers to wait for: every one, or those of the topologies killed here
                scope = None if kill_topologies is True else {t["id"] for t in doomed}
                deadline = time.monotonic() + self.launcher.grace + 2  # the next sync tells them
                while self.launcher.busy(scope) and time.monotonic() < deadline:
                    time.sleep(0.1)
        if self._ui is not None:
            self._ui.stop()
            self._ui = None
        self.supervisor.stop()
        self._sup_thread.join(30)
        self._server.stop()
        self._release_lock()
        self.close()
        self.remove_shipped()
        if self._own_session:
            self.spark.stop()

    def spark_alive(self) -> bool:
        """Whether this driver's Spark JVM still answers (pyspark's gateway to it)."""
        from py4j.protocol import Py4JError  # pyspark's own dependency
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()
        except (Py4JError, OSError):  # the JVM is gone
            return False

    @property
    def ui_port(self) -> int | None:
        """The port the UI serves on (None: no UI, or shut down)."""
        return self._ui.port if self._ui is not None else None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _master_addresses(sc: Any, host: str) -> tuple[str, str]:
    """Where the master listens, and the address workers and clients are given. In the local
    modes everything is on this machine; on a cluster the executors reach the driver at
    ``spark.driver.host``, so a loopback ``nimbus.host`` (the default) becomes all interfaces,
    unless the driver's host is loopback too (a cluster all on this machine)."""
    loopback = host in ("127.0.0.1", "localhost", "::1")
    if sc.master.startswith("local"):
        return host, "127.0.0.1" if loopback else host
    if loopback or host == "0.0.0.0":
        driver = sc.getConf().get("spark.driver.host")
        # a cluster on loopback (SPARK_LOCAL_IP=127.0.0.1: every daemon on this machine)
        return (driver, driver) if driver in ("127.0.0.1", "localhost", "::1") else ("0.0.0.0", driver)
    return host, host


def run_spark_nimbus(conf: dict[str, Any], spark_master: str | None,
                     on_ready: Callable[[str, int, str], None] | None = None,
                     settings: Mapping[str, str] | None = None) -> int:
    """``squall nimbus --host spark``: the master in a new Spark driver, until SIGINT/SIGTERM.
    ``on_ready(host, port, what)`` is called once the master listens and the task slots are
    known (``what``: the Spark master and the slots). ``settings``: the session's Spark
    settings (``-c spark.KEY=VALUE``)."""
    cluster = SparkCluster(master=spark_master, conf=conf, settings=settings)
    try:
        stop = stop_on_signals()
        if on_ready is not None:
            on_ready(str(cluster.conf[Config.NIMBUS_HOST]), int(cluster.conf[Config.NIMBUS_THRIFT_PORT]),
                     f"Spark {cluster.spark.sparkContext.master}, {len(cluster.launcher.slots())} task slots")
        while not stop.wait(1.0):
            exit_if_spark_gone(cluster)
    finally:
        cluster.shutdown(kill_topologies=False)
    return 0


EXIT_SPARK_GONE = 70
"""The status of a driver that ended because its Spark JVM was gone."""


def exit_if_spark_gone(cluster: SparkCluster, exit: Callable[[int], Any] = os._exit) -> None:
    """End this process at once, as if killed with it, when the driver's JVM is gone (killed,
    out of memory): pyspark's Python side would otherwise live on, holding the master's port,
    so that the driver Spark starts again (``--supervise``, a YARN attempt) could not listen
    there. The topologies stay in ``storm.local.dir`` for that driver to resume; the user's
    packages zipped for the executors (``squall-ship-*`` in the temporary directory) go, as at
    a clean stop: ``os._exit`` runs no finaliser, and each driver started again would leave
    one more."""
    if not cluster.spark_alive():
        log.error("the Spark driver's JVM is gone: ending this driver; its topologies stay in %s for the "
                  "driver started again to resume", cluster.conf.get(Config.STORM_LOCAL_DIR))
        cluster.remove_shipped()
        exit(EXIT_SPARK_GONE)


def stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set. Call it once the SparkContext exists: pyspark installs
    its own SIGINT handler then (it cancels every job and raises KeyboardInterrupt), which would
    skip a clean stop."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


