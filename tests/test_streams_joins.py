"""Streams API joins with several values of a key on both sides, on a LocalCluster, counting
every record: a join matches every value of a key with every value of that key on the other side
(``PairStream.join``'s javadoc: "Join the values of this stream with the values having the same
key from the other stream"), in a window and outside one, inner and outer; ``co_group_by_key``
outside a window keeps every value of both streams.

Storm's ``JoinProcessor`` took a key's values out of its table at the first row of that key
(``removeAll``), so each later row of the key matched nothing: of a window's 10,000 matches,
200 came out."""

from __future__ import annotations

from collections import Counter

from squall import Config, Count, LocalCluster
from squall.streams import Pair, StreamBuilder, TumblingWindows, ValueMapper
from squall.testing._registry import SharedLog

from .conftest import wait_until
from .test_streams_topologies import ReplayingSpout

KEYS = 4
WINDOW = 400
"""Numbers per window: 200 even (the left side), 200 odd (the right), 50 of each per key."""


def _key(i: int) -> int:
    # an even number 2m and the odd 2m + 1 share key m % KEYS: each side has every key
    return (i // 2) % KEYS


def _pair(i: int) -> Pair:
    return Pair(_key(i), i)


def _shifted_right_key(i: int) -> int:
    # the right side's keys are 1 .. KEYS: key 0 is only on the left, key KEYS only on the right
    return _key(i) + 1


def _shifted_right(i: int) -> Pair:
    return Pair(_shifted_right_key(i), i)


def _matches(numbers: range, right_key=_key) -> Counter:
    """What an inner join of the numbers' evens (left) and odds (right) holds: every pair of a
    key's values."""
    left = [i for i in numbers if i % 2 == 0]
    right = [i for i in numbers if i % 2 == 1]
    return Counter(Pair(_key(a), Pair(a, b)) for a in left for b in right if _key(a) == right_key(b))


def _sides(builder: StreamBuilder, spout: ReplayingSpout):
    return builder.new_stream(spout, ValueMapper(0)).branch(lambda i: i % 2 == 0, lambda i: True)


def test_a_windowed_join_matches_every_value_of_a_key_with_every_value_of_the_others():
    spout = ReplayingSpout("n")
    joined = SharedLog()
    builder = StreamBuilder()
    evens, odds = _sides(builder, spout)
    evens.map_to_pair(_pair).window(TumblingWindows.of(Count(WINDOW))).join(odds.map_to_pair(_pair)) \
        .for_each(joined.append)
    truth = _matches(range(WINDOW)) + _matches(range(WINDOW, 2 * WINDOW))
    assert len(truth) == 2 * KEYS * 50 * 50 == 20_000
    with LocalCluster() as cluster:
        cluster.submit_topology("join", Config(), builder.build())
        for i in range(2 * WINDOW):
            spout.feed([i], i)
        # the first window's inputs are acked when they leave it, as the second fires (after
        # the second's results, which the window's bolt forwards as it fires)
        assert wait_until(lambda: spout.all_acked(range(WINDOW)), 20), len(spout.acked.items())
    got = Counter(joined.items())
    assert got == truth, (f"{sum(got.values())} matches for {len(truth)}; missing "
                          f"{sum((truth - got).values())}, extra {sum((got - truth).values())}")
    assert spout.failed.items() == []


def test_a_windowed_full_outer_join_matches_every_value_and_keeps_each_unmatched_once():
    spout = ReplayingSpout("n")
    joined = SharedLog()
    builder = StreamBuilder()
    evens, odds = _sides(builder, spout)
    evens.map_to_pair(_pair).window(TumblingWindows.of(Count(WINDOW))) \
        .full_outer_join(odds.map_to_pair(_shifted_right)).for_each(joined.append)
    truth = Counter()
    for numbers in (range(WINDOW), range(WINDOW, 2 * WINDOW)):
        truth += _matches(numbers, _shifted_right_key) + Counter(
            [Pair(0, Pair(i, None)) for i in numbers if i % 2 == 0 and _key(i) == 0]
            + [Pair(KEYS, Pair(None, i)) for i in numbers if i % 2 == 1 and _shifted_right_key(i) == KEYS])
    assert len(truth) == 2 * ((KEYS - 1) * 50 * 50 + 50 + 50) == 15_200
    with LocalCluster() as cluster:
        cluster.submit_topology("outer-join", Config(), builder.build())
        for i in range(2 * WINDOW):
            spout.feed([i], i)
        assert wait_until(lambda: spout.all_acked(range(WINDOW)), 20), len(spout.acked.items())
    got = Counter(joined.items())
    assert got == truth, (f"{sum(got.values())} results for {len(truth)}; missing "
                          f"{sum((truth - got).values())}, extra {sum((got - truth).values())}")
    assert spout.failed.items() == []


def test_a_join_outside_a_window_matches_each_value_with_every_value_of_the_other_side_so_far():
    n = 40  # 5 values of each key on each side: 4 * 5 * 5 matches, each once, whatever the order
    spout = ReplayingSpout("n")
    joined = SharedLog()
    builder = StreamBuilder()
    evens, odds = _sides(builder, spout)
    evens.map_to_pair(_pair).join(odds.map_to_pair(_pair)).for_each(joined.append)
    truth = _matches(range(n))
    assert len(truth) == KEYS * 5 * 5
    with LocalCluster() as cluster:
        cluster.submit_topology("join-unwindowed", Config(), builder.build())
        for i in range(n):
            spout.feed([i], i)
        assert wait_until(lambda: spout.all_acked(range(n)), 20), len(spout.acked.items())
    got = Counter(joined.items())
    assert got == truth, (f"{sum(got.values())} matches for {len(truth)}; missing "
                          f"{sum((truth - got).values())}, extra {sum((got - truth).values())}")
    assert spout.failed.items() == []


def test_co_group_by_key_outside_a_window_keeps_every_value_of_both_streams():
    # Storm's forwarded every key's group at each value and took the second stream's values out
    # as it did: each odd number was in one result, then gone from its key's group
    n = 40
    spout = ReplayingSpout("n")
    grouped = SharedLog()
    builder = StreamBuilder()
    evens, odds = _sides(builder, spout)
    evens.map_to_pair(_pair).co_group_by_key(odds.map_to_pair(_pair)).for_each(grouped.append)
    with LocalCluster() as cluster:
        cluster.submit_topology("co-group-unwindowed", Config(), builder.build())
        for i in range(n):
            spout.feed([i], i)
        assert wait_until(lambda: spout.all_acked(range(n)), 20), len(spout.acked.items())
    results = grouped.items()
    assert len(results) == n, f"{len(results)} results for {n} values (one per value, its key's group)"
    last: dict[int, Pair] = {}
    for key, (firsts, seconds) in results:
        before = last.get(key, Pair([], []))
        # each result is the key's group so far: one more value than the key's last result
        assert len(firsts) + len(seconds) == len(before.first) + len(before.second) + 1, (key, before, firsts, seconds)
        assert set(before.first) <= set(firsts) and set(before.second) <= set(seconds), (key, before, firsts, seconds)
        last[key] = Pair(firsts, seconds)
    for key in range(KEYS):
        assert sorted(last[key].first) == [i for i in range(0, n, 2) if _key(i) == key], (key, last[key])
        assert sorted(last[key].second) == [i for i in range(1, n, 2) if _key(i) == key], (key, last[key])
    assert spout.failed.items() == []


def _latest(_earlier: int, latest: int) -> int:
    return latest


def test_a_join_on_two_tasks_meets_a_side_grouped_by_key_elsewhere_or_on_one_task_by_key():
    # the left side on 2 tasks, regrouped by key into the join; the right side either already
    # grouped by key in a bolt of its own (a reduce_by_key that forwards each value as it comes)
    # or on 1 task. Storm's shuffled the first into the join's tasks (half of the matches were
    # lost: 200 of 400) and could not build the second ("Trying to assign grouping info")
    n = 40
    for right_side in ("grouped by key elsewhere", "one task"):
        evens, odds = ReplayingSpout("n"), ReplayingSpout("n")
        joined = SharedLog()
        builder = StreamBuilder()
        left = builder.new_stream(evens, ValueMapper(0)).repartition(2).map_to_pair(_pair)
        right = builder.new_stream(odds, ValueMapper(0))
        right = right.repartition(2).map_to_pair(_pair).reduce_by_key(_latest) \
            if right_side == "grouped by key elsewhere" else right.map_to_pair(_pair)
        left.join(right).for_each(joined.append)
        truth = _matches(range(2 * n))
        assert len(truth) == KEYS * 10 * 10
        with LocalCluster() as cluster:
            cluster.submit_topology("join-groupings", Config(), builder.build())
            for i in range(n):
                evens.feed([2 * i], i)
                odds.feed([2 * i + 1], i)
            assert wait_until(lambda: evens.all_acked(range(n)) and odds.all_acked(range(n)), 20), \
                (right_side, len(evens.acked.items()), len(odds.acked.items()))  # noqa: B023
        got = Counter(joined.items())
        assert got == truth, (f"right side {right_side}: {sum(got.values())} matches for {len(truth)}; missing "
                              f"{sum((truth - got).values())}, extra {sum((got - truth).values())}")
        assert evens.failed.items() == [] and odds.failed.items() == []


def test_a_join_after_a_side_grouped_by_key_in_its_bolt_regroups_it_when_the_other_side_is_regrouped():
    # the left side is already grouped by key on 2 tasks (a join's output, a reduce_by_key's),
    # the right side is regrouped by key into the join: the join then runs in a bolt of its own,
    # and the left side reached it shuffled (chained joins: 2,000 of 4,000 matches; a
    # reduce_by_key joined: 200 of 400)
    n = 40
    for left_side in ("a join", "a reduce_by_key"):
        spouts = [ReplayingSpout("n") for _ in range(3)]
        fed = {0: [2 * i for i in range(n)], 1: [2 * i + 1 for i in range(n)], 2: [1000 + 2 * i for i in range(n)]}
        joined = SharedLog()
        builder = StreamBuilder()
        a, b, c = (builder.new_stream(s, ValueMapper(0)).repartition(2).map_to_pair(_pair) for s in spouts)
        if left_side == "a join":
            a.join(b).join(c).for_each(joined.append)
            truth = Counter(Pair(_key(x), Pair(Pair(x, y), z)) for x in fed[0] for y in fed[1] for z in fed[2]
                            if _key(x) == _key(y) == _key(z))
            assert sum(truth.values()) == KEYS * 10 * 10 * 10
        else:
            a.reduce_by_key(_latest).join(b).for_each(joined.append)
            fed[2] = []
            truth = _matches(range(2 * n))
            assert sum(truth.values()) == KEYS * 10 * 10
        with LocalCluster() as cluster:
            cluster.submit_topology("join-after-grouped", Config(), builder.build())
            for spout, numbers in zip(spouts, fed.values(), strict=True):
                for i, number in enumerate(numbers):
                    spout.feed([number], i)
            sent = [(s, range(len(f))) for s, f in zip(spouts, fed.values(), strict=True)]
            assert wait_until(lambda sent=sent: all(s.all_acked(ids) for s, ids in sent), 20), left_side
        got = Counter(joined.items())
        assert got == truth, (f"left side {left_side}: {sum(got.values())} matches for {sum(truth.values())}; "
                              f"missing {sum((truth - got).values())}, extra {sum((got - truth).values())}")
        assert all(s.failed.items() == [] for s in spouts)
