"""`JoinBolt` (Storm's ``org.apache.storm.bolt.JoinBolt``) on hand-made windows: Storm's
``TestJoinBolt`` cases one to one (the same data and the same expected counts), then what the
port adds: every output record checked against the expected rows, anchoring, output names,
the output stream, and the errors."""

from __future__ import annotations

import pytest

from squall import Fields, JoinBolt, Tuple
from squall._tuple import Source
from squall.windowing import Selector, TupleWindow

USER_FIELDS = ["userId", "name", "city"]
USERS = [[1, "roshan", "san jose"], [2, "harsha", "santa clara"], [3, "siva", "dublin"],
         [4, "hugo", "san mateo"], [5, "suresh", "sunnyvale"], [6, "guru", "palo alto"],
         [7, "arun", "bengaluru"], [8, "satish", "mumbai"], [9, "mani", "bengaluru"],
         [10, "priyank", "seattle"]]
ORDER_FIELDS = ["orderId", "userId", "itemId", "price"]
ORDERS = [[11, 2, 21, 7], [12, 2, 22, 3], [13, 3, 23, 4], [14, 4, 24, 5], [15, 5, 25, 2],
          [16, 6, 26, 7], [17, 6, 27, 4], [18, 7, 28, 2], [19, 8, 29, 9]]
STORE_FIELDS = ["storeId", "storeName", "city"]
STORES = [[1, "store1", "san jose"], [2, "store2", "santa clara"], [3, "store3", "dublin"],
          [4, "store4", "san mateo"], [5, "store5", "bengaluru"]]
CITY_FIELDS = ["cityId", "cityName", "country"]
CITIES = [[1, "san jose", "US"], [2, "santa clara", "US"], [3, "dublin", "US"], [4, "san mateo", "US"],
          [5, "sunnyvale", "US"], [6, "palo alto", "US"], [7, "bengaluru", "India"], [8, "mumbai", "India"],
          [9, "chennai", "India"]]


class MockCollector:
    """Records each emit: (values, anchors, stream)."""

    def __init__(self):
        self.emits = []

    def emit(self, values, anchors=None, stream="default"):
        self.emits.append((values, anchors, stream))
        return []

    @property
    def actual_results(self):
        return [v for v, _a, _s in self.emits]


def make_stream(stream, fields, data, component):
    src = Source(component, stream, 1, Fields(fields))
    return [Tuple(list(rec), src) for rec in data]


def make_nested_stream(stream, fields, data, component):
    src = Source(component, stream, 1, Fields(["outer"]))
    return [Tuple([dict(zip(fields, rec, strict=True))], src) for rec in data]


def window(*streams):
    tuples = [t for s in streams for t in s]
    return TupleWindow(tuples, tuples, [], None, None)


def run(bolt, win):
    collector = MockCollector()
    bolt.prepare({}, None, collector)
    bolt.execute(win)
    return collector


# --- Storm's TestJoinBolt, one to one --------------------------------------------------------------


def test_trivial():
    order_stream = make_stream("orders", ORDER_FIELDS, ORDERS, "ordersSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "orders", ORDER_FIELDS[0]).select("orderId,userId,itemId,price")
    collector = run(bolt, window(order_stream))
    assert len(collector.actual_results) == len(order_stream)
    assert collector.actual_results == ORDERS


def test_nested_keys():
    user_stream = make_nested_stream("users", USER_FIELDS, USERS, "usersSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", "outer.userId").select("outer.name, outer.city")
    collector = run(bolt, window(user_stream))
    assert len(collector.actual_results) == len(user_stream)
    assert collector.actual_results == [[n, c] for _i, n, c in USERS]


def test_projection_fields_with_stream_name():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    store_stream = make_stream("stores", STORE_FIELDS, STORES, "storesSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[2]) \
        .join("stores", "city", "users").select("userId,name,storeName,users:city,stores:city")
    collector = run(bolt, window(store_stream, user_stream))
    assert len(collector.actual_results) == len(store_stream) + 1
    for tup in collector.actual_results:  # 5 fields per tuple and no None
        assert len(tup) == 5 and None not in tup
    assert collector.actual_results == [
        [1, "roshan", "store1", "san jose", "san jose"], [2, "harsha", "store2", "santa clara", "santa clara"],
        [3, "siva", "store3", "dublin", "dublin"], [4, "hugo", "store4", "san mateo", "san mateo"],
        [7, "arun", "store5", "bengaluru", "bengaluru"], [9, "mani", "store5", "bengaluru", "bengaluru"]]


def test_inner_join():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    order_stream = make_stream("orders", ORDER_FIELDS, ORDERS, "ordersSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[0]) \
        .join("orders", "userId", "users").select("userId,name,price")
    collector = run(bolt, window(order_stream, user_stream))
    assert len(collector.actual_results) == len(ORDERS)
    names = {u[0]: u[1] for u in USERS}
    assert collector.actual_results == [[o[1], names[o[1]], o[3]] for o in ORDERS]


def test_left_join():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    order_stream = make_stream("orders", ORDER_FIELDS, ORDERS, "ordersSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[0]) \
        .left_join("orders", "userId", "users").select("userId,name,price")
    collector = run(bolt, window(order_stream, user_stream))
    assert len(collector.actual_results) == 12
    expected = []
    for uid, name, _city in USERS:
        prices = [o[3] for o in ORDERS if o[1] == uid]
        expected += [[uid, name, p] for p in prices] or [[uid, name, None]]
    assert collector.actual_results == expected


def test_three_stream_inner_join():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    stores_stream = make_stream("stores", STORE_FIELDS, STORES, "storesSpout")
    city_stream = make_stream("cities", CITY_FIELDS, CITIES, "citiesSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[2]) \
        .join("stores", "city", "users").join("cities", "cityName", "stores") \
        .select("name,storeName,city,country")
    collector = run(bolt, window(user_stream, stores_stream, city_stream))
    assert len(collector.actual_results) == 6
    assert collector.actual_results == [
        ["roshan", "store1", "san jose", "US"], ["harsha", "store2", "santa clara", "US"],
        ["siva", "store3", "dublin", "US"], ["hugo", "store4", "san mateo", "US"],
        ["arun", "store5", "bengaluru", "India"], ["mani", "store5", "bengaluru", "India"]]


def test_three_stream_left_join_1():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    stores_stream = make_stream("stores", STORE_FIELDS, STORES, "storesSpout")
    city_stream = make_stream("cities", CITY_FIELDS, CITIES, "citiesSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[2]) \
        .left_join("stores", "city", "users").left_join("cities", "cityName", "users") \
        .select("name,storeName,city,country")
    collector = run(bolt, window(user_stream, city_stream, stores_stream))
    assert len(collector.actual_results) == len(USERS)
    stores = {s[2]: s[1] for s in STORES}
    countries = {c[1]: c[2] for c in CITIES}
    assert collector.actual_results == [[n, stores.get(c), c, countries.get(c)] for _i, n, c in USERS]


def test_three_stream_left_join_2():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    stores_stream = make_stream("stores", STORE_FIELDS, STORES, "storesSpout")
    city_stream = make_stream("cities", CITY_FIELDS, CITIES, "citiesSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", "city") \
        .left_join("stores", "city", "users") \
        .left_join("cities", "cityName", "stores") \
        .select("name,storeName,city,country")
    collector = run(bolt, window(user_stream, city_stream, stores_stream))
    # stores + 1 (2 users in bengaluru): a user with no store has no stores:city to join cities
    # on, and Storm's left join drops a record whose key is missing
    assert len(collector.actual_results) == len(STORES) + 1


def test_three_stream_mixed_join():
    user_stream = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    stores_stream = make_stream("stores", STORE_FIELDS, STORES, "storesSpout")
    city_stream = make_stream("cities", CITY_FIELDS, CITIES, "citiesSpout")
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", USER_FIELDS[2]) \
        .join("stores", "city", "users").left_join("cities", "cityName", "users") \
        .select("name,storeName,city,country")
    collector = run(bolt, window(user_stream, city_stream, stores_stream))
    assert len(collector.actual_results) == len(STORES) + 1


# --- beyond Storm's tests ---------------------------------------------------------------------------


def test_each_joined_tuple_is_anchored_to_its_input_tuples_only_on_the_output_stream():
    users = make_stream("users", USER_FIELDS, USERS, "usersSpout")
    orders = make_stream("orders", ORDER_FIELDS, ORDERS, "ordersSpout")
    bolt = JoinBolt(Selector.STREAM, "users", "userId").left_join("orders", "userId", "users") \
        .select("userId,orderId").with_output_stream("joined")
    collector = run(bolt, window(orders, users))
    assert len(collector.emits) == 12
    for values, anchors, stream in collector.emits:
        assert stream == "joined"
        user = next(u for u in users if u[0] == values[0])
        order = [o for o in orders if o[0] == values[1]]
        assert anchors == [user, *order]  # the user's tuple, and its order's if it has one


def test_selector_source_joins_by_component_and_output_names_are_storms():
    a = make_stream("default", ["k", "x"], [[1, "a1"], [2, "a2"], [2, "a2b"]], "spoutA")
    b = make_stream("default", ["k", "y"], [[2, "b2"], [3, "b3"]], "spoutB")
    bolt = JoinBolt("spoutA", "k").join("spoutB", "k", "spoutA").select("spoutA:k, x ,spoutB:y")
    declared = {}

    class Declarer:
        def declare(self, fields):
            declared["default"] = list(fields)

    bolt.declare_output_fields(Declarer())
    assert declared == {"default": ["spoutA:k", "x", "spoutB:y"]}
    assert run(bolt, window(b, a)).actual_results == [[2, "a2", "b2"], [2, "a2b", "b2"]]


def test_a_missing_field_or_nested_path_is_none_and_a_missing_key_never_matches():
    src = Source("s", "left", 1, Fields(["k", "m"]))
    left = [Tuple([1, {"a": {"b": 5}}], src), Tuple([2, {"a": 7}], src), Tuple([None, {}], src)]
    right = make_stream("right", ["k", "v"], [[1, "one"], [2, "two"], [None, "none"]], "r")
    bolt = JoinBolt(Selector.STREAM, "left", "k").left_join("right", "k", "left") \
        .select("k, m.a.b, right:v, right:nothere")
    assert run(bolt, window(left, right)).actual_results == [[1, 5, "one", None], [2, None, "two", None]]


def test_a_list_valued_key_joins_by_value():
    left = make_stream("l", ["k"], [[[1, 2]], [{"a": 1}]], "c")
    right = make_stream("r", ["k", "v"], [[[1, 2], "x"], [{"a": 1}, "y"]], "c")
    bolt = JoinBolt(Selector.STREAM, "l", "k").join("r", "k", "l").select("v")
    assert run(bolt, window(left, right)).actual_results == [["x"], ["y"]]


@pytest.mark.parametrize("build, message", [
    (lambda: JoinBolt(Selector.STREAM, "s1", "k").join("s2", "k", "s1").join("s2", "k", "s1"),
     "'s2' is already part of join"),
    (lambda: JoinBolt(Selector.STREAM, "s1", "k").left_join("s1", "k", "s1"), "'s1' is already part of join"),
    (lambda: JoinBolt(Selector.STREAM, "s1", "k").join("s2", "k", "s3"), "Stream 's3' was not previously declared"),
    (lambda: JoinBolt(Selector.STREAM, "s1", "k").join("s2", "s2:k", "s1"), "Not expecting stream qualifier"),
    (lambda: JoinBolt(Selector.STREAM, "s1", "k").select("a,,b"), "is not a field"),
    (lambda: JoinBolt("users", "s1", "k"), "Selector.STREAM or Selector.SOURCE"),
])
def test_a_bad_join_is_refused_when_it_is_built(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_without_select_prepare_refuses_as_storms():
    with pytest.raises(ValueError, match=r"Must specify output fields via \.select\(\) method"):
        JoinBolt(Selector.STREAM, "s1", "k").prepare({}, None, MockCollector())
