"""`MasterServer`: the master as a daemon (what ``squall nimbus`` runs).

The `squall.cluster.master.Master` holds the Nimbus state and answers its verbs; the server
owns what makes it a network service: the authenticated RPC listener
(`squall.worker.rpc.serve_connection`, each request answered by `Master.handle`), the
connection cap, the monitor timer (``nimbus.monitor.freq.secs``, at most a second: restarts,
due kills and rebalances) and, with Nimbus HA, the election's tick and the leader's second
(`squall.cluster.master_ha.Election`). A `LocalCluster`'s master is never served: its verbs are
called directly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from .._config import Config, conf_value
from .master import Master

log = logging.getLogger("squall.master")

ELECTION_TICK_SECS = 0.25  # with Nimbus HA, a follower takes the lead within this of winning it


class MasterServer:
    """Serves ``master`` on ``nimbus.host``:``nimbus.thrift.port``; see the module docstring."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.conf = master.conf
        self.rpc: Any = None  # the RPC server's settings, once `serve` runs
        self._connections: Any = None  # the RPC server's ConnectionTable, once `serve` runs

    @property
    def port(self) -> int | None:
        """The port it listens on, once it does."""
        return self.master.port

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Listen until cancelled; ``ready`` is set once listening.

        Raises:
            SquallError: ``squall.encryption`` or ``nimbus.thrift.max_buffer_size`` is invalid (named).
        """
        from .._connlimit import ACCEPT_BACKLOG, ConnectionTable, FullTableLog, connection_cap, open_files_limit
        from ..worker.rpc import rpc_settings
        master, election = self.master, self.master.election
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
        monitored = time.monotonic()
        try:
            async with server:
                while True:
                    await asyncio.sleep(tick)
                    now = time.monotonic()
                    try:
                        if (election is None or election.tick(now)) and now - monitored >= freq:
                            monitored = now
                            master.monitor()
                            if election is not None:
                                election.monitor(now)
                    except Exception:
                        log.exception("monitor failed")
        finally:
            if election is not None:
                election.ha.close()  # our election node goes now: a follower leads at once

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from ..worker.rpc import serve_connection
        try:
            await serve_connection(reader, writer, self.master.secret, self.master.handle, log, self.rpc,
                                   self._connections)
        except asyncio.CancelledError:
            # the master is stopping. Ending quietly: Python 3.11's start_server calls
            # task.exception() on a cancelled connection task, logging a traceback per client
            pass
