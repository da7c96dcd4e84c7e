"""Errors in user code: crashes restart the worker, failures fail the tuple, reports are
recorded; and the statistics `get_topology_info` reports."""

from __future__ import annotations

import json

import pytest

from squall import Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt

from ..conftest import wait_until
from .components import (
    AckBolt, AlwaysCrashingBolt, BasicMisuseBolt, BranchingBolt, CrashingBolt, FloodSpout, CrashOnceSpout, FailingBasicBolt, Gate, PrepareCrashBolt, Recorder,
    NOT_VALUES, NotValuesBasicBolt, NotValuesBolt, NotValuesSpout, ReportingBolt, UnprintableErrorBolt, WrongSizeBolt,
)
from .conftest import wait_idle


def feeder_with_tracker(fields=("word",)):
    feeder = FeederSpout(Fields(*fields))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    return feeder, tracker


def test_a_crashing_bolt_is_reported_and_its_worker_restarted_with_fresh_instances(cluster):
    """Storm's fail-fast: an exception escaping execute kills the worker; the error is recorded
    with component, task and traceback, the supervisor restarts the worker, and new component
    instances process what comes next."""
    recorder = Recorder()
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("crasher", CrashingBolt(recorder)).shuffle_grouping("spout")
    cluster.submit_topology("crashy", {"topology.bolt.fail.fast": True}, builder.create_topology())  # Storm's fail-fast
    feeder.feed(["ok"], "before")
    assert wait_until(lambda: tracker.is_acked("before"))

    feeder.feed(["crash"], "boom")

    def info():
        return cluster.get_topology_info("crashy")
    assert wait_until(lambda: info()["errors"] and info()["workers"] and info()["workers"][0]["restarts"] >= 1)
    [err] = info()["errors"]
    assert err["component"] == "crasher"
    assert err["task"] == 2  # "__acker" is task 1, "crasher" task 2
    assert "RuntimeError: boom: deliberate crash in execute" in err["error"]
    assert "Traceback" in err["traceback"] and "deliberate crash" in err["traceback"]
    assert info()["components"]["crasher"]["errors"] == [err]

    feeder.feed(["ok"], "after")
    assert wait_until(lambda: tracker.is_acked("after"))
    instances = [e[1] for e in recorder.events("prepare")]
    assert len(instances) == 2 and instances[0] != instances[1]
    assert recorder.events("execute")[-1] == ("execute", instances[1], "ok")
    assert info()["status"] == "ACTIVE"


def test_a_failed_exception_from_a_basic_bolt_fails_the_input(cluster):
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("basic", FailingBasicBolt()).shuffle_grouping("spout")
    builder.set_bolt("sink", AckBolt()).shuffle_grouping("basic")
    cluster.submit_topology("basic-fail", {}, builder.create_topology())

    feeder.feed(["fail"], "bad")
    feeder.feed(["fine"], "good")

    assert wait_until(lambda: tracker.is_failed("bad") and tracker.is_acked("good"))
    assert not tracker.is_acked("bad") and not tracker.is_failed("good")
    info = cluster.get_topology_info("basic-fail")
    assert info["errors"] == []
    assert all(w["restarts"] == 0 for w in info["workers"])


def test_a_reported_failed_exception_fails_the_input_and_records_the_error(cluster):
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("basic", FailingBasicBolt(reported=True)).shuffle_grouping("spout")
    cluster.submit_topology("reported-fail", {}, builder.create_topology())

    feeder.feed(["fail"], "bad")

    assert wait_until(lambda: tracker.is_failed("bad"))
    info = cluster.get_topology_info("reported-fail")
    [err] = info["errors"]
    assert err["component"] == "basic"
    assert "reported failure of the input" in err["error"]
    assert all(w["restarts"] == 0 for w in info["workers"])


def test_report_error_records_the_error_without_crashing(cluster):
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("reporter", ReportingBolt()).shuffle_grouping("spout")
    cluster.submit_topology("reporting", {}, builder.create_topology())

    feeder.feed(["x"], 1)
    feeder.feed(["y"], 2)

    assert wait_until(lambda: tracker.is_acked(1) and tracker.is_acked(2))
    info = cluster.get_topology_info("reporting")
    assert [e["error"] for e in info["errors"]] == ["ValueError: odd input 'x'", "ValueError: odd input 'y'"]
    assert all(e["component"] == "reporter" for e in info["errors"])
    assert all(w["restarts"] == 0 for w in info["workers"])


def test_topology_info_counts_per_component_and_per_task_as_plain_dicts(cluster):
    """10 spout tuples, each branched into 2 children by a 2-task bolt, acked by a 2-task sink."""
    feeder, tracker = feeder_with_tracker(("num",))
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("branch", BranchingBolt(2), 2).shuffle_grouping("spout")
    builder.set_bolt("sink", AckBolt(), 2).shuffle_grouping("branch")
    cluster.submit_topology("stats", {}, builder.create_topology())

    for i in range(10):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(10)))
    assert wait_idle(cluster, "stats")

    info = cluster.get_topology_info("stats")
    json.dumps(info)  # plain data all the way down
    spout, branch, sink = (info["components"][c] for c in ("spout", "branch", "sink"))
    assert (spout["type"], branch["type"]) == ("spout", "bolt")
    assert (spout["emitted"], spout["transferred"], spout["acked"], spout["failed"]) == (10, 10, 10, 0)
    assert (branch["executed"], branch["emitted"], branch["transferred"], branch["acked"]) == (10, 20, 20, 10)
    assert (sink["executed"], sink["emitted"], sink["acked"], sink["failed"]) == (20, 0, 20, 0)
    assert sum(s["executed"] for s in branch["task_stats"].values()) == 10
    assert sum(s["executed"] for s in sink["task_stats"].values()) == 20
    assert all(s["executed"] > 0 for s in sink["task_stats"].values())
    assert sum(s["emitted"]["default"] for s in branch["task_stats"].values()) == 20
    assert info["status"] == "ACTIVE"
    assert info["num_workers"] == 1 and info["num_tasks"] == 6


def test_a_crashing_spout_is_reported_and_reopened(cluster):
    trigger, report, recorder = Gate(), Gate(), Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", CrashOnceSpout(trigger, report, recorder))
    cluster.submit_topology("spout-crash", {}, builder.create_topology())
    assert wait_until(lambda: recorder.count("open") == 1)

    report.open()
    assert wait_until(lambda: cluster.get_topology_info("spout-crash")["errors"])
    trigger.open()

    assert wait_until(lambda: recorder.count("open") == 2)
    errors = cluster.get_topology_info("spout-crash")["errors"]
    assert [(e["component"], e["error"]) for e in errors] == [
        ("spout", "spout noticed something"),
        ("spout", "KeyError: 'spout crash in next_tuple'"),
    ]
    assert cluster.get_topology_info("spout-crash")["workers"][0]["restarts"] == 1


def test_a_bolt_that_cannot_prepare_keeps_being_restarted_and_can_still_be_killed(cluster):
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", FeederSpout(Fields("x")))
    builder.set_bolt("broken", PrepareCrashBolt(recorder)).shuffle_grouping("spout")
    cluster.submit_topology("crash-loop", {}, builder.create_topology())

    assert wait_until(lambda: recorder.count("prepare") >= 3)
    errors = cluster.get_topology_info("crash-loop")["errors"]
    assert all(e["component"] == "broken" and "cannot prepare" in e["error"] for e in errors)

    cluster.kill_topology("crash-loop", wait_secs=0)
    assert "crash-loop" not in [t["name"] for t in cluster.get_cluster_info()["topologies"]]


def test_emitting_the_wrong_number_of_values_crashes_naming_component_and_stream(cluster):
    feeder = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("sloppy", WrongSizeBolt()).shuffle_grouping("spout")
    cluster.submit_topology("wrong-size", {}, builder.create_topology())

    feeder.feed(["v"])

    assert wait_until(lambda: cluster.get_topology_info("wrong-size")["errors"])
    err = cluster.get_topology_info("wrong-size")["errors"][0]
    assert err["component"] == "sloppy"
    assert "Tuple created with wrong number of fields. Expected 1 fields but got 2" in err["error"]
    assert "stream [default]" in err["error"]


def test_a_bolt_that_crashes_on_every_tuple_backs_off_and_shows_one_error_with_a_count(cluster):
    """A worker that crashes soon after each start is restarted at once the first time, then after
    1 s, 2 s, 4 s ... (as on the process host), not every few milliseconds; its error is one
    record with a count, not one per crash."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout())
    builder.set_bolt("crasher", AlwaysCrashingBolt(recorder)).shuffle_grouping("flood")
    cluster.submit_topology("crash-every-tuple", {"topology.bolt.fail.fast": True}, builder.create_topology())

    def info():
        return cluster.get_topology_info("crash-every-tuple")
    assert wait_until(lambda: recorder.count("prepare") >= 3)  # two crashes, two restarts
    assert not wait_until(lambda: info()["workers"][0]["restarts"] > 4, 2.5)
    [err] = info()["errors"]
    assert err["component"] == "crasher" and err["error"] == "ValueError: cannot handle this value"
    assert err["fatal"] and err["count"] >= 3 and err["last_time"] > err["time"]
    assert info()["components"]["crasher"]["errors"] == [err]


def test_an_emit_of_a_str_or_dict_for_its_values_is_refused_naming_component_and_stream(cluster):
    """A str, dict or bytes as long as the stream's fields passed the field count and reached the
    bolts as itself (t[0] a character); None or an int raised a bare TypeError."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", NotValuesSpout(recorder))
    builder.set_bolt("bolt", NotValuesBolt(recorder)).shuffle_grouping("spout")
    builder.set_bolt("basic", NotValuesBasicBolt(recorder)).shuffle_grouping("bolt")
    sink = TupleCaptureBolt()
    builder.set_bolt("sink", sink).shuffle_grouping("basic")
    cluster.submit_topology("not-values", {}, builder.create_topology())
    assert wait_until(lambda: recorder.events("ack") == [("ack", "good")])
    assert recorder.count("accepted") == 0, recorder.events("accepted")
    refused = recorder.events("refused")
    assert len(refused) == 3 * len(NOT_VALUES)
    for _, who, error in refused:
        component = "spout" if who == "spout" else who
        assert error.startswith("EmitError: emit got a ") and "as its values, not a list of them" in error, error
        assert f"component [{component}]" in error and "stream [default]" in error, error
    assert sink.results() == {"basic": [("default", ["a", "b"])]}


@pytest.mark.parametrize("how, message", [
    ("wrong-size", "Tuple created with wrong number of fields. Expected 1 fields but got 2"),
    ("tuple-as-values", "emit got a Tuple as its values"),
])
def test_a_basic_bolt_s_bad_emit_crashes_naming_component_and_stream(cluster, how, message):
    feeder = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("basic", BasicMisuseBolt()).shuffle_grouping("spout")
    builder.set_bolt("sink", TupleCaptureBolt()).shuffle_grouping("basic")
    cluster.submit_topology("basic-misuse", {}, builder.create_topology())

    feeder.feed([how])

    assert wait_until(lambda: cluster.get_topology_info("basic-misuse")["errors"])
    err = cluster.get_topology_info("basic-misuse")["errors"][0]
    assert err["component"] == "basic"
    assert message in err["error"] and "stream [default]" in err["error"]


def test_a_basic_bolt_emits_by_keyword_to_another_stream_anchored_to_its_input(cluster):
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("basic", BasicMisuseBolt()).shuffle_grouping("spout")
    builder.set_bolt("sink", capture).shuffle_grouping("basic", "side")
    cluster.submit_topology("basic-kw", {}, builder.create_topology())

    feeder.feed(["hello"], 1)

    assert wait_until(lambda: tracker.is_acked(1))
    assert capture.results() == {"basic": [("side", ["hello"])]}


def test_an_exception_whose_str_raises_fails_its_input_without_crashing_the_worker(cluster):
    """A user's exception class whose ``__str__`` raises, raised on one record: squall's own
    report of it raised that second exception, which crashed the worker at every replay of the
    record (every good record in flight lost with it) and showed as the error instead of the
    user's. The input fails, the others pass, and the error names the user's exception."""
    feeder, tracker = feeder_with_tracker(("x",))
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("picky", UnprintableErrorBolt()).shuffle_grouping("spout")
    builder.set_bolt("sink", capture).shuffle_grouping("picky")
    cluster.submit_topology("unprintable", {}, builder.create_topology())

    for i, x in enumerate(["a", "bad", "b"]):
        feeder.feed([x], i)

    assert wait_until(lambda: tracker.is_acked(0) and tracker.is_failed(1) and tracker.is_acked(2))
    assert sorted(v for _, v in capture.results()["picky"]) == [["a"], ["b"]]
    info = cluster.get_topology_info("unprintable")
    assert [(e["component"], e["error"], e["fatal"]) for e in info["errors"]] == \
        [("picky", "UnprintableError: <str() of UnprintableError raised RuntimeError>", False)]
    assert all(w["restarts"] == 0 for w in info["workers"])
