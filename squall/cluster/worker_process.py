"""A worker process of the process host: runs one slot's executors of one topology
(``python -m squall.worker``, whose ``__main__`` calls `entry`).

Started by its supervisor, it dies with it (``PR_SET_PDEATHSIG``, set by the supervisor before
exec). It fetches its assignment from the master, builds the engine's `Worker` with a
transport (`squall.worker.process.open_transport`: `TcpTransport` where the data port is not
encrypted, `ZmqTransport` with CurveZMQ where it is), and heartbeats its statistics and errors
every ``worker.heartbeat.frequency.secs`` (`squall.worker.agent.WorkerAgent`, the same on every
host). Its `logging` goes to its ``worker.log`` at Storm's place (`.logs.install_worker_logging`).
A crash in user code (Storm's fail-fast) is reported and ends the process with status 1; the
supervisor restarts it. A worker that cannot start reports why and exits with status 3. A worker
past its memory cap (``worker.heap.memory.mb``, ``topology.worker.max.heap.size.mb``: its own
resident size, `squall.worker.memory_cap`) reports so and exits with status 4, a crash too.

It lives with the hosts, beside the Spark task's worker (`spark_task`) and LocalCluster's
threads (`inprocess`), because it puts the worker together with the host's parts: the link to
the leading master (`seeds`), the log files (`logs`), the state home and the DRPC client.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import logging
import mmap
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .._config import Config, conf_value
from .._secret import load_or_create_secret
from ..drpc.client import remember_cluster
from ..engine.serialize import Serializer, source_cache
from ..state import StateHome, state_key
from ..worker.agent import WorkerAgent
from ..worker.batching import BatchingTransport
from ..worker.envelope import Origin
from ..worker.process import open_transport
from . import features  # noqa: F401 (the extension points its executors use: metrics, stateful and windowed bolts)
from .local_assignment import AssignmentCopy, resume_first_seq
from .logs import install_worker_logging, stderr_format
from .seeds import NimbusAddress, master_link
from .stall_watch import ProgressBeat, stall_limit_secs

log = logging.getLogger("squall.worker")

# How long the ``atexit`` functions of an ending worker may take (`exit_process`)
ATEXIT_SECS = 5.0


def anchored(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` with ``storm.local.dir`` and ``storm.log.dir`` made absolute, from the directory
    the worker started in (its supervisor's). User code may change the working directory
    (``os.chdir`` in a ``prepare``): what the worker writes after, its stateful bolts'
    checkpoints above all, must stay where the next launch of the worker will look."""
    out = dict(conf)
    for key in (Config.STORM_LOCAL_DIR, Config.STORM_LOG_DIR):
        if out.get(key):
            out[key] = os.path.abspath(out[key])
    return out


def run(master: str, storm_id: str, slot: str, launch_id: int, conf: dict[str, Any],
        stop: threading.Event | None = None, bind: str | None = None, cap_memory: bool = True,
        kept: Path | None = None, resumes: int = 0, board: Path | None = None,
        board_memory: Callable[[int], Any] | None = None) -> int:
    """Run the worker until the master says stop, ``stop`` is set (SIGTERM from the supervisor)
    or user code crashes; return the exit status. The worker receives on ``bind`` (default
    the slot's own ``tcp://host:port``; port 0 picks a free one) and reports that address to
    the master, which hands every worker the addresses of its peers. ``cap_memory``: apply the
    memory cap (`squall.worker.memory_cap`) to this process, which holds this worker alone.
    ``kept``: the file where it keeps a sealed copy of its assignment (`AssignmentCopy`);
    ``resumes`` above 0: it is that local restart of the launch, started from ``kept`` while no
    master answers its supervisor (`squall.cluster.local_assignment`). ``board``: the file where
    it keeps which input each bolt executor is executing, which its supervisor reads if it dies
    (`squall.engine.executing`); or ``board_memory``, the memory of that board as ``size ->
    buffer`` (the Spark task's shared memory, `squall.cluster.spark_task.run_watched`)."""
    conf = anchored(conf)
    mhost, mport = master.rsplit(":", 1)
    secret = load_or_create_secret(conf)
    remember_cluster(conf, secret)  # how this worker's DRPC spouts and return bolts reach drpc.servers
    # the master the supervisor found, then (Nimbus HA: it died, or lost the lead) the leader
    # among nimbus.seeds
    link = master_link(conf, first=NimbusAddress(mhost, int(mport)))

    def make_transport(plan: Any, origin: Origin, receive: Any) -> BatchingTransport:
        return open_transport(bind or f"tcp://{slot}", Serializer(plan.conf, source_cache(plan)), secret, receive,
                              origin, conf, plan.conf)
    # stateful bolts' states: sealed files under storm.local.dir, which outlive the worker
    home = StateHome(directory=Path(conf_value(conf, Config.STORM_LOCAL_DIR)) / "state", key=state_key(secret),
                     machine=(bind or f"tcp://{slot}").rsplit("://", 1)[-1].rsplit(":", 1)[0])
    # Trident's transactional state: a link of its own, as the agent's beats take the first
    tx_link = master_link(conf, first=NimbusAddress(mhost, int(mport)))
    try:
        return WorkerAgent(link, storm_id, slot, launch_id, conf, make_transport=make_transport, stop=stop,
                           state_home=home, transactional_link=tx_link, cap_memory=cap_memory,
                           kept=None if kept is None else AssignmentCopy(kept, secret), resumes=resumes,
                           first_seq=resume_first_seq(resumes),
                           board_memory=board_memory if board_memory is not None
                           else bytearray if board is None else functools.partial(mapped_file, board)).run()
    finally:
        tx_link.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m squall.worker --master HOST:PORT --storm-id ID --slot HOST:PORT --launch-id N``."""
    p = argparse.ArgumentParser(prog="squall-worker")
    p.add_argument("--master", required=True)
    p.add_argument("--storm-id", required=True)
    p.add_argument("--slot", required=True)
    p.add_argument("--launch-id", type=int, required=True)
    p.add_argument("--conf", help="cluster configuration as a YAML file", default=None)
    p.add_argument("--kept-assignment", default=None,
                   help="where to keep a sealed copy of the assignment (its supervisor's directory)")
    p.add_argument("--executing", default=None,
                   help="the file of the board of the inputs being executed (its supervisor's directory)")
    p.add_argument("--progress", default=None,
                   help="the file of the count that shows the worker runs Python (its supervisor's directory)")
    p.add_argument("--resume", type=int, default=0,
                   help="above 0: this local restart of the launch, started from --kept-assignment "
                        "while no master answers")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=stderr_format(args.slot))
    from .._config import cluster_conf  # the cluster's settings: defaults, squall.yaml, --conf
    conf = anchored(cluster_conf(None, args.conf))
    install_worker_logging(conf, args.storm_id, args.slot)  # <storm.log.dir>/workers-artifacts/ID/PORT/worker.log
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a clean stop: close/cleanup run
    if args.progress:  # its supervisor dumps its stacks if it stops running Python (`stall_watch`)
        ProgressBeat(Path(args.progress), stall_limit_secs(conf)).start()
    return run(args.master, args.storm_id, args.slot, args.launch_id, conf, stop,
               kept=Path(args.kept_assignment) if args.kept_assignment else None, resumes=args.resume,
               board=Path(args.executing) if args.executing else None)


def mapped_file(path: Path, size: int) -> mmap.mmap:
    """``size`` zeroed bytes of a new file at ``path`` (owner-only; one there is replaced),
    mapped shared: what the worker writes there is in the file when the process dies, however
    it dies (the kernel keeps the pages), for its supervisor to read (`squall.engine.executing`)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(fd, max(size, 1))
        return mmap.mmap(fd, max(size, 1))
    finally:
        os.close(fd)


def exit_process(status: int) -> NoReturn:
    """End this worker process now with ``status``, as Storm's worker ends (``Utils.exitProcess``:
    the shutdown hooks run, and threads that user code left running do not hold the exit).
    ``sys.exit`` would first wait for every thread that is not a daemon: a bolt's
    ``ThreadPoolExecutor`` with a call that never returns, or a thread started with
    ``daemon=False``, kept a crashed worker alive (and its slot's restart waiting) until the
    master's heartbeat timeout, and a stopped one until its supervisor's SIGKILL. The ``atexit``
    functions run first (for `ATEXIT_SECS` at most), then the logs and standard streams are
    flushed."""
    try:
        hooks = threading.Thread(target=atexit._run_exitfuncs, name="squall-worker-atexit", daemon=True)
        hooks.start()
        hooks.join(ATEXIT_SECS)
        if hooks.is_alive():
            log.warning("the atexit functions did not end within %g s; exiting without them", ATEXIT_SECS)
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed, or its reader gone: nothing more to say
                pass
    finally:
        os._exit(status)


def entry(argv: list[str] | None = None) -> NoReturn:
    """``python -m squall.worker``: `main`, then `exit_process` with its status (a status of
    its own for an exception that escaped it, whose traceback goes to stderr)."""
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's, on bad arguments: it said why
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (printed: the worker exits with it, as an uncaught exception would)
        import traceback
        traceback.print_exc()
        status = 1
    exit_process(status)
