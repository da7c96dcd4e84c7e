"""An exception escaping a bolt's execute fails that input with its cause and the bolt goes on
(``topology.bolt.fail.fast: false``, the default); the cause reaches the spout's ``fail_with``;
the fail-fast setting still crashes and restarts the worker; and a spout's acked and failed
counts, and a bolt's failed, are exact in the statistics at any sample rate (issue 33, items 2-3)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from squall import (
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    Config,
    Count,
    FailureCause,
    Fields,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from squall._failure import EXCEPTION, EXPLICIT, TIMEOUT, WORKER_LOST
from squall.cli._local import with_statistics
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until

N = 600
BAD = {37: "not json", 250: "{broken", 511: "[1, 2"}  # msg id -> a malformed record


def records() -> list[str]:
    return [BAD.get(i, json.dumps({"n": i})) for i in range(N)]


class Records(Spout):
    """Emits each record once, with its index as message id; logs ``("ack", id)`` and
    ``("fail", id, cause)`` (no replay: every id is answered exactly once)."""

    def __init__(self, items: list[str], log: SharedLog) -> None:
        self.items, self.log = items, log

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0

    def next_tuple(self):
        if self.i < len(self.items):
            self.collector.emit([self.items[self.i]], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.log.append(("ack", msg_id))

    def fail_with(self, msg_id, cause):
        self.log.append(("fail", msg_id, cause))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("record"))


class Parse(BasicBolt):
    """``json.loads`` of the record: raises JSONDecodeError on a malformed one."""

    def execute(self, tup, collector):
        collector.emit([json.loads(tup[0])])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("doc"))


class RichParse(Bolt):
    """The same with a plain Bolt, which acks only after a successful parse."""

    def execute(self, tup):
        self.collector.emit([json.loads(tup[0])], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("doc"))


class Sink(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def run(bolt, conf: dict) -> tuple[dict, dict, dict, list]:
    """Run records -> parse -> sink until every id is answered; the info, pages, and log."""
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("records", Records(records(), log))
    b.set_bolt("parse", bolt, 2).shuffle_grouping("records")
    b.set_bolt("sink", Sink()).shuffle_grouping("parse")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": 300, **conf}, b.create_topology())
        assert wait_until(lambda: len(log.items()) >= N, timeout=60), len(log.items())
        info = cluster.get_topology_info("t")
        page = cluster.get_topology_page("t")
        parse_page = cluster.get_component_page("t", "parse")
    return info, page, parse_page, log.items()


# the three paths a raising input can take: every input sampled (timed, C's sampled_execute),
# none (statistics off: runs of plain inputs, C's execute_run), and Storm's default 1 in 20 (both)
PATHS = [{"topology.stats.sample.rate": 1.0}, {"topology.stats.enabled": False}, {"topology.stats.sample.rate": 0.05}]


@pytest.mark.parametrize("conf", PATHS, ids=["sampled", "plain", "default-rate"])
@pytest.mark.parametrize("bolt", [Parse, RichParse], ids=["BasicBolt", "Bolt"])
def test_a_bolt_raising_on_a_few_records_fails_only_those_with_the_cause_and_goes_on(bolt, conf):
    info, page, parse_page, log = run(bolt(), conf)
    answers = {entry[1] for entry in log}
    assert len(log) == N and answers == set(range(N))  # each id answered once: nothing replayed, nothing lost
    assert {entry[1] for entry in log if entry[0] == "ack"} == set(range(N)) - set(BAD)
    failed = {entry[1]: entry[2] for entry in log if entry[0] == "fail"}
    assert set(failed) == set(BAD)
    for msg_id, cause in failed.items():
        assert isinstance(cause, FailureCause) and cause.kind == EXCEPTION and cause.record_caused
        assert cause.component == "parse" and cause.error == "JSONDecodeError"
        assert cause.message == str(_decode_error(BAD[msg_id]))
        assert "exception in [parse] task" in cause.describe() and "JSONDecodeError" in cause.describe()
    # reported as a crash is (component, task, traceback), but the worker never crashed
    errors = info["errors"]
    assert errors and all(e["component"] == "parse" and not e["fatal"] for e in errors)
    assert sum(e["count"] for e in errors) == len(BAD)
    assert all("JSONDecodeError" in e["error"] and "json.loads" in e["traceback"] for e in errors)
    if conf.get("topology.stats.enabled", True):
        # exact at any sample rate: the spout's acked and failed, the bolt's failed
        spout = page["spouts"][0]
        assert (spout["acked"], spout["failed"]) == (N - len(BAD), len(BAD))
        parse = next(b for b in page["bolts"] if b["boltId"] == "parse")
        assert parse["failed"] == len(BAD)
        assert [(i["component"], i["failed"]) for i in parse_page["inputStats"]] == [("records", len(BAD))]
        # squall local's figures are the page's
        with_statistics(info, page)
        assert (info["components"]["records"]["acked"], info["components"]["records"]["failed"]) == \
            (N - len(BAD), len(BAD))
        assert info["components"]["parse"]["failed"] == len(BAD)


def _decode_error(text: str) -> Exception:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return e
    raise AssertionError(f"{text!r} parses")


class ExplicitFail(Bolt):
    """Fails every input with the collector's fail."""

    def execute(self, tup):
        self.collector.fail(tup)


def test_an_explicit_fail_reaches_the_spout_as_an_explicit_failure_naming_the_bolt():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("records", Records(["a", "b"], log))
    b.set_bolt("judge", ExplicitFail()).shuffle_grouping("records")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        assert wait_until(lambda: len(log.items()) == 2)
    causes = [entry[2] for entry in log.items()]
    assert [(c.kind, c.component, c.record_caused) for c in causes] == [(EXPLICIT, "judge", True)] * 2


class Causes(FeederSpout):
    """A FeederSpout that also logs each failure's ``(msg_id, cause)``."""

    def __init__(self, fields, causes: SharedLog) -> None:
        super().__init__(fields)
        self.causes = causes

    def fail_with(self, msg_id, cause):
        self.causes.append((msg_id, cause))
        super().fail_with(msg_id, cause)


class HoldsAndRaisesOnBoom(Bolt):
    """Holds its tuples (never acks); raises on ``"boom"``."""

    def execute(self, tup):
        if tup[0] == "boom":
            raise RuntimeError("boom")


def _two_workers(fail_fast: bool | None, bolt: Any = None) -> tuple[LocalCluster, Causes, SharedLog]:
    """``feed`` -> ``crash`` (``bolt``, by default `HoldsAndRaisesOnBoom`) in two workers."""
    causes = SharedLog()
    feed = Causes(Fields(["x"]), causes)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("crash", bolt or HoldsAndRaisesOnBoom()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf["topology.bolt.fail.fast"] = fail_fast
    cluster = LocalCluster(clock=SimulatedClock())  # no message timeout can fail anything
    cluster.submit_topology("t", conf, b.create_topology())
    comps = cluster.get_topology_info("t")["components"]
    workers = {c["task_stats"][t]["worker"] for c in (comps["feed"], comps["crash"]) for t in c["task_stats"]}
    assert len(workers) == 2, "feed and crash must be in different workers"
    return cluster, feed, causes


def test_fail_fast_crashes_the_worker_and_fails_the_raising_input_as_an_exception_the_others_as_lost():
    cluster, feed, causes = _two_workers(fail_fast=True)
    with cluster:
        feed.feed(["a"], "a")
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["crash"]["executed"] == 1)
        feed.feed(["boom"], "boom")
        assert wait_until(lambda: len(causes.items()) == 2)
        # the worker crashed (a fatal error, naming the bolt) and LocalCluster restarted it
        errors = cluster.get_topology_info("t")["errors"]
        assert [(e["component"], e["fatal"]) for e in errors] == [("crash", True)]
        assert "RuntimeError: boom" in errors[0]["error"]
    got = dict(causes.items())
    assert got["boom"] == FailureCause(EXCEPTION, "crash", got["boom"].task, "RuntimeError", "boom")
    assert got["a"] == FailureCause(WORKER_LOST) and not got["a"].record_caused


def test_by_default_the_worker_stays_up_and_only_the_raising_input_fails(caplog):
    """The error is reported (the UI's errors) and, as Storm logs a reported error, in the
    worker's log with its traceback: it was in the errors alone, so a user watching the log of
    a stalled topology saw nothing."""
    cluster, feed, causes = _two_workers(fail_fast=False)
    with cluster, caplog.at_level(logging.ERROR, "squall.engine"):
        feed.feed(["a"], "a")
        feed.feed(["boom"], "boom")
        assert wait_until(lambda: len(causes.items()) == 1)
        feed.feed(["b"], "b")
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["crash"]["executed"] == 3)
        errors = cluster.get_topology_info("t")["errors"]
        assert [(e["component"], e["fatal"]) for e in errors] == [("crash", False)]
    assert [(m, c.kind, c.error) for m, c in causes.items()] == [("boom", EXCEPTION, "RuntimeError")]
    logged = [r.getMessage() for r in caplog.records if "execute raised" in r.getMessage()]
    assert len(logged) == 1 and logged[0].startswith("[crash] task ") and logged[0].rstrip().endswith("RuntimeError: boom")


class CutShortByItsStop(Bolt):
    """Raises what a Trident state call raises when its worker's stop cuts its retries short."""

    def execute(self, tup):
        from squall._errors import WorkerStoppingError
        raise WorkerStoppingError("trident_state_get not sent again: the worker is stopping (cannot reach the master)")


def test_an_input_whose_call_the_workers_stop_cut_short_fails_uncharged_and_reports_nothing(caplog):
    """At every stop of a worker whose Trident coordinator was retrying a master gone, the
    topology's errors and the worker's log said the bolt had failed, with a traceback."""
    cluster, feed, causes = _two_workers(fail_fast=False, bolt=CutShortByItsStop())
    with cluster, caplog.at_level(logging.ERROR, "squall.engine"):
        feed.feed(["a"], "a")
        assert wait_until(lambda: len(causes.items()) == 1)
        assert cluster.get_topology_info("t")["errors"] == []
    [(msg_id, cause)] = causes.items()
    assert (msg_id, cause.kind, cause.component, cause.record_caused) == ("a", WORKER_LOST, "crash", False)
    assert not [r for r in caplog.records if "execute raised" in r.getMessage()]


class CoordinatorCutShortByItsStop(Spout):
    """Raises what a Trident coordinator's write to the master raises when its worker's stop
    cuts its retries short (the write is the coordinator spout's, in its next_tuple)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def next_tuple(self):
        from squall._errors import WorkerStoppingError
        raise WorkerStoppingError("trident_state_put not sent again: the worker is stopping (cannot reach the master)")


def test_a_spout_whose_call_the_workers_stop_cut_short_is_no_crash_of_the_spout(caplog):
    """The bolts' case (above) was fixed, not the spout's: a Trident coordinator (a spout)
    retrying a master gone at its worker's stop crashed its loop, and the worker's errors and
    log said the spout had crashed, a fatal error, as a death of the worker."""
    b = TopologyBuilder()
    b.set_spout("coord", CoordinatorCutShortByItsStop())
    cluster = LocalCluster(clock=SimulatedClock())
    with cluster, caplog.at_level(logging.INFO, "squall.engine"):
        cluster.submit_topology("t", Config(), b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("t")["errors"]
                          or any("stopping" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO))
        assert cluster.get_topology_info("t")["errors"] == []
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_timeout_reaches_the_spout_as_a_timeout():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("records", Records(["a"], log))
    b.set_bolt("hold", HoldsAndRaisesOnBoom()).shuffle_grouping("records")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": 5}, b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["hold"]["executed"] == 1)
        cluster.advance_cluster_time(11)
        assert wait_until(lambda: len(log.items()) == 1)
    [(kind, msg_id, cause)] = log.items()
    assert (kind, msg_id, cause) == ("fail", 0, FailureCause(TIMEOUT)) and not cause.record_caused


def test_a_spout_without_fail_with_is_told_by_its_fail():
    """A spout written for Storm (no fail_with; not even a squall Spout) works unchanged."""
    from squall.engine.spout_executor import _fail_hook

    class Plain:
        def __init__(self):
            self.failed = []

        def fail(self, msg_id):
            self.failed.append(msg_id)
    plain = Plain()
    _fail_hook(plain)(7, FailureCause(TIMEOUT))
    assert plain.failed == [7]


def test_the_cause_of_a_failure_from_an_older_sender_counts_as_an_explicit_fail():
    assert FailureCause.from_wire(None) == FailureCause(EXPLICIT)
    assert FailureCause.from_wire(("exception", "p", 3, "ValueError", "x")) == \
        FailureCause(EXCEPTION, "p", 3, "ValueError", "x")
    assert FailureCause.from_wire(("nonsense", "p", 3, "E", "x")).kind == EXPLICIT
    long = FailureCause.of_exception(EXCEPTION, "p", 1, ValueError("x" * 5000))
    assert len(long.message) < 1100 and long.error == "ValueError"


def test_a_credential_in_an_exception_message_does_not_reach_the_cause():
    """The cause's message goes into dead-letter entries (a Redis stream, a file) and log lines:
    a bolt's exception that names its store's URL must not carry the password there."""
    cause = FailureCause.of_exception(EXCEPTION, "sink", 2, ConnectionError("redis://app:s3cret-pw@db:6379/0 is down"))
    assert "s3cret-pw" not in cause.message and "s3cret-pw" not in cause.describe()
    assert cause.message == "redis://app:***@db:6379/0 is down"


def test_a_huge_reason_is_masked_only_as_far_as_its_message_can_reach(monkeypatch):
    """A failure's message keeps 1,000 characters, but the whole of its text was masked first:
    a subprocess's 5 MB error, or a value quoted whole, made each failure it caused read 5 MB
    (36 s for one reason of 5 MB of words and "a=b" pairs), on the failing bolt's thread, for
    each tuple it failed. Now 16,000 characters at most are masked, and what is kept is masked."""
    import squall._failure as failure

    masked: list[int] = []
    real = failure.shown_text
    monkeypatch.setattr(failure, "shown_text", lambda text: masked.append(len(text)) or real(text))
    secret = "redis://:s3cret-pw@db:6379/0"
    huge = f"cannot reach {secret}: " + ("x" * 1000 + " a=b 'q' ") * 5000
    causes = [FailureCause.of_reason("lookup", 3, huge),
              FailureCause.of_exception(EXCEPTION, "lookup", 3, ValueError(huge))]
    assert masked and max(masked) <= 16_000, masked
    for cause in causes:
        assert cause.message.startswith("cannot reach redis://:***@db:6379/0: xxx") and "s3cret" not in cause.message
        assert len(cause.message) == failure.MAX_MESSAGE_CHARS + len("...")
    # a short reason is masked whole, as before
    assert FailureCause.of_reason("lookup", 3, f"down: {secret}").message == "down: redis://:***@db:6379/0"


def test_a_cause_crosses_workers_in_acker_messages_and_replies():
    from squall.engine.acker import FAIL, FAILED
    from squall.engine.serialize import Serializer

    ser = Serializer({"topology.fall.back.on.pickle": False}, lambda task, stream: None)
    cause = FailureCause(EXCEPTION, "parse", 3, "JSONDecodeError", "Expecting value").wire()
    items = [5, (FAIL, 2**63 + 5, cause, -1), 6, (FAILED, 2**63 + 5, cause), 6, (FAILED, 8, None)]
    assert ser.decode_batch(ser.encode_batch(items)) == items
    assert FailureCause.from_wire(ser.decode_batch(ser.encode_batch(items))[3][2]).error == "JSONDecodeError"


def test_reports_of_a_bolts_exceptions_follow_storms_throttle():
    from squall.engine.bolt_executor import ErrorThrottle

    throttle = ErrorThrottle(10.0, 2)
    assert [throttle.allow(t) for t in (0.0, 1.0, 2.0, 9.9)] == [True, True, False, False]
    assert [throttle.allow(t) for t in (10.0, 10.5, 11.0)] == [True, True, False]



class RaisesOnItsFirstWindow(BaseWindowedBolt):
    """Logs each window's values; raises on the first window."""

    def __init__(self, windows: SharedLog) -> None:
        super().__init__()
        self.windows = windows

    def prepare(self, conf, context, collector):
        self.fired = 0

    def execute(self, window):
        self.fired += 1
        self.windows.append(sorted(t[0] for t in window.get()))
        if self.fired == 1:
            raise RuntimeError("the first window")


def test_a_windowed_bolt_that_raises_crashes_its_worker_by_default():
    """The exception comes from a window, not from the input that fired it, which the window
    holds and acks when it expires: failing that input answered it twice (failed, then acked)
    and left the count trigger un-reset, so every later input fired the window again. A
    windowed bolt keeps Storm's fail-fast by default, as its time-driven trigger always did."""
    windows = SharedLog()
    bolt = RaisesOnItsFirstWindow(windows).with_tumbling_window(Count(3))
    cluster, feed, causes = _two_workers(fail_fast=None, bolt=bolt)
    with cluster:
        for i in range(3):
            feed.feed([i], i)
        assert wait_until(lambda: len(causes.items()) == 3)  # all three, the worker having crashed
        errors = cluster.get_topology_info("t")["errors"]
        assert [(e["component"], e["fatal"]) for e in errors] == [("crash", True)]
        # the next inputs once the crashed worker runs again: sent before, they were lost with it
        # (failed as a lost worker, and a FeederSpout does not replay), which a loaded machine showed
        assert wait_until(lambda: all(w["alive"] for w in cluster.get_topology_info("t")["workers"])
                          and any(w["restarts"] for w in cluster.get_topology_info("t")["workers"]))
        for i in range(3, 6):
            feed.feed([i], i)
        assert wait_until(lambda: len(windows.items()) == 2)
    assert windows.items() == [[0, 1, 2], [3, 4, 5]]  # the restarted window fires every 3 inputs
    got = dict(causes.items())
    assert got[2].kind == EXCEPTION and got[0] == got[1] == FailureCause(WORKER_LOST)


def test_a_windowed_bolt_in_a_stateful_topology_keeps_fail_fast_through_its_checkpoint_wrapper():
    from squall.state._bolt import CheckpointTupleForwarder, StatefulBoltExecutor
    from squall.state._windowed import windowed_executor

    window = windowed_executor(RaisesOnItsFirstWindow(SharedLog()).with_tumbling_window(Count(3)))
    assert CheckpointTupleForwarder(window).squall_fail_fast
    assert not CheckpointTupleForwarder(Sink()).squall_fail_fast
    assert StatefulBoltExecutor(Sink()).squall_fail_fast
