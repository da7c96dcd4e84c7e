"""Every name API.md promises is importable from `squall` / `squall.testing` and documented."""

from __future__ import annotations

import inspect

import pytest

import squall
import squall.testing

# (name, public methods/attributes API.md lists for it)
SQUALL_API = {
    "Fields": ["index", "contains", "select"],
    "Values": [],
    "Tuple": ["get_value", "get_value_by_field", "select", "contains", "get_fields", "get_source_component",
              "get_source_stream_id", "get_source_task", "get_message_id", "values", "fields",
              "source_component", "source_stream", "source_task", "message_id"],
    "is_tick_tuple": [],
    "Spout": ["declare_output_fields", "get_component_configuration", "open", "close", "activate",
              "deactivate", "next_tuple", "ack", "fail"],
    "Bolt": ["declare_output_fields", "get_component_configuration", "prepare", "execute", "cleanup"],
    "BasicBolt": ["declare_output_fields", "get_component_configuration", "prepare", "execute", "cleanup"],
    "OutputFieldsDeclarer": ["declare", "declare_stream"],
    "SpoutOutputCollector": ["emit", "emit_direct", "report_error"],
    "OutputCollector": ["emit", "emit_direct", "ack", "fail", "reset_timeout", "report_error"],
    "BasicOutputCollector": ["emit", "emit_direct", "reset_timeout", "report_error"],
    "TopologyContext": ["get_this_task_id", "get_this_component_id", "get_this_task_index",
                        "get_component_tasks", "get_component_id", "get_this_sources", "get_this_targets",
                        "get_component_output_fields", "get_this_worker_port", "get_storm_id",
                        "register_metric"],
    "GlobalStreamId": [],
    "CustomStreamGrouping": ["prepare", "choose_tasks"],
    "TopologyBuilder": ["set_spout", "set_bolt", "create_topology"],
    "SpoutDeclarer": ["set_num_tasks", "add_configuration", "add_configurations", "set_max_spout_pending",
                      "set_max_task_parallelism", "set_debug"],
    "BoltDeclarer": ["set_num_tasks", "add_configuration", "add_configurations", "set_max_spout_pending",
                     "set_max_task_parallelism", "set_debug", "shuffle_grouping", "fields_grouping",
                     "partial_key_grouping", "all_grouping", "global_grouping", "none_grouping",
                     "direct_grouping", "local_or_shuffle_grouping", "custom_grouping"],
    "StormTopology": [],
    "Config": ["set_num_workers", "set_num_ackers", "set_max_spout_pending", "set_message_timeout_secs",
               "set_debug", "set_max_task_parallelism", "register_serialization", "register_metrics_consumer"],
    "LocalCluster": ["submit_topology", "kill_topology", "activate", "deactivate", "rebalance",
                     "get_topology_info", "get_cluster_info", "shutdown", "__enter__", "__exit__"],
    "StormSubmitter": ["submit_topology"],
    "InvalidTopologyException": [],
    "AlreadyAliveException": [],
    "NotAliveException": [],
    "FailedException": [],
    "ReportedFailedException": [],
    # Metrics (Storm's v1)
    "IMetric": ["get_value_and_reset"],
    "CountMetric": ["incr", "incr_by", "get_value_and_reset"],
    "MultiCountMetric": ["scope", "get_value_and_reset"],
    "ReducedMetric": ["update", "get_value_and_reset"],
    "CombinedMetric": ["update", "get_value_and_reset"],
    "AssignableMetric": ["set_value", "get_value_and_reset"],
    "IReducer": ["init", "reduce", "extract_result"],
    "MeanReducer": ["init", "reduce", "extract_result"],
    "ICombiner": ["identity", "combine"],
    "IMetricsConsumer": ["prepare", "handle_data_points", "cleanup"],
    "LoggingMetricsConsumer": ["prepare", "handle_data_points", "cleanup"],
    "TaskInfo": [],
    "DataPoint": [],
    # Windowed bolts
    "BaseWindowedBolt": ["with_window", "with_tumbling_window", "with_timestamp_field", "with_lag",
                         "with_watermark_interval", "with_late_tuple_stream", "prepare", "execute", "cleanup",
                         "declare_output_fields"],
    "Count": ["of"],
    "Duration": ["of", "seconds", "minutes"],
    "TupleWindow": ["get", "get_new", "get_expired", "get_start_timestamp", "get_end_timestamp"],
    # Stateful bolts
    "BaseStatefulBolt": ["init_state", "prepare", "execute", "cleanup", "declare_output_fields", "pre_prepare",
                         "pre_commit", "pre_rollback"],
    "BaseStatefulWindowedBolt": ["init_state", "with_window", "prepare", "execute", "cleanup", "pre_prepare",
                                 "pre_commit", "pre_rollback"],
    "KeyValueState": ["put", "get", "delete"],
}

TESTING_API = {
    "complete_topology": [],
    "read_tuples": [],
    "MockedSources": ["add_mock_data"],
    "FeederSpout": ["feed", "set_ack_fail_delegate"],
    "AckFailMapTracker": ["is_acked", "is_failed"],
    "AckTracker": ["get_num_acks"],
}

CONFIG_KEYS = {
    "TOPOLOGY_WORKERS": "topology.workers",
    "TOPOLOGY_ACKER_EXECUTORS": "topology.acker.executors",
    "TOPOLOGY_MAX_SPOUT_PENDING": "topology.max.spout.pending",
    "TOPOLOGY_MESSAGE_TIMEOUT_SECS": "topology.message.timeout.secs",
    "TOPOLOGY_DEBUG": "topology.debug",
    "TOPOLOGY_TICK_TUPLE_FREQ_SECS": "topology.tick.tuple.freq.secs",
    "TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS": "topology.enable.message.timeouts",
    "TOPOLOGY_MAX_TASK_PARALLELISM": "topology.max.task.parallelism",
    "TOPOLOGY_STATE_CHECKPOINT_INTERVAL": "topology.state.checkpoint.interval.ms",
    "TOPOLOGY_STATE_PROVIDER": "topology.state.provider",
}


def cases():
    for module, api in ((squall, SQUALL_API), (squall.testing, TESTING_API)):
        for name, members in api.items():
            yield pytest.param(module, name, members, id=f"{module.__name__}.{name}")


@pytest.mark.parametrize("module, name, members", list(cases()))
def test_name_is_exported_documented_and_has_its_members(module, name, members):
    obj = getattr(module, name)

    assert name in module.__all__
    assert inspect.getdoc(obj), f"{module.__name__}.{name} has no docstring"
    for member in members:
        attr = getattr(obj, member, None)
        assert attr is not None, f"{name}.{member} is missing"
        if callable(attr) and not member.startswith("__"):
            assert inspect.getdoc(attr), f"{name}.{member} has no docstring"


def test_default_stream_is_default():
    assert squall.DEFAULT_STREAM == "default"


def test_config_constants_are_storms_keys():
    for constant, key in CONFIG_KEYS.items():
        assert getattr(squall.Config, constant) == key


def test_the_exceptions_form_the_documented_hierarchy():
    for name in ("InvalidTopologyException", "AlreadyAliveException", "NotAliveException"):
        assert issubclass(getattr(squall, name), squall.SquallError)
    assert issubclass(squall.ReportedFailedException, squall.FailedException)


@pytest.mark.parametrize("module", [squall, squall.testing])
def test_everything_in_all_is_importable(module):
    for name in module.__all__:
        assert hasattr(module, name), name


def test_default_open_and_prepare_store_their_arguments():
    spout, bolt, basic = squall.Spout(), squall.Bolt(), squall.BasicBolt()
    spout.open({"k": 1}, "ctx", "collector")
    bolt.prepare({"k": 2}, "ctx", "collector")
    basic.prepare({"k": 3}, "ctx")

    assert (spout.conf, spout.context, spout.collector) == ({"k": 1}, "ctx", "collector")
    assert (bolt.conf, bolt.context, bolt.collector) == ({"k": 2}, "ctx", "collector")
    assert (basic.conf, basic.context) == ({"k": 3}, "ctx")
    assert spout.get_component_configuration() is None
