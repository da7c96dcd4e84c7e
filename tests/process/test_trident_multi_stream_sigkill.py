"""Trident's multi-stream operations exactly once on the process host (2 workers): a join of two
transactional spouts (Count and Sum per key of the joined pairs), their merge (Count per key)
and a grouped `chained_agg` (Count and Sum per key in one tuple, each persisted) write into
Redis maps (transactional and opaque) exactly what a plain-Python join, merge and count of the
spouts' batches give (and a user GroupedMultiReducer over both, Sum per key of its per-side
counts), when the worker holding a commit (after its writes) is SIGKILLed."""

from __future__ import annotations

import collections
import json
import os
import signal

import pytest

from squall import Fields
from squall.testing import shared_state_dir
from squall.trident import Count, Sum, TridentTopology

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..trident.exactly_once import HeldCommit, held_pid
from ..trident.multi_ops import PerSide

redis = pytest.importorskip("redis")

CONF = {"topology.workers": 2, "topology.max.spout.pending": 3, "topology.message.timeout.secs": 5,
        "topology.trident.batch.emit.interval.millis": 50}
LEFT = [[f"k{(i * 5) % 7}", i] for i in range(180)]
RIGHT = [[f"k{(i * 3) % 6}", 1000 + i] for i in range(120)]
HOLD_TXID = 10


def test_join_merge_and_chained_agg_store_exact_figures_after_a_worker_is_sigkilled(cluster, redis_server,  # noqa: F811
                                                                                   tmp_path):
    from squall.external.trident_redis import Options, RedisMapState
    from squall.trident.spout import FixedBatchSpout

    hold = tmp_path / "hold"
    hold.mkdir()
    url = redis_server.url

    def state(kind, hash_key):
        factory = getattr(RedisMapState, kind)(url, Options(data_type="hash", hash_key=hash_key))
        return HeldCommit(factory, HOLD_TXID, str(hold))  # the first commit of the txid is held

    lspout = FixedBatchSpout(Fields("k", "a"), 6, *LEFT)
    rspout = FixedBatchSpout(Fields("k2", "b"), 4, *RIGHT)
    with shared_state_dir(tmp_path / "shared"):
        topo = TridentTopology()
        left, right = topo.new_stream("left", lspout), topo.new_stream("right", rspout)
        joined = topo.join(left, Fields("k"), right, Fields("k2"), Fields("key", "a", "b")).parallelism_hint(3)
        joined.group_by(Fields("key")).persistent_aggregate(
            state("transactional", "join-n"), Count(), Fields("n")).parallelism_hint(2)
        joined.group_by(Fields("key")).persistent_aggregate(
            state("opaque", "join-s"), Fields("b"), Sum(), Fields("s")).parallelism_hint(2)
        merged = topo.merge(left.project(Fields("k")), right.project(Fields("k2")))
        merged.group_by(Fields("k")).persistent_aggregate(
            state("transactional", "merge-n"), Count(), Fields("n")).parallelism_hint(2)
        # a user GroupedMultiReducer (per key of a batch: tuples of each side), persisted
        sides = topo.multi_reduce(left.group_by(Fields("k")), right.group_by(Fields("k2")), PerSide(2),
                                  Fields("key", "nl", "nr")).parallelism_hint(2)
        sides.group_by(Fields("key")).persistent_aggregate(
            state("transactional", "multi-nr"), Fields("nr"), Sum(), Fields("nr_total")).parallelism_hint(2)
        chained = left.group_by(Fields("k")).chained_agg() \
            .aggregate(Count(), Fields("n")).aggregate(Fields("a"), Sum(), Fields("s")).chain_end()
        chained.group_by(Fields("k")).persistent_aggregate(
            state("transactional", "chain-n"), Fields("n"), Sum(), Fields("n_total"))
        chained.group_by(Fields("k")).persistent_aggregate(
            state("opaque", "chain-s"), Fields("s"), Sum(), Fields("s_total"))
        built = topo.build()

    txids = range(1, max(len(LEFT) // 6, len(RIGHT) // 4) + 1)
    expected = {name: collections.Counter() for name in ("join-n", "join-s", "merge-n", "chain-n", "chain-s",
                                                               "multi-nr")}
    for t in txids:  # a join is within one batch: the txid's batch of each spout
        for k, a in lspout.batch(t):
            for k2, b in rspout.batch(t):
                if k == k2:
                    expected["join-n"][k] += 1
                    expected["join-s"][k] += b
    for k, a in LEFT:
        expected["merge-n"][k] += 1
        expected["chain-n"][k] += 1
        expected["chain-s"][k] += a
    for k2, _ in RIGHT:
        expected["merge-n"][k2] += 1
        expected["multi-nr"][k2] += 1
    for k, _ in LEFT:  # a key only the left side has is a group too, of no right tuple
        expected["multi-nr"].setdefault(k, 0)
    client = redis.Redis.from_url(url)

    def stored() -> dict[str, dict[str, int]]:
        # Storm's JSON values: [txid, val] (transactional), [curr_txid, curr, prev] (opaque)
        return {h: {k.decode(): json.loads(v)[1] for k, v in client.hgetall(h).items()} for h in expected}

    with cluster.client() as m:
        m.submit_topology("multi-stream-kill", CONF, built)
        assert wait_until(lambda: held_pid(hold) is not None, 90), stored()
        os.kill(held_pid(hold), signal.SIGKILL)  # in the middle of its commit of txid 10
        at_kill = {h: sum(c.values()) for h, c in stored().items()}
        want = {h: dict(c) for h, c in expected.items()}
        assert wait_until(lambda: stored() == want, 150), (stored(), want)
        m.kill_topology("multi-stream-kill", wait_secs=0)
    assert at_kill["merge-n"] < sum(expected["merge-n"].values()), at_kill  # killed mid-run
