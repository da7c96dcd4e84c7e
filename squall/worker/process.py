"""A worker process: runs one slot's executors of one topology (``python -m squall.worker``).

Started by its supervisor, it dies with it (``PR_SET_PDEATHSIG``, set by the supervisor before
exec). It fetches its assignment from the master, builds the engine's `Worker` with a
`ZmqTransport`, and heartbeats its statistics and errors every ``worker.heartbeat.frequency.secs``;
the replies say whether the topology is active or the worker must stop. While the master is
unreachable it keeps processing and retries. A crash in user code (Storm's fail-fast) is
reported and ends the process with status 1; the supervisor restarts it. A worker that cannot
start (its topology cannot be loaded, or user code fails before every executor has opened, say
on a bad import in ``prepare``) reports why and exits with status 3.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
from typing import Any

import cloudpickle

from .._config import setting
from .._encryption import encryption_setting
from .._tuple import Source
from ..engine.clock import Clock
from ..engine.executor import error_record
from ..engine.loop import Backpressure, TopologyState
from ..engine.remote_backpressure import BackpressureLink
from ..engine.serialize import Serializer
from ..engine.worker import Worker, component_blobs
from .envelope import Origin
from .rpc import Client, RemoteError, RpcError, RpcSettings, load_or_create_secret, rpc_settings
from .transport import DEFAULT_MAX_MESSAGE_BYTES, MAX_MESSAGE_KEY, ZmqTransport

log = logging.getLogger("squall.worker")

EXIT_CRASHED = 1
EXIT_CANNOT_START = 3


class _MasterLink:
    """The worker's connection to the master, re-made on the call after one that failed (a
    failed call closes its `Client`; its callers retry: heartbeats every period, the start's
    requests until ``nimbus.task.launch.secs``)."""

    def __init__(self, host: str, port: int, secret: bytes, settings: RpcSettings) -> None:
        self.host, self.port, self.secret, self.settings = host, port, secret, settings
        self._client: Client | None = None

    def call(self, op: str, **args: Any) -> Any:
        if self._client is None or self._client.broken:
            self._client = Client(self.host, self.port, self.secret, timeout=10, settings=self.settings)
        return self._client.call(op, **args)


def _source_cache(plan) -> Any:
    cache: dict[tuple[int, str], Source] = {}

    def source_of(task: int, stream: str) -> Source:
        src = cache.get((task, stream))
        if src is None:
            component = plan.task_to_component[task]
            fields = plan.topology.components[component].streams[stream].fields
            src = cache[(task, stream)] = Source(component, stream, task, fields)
        return src
    return source_of


def run(master: str, storm_id: str, slot: str, launch_id: int, conf: dict[str, Any],
        stop: threading.Event | None = None, bind: str | None = None) -> int:
    """Run the worker until the master says stop, ``stop`` is set (SIGTERM from the supervisor)
    or user code crashes; return the exit status. The worker receives on ``bind`` (default
    the slot's own ``tcp://host:port``; port 0 picks a free one) and reports that address to
    the master, which hands every worker the addresses of its peers."""
    stop = stop or threading.Event()
    port = slot.rsplit(":", 1)[1]
    mhost, mport = master.rsplit(":", 1)
    link = _MasterLink(mhost, int(mport), load_or_create_secret(conf), rpc_settings(conf))
    deadline = time.monotonic() + float(conf.get("nimbus.task.launch.secs", 120))
    transport: ZmqTransport | None = None
    try:
        a = _call_until(link, deadline, stop, "get_assignment", storm_id=storm_id, slot=slot, launch_id=launch_id)
        if a is None:
            log.error("cannot reach the master at %s", master)
            return EXIT_CANNOT_START
        if a["launch_id"] != launch_id:
            return 0  # superseded while starting
        try:
            plan = cloudpickle.loads(a["plan"])
            executors = [plan.executors[i] for i in a["executors"]]
            blobs = component_blobs(plan)
            serializer = Serializer(plan.conf, _source_cache(plan))
            early = _EarlyItems()
            transport = ZmqTransport(bind or f"tcp://{slot}", {}, serializer, link.secret, receive=early,
                                     origin=Origin(storm_id, slot, launch_id), **_transport_options(conf))
        except Exception as e:
            rec = error_record("__worker", -1, e, int(port), fatal=True)
            rec.error = f"worker on {slot} cannot start: {rec.error}"
            _report(link, storm_id, slot, launch_id, [rec.as_dict()])
            return EXIT_CANNOT_START
        # report our address, and wait for every peer's (on Spark they bind as their tasks start)
        while True:
            a = _call_until(link, deadline, stop, "get_assignment", storm_id=storm_id, slot=slot,
                            launch_id=launch_id, address=transport.address, want_plan=False)
            if a is None or a["launch_id"] != launch_id:
                return 0 if stop.is_set() or a is not None else EXIT_CANNOT_START
            if all(addr is not None for addr in a["peers"].values()):
                break
            if time.monotonic() > deadline:
                log.error("peers of %s did not report within nimbus.task.launch.secs", slot)
                return EXIT_CANNOT_START
            time.sleep(0.2)
        return _run_started(link, plan, executors, blobs, transport, early, a, storm_id, slot, launch_id, conf,
                            stop)
    except RemoteError as e:  # "no assignment": killed or moved while this worker started
        log.info("%s; exiting", e)
        return 0
    finally:
        if transport is not None:
            transport.close()


def _transport_options(conf: dict[str, Any]) -> dict[str, Any]:
    """The `ZmqTransport` settings of the cluster's configuration (checked by the keys' rules in
    `squall._config`; an error names a bad key)."""
    return {"max_message_bytes": setting(conf, MAX_MESSAGE_KEY, DEFAULT_MAX_MESSAGE_BYTES),
            "encryption": encryption_setting(conf)}


def _call_until(link: _MasterLink, deadline: float, stop: threading.Event, op: str, **args: Any) -> Any:
    """``link.call`` retried while the master is unreachable; None once past ``deadline`` or stopped."""
    while not stop.is_set():
        try:
            return link.call(op, **args)
        except RpcError as e:
            if time.monotonic() > deadline:
                log.error("%s failed: %s", op, e)
                return None
            time.sleep(0.5)
    return None


def _run_started(link: _MasterLink, plan: Any, executors: list, blobs: Any, transport: ZmqTransport,
                 early: _EarlyItems, a: dict[str, Any], storm_id: str, slot: str, launch_id: int,
                 conf: dict[str, Any], stop: threading.Event) -> int:
    port = slot.rsplit(":", 1)[1]
    addresses_version = a["addresses_version"]
    lost_generation = a.get("lost_generation", 0)
    epoch = a.get("epoch")  # the master's: a restarted master counts generations afresh
    peers: dict[int, str] = {}
    _set_peers(transport, peers, a["peers"])
    transport.set_launches(a["launch_ids"])
    errors: list[dict[str, Any]] = []
    crashed = threading.Event()
    state = TopologyState(active=bool(a["active"]))
    clock = Clock()
    bp = Backpressure(plan.conf["topology.executor.receive.buffer.size"], clock)
    worker = Worker(plan, int(port), executors, blobs, transport, clock, state, bp,
                    lambda rec: errors.append(rec.as_dict()),
                    lambda w, rec: crashed.set(), random.SystemRandom().getrandbits(64))
    early.hand_over(worker.receive)
    transport.set_receiver(worker.receive)
    refused_tasks: set[int] = set()

    def refused(task: int, why: str) -> None:  # an item too large to send: say so once per task
        if task not in refused_tasks:
            refused_tasks.add(task)
            errors.append(error_record(plan.task_to_component.get(task, "__transport"), task, why,
                                       int(port)).as_dict())
    transport.on_refused = refused
    # backpressure across workers; the sender of a peer's message is the slot its authenticated
    # header names
    peers_bp = BackpressureLink(bp, transport)
    worker.start()
    freq = float(conf.get("worker.heartbeat.frequency.secs") or 1)
    stall_after = float(plan.conf.get("topology.executor.blocking.warn.millis") or 1000) / 1000.0
    status = 0
    try:
        while True:
            if _wait_any(crashed, stop, freq) and crashed.is_set():
                status = EXIT_CRASHED
            elif stop.is_set():
                return 0
            worker.find_stalls(time.monotonic(), stall_after)  # moves a blocking component off the shared loop
            pending, errors[:] = list(errors), []
            try:
                reply = link.call("heartbeat", storm_id=storm_id, slot=slot, launch_id=launch_id,
                                  stats=worker.statistics(), errors=pending, started=worker.opened(),
                                  address=transport.address, addresses_version=addresses_version,
                                  pid=os.getpid(), lost_generation=lost_generation, epoch=epoch,
                                  transport=transport.statistics())
            except RpcError:
                errors[:0] = pending  # keep them for when the master is back; go on processing
                reply = None
            if status:
                # a crash before every executor opened is a failed start (say, a bad import in
                # prepare): the master stops retrying those after a bounded number of attempts
                return status if worker.opened() else EXIT_CANNOT_START
            if reply is not None:
                if reply.get("stop"):
                    return 0
                if "peers" in reply:  # a peer restarted elsewhere: before spouts may (re)start
                    worker.tasks_lost(_set_peers(transport, peers, reply["peers"]))
                    transport.set_launches(reply["launch_ids"])
                    addresses_version = reply["addresses_version"]
                for lost in reply.get("lost", ()):
                    if worker.tasks_lost(lost["tasks"]):
                        log.info("worker %s died %.1f s ago: failing the spouts' pending tuples that may "
                                 "have been in it", lost["slot"], max(0.0, time.time() - lost["time"]))
                lost_generation = reply.get("lost_generation", lost_generation)
                epoch = reply.get("epoch", epoch)
                state.set_active(bool(reply.get("active")))
    finally:
        worker.stop(clean=status == 0, timeout=2)
        peers_bp.stop()


def _set_peers(transport: ZmqTransport, known: dict[int, str], table: dict[Any, Any]) -> list[int]:
    """Give the transport the peers' addresses (``table``: task -> address, None while a peer
    restarts) and return the tasks whose worker moved. The transport drops what it queued for
    those (their old address is a dead worker's): the spouts must fail what they sent there at
    once (`Worker.tasks_lost`), or wait a message timeout for it."""
    new = {int(t): addr for t, addr in table.items() if addr is not None and addr != transport.address}
    moved = [t for t, addr in new.items() if known.get(t, addr) != addr]
    transport.set_peers(new)
    known.update(new)
    return moved


class _EarlyItems:
    """The transport's receiver until the worker exists. Peers may send as soon as they know
    this worker's address, which it reports before it builds its executors; what arrives
    meanwhile (on the process host, a restarted worker's port at once gets what its peers
    queued for it) is kept and handed to the worker, not dropped."""

    def __init__(self) -> None:
        self._items: list[tuple[int, Any]] = []
        self._receive: Any = None
        self._lock = threading.Lock()

    def __call__(self, task: int, item: Any) -> None:
        with self._lock:
            if self._receive is None:
                self._items.append((task, item))
                return
        self._receive(task, item)

    def hand_over(self, receive: Any) -> None:
        """Deliver what was kept to ``receive``, and from now on everything."""
        with self._lock:
            for task, item in self._items:
                try:
                    receive(task, item)
                except KeyError:
                    pass  # not a task of this worker (the transport drops those too)
            self._items = []
            self._receive = receive


def _wait_any(a: threading.Event, b: threading.Event, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not (a.is_set() or b.is_set()):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        a.wait(min(left, 0.05))
    return True


def _report(link: _MasterLink, storm_id: str, slot: str, launch_id: int, errors: list) -> None:
    try:
        link.call("report_errors", storm_id=storm_id, slot=slot, launch_id=launch_id, errors=errors)
    except Exception as e:
        log.error("could not report to the master: %s", e)


def main(argv: list[str] | None = None) -> int:
    """``python -m squall.worker --master HOST:PORT --storm-id ID --slot HOST:PORT --launch-id N``."""
    p = argparse.ArgumentParser(prog="squall-worker")
    p.add_argument("--master", required=True)
    p.add_argument("--storm-id", required=True)
    p.add_argument("--slot", required=True)
    p.add_argument("--launch-id", type=int, required=True)
    p.add_argument("--conf", help="cluster configuration as a YAML file", default=None)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s worker {args.slot} %(levelname)s %(message)s")
    from .._config import cluster_conf  # the cluster's settings: defaults, squall.yaml, --conf
    conf = cluster_conf(None, args.conf)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a clean stop: close/cleanup run
    return run(args.master, args.storm_id, args.slot, args.launch_id, conf, stop)


if __name__ == "__main__":
    sys.exit(main())
