"""A grouping given in Storm's Java order, ``fieldsGrouping(componentId, streamId, fields)``
(and ``partialKeyGrouping``, ``customGrouping`` alike), subscribes to that stream with those
fields, as squall's order ``fields_grouping(component_id, fields, stream)`` does (it was refused
with "subscribes with a non-string id: 'numbers', Fields(['n'])"). Every tuple counted: each
key reaches exactly one task of the bolt, the task its fields name."""

from __future__ import annotations

from collections import defaultdict

import pytest

from squall import (
    Bolt,
    CustomStreamGrouping,
    Fields,
    GlobalStreamId,
    InvalidTopologyException,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from squall._grouping import CUSTOM, FIELDS, PARTIAL_KEY
from squall.testing._registry import SharedLog

from ..conftest import wait_until

N = 200


class Numbers(Spout):
    """Emits 0..N-1 on stream "odd-even" (field n), each once."""

    def open(self, conf, context, collector):
        self.collector, self.i = collector, 0

    def next_tuple(self):
        if self.i < N:
            self.collector.emit([self.i % 10, self.i], stream="odd-even")
            self.i += 1

    def declare_output_fields(self, declarer):
        declarer.declare_stream("odd-even", Fields(["key", "n"]))


class Record(Bolt):
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def prepare(self, conf, context, collector):
        self.collector, self.task = collector, context.get_this_task_id()

    def execute(self, tup):
        self.log.append([self.task, tup.get_value_by_field("key"), tup.get_value_by_field("n")])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


class ByKey(CustomStreamGrouping):
    def prepare(self, context, stream, target_tasks):
        self.targets = list(target_tasks)

    def choose_tasks(self, task_id, values):
        return [self.targets[values[0] % len(self.targets)]]


def test_storms_fields_grouping_order_subscribes_to_the_stream_and_keys_go_to_one_task_each():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("record", Record(log), 3).fields_grouping("numbers", "odd-even", Fields(["key"]))
    topology = b.create_topology()
    (grouping,) = topology.bolts["record"].inputs.values()
    assert list(topology.bolts["record"].inputs) == [GlobalStreamId("numbers", "odd-even")]
    assert grouping.kind == FIELDS and list(grouping.fields) == ["key"]
    with LocalCluster() as cluster:
        cluster.submit_topology("order", {}, topology)
        assert wait_until(lambda: len(log.items()) >= N, 30)
    rows = log.items()
    assert sorted(n for _task, _key, n in rows) == list(range(N))  # each once
    tasks_of = defaultdict(set)
    for task, key, _n in rows:
        tasks_of[key].add(task)
    assert set(tasks_of) == set(range(10)) and all(len(t) == 1 for t in tasks_of.values())


@pytest.mark.parametrize("declare", ["partial_key", "custom", "squall"])
def test_the_other_groupings_take_storms_order_too_and_squalls_is_unchanged(declare):
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    d = b.set_bolt("record", Record(SharedLog()), 2)
    if declare == "partial_key":
        d.partial_key_grouping("numbers", "odd-even", ["key"])
        kind = PARTIAL_KEY
    elif declare == "custom":
        d.custom_grouping("numbers", "odd-even", ByKey())
        kind = CUSTOM
    else:
        d.fields_grouping("numbers", Fields(["key"]), "odd-even")
        kind = FIELDS
    inputs = b.create_topology().bolts["record"].inputs
    assert list(inputs) == [GlobalStreamId("numbers", "odd-even")]
    assert next(iter(inputs.values())).kind == kind


@pytest.mark.parametrize("declare", ["fields", "partial_key"])
@pytest.mark.parametrize("stream", [None, 5])
def test_a_stream_id_that_is_not_a_str_is_refused_naming_it_not_taken_for_the_fields(declare, stream):
    """squall's order with a bad stream id, ``fields_grouping("numbers", "key", None)`` (a str
    field and a stream that is not a str, nor a field list): not Storm's order, so refused
    naming the component and the stream id as before Storm's order was taken (it was a bare
    "TypeError: 'NoneType' object is not iterable", the stream id taken for the fields)."""
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    d = b.set_bolt("record", Record(SharedLog()), 2)
    with pytest.raises(InvalidTopologyException, match=r"Component \[record\] subscribes with a non-string id: "
                                                        rf"'numbers', {stream!r}"):
        getattr(d, f"{declare}_grouping")("numbers", "key", stream)
