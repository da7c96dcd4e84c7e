"""What runs inside a Spark task: one squall worker, until the master stops it.

`worker_task` builds the function that the Spark host's single-task job maps over its one
partition (``sc.parallelize([slot], 1).mapPartitions(worker_task(...))``). It runs
`squall.cluster.worker_process.run` with the data port bound on the executor's own address, and
returns one exit record. The worker logs to ``worker.log`` under ``storm.log.dir`` as on the process
host (`squall.cluster.logs.install_worker_logging`; relative to the executor's working
directory, which is its Spark work directory). It catches everything, so Spark never retries the task on its own: the master,
in the driver, owns restarts (SPARK.md, rule 2). A copy that Spark starts again anyway (its
Python worker or executor died, and ``spark.task.maxFailures`` or ``local[N,F]`` allows a retry,
or the loss is not counted against the task) returns at once as lost: it would carry the same
launch id as the copy that died, whose peers remember that launch's message numbers and drop
the new copy's, from 0 again, as replays; the master then starts the slot under a new launch.

The worker runs in a child of the task's Python process (`run_watched`), which stays behind only
to watch it, as the process host's supervisor watches its worker processes: a record whose
processing kills the worker's process (a library's ``os._exit``, a segfault, the OOM killer)
leaves its worker's board (`squall.engine.executing`) in memory the task's process shares with
it, which the task reads after the death and returns with its exit record, so that the master
charges that record alone (``worker-died``) as on the process host. Were the worker the task's
own process, nothing would be left to read: the record would be replayed, and kill the worker,
for ever. The child dies with the task's process (``PR_SET_PDEATHSIG``: Spark killing the task,
its executor lost), so that no copy of the worker runs on beside its next launch. What it was
executing then is not charged: the board was memory of the two processes, gone with them, and
the task's process runs no user code, so its death says nothing against a record (docs/spark.md,
Failures). Its shell components' tasks keep their directories and the record of their
process groups in a directory the task's process made (`squall._children.SHELL_HOME_ENV`), which
it ends and removes once the worker's process ended (`squall._children.end_shell_tasks`): what a
killed worker's subprocesses started does not outlive it. A task's process SIGKILLed itself
leaves that directory; the next task's process on the machine ends what it holds
(`squall._children.end_orphaned_shell_homes`).

This module is imported on executors: it needs only squall and its dependencies there, not
pyspark's driver side.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import shutil
import signal
import socket
import stat
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .._children import (
    SHELL_HOME_ENV,
    die_with_parent,
    end_orphaned_shell_homes,
    end_shell_tasks,
    make_watched_shell_home,
)
from .._config import MEMORY_CAP_KEYS, Config
from .._nimbus import EXIT_LOST
from ..engine.executing import MAX_LINES, board_size, read_board
from ..worker.agent import EXIT_CRASHED
from . import features  # noqa: F401 (the extension points its executors use: metrics, stateful and windowed bolts)
from .oom_kills import oom_kills

ERROR_LIMIT = 16384  # the most of a failed start's traceback the worker's process passes to the task's


@dataclass(frozen=True)
class WatchedEnd:
    """How a worker run by `run_watched` ended: its process's exit ``status`` (negative: killed
    by that signal), the traceback of what its start raised (``error``, else empty), and
    ``(task, root)`` of each input its bolts were executing if it died without ending on its
    own (``executing``, from its board); ``why``: what the watch knows of a death that left no
    traceback (the OOM killer, `oom_killed`), else empty."""

    status: int
    error: str
    executing: tuple[tuple[int, int], ...]
    why: str = ""


def oom_killed(before: int | None, after: int | None) -> str:
    """Why a worker SIGKILLed while its memory cgroup's OOM kills went from ``before`` to
    ``after`` (`squall.cluster.oom_kills`) died, and what to do; empty if the count did not
    rise or could not be read (a ``kill -9``, say, or no cgroup)."""
    if before is None or after is None or after <= before:
        return ""
    return (f"the kernel's OOM killer, likely: its memory cgroup counted {after - before} OOM kill"
            f"{'s' if after - before > 1 else ''} while it ran; give the executor more memory outside "
            f"the JVM (spark.executor.memoryOverhead, spark.executor.pyspark.memory) or cap the worker "
            f"(worker.heap.memory.mb, which ends it with an error instead)")


def run_watched(work: Callable[[Callable[[int], Any]], int], storm_id: str, launch_id: int) -> WatchedEnd:
    """Run ``work(board_memory)``, a worker of the launch ``launch_id`` of ``storm_id``, in a
    child of this process, and wait for it to end; see the module docstring. ``board_memory``
    gives the worker its board (`squall.engine.executing.ExecutingBoard`) in an anonymous
    shared mapping, which this process reads after the child ended (as hostile, `read_board`:
    only that launch's board, still live, names anything). The child's exit status is
    ``work``'s; what ``work`` raises is written to a pipe (the last `ERROR_LIMIT` bytes, which
    the pipe holds without a reader) and the child exits with `EXIT_CRASHED`. A child SIGKILLed
    while its memory cgroup counted an OOM kill is said to be the OOM killer's (``why``)."""
    from .worker_process import exit_process
    oom_before = oom_kills()  # (in the parent: a count read after the death compares with it)
    board = mmap.mmap(-1, board_size(MAX_LINES))  # MAP_SHARED: the child's stores are seen here
    errors, errors_out = os.pipe()
    parent = os.getpid()
    left = end_orphaned_shell_homes()  # what the shell tasks of killed tasks' workers left on this machine
    if left:
        logging.getLogger("squall.worker").warning(
            "killed %d processes %s that the shell components of workers of killed Spark tasks left", len(left), left)
    shell_home = make_watched_shell_home()
    try:
        pid = os.fork()
    except BaseException:  # (EAGAIN, ENOMEM) raised to the task, whose Python worker Spark may reuse
        os.close(errors)
        os.close(errors_out)
        board.close()
        shutil.rmtree(shell_home, ignore_errors=True)
        raise
    if pid == 0:  # the worker's process: it never returns from here into the Spark task's code
        try:
            status = EXIT_CRASHED
            try:
                os.close(errors)
                die_with_parent()
                if os.getppid() != parent:  # the task's process died before the line above took
                    os._exit(EXIT_CRASHED)  # (nobody waits for this status)
                release_task_sockets()
                os.environ[SHELL_HOME_ENV] = shell_home
                status = int(work(lambda size: board))
            except BaseException:  # noqa: BLE001 (passed to the task's process, which reports it)
                with contextlib.suppress(OSError):
                    os.write(errors_out, traceback.format_exc().encode()[-ERROR_LIMIT:])
            exit_process(status)
        finally:
            os._exit(EXIT_CRASHED)  # exit_process failed
    os.close(errors_out)
    try:
        _, wait_status = os.waitpid(pid, 0)
        pid = 0
        # read without waiting: a child the worker forked (a multilang subprocess) may hold its end
        os.set_blocking(errors, False)
        error = b""
        with contextlib.suppress(BlockingIOError):
            error = os.read(errors, ERROR_LIMIT)
        executing = tuple((e.task, e.root) for e in read_board(board[:], storm_id, launch_id))
        status = os.waitstatus_to_exitcode(wait_status)
        why = oom_killed(oom_before, oom_kills()) if status == -signal.SIGKILL else ""
        return WatchedEnd(status, error.decode(errors="replace"), executing, why)
    finally:
        if pid:  # the wait was interrupted (an exception in this process): the worker goes too
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        # the worker is dead: what its shell components started and left goes with it
        killed = end_shell_tasks(shell_home)
        if killed:
            logging.getLogger("squall.worker").warning(
                "killed %d processes %s of the shell components its worker (launch %s of %s) left",
                len(killed), killed, launch_id, storm_id)
        shutil.rmtree(shell_home, ignore_errors=True)
        os.close(errors)
        board.close()


def release_task_sockets() -> None:
    """In the worker's process just forked (`run_watched`): let go of the sockets it inherited
    from the Spark task's process, its connection to the executor's JVM above all. A process
    the worker's user code forks (multiprocessing's fork, a helper), which does not die with
    the worker, would otherwise hold that connection open after the task's process died, and
    the JVM, which learns of that death from the connection's end, would not: the master would
    hear of it only by the heartbeat timeout (``nimbus.task.timeout.secs``). Each socket's
    descriptor is pointed at ``/dev/null``, not closed: a stale Python object of the task's
    that closes it later then closes nothing the worker opened under that number since."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: nothing to look at
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            if fd <= 2 or fd == devnull:
                continue
            with contextlib.suppress(OSError):  # (the listing's own descriptor, closed since)
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def executor_address(master_host: str, master_port: int) -> str:
    """The address of this machine on the route to the master: where peers (which reach the
    master the same way) can reach this worker."""
    if master_host in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((master_host, master_port))  # UDP: no packet is sent, only a route chosen
        return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())
    finally:
        s.close()


def _attempt_number() -> int:
    """Which attempt of its task Spark runs here (0: the first); 0 outside a Spark task."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return 0
    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def worker_task(master: str, storm_id: str, slot: str, launch_id: int,
                conf: dict[str, Any]) -> Callable[[Iterable[Any]], Iterator[dict[str, Any]]]:
    """The partition function of one worker's Spark job; see the module docstring."""

    def run_worker(_partition: Iterable[Any]) -> Iterator[dict[str, Any]]:
        attempt = _attempt_number()
        if attempt > 0:
            # Spark retries a task, without counting it against the task, when the executor it
            # ran in was lost (its JVM or its Spark worker node died): say so, it is the cause
            yield {"status": EXIT_LOST, "error": f"Spark ran worker {slot}'s task again on its own (attempt "
                                                 f"{attempt}), as it does when the executor running it is lost "
                                                 f"(its JVM or its Spark worker died); it ends at once, and the "
                                                 f"master starts a new launch"}
            return
        from .logs import stderr_format
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=stderr_format(slot))
        try:
            end = run_watched(_run_worker, storm_id, launch_id)
            record: dict[str, Any] = {"status": end.status}
            if end.error or end.why:  # (the master's error shows its last line)
                record["error"] = end.error or end.why
            if end.executing:
                record["executing"] = end.executing
            yield record
        except BaseException:  # noqa: B036 - never let Spark retry a worker on its own
            logging.getLogger("squall.worker").exception("worker %s failed", slot)
            yield {"status": EXIT_CRASHED, "error": traceback.format_exc()}

    def _run_worker(board_memory: Callable[[int], Any]) -> int:
        """The worker, in its own process (`run_watched`)."""
        from .logs import install_worker_logging
        from .worker_process import run
        try:
            install_worker_logging(conf, storm_id, slot)  # relative paths: from the executor's work dir
            host = conf.get(Config.SQUALL_SPARK_WORKER_HOST)
            if not host:
                mhost, mport = master.rsplit(":", 1)
                host = executor_address(mhost, int(mport))
            # a Python worker Spark reuses (spark.python.worker.reuse, PySpark's default on a session
            # squall did not build) keeps what an earlier launch left in it: a cap on its size
            # would stop every later launch at its first reading, so it applies only to fresh ones
            reused = os.environ.get("SPARK_REUSE_WORKER", "") not in ("", "0")  # (pyspark.daemon reads it so)
            if reused and any(conf.get(key) for key in MEMORY_CAP_KEYS):  # (a topology's own: docs/spark.md)
                logging.getLogger("squall.worker").warning(
                    "worker %s: no memory cap: Spark reuses its Python workers (spark.python.worker.reuse "
                    "true), whose size holds what earlier tasks left; set it to false to cap them", slot)
            return run(master, storm_id, slot, launch_id, conf, bind=f"tcp://{host}:0", cap_memory=not reused,
                       board_memory=board_memory)
        except BaseException:
            logging.getLogger("squall.worker").exception("worker %s failed", slot)
            raise

    return run_worker
