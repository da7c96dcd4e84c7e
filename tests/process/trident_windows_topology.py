"""The Trident count-window topology the process host's window tests share
(`test_trident_windowing_sigkill.py`, `test_rebalance_state.py`): ids in fixed batches, count
windows of them, each window's ``(first, last) -> size`` summed into a transactional Redis hash
whose commit of one txid is held, so that tuples wait in an open window meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squall import Fields
from squall.trident import KeyValueWindowsStoreFactory, Sum, TridentTopology

from ..trident.exactly_once import HeldCommit
from ..trident.windowing_ops import Span

REDIS_STATE = "squall.state.redis:RedisKeyValueStateProvider"


def window_conf(base: dict[str, Any], provider: str, redis_url: str) -> dict[str, Any]:
    """``base`` with the windows' store on ``provider``: "file" (the default) or "redis"."""
    conf = dict(base)
    if provider == "redis":
        conf["topology.state.provider"] = REDIS_STATE
        conf["topology.state.provider.config"] = {"url": redis_url}
    return conf


def held_windows_topology(kind: str, redis_url: str, hold: Path, n: int, batch: int, window: int,
                          hold_txid: int) -> Any:
    """The built topology: ids 0 .. n-1 in batches of ``batch``, ``kind`` "tumbling" windows of
    ``window`` tuples or "sliding" ones every ``window // 2``, summed by ``(first, last)`` into
    Redis hash ``windows`` by 2 tasks, whose commit of ``hold_txid`` waits while ``hold`` (a
    directory) holds it (`HeldCommit`)."""
    from squall.external.trident_redis import Options, RedisMapState
    from squall.trident.spout import FixedBatchSpout

    topo = TridentTopology()
    nums = topo.new_stream("nums", FixedBatchSpout(Fields("i"), batch, *[[i] for i in range(n)]))
    args = (KeyValueWindowsStoreFactory(), Fields("i"), Span(), Fields("first", "last", "n"))
    windows = nums.tumbling_window(window, *args) if kind == "tumbling" else \
        nums.sliding_window(window, window // 2, *args)
    windows \
        .group_by(Fields("first", "last")) \
        .persistent_aggregate(HeldCommit(RedisMapState.transactional(
            redis_url, Options(data_type="hash", hash_key="windows")), hold_txid, str(hold)),
            Fields("n"), Sum(), Fields("total")).parallelism_hint(2)
    return topo.build()


def component_running(built: Any, processor_type: type) -> str:
    """The one component of ``built`` whose Trident body runs a ``processor_type``."""
    found, = [cid for cid, c in built.bolts.items()
              if any(isinstance(n.processor, processor_type)
                     for n in getattr(getattr(c.obj, "body", None), "nodes", ()))]
    return found
