"""Trident's DRPC names (Storm's ``LocalDRPC``, ``DRPCSpout``, ``ReturnResults``,
``DRPCExecutionException``, ``DRPCClient``): the implementation is `squall.drpc`, shared with
plain DRPC topologies; ``TridentTopology.new_drpc_stream`` puts a `DRPCSpout` at the head of
the stream and a `ReturnResults` bolt after the step that groups each request's results into
``json.dumps([values, ...])``."""

from ..drpc import (
           DRPCClient,
           DRPCExceptionType,
           DRPCExecutionException,
           DRPCMessageId,
           DRPCSpout,
           LocalDRPC,
           ReturnInfo,
           ReturnResults,
)

__all__ = ["DRPCClient", "DRPCExceptionType", "DRPCExecutionException", "DRPCMessageId", "DRPCSpout",
           "LocalDRPC", "ReturnInfo", "ReturnResults"]
