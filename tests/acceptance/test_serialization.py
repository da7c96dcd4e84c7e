"""Values that cross workers: a user's class (pickled, or through its registered serializer),
large values, and a value that cannot be serialized, which must fail at the emit with a message
naming the component, the stream and the type. On the process host and Spark these tuples go
between processes; the same tests on LocalCluster say what a user sees there."""

from __future__ import annotations

import pytest

from squall import Config, TopologyBuilder
from squall.testing import complete_topology, read_tuples

from ..conftest import wait_until
from .components import (
    NeverAckBolt, Point, PointSerializer, Recorder, TaskBolt, TestWordSpout, UnpicklableValueSpout,
)


def two_workers(**conf) -> Config:
    """Two workers and a plain shuffle, so that tuples do cross (load-aware, they stay in the
    spout's worker while its tasks keep up)."""
    out = Config()
    out.set_num_workers(2)
    out["topology.disable.loadaware.messaging"] = True
    out.update(conf)
    return out


def relayed(cluster, values, conf):
    """Send each of ``values`` from a spout through a bolt of 4 tasks (over 2 workers) to the
    capture bolt; return what the bolt relayed."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True))
    builder.set_bolt("2", TaskBolt(), 4).shuffle_grouping("1")
    results = complete_topology(cluster, builder.create_topology(), {"1": [[v] for v in values]}, conf)
    return [w for _t, _i, w in read_tuples(results, "2")]


@pytest.mark.hosts
def test_a_user_class_crosses_workers_and_arrives_as_an_equal_instance(cluster):
    points = [Point(i, -i) for i in range(20)]

    got = relayed(cluster, points, two_workers())

    assert sorted(got, key=lambda p: p.x) == points
    assert all(type(p) is Point for p in got)


@pytest.mark.hosts("process")
def test_a_registered_class_crosses_workers_without_pickle(cluster):
    conf = two_workers(**{"topology.fall.back.on.pickle": False})
    conf.register_serialization(Point, PointSerializer)
    points = [Point(i, i * i) for i in range(20)]

    got = relayed(cluster, points, conf)

    assert sorted(got, key=lambda p: p.x) == points


@pytest.mark.hosts("process")
def test_large_values_cross_workers_intact(cluster):
    big = [bytes(range(256)) * 8192, "\u00e9" * 1_000_000, list(range(100_000)), {str(i): i for i in range(20_000)}]

    got = relayed(cluster, big, two_workers())

    assert sorted(got, key=repr) == sorted(big, key=repr)


@pytest.mark.hosts
def test_a_value_that_cannot_be_serialized_fails_its_emit_naming_component_stream_and_type(cluster):
    """A tuple holding a lock, bound for a task in the other worker: the emit raises
    SerializationError in the spout, which catches it; nothing crashes. On LocalCluster too,
    whose workers hand each other objects, not bytes: what could not cross processes must not
    pass there unseen."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("locks", UnpicklableValueSpout(20, recorder))
    builder.set_bolt("sink", NeverAckBolt(), 2).shuffle_grouping("locks")  # one task in each worker
    cluster.submit_topology("unpicklable", two_workers(), builder.create_topology())

    assert wait_until(lambda: len(recorder.events()) == 20, 30)
    assert recorder.count("error") > 0, "no emit of the lock failed"
    message = recorder.events("error")[0][1]
    assert "component [locks]" in message and "stream [default]" in message and "lock" in message
    assert not [e for e in cluster.get_topology_info("unpicklable")["errors"] if e.get("fatal")]
