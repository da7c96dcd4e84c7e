"""Stream groupings: which tasks get each tuple (Storm's grouping and integration tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from squall import Config, Fields, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt, complete_topology, read_tuples

from ..conftest import wait_until
from .components import (
    ByValueGrouping, ListedSpout, Recorder,
    DirectEmitBolt, DirectOnRegularStreamBolt, DirectTaskIdBolt, DirectTaskIdSpout, IdentityBolt, KeyEmitBolt, LocalityBolt, NGrouping, RegularEmitToDirectBolt, TaskBolt,
    TestWordCounter, TestWordSpout, UndeclaredStreamBolt,
)

REPO = Path(__file__).resolve().parents[2]


def two_workers() -> Config:
    """On the process and Spark hosts, tuples between the two workers cross processes."""
    conf = Config()
    conf.set_num_workers(2)
    return conf


def word_spout_and(bolt_parallelism: int, subscribe, bolt=None, spout_parallelism: int = 1):
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True), spout_parallelism)
    subscribe(builder.set_bolt("2", bolt or TaskBolt(), bolt_parallelism))
    return builder.create_topology()


@pytest.mark.hosts("process")
def test_shuffle_grouping_spreads_tuples_evenly_over_four_tasks(cluster):
    topology = word_spout_and(4, lambda d: d.shuffle_grouping("1"))
    conf = two_workers()
    # plain shuffle: load-aware, it would keep the tuples in the spout's worker (test_loadaware_shuffle)
    conf["topology.disable.loadaware.messaging"] = True
    results = complete_topology(cluster, topology, {"1": [[f"w{i}"] for i in range(400)]}, conf)

    per_task = Counter(task for task, _i, _w in read_tuples(results, "2"))
    assert len(per_task) == 4
    assert all(90 <= n <= 110 for n in per_task.values()), per_task


@pytest.mark.hosts
def test_fields_grouping_sends_equal_values_to_the_same_task(cluster):
    """Storm's test-field: 4 spout tasks, 6 counter tasks; each of "a" and "b" (as bytes) is
    emitted 24 times and counted 1..24 by one task."""
    topology = word_spout_and(6, lambda d: d.fields_grouping("1", Fields("word")), TestWordCounter(),
                              spout_parallelism=4)
    results = complete_topology(cluster, topology, {"1": [[b"a"], [b"b"]] * 24}, two_workers())

    expected = Counter((w, n) for w in ("a", "b") for n in range(1, 25))
    assert Counter(tuple(r) for r in read_tuples(results, "2")) == expected


def fields_assignment() -> dict[str, int]:
    """Word -> index of the task fields grouping chose, from a run on a fresh LocalCluster."""
    words = [f"word-{i}" for i in range(30)] + ["", "nathan", "\u00e9t\u00e9"]
    topology = word_spout_and(6, lambda d: d.fields_grouping("1", Fields("word")))
    with LocalCluster() as cluster:
        results = complete_topology(cluster, topology, {"1": [[w] for w in words] * 2})
    out: dict[str, int] = {}
    for _task, index, word in read_tuples(results, "2"):
        assert out.setdefault(word, index) == index, f"{word!r} went to two tasks"
    return out


def test_fields_grouping_is_the_same_in_two_separate_cluster_runs():
    first = fields_assignment()
    second = fields_assignment()

    assert first == second
    assert len(set(first.values())) > 1  # the words really are spread


def test_fields_grouping_is_the_same_in_a_process_with_another_hash_seed():
    """Python salts str hashes per process; fields grouping must not depend on it, or two
    workers would send one word to different tasks."""
    here = fields_assignment()
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(REPO))
    code = ("import json; from tests.acceptance.test_groupings import fields_assignment; "
            "print(json.dumps(fields_assignment()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True)

    assert json.loads(out.stdout.strip().splitlines()[-1]) == here


@pytest.mark.hosts("process")
def test_all_grouping_sends_every_tuple_to_every_task(cluster):
    topology = word_spout_and(3, lambda d: d.all_grouping("1"))
    results = complete_topology(cluster, topology, {"1": [["a"], ["b"]]}, two_workers())

    got = Counter((index, word) for _t, index, word in read_tuples(results, "2"))
    assert got == Counter((i, w) for i in range(3) for w in ("a", "b"))


@pytest.mark.hosts("process")
def test_global_grouping_sends_everything_to_the_lowest_task_id(cluster):
    topology = word_spout_and(3, lambda d: d.global_grouping("1"))
    results = complete_topology(cluster, topology, {"1": [[w] for w in "abcdef"]}, two_workers())

    rows = read_tuples(results, "2")
    assert len(rows) == 6
    assert {index for _t, index, _w in rows} == {0}


def test_none_grouping_sends_each_tuple_to_exactly_one_task(cluster):
    topology = word_spout_and(3, lambda d: d.none_grouping("1"))
    results = complete_topology(cluster, topology, {"1": [[str(i)] for i in range(30)]})

    rows = read_tuples(results, "2")
    assert sorted(w for _t, _i, w in rows) == sorted(str(i) for i in range(30))
    assert {i for _t, i, _w in rows} <= {0, 1, 2}


@pytest.mark.hosts("process")
def test_emit_direct_reaches_exactly_the_named_task(cluster):
    builder = TopologyBuilder()
    builder.set_spout("1", FeederSpout(Fields("index", "value")))
    builder.set_bolt("router", DirectEmitBolt("sink")).shuffle_grouping("1")
    builder.set_bolt("sink", TaskBolt(("value",)), 4).direct_grouping("router", "direct")
    results = complete_topology(cluster, builder.create_topology(),
                                {"1": [[3, "x"], [0, "y"], [3, "z"], [2, "w"]]}, two_workers())

    got = sorted((index, value) for _t, index, value in read_tuples(results, "sink"))
    assert got == [(0, "y"), (2, "w"), (3, "x"), (3, "z")]


def test_a_regular_emit_to_a_direct_stream_crashes_with_storms_message(cluster):
    feeder = FeederSpout(Fields("value"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("bad", RegularEmitToDirectBolt()).shuffle_grouping("1")
    builder.set_bolt("sink", TaskBolt(("value",))).direct_grouping("bad", "direct")
    cluster.submit_topology("direct-misuse", {}, builder.create_topology())

    feeder.feed(["v"], 1)

    def errors():
        return cluster.get_topology_info("direct-misuse")["errors"]
    assert wait_until(lambda: errors())
    err = errors()[0]
    assert err["component"] == "bad"
    assert "Cannot do regular emit to direct stream" in err["error"]
    assert not tracker.is_acked(1)


def test_emitting_on_an_undeclared_stream_is_reported_as_unknown_stream(cluster):
    builder = TopologyBuilder()
    spout = FeederSpout(Fields("value"))
    builder.set_spout("1", spout)
    builder.set_bolt("bad", IdentityBolt(Fields("value"))).shuffle_grouping("1")
    builder.set_bolt("reader", UndeclaredStreamBolt()).shuffle_grouping("bad")
    cluster.submit_topology("unknown-stream", {}, builder.create_topology())

    spout.feed(["v"])

    assert wait_until(lambda: cluster.get_topology_info("unknown-stream")["errors"])
    err = cluster.get_topology_info("unknown-stream")["errors"][0]
    assert err["component"] == "reader"
    assert "Unknown stream ID: nowhere" in err["error"]


@pytest.mark.hosts
def test_local_or_shuffle_grouping_prefers_tasks_in_the_same_worker(cluster):
    """2 workers, each with one spout task and two of the bolt's four tasks: every tuple
    stays in the worker that emitted it."""
    topology = word_spout_and(4, lambda d: d.local_or_shuffle_grouping("1"), LocalityBolt(),
                              spout_parallelism=2)
    results = complete_topology(cluster, topology, {"1": [[str(i)] for i in range(40)]}, two_workers())

    rows = read_tuples(results, "2")
    assert len(rows) == 40
    assert len({source for source, _t, _l in rows}) == 2  # both spout tasks emitted
    assert all(local for _s, _t, local in rows)
    assert len({task for _s, task, _l in rows}) == 4


def test_partial_key_grouping_spreads_a_hot_key_over_exactly_two_tasks(cluster):
    """A single hot key is split evenly over its two candidate tasks. The keys include ones
    whose two hashes pick the same task index; Storm then moves the second choice on, so they
    too get two distinct tasks."""
    for key in ["hot", "key-5", "key-6", "key-23", "key-28"]:
        topology = word_spout_and(4, lambda d: d.partial_key_grouping("1", Fields("word")))
        results = complete_topology(cluster, topology, {"1": [[key]] * 40})

        per_task = Counter(task for task, _i, _w in read_tuples(results, "2"))
        assert sorted(per_task.values()) == [20, 20], (key, per_task)


@pytest.mark.hosts("process")
def test_custom_grouping_ngrouping_sends_to_the_n_lowest_tasks(cluster):
    """Storm's test-custom-groupings with NGrouping(2) on 4 tasks and NGrouping(3) on 6."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True))
    builder.set_bolt("2", TaskBolt(), 4).custom_grouping("1", NGrouping(2))
    builder.set_bolt("3", TaskBolt(), 6).custom_grouping("1", NGrouping(3))
    results = complete_topology(cluster, builder.create_topology(), {"1": [["a"], ["b"]]}, two_workers())

    assert Counter(w for _t, _i, w in read_tuples(results, "2")) == {"a": 2, "b": 2}
    assert Counter(w for _t, _i, w in read_tuples(results, "3")) == {"a": 3, "b": 3}
    assert {i for _t, i, _w in read_tuples(results, "2")} == {0, 1}
    assert {i for _t, i, _w in read_tuples(results, "3")} == {0, 1, 2}


def test_a_custom_grouping_choosing_tasks_not_its_targets_fails_the_emit_naming_it(cluster):
    """An acker's task chosen got a tuple it cannot read (the worker crashed and crash-looped), an
    unknown task raised a bare KeyError; now the emit raises, naming grouping, component and stream."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("src", ListedSpout(recorder, ["acker", "unknown", "tuple", "ok"]))
    sink = TupleCaptureBolt()
    builder.set_bolt("sink", sink, 2).custom_grouping("src", ByValueGrouping())
    cluster.submit_topology("custom-bad", {}, builder.create_topology())
    assert wait_until(lambda: recorder.events("ack") == [("ack", "ok")])
    refused = {v: error for _, v, error in recorder.events("refused")}
    assert sorted(refused) == ["acker", "tuple", "unknown"]
    assert "chose [1]" in refused["acker"] and "chose [999]" in refused["unknown"] and "chose (" in refused["tuple"]
    for error in refused.values():
        assert error.startswith("EmitError: custom grouping ByValueGrouping chose ") and "[sink]'s task ids" in error
        assert "component [src]" in error and "stream [default]" in error
    assert sink.results() == {"src": [("default", ["ok"])]}
    assert not cluster.get_topology_info("custom-bad")["errors"]


def test_emit_direct_to_a_task_expecting_a_regular_grouping_crashes_with_storms_message(cluster):
    feeder = FeederSpout(Fields("value"))
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("bad", DirectOnRegularStreamBolt("sink")).shuffle_grouping("1")
    builder.set_bolt("sink", TaskBolt(("value",))).shuffle_grouping("bad")
    cluster.submit_topology("direct-to-regular", {}, builder.create_topology())

    feeder.feed(["v"])

    assert wait_until(lambda: cluster.get_topology_info("direct-to-regular")["errors"])
    err = cluster.get_topology_info("direct-to-regular")["errors"][0]
    assert err["component"] == "bad"
    assert "Cannot emitDirect to a task expecting a regular grouping" in err["error"]


def test_emit_direct_takes_an_int_task_id_and_refuses_another_naming_component_and_stream(cluster):
    """A task id given as a str ("7") or None named no task: the emit was dropped, as one to a
    task that does not subscribe is, and the spout tuple acked, a record lost without a word.
    Now such an emit_direct raises `EmitError` naming the value, the component and the stream
    (from a bolt: its input fails and the error is reported; from a spout: the emit raises), and
    a task id that is an integer by ``__index__`` (a numpy integer) is taken as that int."""
    recorder = Recorder()
    feeder = FeederSpout(Fields("how", "index"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_spout("2", DirectTaskIdSpout(recorder, "sink", [("int", 1), ("str", 1), ("none", 0), ("index", 0)]))
    builder.set_bolt("router", DirectTaskIdBolt("sink")).shuffle_grouping("1")
    builder.set_bolt("sink", TaskBolt(("how",)), 2).direct_grouping("router", "direct").direct_grouping("2", "direct")
    builder.set_bolt("capture", capture).shuffle_grouping("sink")
    cluster.submit_topology("direct-task-ids", {}, builder.create_topology())

    for how, index in [("int", 1), ("str", 1), ("none", 0), ("index", 0)]:
        feeder.feed([how, index], how)

    assert wait_until(lambda: all(tracker.is_acked(h) or tracker.is_failed(h) for h in ("int", "str", "none", "index")))
    assert wait_until(lambda: len(recorder.events("ack")) + len(recorder.events("refused")) == 4)
    assert [h for h in ("int", "str", "none", "index") if tracker.is_acked(h)] == ["int", "index"]
    assert [h for h in ("int", "str", "none", "index") if tracker.is_failed(h)] == ["str", "none"]
    assert sorted(recorder.events("ack")) == [("ack", "index"), ("ack", "int")]
    assert not recorder.events("fail")
    refused = dict((how, error) for _, how, error in recorder.events("refused"))
    assert sorted(refused) == ["none", "str"]
    errors = [e["error"] for e in cluster.get_topology_info("direct-task-ids")["errors"]]
    assert len(errors) == 2
    for error in [*refused.values(), *errors]:
        assert error.startswith("EmitError: emit_direct's task_id must be a task id (an int), got "), error
        assert "stream [direct]" in error, error
    assert "got str '" in refused["str"] and "got NoneType None" in refused["none"]
    assert sum("component [router]" in e for e in errors) == 2
    assert all("component [2]" in e for e in refused.values())
    assert wait_until(lambda: len(capture.results().get("sink", [])) == 4)
    # [the sink's task id, its index, how]: each reached the task of the index it was sent to
    got = sorted((values[2], values[1]) for _, values in capture.results()["sink"])
    assert got == [("index", 0), ("index", 0), ("int", 1), ("int", 1)], got
    assert len({values[0] for _, values in capture.results()["sink"]}) == 2


def test_an_unhashable_grouping_key_fails_the_emit_naming_grouping_field_component_and_stream(cluster):
    """A fields (or partial key) grouping key of a class with ``__eq__`` and no ``__hash__`` was
    reported as a bare ``TypeError: unhashable type: 'EqOnlyKey'`` from squall's stable hash, deep
    inside the emit; now the emit raises `EmitError` naming the grouping and its bolt, the field,
    the value, the component and the stream. The bolt's input fails; a str key goes through."""
    feeder = FeederSpout(Fields("how"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("keys", KeyEmitBolt()).shuffle_grouping("1")
    builder.set_bolt("f", IdentityBolt(Fields("key")), 2).fields_grouping("keys", Fields("key"))
    builder.set_bolt("p", IdentityBolt(Fields("key")), 2).partial_key_grouping("keys", Fields("key"), "pk")
    builder.set_bolt("capture", capture).shuffle_grouping("f")
    cluster.submit_topology("unhashable-key", {}, builder.create_topology())

    for how in ["plain", "eq-only", "eq-only-pk"]:
        feeder.feed([how], how)

    assert wait_until(lambda: all(tracker.is_acked(h) or tracker.is_failed(h) for h in ("plain", "eq-only", "eq-only-pk")))
    assert tracker.is_acked("plain") and tracker.is_failed("eq-only") and tracker.is_failed("eq-only-pk")
    assert not tracker.is_failed("plain") and not tracker.is_acked("eq-only") and not tracker.is_acked("eq-only-pk")
    assert capture.results() == {"f": [("default", ["plain-key"])]}
    errors = sorted(e["error"] for e in cluster.get_topology_info("unhashable-key")["errors"])
    assert [e.split(" on fields")[0] for e in errors] == [
        "EmitError: the fields grouping of [f]", "EmitError: the partial key grouping of [p]"], errors
    for error, stream, value in zip(errors, ["default", "pk"], ["EqOnlyKey('eq-only')", "EqOnlyKey('eq-only-pk')"],
                                    strict=True):
        assert f"cannot hash the value of field [key], EqOnlyKey {value}" in error, error
        assert f"(component [keys], task " in error and f"stream [{stream}])" in error, error
    assert all(e["component"] == "keys" for e in cluster.get_topology_info("unhashable-key")["errors"])
