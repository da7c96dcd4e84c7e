"""`OpenConnections`: the connections an asyncio server (the master, the DRPC server) holds, so
that its stop ends every one of them, within a bound, before its loop ends.

Why a server cannot leave them to asyncio: a peer keeps its authenticated connection open between
its calls (a worker, a supervisor, a DRPC caller or spout), and its task waits for the next
request for good. `asyncio.run` cancels such tasks and waits for them without a bound; and on
Python 3.12+ leaving ``async with server`` (``Server.wait_closed``) waits until every connection
has closed, which a kept-alive one never does: the process sent SIGTERM never exits.
"""

from __future__ import annotations

import asyncio
from typing import Any

STOP_CONNECTIONS_SECS = 2.0
"""How long a stopping server waits for its open connections to end once it has closed them: a
reply being written gets this long to go out, then the connection is cut (`OpenConnections.end`)."""


class OpenConnections:
    """Each open connection's task and writer. A connection's handler calls `opened` first (False:
    the server is stopping, the connection is closed, serve nothing) and `closed` last; the
    server's stop calls `end`. ``log`` and ``server`` (its name, "the master") name what `end`
    could not end."""

    def __init__(self, log: Any, server: str) -> None:
        self._log = log
        self._server = server
        self._open: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self.stopping = False

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, writer: asyncio.StreamWriter) -> bool:
        """Hold the current task's connection (``writer``); False, the connection closed, once
        the server is stopping.

        A connection accepted just before the listening socket closed has its task first run a
        few loop steps later, after `end` took the connections it ends: served, it answered for
        a server that had stopped, and (Python 3.12+) kept the server's exit waiting while its
        peer held it open."""
        if self.stopping:
            writer.close()
            return False
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection in a task of its own
        self._open[task] = writer
        return True

    def closed(self) -> None:
        """The current task's connection has ended."""
        self._open.pop(asyncio.current_task(), None)  # type: ignore[arg-type]

    async def end(self, grace: float = STOP_CONNECTIONS_SECS) -> None:
        """End every open connection, within about twice ``grace`` seconds, as the server stops
        (its listening sockets closed first); a connection that starts after is closed at once.

        Each connection's task is cancelled and its socket closed. Closing lets a reply already
        written go out; one still not gone after ``grace`` is cut (`asyncio.Transport.abort`)."""
        self.stopping = True
        if not self._open:
            return
        open_now = dict(self._open)
        for task, writer in open_now.items():
            task.cancel()
            writer.close()
        _done, left = await asyncio.wait(open_now, timeout=grace)
        for task in left:
            open_now[task].transport.abort()  # a peer that does not read its reply: cut
        if left:
            _done, left = await asyncio.wait(left, timeout=grace)
        if left:
            self._log.warning("%d of %s's %d connections did not end within %.0f s of its stop; "
                              "it stops without them: %s", len(left), self._server, len(open_now), 2 * grace,
                              ", ".join(str(open_now[t].get_extra_info("peername")) for t in left))
