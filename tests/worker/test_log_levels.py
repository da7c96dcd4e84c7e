"""The topology log levels of ``squall set_log_level`` in one worker (`squall.worker.log_levels`):
the master's merge of a request, and a worker's manager applying a config, restoring a logger
when its timeout passes on a simulated clock, and when the setting is removed (``-r``)."""

from __future__ import annotations

import logging

import pytest

from squall import BasicBolt, Fields, LocalCluster, TopologyBuilder
from squall._config import cluster_conf
from squall._errors import BadParameterError
from squall._nimbus import Assignment, HeartbeatReply, LogConfig, LogLevel, decode, encode
from squall.cluster.store import MemoryStore
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout
from squall.worker.log_levels import LogLevelManager, ProcessLoggers, merge_log_config
from tests.cluster.served import served
from tests.cluster.test_master import _register, _topology
from tests.conftest import wait_until

STORE_CONF = cluster_conf({"squall.secret": "log-levels-test-secret-0123456789ab"})


class MapLevels:
    """A test's loggers: name -> own level."""

    def __init__(self, **levels: int) -> None:
        self.levels = dict(levels)

    def get(self, name: str) -> int:
        return self.levels.get(name, 0)

    def set(self, name: str, level: int) -> None:
        self.levels[name] = level


def update(level: str, secs: int = 0) -> LogLevel:
    return LogLevel("UPDATE", level, secs)


def test_a_request_merges_as_storms_nimbus_with_the_timeout_from_the_masters_clock():
    merged = merge_log_config({}, LogConfig({"app.db": update("debug", 30), "root": update("WARN")}), now=1000.0)
    assert merged == {"app.db": LogLevel("UPDATE", "DEBUG", 30, 1030.0), "ROOT": LogLevel("UPDATE", "WARN", 0, None)}
    merged = merge_log_config(merged, LogConfig({"app.db": LogLevel("REMOVE")}), now=1001.0)
    assert merged == {"ROOT": LogLevel("UPDATE", "WARN", 0, None)}
    with pytest.raises(BadParameterError, match=r"logger app\.db: 'LOUD' is not a log level \(one of ALL, TRACE"):
        merge_log_config({}, LogConfig({"app.db": update("LOUD")}), now=0.0)
    with pytest.raises(BadParameterError, match=r"logger app: the action 'DELETE' is none of UPDATE, REMOVE"):
        merge_log_config({}, LogConfig({"app": LogLevel("DELETE")}), now=0.0)
    with pytest.raises(BadParameterError, match="use ROOT for the root logger"):
        merge_log_config({}, LogConfig({"": update("INFO")}), now=0.0)


def test_a_level_set_for_a_while_comes_back_when_the_timeout_passes_on_the_clock():
    clock = SimulatedClock()
    levels = MapLevels(**{"app.db": 30})
    manager = LogLevelManager(ProcessLoggers(levels))
    config = LogConfig(merge_log_config({}, LogConfig({"app.db": update("DEBUG", 10), "ROOT": update("TRACE")}),
                                        clock.wall()))
    manager.apply(config, clock.wall())
    assert levels.levels == {"app.db": 10, "ROOT": 5}
    assert manager.applied()["app.db"].reset_log_level == "WARN"
    clock.advance(9.5)
    assert manager.expire(clock.wall()) == [] and levels.levels["app.db"] == 10
    clock.advance(0.5)
    assert manager.expire(clock.wall()) == ["app.db"]
    assert levels.levels == {"app.db": 30, "ROOT": 5}  # the other setting has no timeout
    manager.apply(config, clock.wall())  # the same config again: a setting that ended stays ended
    assert levels.levels["app.db"] == 30


def test_a_removed_setting_restores_the_level_the_logger_had_even_inherited():
    levels = MapLevels()
    manager = LogLevelManager(ProcessLoggers(levels))
    manager.apply(LogConfig({"app": update("OFF")}), 0.0)
    assert levels.levels == {"app": 60}
    manager.apply(LogConfig({}), 1.0)  # `-r app`: the master's config no longer has it
    assert levels.levels == {"app": 0}  # NOTSET: it inherits its parent's again


def test_workers_sharing_a_process_restore_a_logger_when_the_last_lets_it_go():
    levels = MapLevels(app=20)
    loggers = ProcessLoggers(levels)
    first, second = LogLevelManager(loggers), LogLevelManager(loggers)
    config = LogConfig({"app": LogLevel("UPDATE", "DEBUG", 5, 5.0)})
    first.apply(config, 0.0)
    second.apply(config, 0.0)  # sees DEBUG, yet restores INFO: the level before the first
    first.expire(6.0)
    assert levels.levels["app"] == 10  # the second worker still holds it
    second.close()
    assert levels.levels["app"] == 20


# --- on a LocalCluster: a bolt's DEBUG lines appear while the level is set, and stop after --------------
class Chatty(BasicBolt):
    """Logs each value at DEBUG, then says it is done at INFO (logger ``lg37.bolt``)."""

    def execute(self, tup, collector):
        chat = logging.getLogger("lg37.bolt")
        chat.debug("debug %s", tup[0])
        chat.info("done %s", tup[0])


class Lines(logging.Handler):
    """The messages that reached logger ``lg37``."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lg37_lines():
    parent, bolt = logging.getLogger("lg37"), logging.getLogger("lg37.bolt")
    lines = Lines()
    was = parent.level
    parent.setLevel(logging.INFO)  # what lg37.bolt inherits, whatever the root's level in this run
    parent.addHandler(lines)
    try:
        yield lines
    finally:
        parent.removeHandler(lines)
        parent.setLevel(was)
        bolt.setLevel(logging.NOTSET)


def test_set_log_level_reaches_a_local_clusters_workers_and_ends_with_its_timeout(lg37_lines):
    feed = FeederSpout(Fields(["word"]))
    builder = TopologyBuilder()
    builder.set_spout("feed", feed)
    builder.set_bolt("chatty", Chatty(), 2).shuffle_grouping("feed")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("chat", {"topology.workers": 2}, builder.create_topology())

        def say(word: str) -> None:
            feed.feed([word])
            assert wait_until(lambda: f"done {word}" in lg37_lines.lines)
        say("before")
        config = cluster.set_log_config("chat", LogConfig({"lg37.bolt": update("debug", 10)}))
        assert config.named_logger_level["lg37.bolt"].target_log_level == "DEBUG"
        assert cluster.get_log_config("chat") == config
        assert wait_until(lambda: logging.getLogger("lg37.bolt").level == logging.DEBUG)
        say("during")
        cluster.advance_cluster_time(10)
        assert logging.getLogger("lg37.bolt").level == logging.NOTSET
        say("after")
        with pytest.raises(BadParameterError, match=r"logger lg37\.bolt: 'LOUD' is not a log level"):
            cluster.set_log_config("chat", LogConfig({"lg37.bolt": update("LOUD")}))
    assert [line for line in lg37_lines.lines if line.startswith("debug")] == ["debug during"]
    assert lg37_lines.lines.index("debug during") == lg37_lines.lines.index("done during") - 1


# --- the master: kept with the topology, sent to a worker whose beat has another digest ---------------
def test_the_master_keeps_a_topologys_log_config_and_sends_it_to_workers_that_lack_it():
    clock = SimulatedClock(1000.0)
    store = MemoryStore.for_conf(STORE_CONF)
    first = served(STORE_CONF, clock=clock, store=store)
    _register(first)
    storm_id = first.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    request = LogConfig({"app.db": update("debug", 30), "ROOT": update("warn")})
    kept = first.op_set_log_config(name="t", config=encode(request))
    assert decode(LogConfig, kept) == LogConfig({"app.db": LogLevel("UPDATE", "DEBUG", 30, 1030.0),
                                                 "ROOT": LogLevel("UPDATE", "WARN", 0, None)})
    (slot, launch), = ((w["slot"], w["launch_id"]) for w in first.op_info(name="t")["workers"])
    assignment = decode(Assignment, first.op_get_assignment(storm_id=storm_id, slot=slot, launch_id=launch,
                                                            want_plan=False))
    assert encode(assignment.log_config) == kept and assignment.log_config_digest

    def beat(digest):
        return decode(HeartbeatReply, first.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=launch,
                                                         log_config_digest=digest))
    assert beat(assignment.log_config_digest).log_config is None  # it has it: nothing sent
    assert beat("").log_config == assignment.log_config
    assert beat(None).log_config is None  # a worker that applies none (older) is sent none

    again = served(STORE_CONF, clock=clock, store=store)  # a master made again from the store
    assert again.op_get_log_config(name="t") == kept
    removed = again.op_set_log_config(name="t", config=encode(LogConfig({"ROOT": LogLevel("REMOVE")})))
    assert removed == encode(LogConfig({"app.db": LogLevel("UPDATE", "DEBUG", 30, 1030.0)}))
