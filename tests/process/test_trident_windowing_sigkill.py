"""Trident windowing exactly once on the process host (2 workers): a count window over a
`KeyValueWindowsStoreFactory` (the topology's state provider: files under the supervisor's
``storm.local.dir``, or Redis) whose windows' sizes go into a Redis `TransactionalMap`, every
window compared with the windows computed from the input, when the worker holding the map's
commit of txid 10 (after its writes) and the worker of the window's task are SIGKILLed while
tuples wait in the open window: the restarted window resumes where its last batch left it, and
the replayed batch adds no tuple twice. Tumbling windows over the file provider; sliding ones
(each tuple in two windows) over the Redis provider."""

from __future__ import annotations

import json
import os
import signal

import pytest

from squall.testing import shared_state_dir
from squall.trident.windowing.processor import WindowTridentProcessor

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..trident.exactly_once import held_pid
from ..trident.windowing_ops import expected_windows
from .trident_windows_topology import component_running, held_windows_topology, window_conf

redis = pytest.importorskip("redis")

CONF = {"topology.workers": 2, "topology.max.spout.pending": 3, "topology.message.timeout.secs": 5,
        "topology.trident.batch.emit.interval.millis": 50}
N = 240
BATCH = 6   # 40 batches
WINDOW = 8  # txid 10 ends at tuple 59: tuples 56..59 wait in the open window then
HOLD_TXID = 10



@pytest.mark.parametrize(("kind", "provider"), [("tumbling", "file"), ("sliding", "redis")])
def test_count_windows_count_every_tuple_once_after_workers_are_sigkilled(cluster, redis_server,  # noqa: F811
                                                                         tmp_path, kind, provider):
    hold = tmp_path / "hold"
    hold.mkdir()
    conf = window_conf(CONF, provider, redis_server.url)
    with shared_state_dir(tmp_path / "shared"):
        built = held_windows_topology(kind, redis_server.url, hold, N, BATCH, WINDOW, HOLD_TXID)
    window_bolt = component_running(built, WindowTridentProcessor)
    client = redis.Redis.from_url(redis_server.url)

    def stored() -> dict[tuple[int, int], int]:
        return {tuple(json.loads(k)): json.loads(v)[1] for k, v in client.hgetall("windows").items()}

    with cluster.client() as m:
        m.submit_topology("windows-kill", conf, built)
        assert wait_until(lambda: held_pid(hold) is not None, 60), stored()
        at_kill = stored()
        info = m.get_topology_info("windows-kill")
        ports = {st["worker"] for st in info["components"][window_bolt]["task_stats"].values()}
        victims = {held_pid(hold)} | {w["pid"] for w in info["workers"] if w["port"] in ports}
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        (hold / "release").write_text("")
        expected = expected_windows(N, WINDOW, WINDOW if kind == "tumbling" else WINDOW // 2)
        assert wait_until(lambda: len(stored()) >= len(expected), 120), (stored(), at_kill)
        after = {w["pid"] for w in m.get_topology_info("windows-kill")["workers"]}
        m.kill_topology("windows-kill", wait_secs=0)
    assert stored() == expected
    assert len(at_kill) < len(expected) and not victims & after, (at_kill, victims, after)
    if provider == "redis":  # the windows were in Redis, not in the supervisor's files
        assert any(b"window-" in k for k in client.keys("windows-kill/*"))
    print(f"process host, {kind} windows over the {provider} provider, {len(victims)} workers SIGKILLed with {len(at_kill)} windows stored: {N} tuples, "
          f"{len(expected)} windows of {sum(stored().values())} tuples")
