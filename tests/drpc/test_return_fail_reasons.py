"""A DRPC request that ReturnResults cannot answer (its result is no string, its return info
malformed) fails with the bolt's reason, and its caller's DRPCExecutionException says it. Before,
the return bolt failed the tuple plainly: the caller read only ``failed in [return] task 5``."""

from __future__ import annotations

import re

from squall import LocalCluster
from squall.drpc import DRPCExceptionType, DRPCExecutionException, LocalDRPC

from .calls import guarded
from .test_local_drpc import manual_topology

ARGS = ["a", "number", "b", "c", "number", "d"]  # N = 6; K = 2 whose result is 42, no string


def test_a_result_the_return_bolt_refuses_fails_its_call_saying_why():
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("manual-drpc", {}, manual_topology(drpc))
        answers = [guarded(drpc.execute, "exclamation", args) for args in ARGS]
    results = [result for result, error in answers if error is None]
    errors = [error for result, error in answers if error is not None]
    assert results == ["a!", "b!", "c!", "d!"]  # N - K, each its own
    assert len(errors) == 2  # K
    for error in errors:
        assert isinstance(error, DRPCExecutionException) and error.type is DRPCExceptionType.FAILED_REQUEST
        # main: "failed in [return] task 5", no reason
        assert re.search(r"failed in \[return\] task \d+: DRPC return bolt \[return\]: the result of request "
                         r"\S+ must be a string \(Storm's DRPC carries strings; json.dumps it\), got int",
                         str(error)), str(error)


def test_a_joinresult_half_whose_other_half_never_comes_fails_saying_which_is_missing():
    from squall import Fields
    from squall._tuple import Source, Tuple
    from squall.drpc.linear import JoinResult
    from tests.conftest import wait_until

    from .test_linear_drpc import Collector, Context

    class Causes(Collector):
        def __init__(self) -> None:
            super().__init__()
            self.causes: dict = {}

        def fail_with(self, tup, cause) -> None:
            self.failed.append(tup)
            self.causes[tup.values[0]] = cause

    out = Causes()
    bolt = JoinResult("prepare-request")
    bolt.prepare({"topology.message.timeout.secs": 0.05}, Context(), out)
    bolt.execute(Tuple([7, {"host": "h", "port": 1, "id": "7"}], Source("prepare-request", "ret", 7,
                                                                          Fields(["request", "return"]))))
    bolt.execute(Tuple([8, "eight"], Source("bolt3", "default", 9, Fields(["id", "result"]))))
    tick = Tuple([1000, "x"], Source("bolt3", "default", 9, Fields(["id", "result"])))
    # the expiry is checked as tuples come: keep one coming until both halves were failed
    assert wait_until(lambda: bolt.execute(tick) or {7, 8} <= set(out.causes), 10)
    assert out.causes[7].message == ("JoinResult: the result of request 7 did not come within "
                                     "topology.message.timeout.secs (0.05 s) of its return info")
    assert out.causes[8].message == ("JoinResult: the return info of request 8 did not come within "
                                     "topology.message.timeout.secs (0.05 s) of its result")
    assert (out.causes[7].component, out.causes[7].task) == ("me", 5)
