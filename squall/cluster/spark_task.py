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

This module is imported on executors: it needs only squall and its dependencies there, not
pyspark's driver side.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._config import MEMORY_CAP_KEYS, Config

EXIT_LOST = -1  # the task ended without a record: cancelled, or its Python worker or executor died


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
            yield {"status": EXIT_LOST, "error": f"Spark ran worker {slot}'s task again on its own (attempt "
                                                 f"{attempt}); it ends at once, and the master starts a new launch"}
            return
        from ..worker.agent import EXIT_CRASHED
        from .logs import install_worker_logging
        from .worker_process import run
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"%(asctime)s worker {slot} %(levelname)s %(message)s")
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
            status = run(master, storm_id, slot, launch_id, conf, bind=f"tcp://{host}:0", cap_memory=not reused)
            yield {"status": status}
        except BaseException:  # noqa: B036 - never let Spark retry a worker on its own
            logging.getLogger("squall.worker").exception("worker %s failed", slot)
            yield {"status": EXIT_CRASHED, "error": traceback.format_exc()}

    return run_worker
