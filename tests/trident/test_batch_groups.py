"""Each connected part of a Trident topology is a batch group of its own (Storm's
``TridentTopology.build``): its own master coordinator, txids and commit order. A state_query
connects no parts: the state's bolt holds nodes of both groups and runs each group's batches on
their own. So a DRPC call reading a state that a failing ingest writes is answered, with the
counts committed, and two independent spouts commit at their own pace."""

from __future__ import annotations

import json
import threading

from starlette.testclient import TestClient

from squall import Config, Fields, GlobalStreamId, LocalCluster
from squall.testing._registry import SharedLog
from squall.trident import BaseFilter, FailedException, LocalDRPC, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, MapGet
from squall.trident.planner import plan
from squall.trident.spout import FeederBatchSpout
from squall.ui.server import local_app

from ..conftest import wait_until
from .exactly_once import Watched, counted
from .trident_ops import Split

# the filters run in this process's workers (LocalCluster): what they share with the test
_FAILING: dict[str, threading.Event] = {"a": threading.Event(), "b": threading.Event()}
_FAILED: dict[str, threading.Event] = {"a": threading.Event(), "b": threading.Event()}
_SEEN: set[tuple[str, str]] = set()
_SEEN_LOCK = threading.Lock()


class FailWhileSet(BaseFilter):
    """Fails its batch while ``_FAILING[part]`` is set (and says so in ``_FAILED[part]``)."""

    def __init__(self, part: str) -> None:
        self.part = part

    def is_keep(self, tuple) -> bool:
        if _FAILING[self.part].is_set():
            _FAILED[self.part].set()
            raise FailedException(f"ingest {self.part} is failing")
        return True


class FailFirstSight(BaseFilter):
    """Fails the batch at each sentence the first time it sees it: every batch fails at least
    once (once per sentence of it) before an attempt passes."""

    def __init__(self, part: str) -> None:
        self.part = part

    def is_keep(self, tuple) -> bool:
        key = (self.part, tuple[0])
        with _SEEN_LOCK:
            first = key not in _SEEN
            _SEEN.add(key)
        if first:
            raise FailedException(f"first sight of {tuple[0]!r} in {self.part}")
        return True


def counts_of(topo: TridentTopology, name: str, feeder, check) -> object:
    """``feeder``'s sentences through ``check``, counted per word into a MemoryMapState."""
    return topo.new_stream(name, feeder) \
        .each(Fields("sentence"), check) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")) \
        .parallelism_hint(2)


def query(topo: TridentTopology, function: str, drpc: LocalDRPC | None, counts) -> None:
    """DRPC ``function``: ``[word, count]`` of each word of its argument (count None: never seen)."""
    topo.new_drpc_stream(function, drpc) \
        .each(Fields("args"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .state_query(counts, Fields("word"), MapGet(), Fields("count")) \
        .project(Fields("word", "count"))


def answer(expected: dict[str, int], words: list[str]) -> list[list]:
    """What `ask` must get: each word with its count as a plain-Python count has it."""
    return sorted([w, expected.get(w)] for w in words)


def ask(drpc: LocalDRPC, function: str, words: list[str]) -> list[list]:
    """DRPC ``function`` of ``words``: its ``[word, count]`` rows, sorted."""
    return sorted(json.loads(drpc.execute(function, " ".join(words))))


def test_each_connected_part_is_a_batch_group_and_a_state_bolt_holds_two() -> None:
    topo = TridentTopology()
    counts = counts_of(topo, "ingest", FeederBatchSpout(["sentence"]), FailWhileSet("a"))
    query(topo, "words", None, counts)
    p = plan(topo)
    assert {s.component: s.batch_group for s in p.spouts} == {"spout-ingest": "bg0", "spout-drpc-words": "bg1"}
    state_bolt = next(b for b in p.bolts if b.committer)
    spec = state_bolt.spec
    assert spec.groups() == ("bg0", "bg1")
    assert spec.committing_groups() == ("bg0",)
    assert {spec.input_group(i) for i in spec.inputs} == {"bg0", "bg1"}
    body = state_bolt.body
    assert {n.batch_group for n in body.nodes} == {"bg0", "bg1"}, state_bolt.operations()
    # a batch runs in its group's nodes; one of no group (Trident on Spark: one micro-batch for
    # the whole topology) in all of them
    assert {n.batch_group for n in body._in_group("bg1")} == {"bg1"}
    assert body._in_group(None) == body.nodes

    t = topo.build()
    assert {c for c in t.spouts if c.startswith("$mastercoord")} == {"$mastercoord-bg0", "$mastercoord-bg1"}
    inputs = t.bolts[state_bolt.component].inputs
    assert GlobalStreamId("$mastercoord-bg0", "$commit") in inputs
    assert GlobalStreamId("$mastercoord-bg1", "$commit") not in inputs  # the query part commits nothing here
    coords = {g.stream_id for g in inputs if g.stream_id.startswith("$coord-")}
    assert coords == {"$coord-bg0", "$coord-bg1"}
    assert set(t.bolts["$spoutcoord-spout-drpc-words"].inputs) == {
        GlobalStreamId("$mastercoord-bg1", "$batch"), GlobalStreamId("$mastercoord-bg1", "$success")}

    # a topology of one part keeps bg0 alone (the name its coordinator ran under before)
    one = TridentTopology()
    counts_of(one, "ingest", FeederBatchSpout(["sentence"]), FailWhileSet("a"))
    assert [c for c in one.build().spouts if c.startswith("$mastercoord")] == ["$mastercoord-bg0"]


def test_a_drpc_call_reading_a_state_is_answered_exactly_while_the_part_writing_it_fails() -> None:
    """The ingest part's batch fails at every attempt; each DRPC call over its state is answered
    (not failed with the ingest's FailedException) with the counts committed, exact."""
    _FAILING["a"].clear()
    _FAILED["a"].clear()
    feeder = FeederBatchSpout(["sentence"])
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        counts = counts_of(topo, "ingest", feeder, FailWhileSet("a"))
        query(topo, "words", drpc, counts)
        cluster.submit_topology("groups-drpc", Config(), topo.build())
        try:
            first = ["the cat sat", "the dog", "a cat and the hat"]
            feeder.feed([[s] for s in first], timeout=60)
            expected = counted(first)
            words = sorted(expected) + ["nobody"]
            assert ask(drpc, "words", words) == answer(expected, words)

            _FAILING["a"].set()
            stuck = feeder.feed_no_wait([["the cat is back"], ["nobody came"]])
            assert wait_until(_FAILED["a"].is_set, 60), "the ingest part's batch never failed"
            for _ in range(5):  # each call gets a batch of its own group; every one is answered
                assert ask(drpc, "words", words) == answer(expected, words)
            assert _FAILED["a"].is_set() and _FAILING["a"].is_set()

            _FAILING["a"].clear()
            feeder.wait_committed(stuck, 60)
            expected = counted(first + ["the cat is back", "nobody came"])
            assert ask(drpc, "words", words) == answer(expected, words)
        finally:
            _FAILING["a"].clear()


def test_two_independent_spouts_commit_at_their_own_pace() -> None:
    """Part a fails every attempt of its batch; part b's batches commit all the same, each at
    its first attempt (a's failures fail none of b's), and each part has its own txids."""
    _FAILING["a"].clear()
    _FAILED["a"].clear()
    a, b = FeederBatchSpout(["sentence"]), FeederBatchSpout(["sentence"])
    attempts_b = SharedLog()
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        counts_a = counts_of(topo, "a", a, FailWhileSet("a"))
        counts_b = counts_of(topo, "b", Watched(b, attempts_b), FailWhileSet("b"))
        query(topo, "a", drpc, counts_a)
        query(topo, "b", drpc, counts_b)
        built = topo.build()
        cluster.submit_topology("groups-pace", Config(), built)
        try:
            _FAILING["a"].set()
            stuck = a.feed_no_wait([["a stuck batch"]])
            assert wait_until(_FAILED["a"].is_set, 60), "part a's batch never failed"
            fed = [f"b sentence {i} the" for i in range(6)]
            for i in range(0, len(fed), 2):
                b.feed([[s] for s in fed[i:i + 2]], timeout=60)  # committed while a's batch fails
            assert ask(drpc, "b", ["b", "the", "sentence"]) == answer(counted(fed), ["b", "the", "sentence"])
            assert ask(drpc, "a", ["stuck", "a"]) == answer({}, ["stuck", "a"])
            per_txid: dict[int, set[int]] = {}
            for txid, attempt in attempts_b.items():
                per_txid.setdefault(txid, set()).add(attempt)
            assert per_txid and all(v == {0} for v in per_txid.values()), per_txid
            assert max(per_txid) == 3  # b's own txids: its three batches, whatever a did
            # the UI shows each group's own txid (a's part, made first, is bg0: txid 1 uncommitted;
            # b's bg1: 4 after its three), and no sum of them as a txid
            storm_id = cluster.get_topology_info("groups-pace")["id"]
            with TestClient(local_app(cluster), base_url="http://127.0.0.1") as client:
                def txids() -> dict:
                    page = client.get(f"/api/v1/topology/{storm_id}").json()["trident"] or {}
                    return {g["coordinator"]: g["currentTxid"] for g in page.get("groups", [])}
                assert wait_until(lambda: txids().get("$mastercoord-bg1") == 4, 30, 0.2), txids()
                page = client.get(f"/api/v1/topology/{storm_id}").json()["trident"]
                groups = {g["coordinator"]: g for g in page["groups"]}
                assert groups["$mastercoord-bg0"]["currentTxid"] == 1
                assert groups["$mastercoord-bg0"]["batchesCommitted"] == 0
                assert groups["$mastercoord-bg1"]["batchesCommitted"] == 3
                assert page["currentTxid"] is None and page["coordinators"] == sorted(groups)
                assert page["batchesCommitted"] == sum(g["batchesCommitted"] for g in page["groups"])

            _FAILING["a"].clear()
            a.wait_committed(stuck, 60)
            assert ask(drpc, "a", ["stuck", "a"]) == answer(counted(["a stuck batch"]), ["stuck", "a"])
        finally:
            _FAILING["a"].clear()
    assert {c for c in built.spouts if c.startswith("$mastercoord")} == {f"$mastercoord-bg{i}" for i in range(4)}


def test_exactly_once_counts_with_failing_batches_in_each_group() -> None:
    """Two parts, each failing every batch at least once (at each sentence's first sight),
    fed at once: each part's counts are exact, read through DRPC calls of a third and fourth
    part."""
    with _SEEN_LOCK:
        _SEEN.clear()
    a, b = FeederBatchSpout(["sentence"]), FeederBatchSpout(["sentence"])
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        counts_a = counts_of(topo, "a", a, FailFirstSight("a"))
        counts_b = counts_of(topo, "b", b, FailFirstSight("b"))
        query(topo, "a", drpc, counts_a)
        query(topo, "b", drpc, counts_b)
        conf = Config()
        conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = 3
        cluster.submit_topology("groups-once", conf, topo.build())
        sent: dict[str, list[str]] = {"a": [], "b": []}
        ids: list[tuple[FeederBatchSpout, str]] = []
        for i in range(5):
            for name, feeder in (("a", a), ("b", b)):
                batch = [f"{name} w{i % 3} w{(i + 1) % 4} the", f"the w{i} end"]
                sent[name] += batch
                ids.append((feeder, feeder.feed_no_wait([[s] for s in batch])))
        for feeder, batch_id in ids:
            feeder.wait_committed(batch_id, 120)
        for name in ("a", "b"):
            expected = counted(sent[name])
            words = sorted(expected) + ["nobody"]
            assert ask(drpc, name, words) == answer(expected, words), name
        with _SEEN_LOCK:
            assert {part for part, _ in _SEEN} == {"a", "b"}  # both parts failed batches
