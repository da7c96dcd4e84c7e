"""`Fields`, `Values`, `GlobalStreamId` and `MessageId` (Storm's ``org.apache.storm.tuple``)."""

from __future__ import annotations

import pytest

from squall import Fields, GlobalStreamId, MessageId, Values


def test_fields_from_names_or_a_list_are_equal():
    assert Fields("a", "b") == Fields(["a", "b"]) == Fields(Fields("a", "b"))
    assert Fields("a", "b") != Fields("b", "a")
    assert Fields() == Fields([])
    assert hash(Fields("a")) == hash(Fields(["a"]))


def test_fields_are_ordered_sized_and_iterable():
    f = Fields("word", "count", "extra")

    assert len(f) == f.size() == 3
    assert list(f) == ["word", "count", "extra"] == f.to_list()
    assert f[1] == f.get(1) == "count"


def test_index_and_contains():
    f = Fields("word", "count")

    assert f.index("count") == 1
    assert f.contains("word") and "word" in f
    assert not f.contains("nope") and "nope" not in f


def test_index_of_an_unknown_field_names_it():
    with pytest.raises(ValueError, match="'nope'.*\\['word', 'count'\\]"):
        Fields("word", "count").index("nope")


def test_select_picks_values_by_field_name_in_the_selectors_order():
    f = Fields("a", "b", "c")

    assert f.select(Fields("c", "a"), [1, 2, 3]) == [3, 1]
    assert f.select(Fields(), [1, 2, 3]) == []


def test_duplicate_or_non_string_field_names_are_refused():
    with pytest.raises(ValueError, match="duplicate field name 'a'"):
        Fields("a", "b", "a")
    with pytest.raises(TypeError):
        Fields(["a", 1])


def test_values_is_a_list():
    assert Values is list
    assert Values(["a", 1]) == ["a", 1]


def test_global_stream_id_is_a_hashable_pair():
    g = GlobalStreamId("spout", "default")

    assert g == GlobalStreamId("spout", "default")
    assert {g: 1}[GlobalStreamId("spout", "default")] == 1
    assert (g.component_id, g.stream_id) == ("spout", "default")
    assert (g.get_component_id(), g.get_stream_id()) == ("spout", "default")
    component, stream = g
    assert (component, stream) == ("spout", "default")


def test_message_id_exposes_its_roots():
    unanchored = MessageId()
    m = MessageId({11: 5, 12: 6})

    assert not unanchored.is_anchored() and unanchored.get_anchors() == set()
    assert m.is_anchored() and m.get_anchors() == {11, 12}
    assert m.get_anchors_to_ids() == {11: 5, 12: 6}
    assert m == MessageId({12: 6, 11: 5}) and hash(m) == hash(MessageId({12: 6, 11: 5}))
    m.get_anchors_to_ids()[99] = 1
    assert m.get_anchors() == {11, 12}  # a copy is returned
