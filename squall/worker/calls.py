"""The seam between workers, supervisors and the master: ``call(op, **args)`` and its two errors
(`squall._errors.RpcError`, `squall._errors.RemoteError`).

Over the network it is `squall._wire.ReconnectingClient`; in a `LocalCluster` it is
`squall.cluster.inprocess.DirectMaster`, which takes and returns the verbs' records as they are
(`RecordCalls`). Callers see the same errors from both, reach the verbs typed with `nimbus_of`,
and import neither the RPC machinery nor its cryptography when they need only this.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .._nimbus import NimbusIface, nimbus_client


class MasterCalls(Protocol):
    """How a worker or a supervisor reaches the master; ``call`` raises `RpcError` while it is
    unreachable, `RemoteError` when the master refused the call."""

    def call(self, op: str, **args: Any) -> Any:
        """Run the master's ``op`` with ``args`` and return its result. Raises `RpcError` while the
        master is unreachable, `RemoteError` (naming the exception's type) when it refused the call."""
        ...


@runtime_checkable
class RecordCalls(Protocol):
    """A `MasterCalls` in this process (`squall.cluster.inprocess.DirectMaster`): its ``call``
    takes the verbs' arguments and returns their replies as `squall._nimbus.NimbusIface` declares
    them, records and all, with no wire map between; ``passes_records`` (True) is its mark."""

    passes_records: bool

    def call(self, op: str, **args: Any) -> Any:
        """`MasterCalls.call`, the verb's records passed as they are."""
        ...


def nimbus_of(master: MasterCalls) -> NimbusIface:
    """The master's verbs, typed (`squall._nimbus.NimbusIface`), over ``master``: a heartbeat's or a
    sync's record goes as it is to a master in this process (`RecordCalls`), as its wire map over
    RPC."""
    return nimbus_client(master.call, typed=isinstance(master, RecordCalls) and master.passes_records)
