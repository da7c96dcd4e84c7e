"""examples/storm_starter/: Storm's storm-starter examples as a Storm user ports them, each run on
a LocalCluster with a fixed input and its answer checked against one computed here."""

from __future__ import annotations

import json

import pytest

from squall import Config, Fields
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt

from ..conftest import wait_until
from .conftest import load_example


@pytest.fixture(scope="module")
def single_join():
    return load_example("storm_starter/single_join")


def test_single_join_joins_every_id_once_though_one_side_comes_in_reverse_order(single_join, cluster):
    """Storm's SingleJoinExample with 1,000 ids: the ages come in the reverse order of the
    genders, so the join holds up to a whole side before its first match. Storm (no max spout
    pending) joins every id within a second; squall's automatic limit (64 a task) held each
    spout at 64 unmatched tuples until they timed out after 30 s and failed."""
    n = 1000
    gender, age = FeederSpout(Fields(["id", "gender"])), FeederSpout(Fields(["id", "age"]))
    tracker = AckFailMapTracker()
    gender.set_ack_fail_delegate(tracker)
    age.set_ack_fail_delegate(tracker)
    sink = TupleCaptureBolt()
    single_join.feed(gender, age, n)
    inputs = [(side, i) for side in ("gender", "age") for i in range(n)]
    conf = Config()
    assert conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30) == 30  # Storm's default: the join's cache too
    cluster.submit_topology("join-example", conf, single_join.build(gender, age, sink))
    # within the message timeout: every side acked (a side failed only when its match never came)
    assert wait_until(lambda: all(tracker.is_acked(m) for m in inputs), 25), \
        f"{sum(not tracker.is_acked(m) for m in inputs)} of {2 * n} inputs not acked, " \
        f"{sum(tracker.is_failed(m) for m in inputs)} failed"
    assert not any(tracker.is_failed(m) for m in inputs)
    joined = [values for _stream, values in sink.results()["join"]]
    assert sorted(joined, key=lambda v: v[1]) == single_join.expected(n)  # each id once, nothing else


def test_single_join_main_prints_an_exact_join(single_join, capsys):
    assert single_join.main(n=200, timeout=25) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "200 joins of 200 ids, 0 inputs failed: exact"


@pytest.fixture(scope="module")
def trident_reach():
    return load_example("storm_starter/trident_reach")


def test_trident_reach_answers_every_url_with_its_distinct_followers(trident_reach, cluster):
    """Storm's TridentReach: its lookup tables are read-only map states (ReadOnlyState and
    ReadOnlyMapState, which MapGet reads in Storm); squall's MapGet took only a full MapState,
    so every call failed with `TypeError: MapGet needs a MapState state`."""
    from squall.trident import LocalDRPC

    # the answers, from the tables directly
    expected = {url: len({f for t in trident_reach.TWEETERS_DB.get(url, []) for f in trident_reach.FOLLOWERS_DB.get(t, [])})
                for url in trident_reach.URLS}
    assert expected == {"aaa": 0, "foo.com/blog/1": 16, "engineering.twitter.com/blog/5": 14,
                        "tech.backtype.com/blog/123": 7}
    with LocalDRPC() as drpc:
        cluster.submit_topology("reach", Config(), trident_reach.build_topology(drpc))
        for url, n in expected.items():
            assert json.loads(drpc.execute("reach", url)) == [[n]], url


def test_trident_reach_main_prints_storms_answers(trident_reach, capsys):
    assert trident_reach.main() == 0
    assert capsys.readouterr().out.splitlines() == [
        "REACH: aaa -> [[0]]", "REACH: foo.com/blog/1 -> [[16]]", "REACH: engineering.twitter.com/blog/5 -> [[14]]",
        "REACH: tech.backtype.com/blog/123 -> [[7]]"]


def test_single_join_under_the_max_spout_pending_tuner_joins_every_id(single_join, cluster):
    """The same join with `topology.max.spout.pending: auto`: the tuner (from 16 a task) held
    each spout at its limit with nothing acked until the tuples timed out."""
    n = 1000
    gender, age = FeederSpout(Fields(["id", "gender"])), FeederSpout(Fields(["id", "age"]))
    tracker = AckFailMapTracker()
    gender.set_ack_fail_delegate(tracker)
    age.set_ack_fail_delegate(tracker)
    sink = TupleCaptureBolt()
    single_join.feed(gender, age, n)
    inputs = [(side, i) for side in ("gender", "age") for i in range(n)]
    conf = Config()
    conf.set_max_spout_pending("auto")
    cluster.submit_topology("join-auto", conf, single_join.build(gender, age, sink))
    assert wait_until(lambda: all(tracker.is_acked(m) for m in inputs), 25), \
        f"{sum(not tracker.is_acked(m) for m in inputs)} of {2 * n} inputs not acked"
    assert not any(tracker.is_failed(m) for m in inputs)
    assert sorted((v for _s, v in sink.results()["join"]), key=lambda v: v[1]) == single_join.expected(n)


def test_basic_drpc_answers_each_call_with_its_own_argument_exclaimed(cluster):
    """Storm's BasicDRPCTopology, built as Storm builds it (LinearDRPCTopologyBuilder):
    concurrent calls each get their own answer."""
    from concurrent.futures import ThreadPoolExecutor

    from squall import LocalDRPC

    basic = load_example("storm_starter/basic_drpc")
    words = [f"word{i}" for i in range(50)]
    with LocalDRPC() as drpc:
        cluster.submit_topology("drpc-demo", Config(), basic.build_topology(drpc))
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda w: drpc.execute(basic.FUNCTION, w), words))
    assert answers == [w + "!" for w in words]


def test_basic_drpc_main_prints_storms_answers(capsys):
    assert load_example("storm_starter/basic_drpc").main() == 0
    assert capsys.readouterr().out.splitlines()[-1] == 'Result for "ccc": ccc!'
