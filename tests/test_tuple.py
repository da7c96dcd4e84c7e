"""The `Tuple` bolts receive, and tick tuples."""

from __future__ import annotations

import pytest

from squall import Fields, MessageId, is_tick_tuple
from squall._tuple import Source, Tuple, tick_source


def word_tuple(root=0, val=0):
    return Tuple(["hello", 3], Source("split", "words", 7, Fields("word", "count")), root, val)


def test_values_by_position_and_by_field_name():
    t = word_tuple()

    assert t.values == ["hello", 3] and t.get_values() == ["hello", 3]
    assert t.get_value(1) == t[1] == 3
    assert t.get_value_by_field("word") == t["word"] == "hello"
    assert len(t) == 2 and list(t) == ["hello", 3]
    assert t.select(Fields("count", "word")) == [3, "hello"]
    assert t.contains("count") and not t.contains("nope")


@pytest.mark.parametrize("make", ["bolt", "trident"])
def test_storms_typed_getters_read_the_values_as_they_are(make):
    """storm-starter reads ``tuple.getString(0)`` and ``getIntegerByField("count")``: both kinds
    of tuple take Storm's typed getters (a Python value has one type whatever the getter's
    name), ``size()`` and ``field_index``."""
    from squall.trident.tuple import TridentTuple

    t = word_tuple() if make == "bolt" else TridentTuple(Fields("word", "count"), ["hello", 3])
    assert t.get_string(0) == t.get_string_by_field("word") == "hello"
    for kind in ("integer", "long", "short", "byte", "double", "float", "boolean", "binary"):
        assert getattr(t, f"get_{kind}")(1) == getattr(t, f"get_{kind}_by_field")("count") == 3
    assert t.size() == 2 and t.field_index("count") == 1
    with pytest.raises(ValueError, match="'nope'"):
        t.get_long_by_field("nope")


def test_an_unknown_field_is_named_in_the_error():
    with pytest.raises(ValueError, match="'nope'"):
        word_tuple().get_value_by_field("nope")


def test_where_the_tuple_came_from():
    t = word_tuple()

    assert (t.source_component, t.source_stream, t.source_task) == ("split", "words", 7)
    assert (t.get_source_component(), t.get_source_stream_id(), t.get_source_task()) == ("split", "words", 7)
    assert t.fields == t.get_fields() == Fields("word", "count")


def test_message_id_of_untracked_single_root_and_multi_root_tuples():
    assert word_tuple().message_id == MessageId()
    assert word_tuple(11, 5).get_message_id() == MessageId({11: 5})
    assert word_tuple({11: 5, 12: 6}).message_id.get_anchors() == {11, 12}


def test_tick_tuples_come_from_system_on_the_tick_stream():
    tick = Tuple([1], tick_source())

    assert is_tick_tuple(tick)
    assert (tick.source_component, tick.source_stream, tick.source_task) == ("__system", "__tick", -1)
    assert tick["rate_secs"] == 1
    assert not is_tick_tuple(word_tuple())
    assert not is_tick_tuple(Tuple([1], Source("__system", "default", -1, Fields("x"))))
    assert not is_tick_tuple(Tuple([1], Source("spout", "__tick", 1, Fields("x"))))
