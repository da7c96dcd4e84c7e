"""`JoinBolt` on a LocalCluster: two spouts' streams joined in tumbling count, processing-time
duration and event-time duration windows. Each window's output is checked against a plain
Python join of the same window's tuples (recorded as the bolt saw them, or for event time
computed from the timestamps alone), every input is counted into exactly one window, and every
input is acked once its window is done, with the joined tuples anchored to their inputs."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import (
    Bolt,
    Config,
    Count,
    Duration,
    Fields,
    InvalidTopologyException,
    JoinBolt,
    LocalCluster,
    TopologyBuilder,
)
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt
from squall.testing._registry import SharedLog
from squall.windowing import Selector

from ..conftest import wait_until

USERS = [[i % 12, f"name{i}"] for i in range(40)]  # (uid, name): a name is one input, a uid several
ORDERS = [[100 + i, (i * 7) % 15, i % 10] for i in range(60)]  # (oid, uid, price): some uids have no user


class RecordingJoin(JoinBolt):
    """A JoinBolt that also records each window's tuples (component, stream, values)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.windows = SharedLog()

    def execute(self, window):
        self.windows.append([(t.source_component, t.source_stream, list(t.values)) for t in window.get()])
        super().execute(window)


class ToStream(Bolt):
    """Re-emits its input, anchored, on stream ``stream`` (so the join can select by stream)."""

    def __init__(self, stream, fields):
        self.stream = stream
        self.fields = fields

    def execute(self, tup):
        self.collector.emit(list(tup.values), anchors=[tup], stream=self.stream)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream(self.stream, Fields(self.fields))


def plain_join(users, orders, left):
    """users (uid, name, ...) joined to orders (oid, uid, price, ...) on uid, the users first,
    in window order, as SQL's ``select uid, name, oid, price from users [left] join orders``."""
    out = []
    for u in users:
        matches = [o for o in orders if o[1] == u[0]]
        out += [(u[0], u[1], o[0], o[2]) for o in matches]
        if left and not matches:
            out.append((u[0], u[1], None, None))
    return out


def _feeders(user_fields, order_fields):
    users, orders = FeederSpout(Fields(user_fields)), FeederSpout(Fields(order_fields))
    tracker = AckFailMapTracker()
    users.set_ack_fail_delegate(tracker)
    orders.set_ack_fail_delegate(tracker)
    return users, orders, tracker


def _feed(users, orders, upto_user, upto_order, fed, ts=None):
    """Feed USERS[fed users:upto_user] and ORDERS[...:upto_order], interleaved; ``fed`` counts them."""
    while fed["u"] < upto_user or fed["o"] < upto_order:
        if fed["u"] < upto_user:
            u = USERS[fed["u"]]
            users.feed(u + ([] if ts is None else [ts("u", fed["u"])]), ("u", fed["u"]))
            fed["u"] += 1
        if fed["o"] < upto_order:
            o = ORDERS[fed["o"]]
            orders.feed(o + ([] if ts is None else [ts("o", fed["o"])]), ("o", fed["o"]))
            fed["o"] += 1


def _side(w, name, by):
    """The values of window ``w``'s tuples from ``name`` (a component, ``by`` 0; a stream, 1)."""
    return [t[2] for t in w if t[by] == name]


def _expected_of(windows, left=False, by=0):
    """The plain join of each window, together."""
    out = []
    for w in windows:
        out += plain_join(_side(w, "users", by), _side(w, "orders", by), left)
    return out


def _check_windows(windows, joined, fed_ids, left, by):
    """Every fed input is in exactly one window, and the output is the plain join of each."""
    seen = Counter()
    for w in windows:
        users, orders = _side(w, "users", by), _side(w, "orders", by)
        assert len(users) + len(orders) == len(w)
        seen.update(("u", int(v[1][4:])) for v in users)
        seen.update(("o", v[0] - 100) for v in orders)
    assert seen == Counter(fed_ids), "an input was in no window, or in two"
    expected = _expected_of(windows, left, by)
    assert Counter(map(tuple, joined)) == Counter(expected)
    return expected


def test_count_windows_join_two_spouts_by_source_component():
    bolt = RecordingJoin("users", "uid").join("orders", "uid", "users").select("uid, name, oid, price") \
        .with_tumbling_window(Count(10))
    users, orders, tracker = _feeders(["uid", "name"], ["oid", "uid", "price"])
    capture = TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("users", users)
    b.set_spout("orders", orders)
    b.set_bolt("join", bolt).global_grouping("users").global_grouping("orders")
    b.set_bolt("out", capture).global_grouping("join")
    fed = {"u": 0, "o": 0}
    with LocalCluster() as cluster:
        cluster.submit_topology("join-count", Config(), b.create_topology())
        for step in range(1, 11):  # 4 users and 6 orders at a time, each a window: 100 tuples, 10 windows
            _feed(users, orders, 4 * step, 6 * step, fed)
            assert wait_until(lambda step=step: len(bolt.windows.items()) == step), len(bolt.windows.items())
        windows = bolt.windows.items()
        assert [len(w) for w in windows] == [10] * 10
        ids = [("u", i) for i in range(40)] + [("o", i) for i in range(60)]
        assert wait_until(lambda: len(capture.results().get("join", [])) >= len(_expected_of(windows))), \
            capture.results()
        joined = [v for _s, v in capture.results().get("join", [])]
        expected = _check_windows(windows, joined, ids, False, 0)
        # a tumbling count window's inputs are acked when the next window fires: all but the last's
        in_last = {("u" if c == "users" else "o", _index(c, v)) for c, _s, v in windows[-1]}
        done = {("u", i) for i in range(40)} | {("o", i) for i in range(60)}
        assert wait_until(lambda: {m for m in done if tracker.is_acked(m)} == done - in_last)
        assert not [m for m in done if tracker.is_failed(m)]
    assert len(expected) == 11  # the pairs that met in a window (the windows are fixed by the steps)


def _index(component, values):
    return int(values[1][4:]) if component == "users" else values[0] - 100


def test_duration_windows_left_join_named_streams_and_every_input_is_acked():
    bolt = RecordingJoin(Selector.STREAM, "users", "uid").left_join("orders", "uid", "users") \
        .select("users:uid, name, oid, price").with_output_stream("joined") \
        .with_tumbling_window(Duration.of(200))
    users, orders, tracker = _feeders(["uid", "name"], ["oid", "uid", "price"])
    capture = TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("u_spout", users)
    b.set_spout("o_spout", orders)
    b.set_bolt("u_bolt", ToStream("users", ["uid", "name"])).shuffle_grouping("u_spout")
    b.set_bolt("o_bolt", ToStream("orders", ["oid", "uid", "price"])).shuffle_grouping("o_spout")
    b.set_bolt("join", bolt).fields_grouping("u_bolt", Fields("uid"), "users") \
        .fields_grouping("o_bolt", Fields("uid"), "orders")
    b.set_bolt("out", capture).global_grouping("join", "joined")
    fed = {"u": 0, "o": 0}
    in_windows = lambda: sum(len(w) for w in bolt.windows.items())
    with LocalCluster() as cluster:
        cluster.submit_topology("join-duration", Config(), b.create_topology())
        for step in range(1, 5):  # four bursts, each waited for: several windows
            _feed(users, orders, 10 * step, 15 * step, fed)
            assert wait_until(lambda step=step: in_windows() == 25 * step), in_windows()
        done = {("u", i) for i in range(40)} | {("o", i) for i in range(60)}
        # a processing-time window's inputs leave it (and are acked) on the next timer, window or not
        assert wait_until(lambda: {m for m in done if tracker.is_acked(m)} == done)
        assert not [m for m in done if tracker.is_failed(m)]
        windows = bolt.windows.items()
        results = capture.results()["join"]
    assert {s for s, _v in results} == {"joined"}
    joined = [v for _s, v in results]
    assert len(windows) >= 4
    expected = _check_windows(windows, joined, sorted(done), True, 1)
    assert len(expected) >= 40  # a user without an order in its window is kept too (left join)


def test_event_time_windows_join_by_timestamp_and_late_tuples_go_to_the_late_stream():
    bolt = RecordingJoin("users", "uid").join("orders", "uid", "users").select("uid, name, oid, price") \
        .with_tumbling_window(Duration.of(1000)).with_timestamp_field("ts") \
        .with_watermark_interval(Duration.of(20)).with_late_tuple_stream("late")
    users, orders, tracker = _feeders(["uid", "name", "ts"], ["oid", "uid", "price", "ts"])
    capture, late = TupleCaptureBolt(), TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("users", users)
    b.set_spout("orders", orders)
    b.set_bolt("join", bolt).global_grouping("users").global_grouping("orders")
    b.set_bolt("out", capture).global_grouping("join")
    b.set_bolt("late", late).global_grouping("join", "late")

    def ts(kind, i):  # each stream in timestamp order: 4 windows of event time
        return 1 + (i * 4000) // (40 if kind == "u" else 60)

    expected = []
    for end in (1000, 2000, 3000, 4000):
        w = lambda kind, rows, end=end: [r for i, r in enumerate(rows) if end - 1000 < ts(kind, i) <= end]
        expected += plain_join(w("u", USERS), w("o", ORDERS), False)
    fed = {"u": 0, "o": 0}
    with LocalCluster() as cluster:
        cluster.submit_topology("join-etime", Config(), b.create_topology())
        _feed(users, orders, 40, 60, fed, ts)
        users.feed([999, "push", 10_000], "push-u")  # move the watermark past the last window
        orders.feed([999, 998, 0, 10_000], "push-o")  # no pair: uid 998 is nobody
        # the 4 windows, then the pushers' own (the watermark, 10,000, is its end)
        assert wait_until(lambda: len(bolt.windows.items()) == 5), bolt.windows.items()
        users.feed([1, "late", 5], "late-u")  # behind the watermark: late
        done = {("u", i) for i in range(40)} | {("o", i) for i in range(60)} | {"late-u"}
        assert wait_until(lambda: {m for m in done if tracker.is_acked(m)} == done)
        assert not [m for m in done if tracker.is_failed(m)]
        assert wait_until(lambda: len(capture.results().get("join", [])) >= len(expected))
        assert wait_until(lambda: len(late.results().get("join", [])) == 1)
        joined = [v for _s, v in capture.results()["join"]]
        [(stream, [late_tuple])] = late.results()["join"]
    assert Counter(map(tuple, joined)) == Counter(expected) and len(expected) > 0
    assert stream == "late" and late_tuple.values == [1, "late", 5]


def _submit_refused(bolt, subscribe, message):
    users, orders, _tracker = _feeders(["uid", "name"], ["oid", "uid", "price"])
    b = TopologyBuilder()
    b.set_spout("users", users)
    b.set_spout("orders", orders)
    subscribe(b.set_bolt("join", bolt.with_tumbling_window(Count(2))))
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyException) as err:
        cluster.submit_topology("bad", Config(), b.create_topology())
    assert "Component [join]" in str(err.value) and message in str(err.value), str(err.value)


def both(d):
    d.global_grouping("users").global_grouping("orders")


@pytest.mark.parametrize("bolt, subscribe, message", [
    (lambda: JoinBolt("users", "uid").join("orders", "uid", "users").select("uid, payments:amount"), both,
     "select names 'payments:amount', but source component 'payments' is not in the join"),
    (lambda: JoinBolt("users", "uid").join("orders", "user", "users").select("uid"), both,
     ("join field 'user' of source component 'orders' is not a field of its input stream [default] of component "
     "[orders]")),
    (lambda: JoinBolt("users", "uid").join("orders", "uid", "users").select("uid, orders:nme"), both,
     "select names 'orders:nme', but 'nme' is not a field of source component 'orders'"),
    (lambda: JoinBolt("users", "uid").select("uid"), both,
     "its input stream [default] of component [orders] is not in the join"),
    (lambda: JoinBolt("users", "uid").join("orders", "uid", "users").select("uid"),
     lambda d: d.global_grouping("users"), "source component 'orders' of the join is not among its inputs"),
    (lambda: JoinBolt(Selector.STREAM, "users", "uid").join("orders", "uid", "users").select("uid"), both,
     ("its input stream [default] of component [orders] is not in the join (its streams: ['users', 'orders']: "
     "component names, use Selector.SOURCE)")),
    (lambda: JoinBolt(Selector.STREAM, "users", "uid").join("default", "uid", "users").select("uid"), both,
     "stream 'users' of the join is not among its inputs"),
])
def test_a_join_that_does_not_fit_its_inputs_is_refused_at_submit_naming_the_component(bolt, subscribe, message):
    _submit_refused(bolt(), subscribe, message)


def test_a_join_without_select_is_refused_when_the_topology_is_built():
    b = TopologyBuilder()
    b.set_spout("users", FeederSpout(Fields("uid")))
    b.set_bolt("join", JoinBolt("users", "uid").with_tumbling_window(Count(2))).global_grouping("users")
    with pytest.raises(Exception, match=r"Component \[join\].*Must specify output fields via \.select\(\)"):
        b.create_topology()
