"""Storm's fixed-input test helpers as Storm's tests use them: ``new FixedTupleSpout(tuples,
fields)``, ``FixedTuple(stream, values)``, ``addMockData(spoutId, streamId, values...)``."""

from __future__ import annotations

from unittest import mock

import pytest

from squall import Config, Fields, TopologyBuilder
from squall.testing import (
    FixedTuple,
    FixedTupleSpout,
    MockedSources,
    TestWordCounter,
    complete_topology,
    multiseteq,
    read_tuples,
)


def test_a_fixed_tuple_spout_made_as_in_storm_runs_its_tuples_to_completion():
    """Before, FixedTupleSpout took only squall's (stream, values) pairs: Storm's
    ``FixedTupleSpout(tuples, fields)`` was a TypeError, and ``FixedTupleSpout([["a", "b"]])``
    emitted ['b'] on a stream "a", crash-looping its worker."""
    spout = FixedTupleSpout([["nathan"], ["bob"], FixedTuple(["nathan"])], Fields("word"))
    assert spout.get_source_tuples() == [FixedTuple("default", ["nathan"]), FixedTuple(["bob"]),
                                         FixedTuple(["nathan"])]
    builder = TopologyBuilder()
    builder.set_spout("words", spout, 2)
    builder.set_bolt("count", TestWordCounter(), 2).fields_grouping("words", Fields("word"))
    result = complete_topology(None, builder.create_topology())  # a FixedTupleSpout is completable
    assert multiseteq(read_tuples(result, "words"), [["nathan"], ["bob"], ["nathan"]])
    assert multiseteq(read_tuples(result, "count"), [["nathan", 1], ["nathan", 2], ["bob", 1]])


def test_mocked_sources_take_fixed_tuples_and_storms_stream_before_the_values():
    mocked = MockedSources({"1": [FixedTuple(["a"]), FixedTuple("other", ["b", 1])]})
    mocked.add_mock_data("1", "other", ["c", 2], ["d", 3])  # Storm's addMockData(spoutId, streamId, ...)
    mocked.add_mock_data("1", ["e"])
    assert mocked.data == {"1": [("default", ["a"]), ("other", ["b", 1]), ("other", ["c", 2]), ("other", ["d", 3]),
                                 ("default", ["e"])]}
    with pytest.raises(TypeError, match=r"the stream is given twice, 'other' and stream='x'"):
        mocked.add_mock_data("1", "other", ["f", 4], stream="x")


def test_add_mock_data_with_one_string_and_no_tuples_is_refused_not_taken_for_a_stream():
    """add_mock_data("words", "nathan") read "nathan" as Storm's stream and mocked nothing: the
    spout emitted no tuple, and a test that nothing came out passed."""
    mocked = MockedSources()
    with pytest.raises(TypeError, match=r"spout \[words\].*'nathan'.*no tuples.*\['nathan'\]"):
        mocked.add_mock_data("words", "nathan")
    assert mocked.data == {}


def test_a_fixed_tuple_spout_with_no_fields_for_its_stream_says_so_when_it_opens():
    """Storm's declares nothing without fields, and its first emit crashes on an unknown stream."""
    context = mock.Mock()
    context.get_this_component_id.return_value = "words"
    context.get_this_streams.return_value = []
    with pytest.raises(ValueError, match=r"^FixedTupleSpout \[words\]: tuple \['a'\] is on stream \[default\], which "
                                         r"the spout does not declare: give the default stream's fields"):
        FixedTupleSpout([["a"]]).open({}, context, mock.Mock())


@pytest.mark.parametrize(("mocked", "message"), [
    ([["a"], ["b"]], (r"^mocked sources must be \{spout_id: \[values, ...\]\} or \{spout_id: \{stream: \[values, "
                      r"...\]\}\} \(or a MockedSources\), got list \[\['a'\], \['b'\]\]$")),
    (Config(), r"^mocked sources: got a Config; the topology's configuration goes to complete_topology's storm_conf=$"),
    ({"topology.workers": 2}, (r"^mocked sources for spout \[topology.workers\] must be a list of tuples \(each a "
                               r"list of values\) or \{stream: \[tuples\]\}, got int 2 \(a topology configuration where "
                               r"the mocked sources go\? give it as storm_conf=\)$")),
    ({"words": ["a", "b"]}, r"^mock data for spout \[words\] must be lists of values or FixedTuples, got str 'a'$"),
], ids=["a list", "a Config", "a configuration", "values not in lists"])
def test_mocked_sources_in_the_wrong_shape_say_what_was_expected(mocked, message):
    """Before: AttributeError: 'list' object has no attribute 'items'; TypeError: Value after *
    must be an iterable, not int; and ["a", "b"] took 'a' for Storm's stream and named 'b'."""
    with pytest.raises(TypeError, match=message):
        MockedSources(mocked)
