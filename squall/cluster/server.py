"""`MasterServer`: the master as a daemon (what ``squall nimbus`` runs), and `Keeper`, the one
place the master's changes reach its store.

The `squall.cluster.master.Master` holds the Nimbus state and answers its verbs, doing no I/O:
each verb and tick returns an `Outcome` (its reply and the changes to keep). The server owns
what makes it a network service: the authenticated RPC listener
(`squall._wire.serve_connection`, each request answered by `Master.handle` and its changes
kept by the `Keeper` before the reply goes, a record replied as its map:
`Keeper.request_from_wire`), the connection cap, the monitor timer
(``nimbus.monitor.freq.secs``, at most a second: restarts, due kills and rebalances) and, with
Nimbus HA, the election (`squall.cluster.master_ha.Election`, which it makes and gives the
master), its tick and the leader's second. A `LocalCluster`'s master is never served: its verbs
are called directly (`squall.cluster.inprocess.DirectMaster`), through a `Keeper` too, their
records passed as they are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from .._config import Config, conf_value
from .._nimbus import decoded_request, verb_named
from .._open_connections import STOP_CONNECTIONS_SECS, OpenConnections
from .master import Master
from .master_ha import Election
from .master_records import Outcome
from .store import (
    Change,
    DeleteTxState,
    PutBeat,
    PutPlan,
    PutSupervisors,
    PutTopology,
    PutTxState,
    RemovePlan,
    RemoveTopology,
    SetCounter,
    ZooKeeperStore,
)

log = logging.getLogger("squall.master")

ELECTION_TICK_SECS = 0.25  # with Nimbus HA, a follower takes the lead within this of winning it


class Keeper:
    """Keeps what the master's stimuli changed: `keep` hands the master's store the changes of
    an `Outcome`, in order, and only then returns its reply.

    A write that fails (a full disk: `DiskWriteError`, naming the file) fails the call: its
    caller gets the error. What the store did not keep is handed over again, first, with the
    next outcome that changes something or the next tick of the master's timer (`tick`), as the
    master's own saves were before this seam (a read still answers meanwhile, writing nothing); a
    topology the outcome submitted is dropped (`Master.unkept`). Trident's transactional writes
    are not repeated: their caller was told they failed, and writes them again itself. What a
    Nimbus HA leader could not write is dropped once it has lost the lead: when it leads again it
    writes its whole state as it then is, and an older change would overwrite what another
    leader wrote meanwhile (`Master.terms`)."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.store = master.store
        self._unkept: list[Change] = []
        self._term = master.terms  # the master's term as leader when `_unkept` was left

    def keep(self, outcome: Outcome) -> Any:
        """Keep ``outcome``'s changes (and any left from a failed write before them); its reply.

        Raises:
            Exception: what the store raised (`DiskWriteError` ...): nothing of the reply went out.
        """
        if not outcome.changes:
            return outcome.reply  # a read: it answers even while the store cannot write
        return self._write(outcome)

    def tick(self, outcome: Outcome) -> None:
        """Keep the outcome of the master's timer (`Master.monitor`) as `keep` does, and write
        what a failed write left even when the tick changed nothing: space may have returned,
        and a master restarted before its next change must not lose it.

        Raises:
            Exception: what the store raised (its server logs it; the next tick tries again).
        """
        if outcome.changes or self._pending():
            self._write(outcome)

    def _pending(self) -> list[Change]:
        """What a failed write left to write (nothing, once the master's term changed)."""
        if self._unkept and self._term != self.master.terms:
            log.warning("%d changes this master could not write before it lost the lead are dropped: "
                        "it writes its whole state as it leads again", len(self._unkept))
            self._unkept = []
        return self._unkept

    def _write(self, outcome: Outcome) -> Any:
        unkept = self._pending()
        batch = _latest(unkept + list(outcome.changes)) if unkept else list(outcome.changes)
        self._unkept = []
        try:
            self.store.apply(batch)
        except BaseException:
            self._unkept = [c for c in batch if not isinstance(c, (PutTxState, DeleteTxState))]
            self._term = self.master.terms
            if outcome.submitted is not None:
                self._unkept = _latest(self._unkept + list(self.master.unkept(outcome).changes))
            raise
        return outcome.reply

    def request(self, op: str, args: Mapping[str, Any]) -> Any:
        """The verb ``op`` (`Master.handle`), its changes kept; its reply as the verb declares it
        (a record where it declares one)."""
        return self.keep(self.master.handle(op, args))

    def request_from_wire(self, op: str, args: Mapping[str, Any]) -> Any:
        """`request` of a verb as it arrived over RPC (``args``: its wire map); its reply as it
        goes back on the wire (`squall._nimbus.Verb.encode_reply`: a record as its map)."""
        return verb_named(op).encode_reply(self.request(op, args))


def _latest(changes: list[Change]) -> list[Change]:
    """``changes`` with each superseded one left out (a topology's record written twice: the
    later), in order: what piles up while a disk is full stays one record per thing."""
    seen: set[tuple[Any, ...]] = set()
    out: list[Change] = []
    for change in reversed(changes):
        key = _what(change)
        if key is None or key not in seen:
            out.append(change)
            if key is not None:
                seen.add(key)
    out.reverse()
    return out


def _what(change: Change) -> tuple[Any, ...] | None:
    """What ``change`` writes, where a later change of the same replaces it (None: none does)."""
    if isinstance(change, (PutTopology, RemoveTopology)):
        return ("topology", change.name)
    if isinstance(change, (PutPlan, RemovePlan)):
        return ("plan", change.storm_id)
    if isinstance(change, PutBeat):
        return ("beat", change.storm_id, change.slot)
    if isinstance(change, (SetCounter, PutSupervisors)):
        return (type(change).__name__,)  # one of each
    return None  # Trident's transactional writes: each its caller's, never left out


class MasterServer:
    """Serves ``master`` on ``nimbus.host``:``nimbus.thrift.port``; see the module docstring.
    With a store several masters share (Nimbus HA), it makes the master's election."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.conf = master.conf
        self.keeper = Keeper(master)
        store = master.store
        self.election = Election(master, store) if isinstance(store, ZooKeeperStore) else None
        master.election = self.election
        self.rpc: Any = None  # the RPC server's settings, once `serve` runs
        self._connections: Any = None  # the RPC server's ConnectionTable, once `serve` runs
        self._open = OpenConnections(log, "the master")

    @property
    def port(self) -> int | None:
        """The port it listens on, once it does."""
        return self.master.port

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Listen until cancelled, then close every connection (within about twice
        `STOP_CONNECTIONS_SECS`); ``ready`` is set once listening.

        Raises:
            SquallError: ``squall.encryption`` or ``nimbus.thrift.max_buffer_size`` is invalid (named).
        """
        from .._connlimit import ACCEPT_BACKLOG, ConnectionTable, FullTableLog, connection_cap, open_files_limit
        from .._wire import rpc_settings
        master, election = self.master, self.election
        self.rpc = rpc_settings(self.conf)
        host = conf_value(self.conf, Config.NIMBUS_HOST)
        port = int(conf_value(self.conf, Config.NIMBUS_THRIFT_PORT))  # 0: any free port (tests, SparkCluster)
        files = open_files_limit()
        self._connections = ConnectionTable(connection_cap(self.rpc.max_connections, files))
        FullTableLog(log, "the master").install(asyncio.get_running_loop())
        server = await asyncio.start_server(self._connection, host, port, backlog=ACCEPT_BACKLOG)
        master.port = server.sockets[0].getsockname()[1]
        log.info("squall master listening on %s:%s (at most %d connections; open files limit %d)",
                 host, master.port, self._connections.cap, files)
        if election is not None:
            election.join()
        if ready is not None:
            ready.set()
        freq = min(float(conf_value(self.conf, Config.NIMBUS_MONITOR_FREQ_SECS)), 1.0)
        # with Nimbus HA, the election is watched 4 times a second; only the leader monitors
        tick = freq if election is None else min(freq, ELECTION_TICK_SECS)
        try:
            async with server:
                try:
                    await self._monitor(tick, freq)
                finally:
                    # cancelled (the master stops): no new connection, then the open ones end,
                    # here and within a bound (the server's exit waits for them on Python 3.12+),
                    # before the election's session: an HA submission cancelled midway writes its
                    # abandonment to ZooKeeper as it ends
                    server.close()
                    await self._end_connections()
        finally:
            if election is not None:
                election.ha.close()  # our election node goes now: a follower leads at once

    async def _monitor(self, tick: float, freq: float) -> None:
        """The master's timer, until cancelled: with Nimbus HA the election each ``tick``, and
        on the leader every ``freq`` seconds `Master.monitor`."""
        master, election, keep = self.master, self.election, self.keeper.keep
        monitored = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            try:
                leading = election is None or election.tick(now)
                if election is not None and leading:
                    keep(master.pending())  # a new leader's whole state goes at once
                if leading and now - monitored >= freq:
                    monitored = now
                    self.keeper.tick(master.monitor())
                    if election is not None:
                        keep(master.pending(full=True))  # the leader's second: all that differs
                        keep(Outcome(changes=tuple(election.monitor(now))))
            except Exception:
                log.exception("monitor failed")

    async def _end_connections(self, grace: float = STOP_CONNECTIONS_SECS) -> None:
        """End every open connection, within about twice ``grace`` seconds, as the master stops
        (`OpenConnections.end`).

        Each connection's task is cancelled and its socket closed: a peer's idle connection (a
        worker or supervisor keeps one between its calls) would otherwise be read for ever, and
        a task that let a cancel pass (Python 3.11's ``wait_for``, CPython gh-86296) kept the
        master from exiting while the worker held it open. Closing lets a reply already written
        go out; one still not gone after ``grace`` is cut (`asyncio.Transport.abort`). Nothing
        the master keeps is lost: a request's changes are written before its reply, in the loop
        step that reads it (`Keeper`), so a request is either kept, its reply sent (unless its
        peer reads none for ``grace``), or never read; a Nimbus HA submission waiting for its
        code's replication is cancelled, and writes that it was abandoned. A connection whose
        task first runs after this (accepted just before the listening socket closed) is closed
        unserved."""
        await self._open.end(grace)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from .._wire import serve_connection
        if not self._open.opened(writer):
            return  # the master is stopping: accepted just before, closed unserved
        try:
            await serve_connection(reader, writer, self.master.secret, self._handle, log, self.rpc,
                                   self._connections)
        except asyncio.CancelledError:
            # the master is stopping. Ending quietly: Python 3.11's start_server calls
            # task.exception() on a cancelled connection task, logging a traceback per client
            pass
        finally:
            self._open.closed()

    async def _handle(self, op: str, args: dict[str, Any], session: dict[str, Any]) -> Any:
        """The RPC server's handler (`squall._wire.serve_connection`; ``session`` unused): the
        master's `Master.handle`, its changes kept before the reply goes. With Nimbus HA the
        election runs ``submit``, which waits for the code to reach other masters."""
        if op == "submit" and self.election is not None:
            _, request = decoded_request(op, args)
            self.election.assert_leader()
            return await self.election.submit_replicated(self.keeper.keep, **request)
        return self.keeper.request_from_wire(op, args)
