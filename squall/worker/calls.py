"""The seam between workers, supervisors and the master: ``call(op, **args)`` and its two errors
(`squall._errors.RpcError`, `squall._errors.RemoteError`).

Over the network it is `squall._wire.ReconnectingClient`; in a `LocalCluster` it is
`squall.cluster.inprocess.DirectMaster`. Callers see the same errors from both, and import
neither the RPC machinery nor its cryptography when they need only this.
"""

from __future__ import annotations

from typing import Any, Protocol


class MasterCalls(Protocol):
    """How a worker or a supervisor reaches the master; ``call`` raises `RpcError` while it is
    unreachable, `RemoteError` when the master refused the call."""

    def call(self, op: str, **args: Any) -> Any:
        """Run the master's ``op`` with ``args`` and return its result. Raises `RpcError` while the
        master is unreachable, `RemoteError` (naming the exception's type) when it refused the call."""
        ...
