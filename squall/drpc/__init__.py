"""DRPC, Storm's distributed RPC, on squall (docs/drpc.md).

A caller's ``execute(function, args)`` goes to a DRPC server; a topology's `DRPCSpout` fetches
it, the topology computes, and its `ReturnResults` bolt sends the result back to the server,
which answers the caller. Layout:

- `squall.drpc.core`: the server's bookkeeping (`RequestBook`), the records and
  `DRPCExecutionException`, no I/O;
- `squall.drpc.local`: `LocalDRPC`, the server in this process for a `LocalCluster`;
- `squall.drpc.client`: `DRPCClient` and the authenticated links to ``squall drpc``;
- `squall.drpc.components`: `DRPCSpout` and `ReturnResults`;
- `squall.drpc.server`: ``squall drpc``, the server of the process and Spark hosts;
- `squall.drpc.linear`: `LinearDRPCTopologyBuilder` (with `PrepareRequest` and `JoinResult`),
  a DRPC topology as a chain of bolts coordinated by `squall.coordination.CoordinatedBolt`.

`squall.trident.drpc` re-exports these for Trident's ``new_drpc_stream``.

Every name re-exported here is loaded at its first use (PEP 562's module ``__getattr__``), as in
``squall``: a worker imports `squall.drpc.client` to remember the cluster's DRPC servers, and
with it this package, but needs the builder, the spout and the local server only when its
topology has them (which its unpickling then imports).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .client import DRPCClient as DRPCClient
    from .components import DRPCMessageId as DRPCMessageId
    from .components import DRPCSpout as DRPCSpout
    from .components import ReturnResults as ReturnResults
    from .core import DRPCExceptionType as DRPCExceptionType
    from .core import DRPCExecutionException as DRPCExecutionException
    from .core import DRPCRequest as DRPCRequest
    from .core import ReturnInfo as ReturnInfo
    from .linear import JoinResult as JoinResult
    from .linear import LinearDRPCInputDeclarer as LinearDRPCInputDeclarer
    from .linear import LinearDRPCTopologyBuilder as LinearDRPCTopologyBuilder
    from .linear import PrepareRequest as PrepareRequest
    from .local import LocalDRPC as LocalDRPC

_LAZY: dict[str, str] = {
    **dict.fromkeys(["DRPCClient"], ".client"),
    **dict.fromkeys(["DRPCMessageId", "DRPCSpout", "ReturnResults"], ".components"),
    **dict.fromkeys(["DRPCExceptionType", "DRPCExecutionException", "DRPCRequest", "ReturnInfo"], ".core"),
    **dict.fromkeys(["JoinResult", "LinearDRPCInputDeclarer", "LinearDRPCTopologyBuilder", "PrepareRequest"], ".linear"),
    **dict.fromkeys(["LocalDRPC"], ".local"),
}
"""Each name re-exported here, by the module it is imported from at its first use."""


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = ["DRPCClient", "DRPCExceptionType", "DRPCExecutionException", "DRPCMessageId", "DRPCRequest",
           "DRPCSpout", "JoinResult", "LinearDRPCInputDeclarer", "LinearDRPCTopologyBuilder", "LocalDRPC",
           "PrepareRequest", "ReturnInfo", "ReturnResults"]
