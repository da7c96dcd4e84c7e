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
"""

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

__all__ = ["DRPCClient", "DRPCExceptionType", "DRPCExecutionException", "DRPCMessageId", "DRPCRequest",
           "DRPCSpout", "JoinResult", "LinearDRPCInputDeclarer", "LinearDRPCTopologyBuilder", "LocalDRPC",
           "PrepareRequest", "ReturnInfo", "ReturnResults"]
