"""Configuration layers as a task sees them, and tick tuples (Storm's
test-component-specific-config; API.md's precedence: defaults < squall.yaml < component <
topology Config)."""

from __future__ import annotations

import pytest

from squall import Config, Fields, LocalCluster, TopologyBuilder
from squall.testing import FeederSpout, complete_topology, read_tuples

from ..conftest import wait_until
from .components import ConfClaimingBolt, Recorder, TestConfBolt, TestPlannerSpout, TickRecorderBolt


def conf_seen(cluster, bolt: TestConfBolt, keys: list[str], storm_conf=None, configure=lambda d: d) -> dict:
    """Run a TestConfBolt fed ``keys`` and return what its conf said for each."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout(Fields("conf")))
    configure(builder.set_bolt("2", bolt).shuffle_grouping("1"))
    results = complete_topology(cluster, builder.create_topology(), {"1": [[k] for k in keys]}, storm_conf)
    return dict(read_tuples(results, "2"))


def test_component_specific_config_reaches_the_task(cluster):
    """Storm's test-component-specific-config: the component's own keys, the declarer's
    settings over them, whitelisted topology.* keys and custom keys."""
    bolt = TestConfBolt({
        "fake.config": 123,
        Config.TOPOLOGY_MAX_TASK_PARALLELISM: 20,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 30,
    })
    seen = conf_seen(cluster, bolt,
                     ["fake.config", Config.TOPOLOGY_MAX_TASK_PARALLELISM, Config.TOPOLOGY_MAX_SPOUT_PENDING,
                      "fake.config2"],
                     configure=lambda d: d.set_max_task_parallelism(2).add_configuration("fake.config2", 987))

    assert seen == {
        "fake.config": 123,
        "fake.config2": 987,
        Config.TOPOLOGY_MAX_TASK_PARALLELISM: 2,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 30,
    }


def test_declarer_add_configuration_overrides_the_components_own_configuration(cluster):
    seen = conf_seen(cluster, TestConfBolt({"fake.config": 1, "other": "own"}), ["fake.config", "other"],
                     configure=lambda d: d.add_configurations({"fake.config": 5}))

    assert seen == {"fake.config": 5, "other": "own"}


def test_component_configuration_cannot_set_non_whitelisted_topology_keys(cluster):
    bolt = TestConfBolt({
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 99,
        Config.TOPOLOGY_WORKERS: 5,
        "nimbus.task.timeout.secs": 1,
        Config.TOPOLOGY_DEBUG: True,
    })
    seen = conf_seen(cluster, bolt, [Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, Config.TOPOLOGY_WORKERS,
                                     "nimbus.task.timeout.secs", Config.TOPOLOGY_DEBUG])

    assert seen == {
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,  # Storm's default: the component's value is dropped
        Config.TOPOLOGY_WORKERS: 1,
        "nimbus.task.timeout.secs": None,  # a daemon setting: neither the component's nor the cluster's
        Config.TOPOLOGY_DEBUG: True,  # whitelisted
    }


def test_the_topology_config_overrides_the_component_configuration(cluster):
    conf = Config()
    conf.set_max_spout_pending(7)
    conf["fake.config"] = "topology"
    conf["topology.only"] = "everywhere"
    seen = conf_seen(cluster, TestConfBolt({"fake.config": "component", Config.TOPOLOGY_MAX_SPOUT_PENDING: 30}),
                     ["fake.config", Config.TOPOLOGY_MAX_SPOUT_PENDING, "topology.only"], storm_conf=conf)

    assert seen == {"fake.config": "topology", Config.TOPOLOGY_MAX_SPOUT_PENDING: 7, "topology.only": "everywhere"}


def test_the_clusters_squall_yaml_sits_between_defaults_and_the_component(tmp_path):
    yaml_file = tmp_path / "squall.yaml"
    yaml_file.write_text("fake.config: from-yaml\n"
                         "topology.max.spout.pending: 3\n"
                         "topology.message.timeout.secs: 12\n")
    with LocalCluster(conf_file=str(yaml_file)) as cluster:
        seen = conf_seen(cluster, TestConfBolt({Config.TOPOLOGY_MAX_SPOUT_PENDING: 30}),
                         ["fake.config", Config.TOPOLOGY_MAX_SPOUT_PENDING, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS])

    assert seen == {"fake.config": "from-yaml", Config.TOPOLOGY_MAX_SPOUT_PENDING: 30,
                    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 12}


def test_a_task_sees_no_daemon_setting_but_the_few_a_topology_may_read():
    """The secret and the daemons' settings stay with the daemons (docs/configuration.md)."""
    daemon = {"squall.secret": "s3cret-of-the-daemons", "storm.local.dir": "/srv/squall", "nimbus.task.timeout.secs": 7,
              "nimbus.seeds": ["m1"], "custom.from.yaml": 1}
    with LocalCluster(daemon_conf=daemon) as cluster:
        seen = conf_seen(cluster, TestConfBolt(), [*daemon, "storm.cluster.mode"])

    assert seen == {"squall.secret": None, "storm.local.dir": None, "nimbus.task.timeout.secs": None,
                    "nimbus.seeds": ["m1"], "custom.from.yaml": 1, "storm.cluster.mode": "distributed"}


def ticks(recorder: Recorder) -> list[tuple]:
    return [e for e in recorder.events("tuple") if e[1]]


def test_a_topology_wide_tick_frequency_sends_tick_tuples_from_system(cluster):
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", FeederSpout(Fields("x")))
    builder.set_bolt("2", TickRecorderBolt(recorder), 2).shuffle_grouping("1")
    conf = Config()
    conf[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = 0.2
    cluster.submit_topology("ticks", conf, builder.create_topology())

    assert wait_until(lambda: len(ticks(recorder)) >= 4)
    for _kind, is_tick, component, stream, task, values in ticks(recorder):
        assert (is_tick, component, stream, task, values) == (True, "__system", "__tick", -1, [0.2])


def test_data_tuples_are_not_tick_tuples(cluster):
    recorder = Recorder()
    feeder = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", TickRecorderBolt(recorder)).shuffle_grouping("1")
    cluster.submit_topology("no-ticks", {}, builder.create_topology())

    feeder.feed(["v"])

    assert wait_until(lambda: recorder.events("tuple"))
    assert recorder.events("tuple") == [("tuple", False, "1", "default", 1, ["v"])]


def test_a_per_component_tick_frequency_ticks_only_that_component(cluster):
    ticked, quiet = Recorder(), Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", FeederSpout(Fields("x")))
    (builder.set_bolt("ticked", TickRecorderBolt(ticked)).shuffle_grouping("1")
     .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0.2))
    builder.set_bolt("quiet", TickRecorderBolt(quiet)).shuffle_grouping("1")
    cluster.submit_topology("component-ticks", {}, builder.create_topology())

    assert wait_until(lambda: len(ticks(ticked)) >= 3)
    assert quiet.events() == []


def test_topology_debug_logs_every_emit_with_component_task_and_stream(cluster, caplog):
    feeder = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", TickRecorderBolt(Recorder())).shuffle_grouping("1")
    conf = Config()
    conf.set_debug(True)
    caplog.set_level("INFO", logger="squall.debug")
    cluster.submit_topology("debug", conf, builder.create_topology())

    feeder.feed(["hello"])

    assert wait_until(lambda: any("hello" in r.getMessage() for r in caplog.records))
    message = next(r.getMessage() for r in caplog.records if "hello" in r.getMessage())
    assert message.startswith("Emitting: 1 task 1 stream default")


@pytest.mark.hosts
def test_each_executor_has_its_own_configuration_map(cluster):
    """Storm gives each executor its own map of the component's configuration
    (``Executor.normalizedComponentConf``): a key one executor's task adds in ``prepare`` is not
    in another executor's, in the same worker or another."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout())
    builder.set_bolt("2", ConfClaimingBolt(recorder), 3).shuffle_grouping("1")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("own-conf", conf, builder.create_topology())

    assert wait_until(lambda: recorder.count("claim") == 3)
    assert sorted(recorder.events("claim")) == [("claim", t, t, t) for t in (2, 3, 4)]
