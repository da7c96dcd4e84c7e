"""Configuration layers and validation (`squall._config`)."""

from __future__ import annotations

import functools

import re

import pytest

from squall import Config, InvalidTopologyException, SquallError
from squall._config import (
    cluster_conf,
    component_conf,
    default_conf,
    find_conf_file,
    is_daemon_key,
    read_conf_file,
    topology_conf,
)


def test_defaults_are_storms():
    d = default_conf()

    assert d[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 30
    assert d[Config.TOPOLOGY_MAX_SPOUT_PENDING] is None
    assert d[Config.TOPOLOGY_ACKER_EXECUTORS] is None
    assert d[Config.TOPOLOGY_WORKERS] == 1
    assert d[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] is True
    assert d[Config.TOPOLOGY_DEBUG] is False
    assert d[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] is None
    assert d["nimbus.task.timeout.secs"] == 30


def test_default_conf_is_a_fresh_copy():
    default_conf()["topology.workers"] = 99

    assert default_conf()["topology.workers"] == 1


def test_config_setters_write_storms_keys():
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(0)
    conf.set_max_spout_pending(10)
    conf.set_message_timeout_secs(5)
    conf.set_debug(True)
    conf.set_max_task_parallelism(4)

    assert conf == {"topology.workers": 2, "topology.acker.executors": 0, "topology.max.spout.pending": 10,
                    "topology.message.timeout.secs": 5, "topology.debug": True,
                    "topology.max.task.parallelism": 4}
    assert isinstance(conf, dict)


def test_register_serialization_records_the_class_and_serializer():
    conf = Config()
    conf.register_serialization(Config)
    conf.register_serialization(InvalidTopologyException, Config)

    assert conf[Config.TOPOLOGY_KRYO_REGISTER] == {
        "squall._config:Config": None,
        "squall._errors:InvalidTopologyException": "squall._config:Config",
    }


def test_cluster_conf_layers_squall_yaml_and_daemon_conf_over_the_defaults(tmp_path):
    f = tmp_path / "squall.yaml"
    f.write_text("topology.message.timeout.secs: 5\nnimbus.task.timeout.secs: 7\ncustom: yaml\n")

    conf = cluster_conf({"custom": "daemon"}, conf_file=f)

    assert conf["topology.message.timeout.secs"] == 5
    assert conf["nimbus.task.timeout.secs"] == 7
    assert conf["custom"] == "daemon"
    assert conf["topology.workers"] == 1


def test_squall_yaml_is_found_in_squall_conf_dir(tmp_path, monkeypatch):
    (tmp_path / "squall.yaml").write_text("custom: found\n")
    monkeypatch.setenv("SQUALL_CONF_DIR", str(tmp_path))

    assert find_conf_file() == tmp_path / "squall.yaml"
    assert cluster_conf()["custom"] == "found"


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "expected a mapping"),
    ("a: [unclosed\n", "not valid YAML"),
])
def test_a_bad_squall_yaml_is_named_in_the_error(tmp_path, text, message):
    f = tmp_path / "squall.yaml"
    f.write_text(text)

    with pytest.raises(InvalidTopologyException, match=message) as e:
        read_conf_file(f)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("text, where", [
    ('db.password: "hunter2-secret\nx: 1\n', r"quoted scalar at line 1, column 1\d"),
    ("db.password: hunter2-secret: x\n", r"line 1, column 2\d: mapping values are not allowed here"),
    ("redis.url: redis://:hunter2-secret@h:6379/0: x\n", r"line 1, column 4\d"),
])
def test_a_squall_yaml_error_says_where_but_never_quotes_the_line_a_secret_may_be_on(tmp_path, text, where):
    f = tmp_path / "squall.yaml"
    f.write_text(text)
    with pytest.raises(InvalidTopologyException) as e:
        read_conf_file(f)
    assert f"{f}: not valid YAML: " in str(e.value) and re.search(where, str(e.value))  # (PyYAML's C and Python scanners count a column apart)
    assert "hunter2" not in str(e.value) and e.value.__cause__ is None and e.value.__suppress_context__


def test_topology_conf_overlays_the_cluster_and_rejects_daemon_keys():
    cluster = default_conf()

    merged = topology_conf(cluster, {"topology.workers": 3, "custom": 1})
    assert merged["topology.workers"] == 3 and merged["custom"] == 1
    with pytest.raises(InvalidTopologyException, match="'nimbus.task.timeout.secs'"):
        topology_conf(cluster, {"nimbus.task.timeout.secs": 1})
    with pytest.raises(InvalidTopologyException, match="'supervisor.slots.ports'"):
        topology_conf(cluster, {"supervisor.slots.ports": [1]})


@pytest.mark.parametrize("key", ["storm.local.dir", "nimbus.seeds", "supervisor.slots.ports", "worker.heap.memory.mb",
                                 "ui.port", "drpc.port", "logviewer.port", "pacemaker.port"])
def test_daemon_keys_are_recognised(key):
    assert is_daemon_key(key)


@pytest.mark.parametrize("key", ["topology.workers", "custom", "my.nimbus.thing"])
def test_topology_and_custom_keys_are_not_daemon_keys(key):
    assert not is_daemon_key(key)


def test_component_conf_precedence_cluster_then_component_then_topology():
    cluster = dict(default_conf(), **{"custom.a": "cluster", "custom.b": "cluster", "custom.c": "cluster"})
    own = {"custom.b": "component", "custom.c": "component"}
    given = {"custom.c": "topology"}

    conf = component_conf(cluster, own, given, "bolt")

    assert (conf["custom.a"], conf["custom.b"], conf["custom.c"]) == ("cluster", "component", "topology")


def test_component_conf_keeps_only_whitelisted_topology_keys_of_the_component():
    own = {
        "topology.max.spout.pending": 3, "topology.tick.tuple.freq.secs": 2, "topology.debug": True,
        "topology.max.task.parallelism": 4, "topology.bolts.window.length.count": 10,
        "topology.message.timeout.secs": 99, "topology.workers": 7, "topology.acker.executors": 0,
        "nimbus.task.timeout.secs": 1, "fake.config": 123,
    }

    conf = component_conf(default_conf(), own, {}, "bolt")

    for kept in ("topology.max.spout.pending", "topology.tick.tuple.freq.secs", "topology.debug",
                 "topology.max.task.parallelism", "topology.bolts.window.length.count", "fake.config"):
        assert conf[kept] == own[kept], kept
    assert conf["topology.message.timeout.secs"] == 30
    assert conf["topology.workers"] == 1
    assert conf["topology.acker.executors"] is None
    assert conf["nimbus.task.timeout.secs"] == 30


@pytest.mark.parametrize("key, value, what", [
    ("topology.workers", 0, "a positive integer"),
    ("topology.workers", "2", "a positive integer"),
    ("topology.acker.executors", -1, "a non-negative integer"),
    ("topology.max.spout.pending", 0, 'a positive integer, "auto" (the tuner) or null'),
    ("topology.message.timeout.secs", 0, "a positive number of seconds"),
    ("topology.enable.message.timeouts", "yes", "true or false"),
    ("topology.debug", 1, "true or false"),
    ("topology.tick.tuple.freq.secs", -1, "a positive number"),
    ("topology.max.task.parallelism", 1.5, "a positive integer"),
    # the values that crash-looped workers before they were checked at submit
    ("topology.spout.wait.progressive.max.sleep.millis", "z", "a non-negative number of milliseconds"),
    ("topology.worker.gc.thresholds", "abc", "a list of 1 to 3 integers from 0 to 2147483647"),
    ("topology.worker.gc.thresholds", [1, 2, 3, 4], "a list of 1 to 3 integers from 0 to 2147483647"),
    ("topology.worker.gc.thresholds", [100000, 2**31], "a list of 1 to 3 integers from 0 to 2147483647"),
    ("topology.stats.sample.rate", 2, "a number above 0 and at most 1"),
    ("topology.executor.blocking.warn.millis", float("nan"), "a positive number of milliseconds"),
    # infinite (YAML's .inf, -c key=Infinity) or past a float's range: an infinite message
    # timeout crash-looped every worker (OverflowError in the spout's pending limit), and 10**400
    # raised OverflowError from the check itself
    ("topology.message.timeout.secs", float("inf"), "a positive number of seconds"),
    pytest.param("topology.message.timeout.secs", 10**400, "a positive number of seconds", id="int-past-float"),
    ("topology.tick.tuple.freq.secs", float("inf"), "a positive number of seconds or null"),
    ("topology.batch.flush.interval.millis", float("inf"), "a non-negative number of milliseconds"),
    ("topology.spout.wait.progressive.level3.sleep.millis", float("inf"), "a positive number"),
    ("topology.state.checkpoint.interval.ms", float("inf"), "a positive number of milliseconds"),
    ("topology.max.replication.wait.time.sec", float("inf"), "a non-negative number of seconds, or -1"),
    ("topology.localityaware.higher.bound", float("-inf"), "a number from 0 to 1"),
    # refused by the worker only, as "cannot start: TypeError: 'int' object is not iterable"
    ("topology.kryo.register", -3, "a map of class names to serializer names (or null), or a list"),
    ("topology.kryo.register", ["app:Point", 7], "a map of class names to serializer names"),
])
def test_a_bad_value_is_rejected_naming_key_value_and_place(key, value, what):
    with pytest.raises(InvalidTopologyException) as e:
        topology_conf(default_conf(), {key: value})
    message = str(e.value)
    assert message.startswith("topology configuration: ")
    assert repr(key) in message and what in message and repr(value) in message


def test_a_bad_value_in_a_component_conf_names_the_component():
    with pytest.raises(InvalidTopologyException, match=r"component \[counter\].*topology.max.spout.pending"):
        component_conf(default_conf(), {"topology.max.spout.pending": -3}, {}, "counter")


@pytest.mark.parametrize("key, value", [
    ("topology.acker.executors", None), ("topology.max.spout.pending", None),
    ("topology.message.timeout.secs", 0.5), ("topology.tick.tuple.freq.secs", None),
])
def test_nullable_and_fractional_values_are_accepted(key, value):
    assert topology_conf(default_conf(), {key: value})[key] == value


def test_every_default_key_squall_reads_has_a_validator_and_the_defaults_pass():
    from squall._config import _VALIDATORS, validate
    defaults = default_conf()
    assert set(defaults) - set(_VALIDATORS) == set()
    validate(defaults, where="defaults")


@pytest.mark.parametrize("value", [
    None, {"app:Point": None, "app:Line": "app:LineSerializer"},  # squall's, Config.register_serialization's
    ["app:Point", {"app:Line": "app:LineSerializer"}],  # Storm's list
    # a map of several in Storm's list: Storm and the worker take it (refused at submit before)
    [{"app:Line": "app:LineSerializer", "app:Area": "app:AreaSerializer"}],
])
def test_the_shapes_of_kryo_registrations_are_accepted(value):
    """Whether the names resolve is for the worker to say (the classes may be in the user's modules)."""
    assert topology_conf(default_conf(), {"topology.kryo.register": value})["topology.kryo.register"] == value


@pytest.mark.parametrize("key, value, what", [
    ("nimbus.thrift.port", "abc", "a port number (0 to 65535; 0: any free port)"),
    ("nimbus.thrift.port", 70000, "a port number"),
    ("supervisor.slots.ports", "x", "a list of port numbers (1 to 65535)"),
    ("supervisor.slots.ports", [6700, 0], "a list of port numbers"),
    ("nimbus.task.timeout.secs", "soon", "a positive number of seconds"),
    ("squall.log.max.bytes", -1, "a non-negative integer"),
    ("isolation.scheduler.machines", {"t": 0}, "a mapping of topology names to numbers of machines"),
    ("nimbus.task.timeout.secs", float("inf"), "a positive number of seconds"),
])
def test_a_bad_cluster_value_is_rejected_naming_the_key(key, value, what):
    with pytest.raises(InvalidTopologyException) as e:
        cluster_conf({key: value})
    assert str(e.value).startswith(f"cluster configuration: {key!r} must be {what}")
    assert str(e.value).endswith(f"got {value!r}")


# --- squall.secret: a string too long to guess, and never shown ------------------------------------------
@pytest.mark.parametrize("value, described", [
    (123456, "a value of type int"),  # squall.secret: 123456 in squall.yaml, or -c squall.secret=123456
    ("", "a string of 0 characters"),
    ("guessable", "a string of 9 characters"),
    (" " * 20, "a string of 20 characters"),
    (b"\0" * 8, "8 bytes"),
    (["a-secret-long-enough-in-a-list"], "a value of type list"),
])
def test_a_secret_that_is_not_a_long_enough_string_is_refused_naming_the_key_never_the_value(value, described):
    from squall._secret import load_or_create_secret
    with pytest.raises(InvalidTopologyException) as e:
        cluster_conf({"squall.secret": value})
    message = str(e.value)
    assert message.startswith("cluster configuration: 'squall.secret' must be a string of at least 16 characters")
    assert message.endswith(f"got {described}")
    with pytest.raises(SquallError) as e:  # a daemon handed a configuration nothing validated
        load_or_create_secret({"squall.secret": value})
    assert "'squall.secret'" in str(e.value) and str(e.value).endswith(f"got {described}")
    if value not in ("", " " * 20):
        assert str(value) not in message and repr(value) not in message and str(value) not in str(e.value)


def test_a_long_enough_secret_is_the_clusters():
    from squall._secret import load_or_create_secret
    assert load_or_create_secret(cluster_conf({"squall.secret": "0123456789abcdef"})) == b"0123456789abcdef"
    assert load_or_create_secret({"squall.secret": b"0123456789abcdef"}) == b"0123456789abcdef"


# --- one rule per key, wherever it is read -----------------------------------------------------------------
@pytest.mark.parametrize("value", [1, 4095])
def test_the_control_channels_frame_limit_has_one_rule(value):
    from squall._wire import rpc_settings
    key = "nimbus.thrift.max_buffer_size"
    with pytest.raises(InvalidTopologyException, match=f"{key!r} must be a number of bytes of at least 4096"):
        cluster_conf({key: value})
    with pytest.raises(SquallError, match=f"{key!r} must be a number of bytes of at least 4096"):
        rpc_settings({key: value})
    assert rpc_settings(cluster_conf({key: 4096})).max_frame == 4096


def test_the_data_ports_message_limit_has_one_rule():
    from squall.worker.process import _transport_options
    key = "squall.transport.max.message.bytes"
    for value in (0, 1023, True, "big"):
        with pytest.raises(InvalidTopologyException, match=f"{key!r} must be a number of bytes of at least 1024"):
            cluster_conf({key: value})
        with pytest.raises(SquallError, match=f"{key!r} must be a number of bytes of at least 1024"):
            _transport_options({key: value})  # the worker's own reading of its configuration file
    assert _transport_options(cluster_conf({key: 1024}))["max_message_bytes"] == 1024


@pytest.mark.parametrize("conf, message", [
    ({"storm.messaging.netty.min_wait_ms": 0}, "'storm.messaging.netty.min_wait_ms' must be a positive number of milli"),
    ({"storm.messaging.netty.max_wait_ms": "1s"}, "'storm.messaging.netty.max_wait_ms' must be a positive number"),
    ({"storm.messaging.netty.min_wait_ms": 2000},
     "'storm.messaging.netty.min_wait_ms' (2000) must not be above 'storm.messaging.netty.max_wait_ms' (1000)"),
])
def test_a_bad_reconnect_wait_is_refused_naming_it(conf, message):
    """The TCP wire's reconnect backoff (`squall.worker.reconnect`): Storm's netty keys, checked
    where the cluster's configuration is read."""
    with pytest.raises(InvalidTopologyException) as e:
        cluster_conf(conf)
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("value", [True, False, "auto", " TRUE ", "False", None, "yes", 1, 0, "", "on"])
def test_the_encryption_setting_has_one_rule(value):
    from squall._encryption import encryption_setting
    try:
        parsed = encryption_setting({"squall.encryption": value})
    except SquallError:
        parsed = None
    try:
        cluster_conf({"squall.encryption": value})
        accepted = True
    except InvalidTopologyException:
        accepted = False
    assert accepted == (parsed is not None)


def test_max_spout_pending_takes_auto_and_the_tuner_keys():
    conf = topology_conf(default_conf(), {"topology.max.spout.pending": "auto",
                                          "topology.max.spout.pending.auto.min": 8,
                                          "topology.max.spout.pending.auto.max": 2000,
                                          "topology.max.spout.pending.auto.interval.secs": 0.5})
    assert conf["topology.max.spout.pending"] == "auto"
    # a spout may ask for the tuner, and tune it, in its own configuration (Storm's whitelist)
    mine = component_conf(default_conf(), {"topology.max.spout.pending": "auto",
                                           "topology.max.spout.pending.auto.max": 300}, {}, "spout")
    assert mine["topology.max.spout.pending"] == "auto" and mine["topology.max.spout.pending.auto.max"] == 300


@pytest.mark.parametrize("conf, message", [
    ({"topology.max.spout.pending": "fast"},
     "'topology.max.spout.pending' must be a positive integer, \"auto\" (the tuner) or null, got 'fast'"),
    ({"topology.max.spout.pending": "AUTO"}, "'topology.max.spout.pending' must be"),
    ({"topology.max.spout.pending.auto.min": 0}, "'topology.max.spout.pending.auto.min' must be a positive integer"),
    ({"topology.max.spout.pending.auto.interval.secs": "1s"},
     "'topology.max.spout.pending.auto.interval.secs' must be a positive number of seconds"),
    ({"topology.max.spout.pending.auto.min": 500, "topology.max.spout.pending.auto.max": 100},
     "'topology.max.spout.pending.auto.min' (500) must not be above 'topology.max.spout.pending.auto.max' (100)"),
])
def test_a_bad_tuner_setting_is_refused_naming_it(conf, message):
    with pytest.raises(InvalidTopologyException) as e:
        topology_conf(default_conf(), conf)
    assert str(e.value).startswith("topology configuration: ") and message in str(e.value)


# --- one source for configuration (issue 35, item 4) ----------------------------------------------

def test_every_key_of_the_defaults_has_exactly_one_constant_and_every_constant_a_default():
    import collections

    from squall._config import KEYS_WITHOUT_DEFAULT, config_keys

    constants = config_keys()
    by_key = collections.Counter(constants.values())
    defaults = default_conf()

    assert [key for key, n in by_key.items() if n > 1] == []
    assert sorted(set(defaults) - set(by_key)) == []
    assert sorted(set(by_key) - set(defaults) - KEYS_WITHOUT_DEFAULT) == []
    assert sorted(KEYS_WITHOUT_DEFAULT & set(defaults)) == []  # documented as without one, yet it has one
    assert constants["TOPOLOGY_WORKERS"] == "topology.workers"  # Storm's names, API.md's kept
    assert constants["TOPOLOGY_STATE_CHECKPOINT_INTERVAL"] == "topology.state.checkpoint.interval.ms"


def test_every_key_squall_validates_or_whitelists_is_a_constant():
    from squall._config import _VALIDATORS, COMPONENT_KEYS, TOPOLOGY_VISIBLE_DAEMON_KEYS, config_keys

    named = set(config_keys().values())

    assert sorted((set(_VALIDATORS) | COMPONENT_KEYS | TOPOLOGY_VISIBLE_DAEMON_KEYS) - named) == []


def test_conf_value_falls_back_to_the_defaults_file_when_a_key_is_missing_or_null():
    from squall._config import conf_value, default_of

    assert conf_value({}, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) == 30
    assert conf_value({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: None}, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) == 30
    assert conf_value({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 7}, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) == 7
    assert conf_value({}, Config.TOPOLOGY_ACKER_EXECUTORS) is None  # its null means one per worker
    # a null the key's rule allows means something of its own (keep Python's thresholds)
    assert conf_value({Config.TOPOLOGY_WORKER_GC_THRESHOLDS: None}, Config.TOPOLOGY_WORKER_GC_THRESHOLDS) is None
    assert conf_value({}, Config.TOPOLOGY_WORKER_GC_THRESHOLDS) == [100000, 50, 100]
    assert default_of(Config.UI_PORT) == 8080
    with pytest.raises(KeyError, match="topology.bolts.window.length.count"):
        default_of(Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT)


@functools.cache
def _squall_trees():
    """Every module of ``squall/`` but ``_config.py``, parsed once for the scans below: its path
    relative to ``squall/`` -> its ast."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent / "squall"
    return {p.relative_to(root).as_posix(): ast.parse(p.read_text(), str(p))
            for p in sorted(root.rglob("*.py")) if p.name != "_config.py"}


def _key_readers(trees):
    """For each source file, a function giving the key an expression names: ``Config.X``, the
    key's string, or a module-level alias of a constant (``BUCKET_KEY = Config.X``, its own or
    one imported, when its name is not used for two keys); else None."""
    import ast
    import collections

    from squall._config import config_keys

    keys = config_keys()
    key_strings = set(keys.values())
    own: dict = {name: {} for name in trees}
    everywhere = collections.defaultdict(set)
    for name, tree in trees.items():
        for node in tree.body:
            value = getattr(node, "value", None)
            if isinstance(node, ast.Assign) and isinstance(value, ast.Attribute) \
                    and isinstance(value.value, ast.Name) and value.value.id == "Config" and value.attr in keys:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        own[name][target.id] = keys[value.attr]
                        everywhere[target.id].add(keys[value.attr])
    unique = {alias: next(iter(ks)) for alias, ks in everywhere.items() if len(ks) == 1}

    def reader(name):
        names = {**unique, **own[name]}

        def key_of(node):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Config":
                return keys.get(node.attr)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in key_strings:
                return node.value
            if isinstance(node, ast.Name):
                return names.get(node.id)
            return None
        return key_of
    return reader


def test_no_configuration_key_is_spelled_outside_config():
    import ast

    from squall._config import config_keys

    keys = set(config_keys().values())
    found = [f"squall/{name}:{node.lineno}: {node.value!r}"
             for name, tree in _squall_trees().items()
             for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in keys]

    assert found == [], ("configuration keys spelled as strings; name each by its constant, Config.<NAME> "
                         "(squall/_config.py), as the other modules do:\n" + "\n".join(found))


def _repeated_default(node, module_literals):
    """The default written at a read site, or None: a literal, arithmetic of literals
    (``16 << 20``), a ``DEFAULT_*`` name, or a name the module binds to a literal
    (``TCP_WIRE = "tcp"`` given as ``setting(conf, WIRE_KEY, TCP_WIRE)``)."""
    import ast

    if isinstance(node, ast.Name):
        if node.id.startswith("DEFAULT"):
            return node.id
        return module_literals.get(node.id)
    if isinstance(node, ast.BinOp):
        left = _repeated_default(node.left, module_literals)
        return left if left is not None and _repeated_default(node.right, module_literals) is not None else None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _module_literals(tree):
    """The module-level names ``tree`` binds once to a literal (``TCP_WIRE = "tcp"``)."""
    import ast
    import collections

    bound = collections.defaultdict(list)
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Name):
                    try:
                        bound[target.id].append(ast.literal_eval(node.value))
                    except ValueError:
                        bound[target.id].append(None)
    return {name: values[0] for name, values in bound.items() if len(values) == 1 and values[0] is not None}


def _default_reads(tree):
    """(key expression, default expression, line) of each read in ``tree`` that gives a default:
    ``m.get(key, d)``, ``m.get(key) or d``, and ``setting(conf, key, d)`` (``default=d`` too)."""
    import ast

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and len(node.args) == 2:
            yield node.args[0], node.args[1], node.lineno
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = node.values[0]
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and first.func.attr == "get" \
                    and len(first.args) == 1:
                yield first.args[0], node.values[1], node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setting" \
                and len(node.args) >= 2:
            given = node.args[2] if len(node.args) >= 3 else next(
                (kw.value for kw in node.keywords if kw.arg == "default"), None)
            if given is not None:
                yield node.args[1], given, node.lineno


def test_no_default_is_repeated_where_a_key_is_read():
    """``conf.get(KEY, 30)``, ``conf.get(KEY) or 30`` and ``setting(conf, KEY, 30)`` for a key whose
    default is in defaults.yaml: read it with conf_value (or setting without a default) instead."""
    import ast

    defaults = default_conf()
    trees = _squall_trees()
    reader = _key_readers(trees)
    found = []
    for name, tree in trees.items():
        key_of, literals = reader(name), _module_literals(tree)
        for key_node, default_node, line in _default_reads(tree):
            key = key_of(key_node)
            if key is not None and defaults.get(key) is not None \
                    and _repeated_default(default_node, literals) is not None:
                found.append(f"squall/{name}:{line}: {key} read with its default {ast.unparse(default_node)}")

    assert found == [], ("a default written again where its key is read; read the key with "
                         "conf_value(conf, Config.<NAME>), or setting(conf, Config.<NAME>) without a default, "
                         "so that squall/defaults.yaml stays the one place it lives:\n" + "\n".join(found))


def test_the_default_scan_sees_each_way_of_repeating_a_default():
    """The scan above finds what it is meant to find (so its pass means something)."""
    import ast

    tree = ast.parse(
        "TCP_WIRE = 'tcp'\n"
        "a = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30)\n"
        "b = conf.get('topology.message.timeout.secs') or 30\n"
        "c = setting(conf, Config.SQUALL_TRANSPORT_WIRE, TCP_WIRE)\n"
        "d = setting(conf, Config.UI_PORT, default=8080)\n"
        "e = setting(conf, Config.FILESPOUT, DEFAULT_MAX_RECORD_BYTES, 'where')\n"
        "f = conf.get(Config.NIMBUS_THRIFT_MAX_BUFFER_SIZE, 64 << 20)\n"
        "ok1 = conf_value(conf, Config.UI_PORT)\n"
        "ok2 = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)\n"
        "ok3 = setting(conf, Config.UI_PORT)\n"
        "ok4 = conf.get(Config.TOPOLOGY_NAME, computed())\n")
    literals = _module_literals(tree)
    repeated = [line for _, default, line in _default_reads(tree) if _repeated_default(default, literals) is not None]

    assert repeated == [2, 3, 4, 5, 6, 7]


def test_storms_jvm_worker_keys_are_warned_of_at_submission_not_dropped_silently():
    """A Storm topology's topology.environment reached no worker, and nothing said so."""
    from squall._config import submit_warnings
    from squall import TopologyBuilder
    from squall.testing import TestWordSpout
    b = TopologyBuilder()
    b.set_spout("words", TestWordSpout())
    warnings = submit_warnings({"topology.environment": {"FOO": "bar"}, "topology.worker.childopts": "-Xmx2g",
                                "topology.workers": 2}, b.create_topology(), "t")
    assert warnings == [
        "t: 'topology.environment' is not applied (squall's workers inherit their supervisor's environment)",
        "t: 'topology.worker.childopts' is not applied (JVM options: squall's workers are Python processes)"]


def test_a_storm_topologys_worker_childopts_runs_with_a_warning_instead_of_being_refused(caplog):
    """A Storm topology's Config sets worker.childopts for its own workers (``conf.put(
    Config.WORKER_CHILDOPTS, "-Xmx2g")``; streamparse's ``-o worker.childopts=...``), which Storm
    takes. squall refused the submission ("may not set daemon setting 'worker.childopts'; set it
    in the cluster's squall.yaml instead", where it does nothing either), though docs/migrating.md
    says such keys are warned of. Now it runs, every tuple through, and the submission says the
    key is not applied."""
    from squall import Fields, TopologyBuilder
    from squall.testing import FeederSpout, complete_topology, read_tuples

    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(Fields("word")))
    words = [[f"w{i}"] for i in range(50)]
    with caplog.at_level("WARNING", logger="squall.master"):
        result = complete_topology(None, b.create_topology(), {"words": words},
                                   storm_conf={"worker.childopts": "-Xmx2g", "topology.workers": 1})
    assert read_tuples(result, "words") == words
    warned = (f"{result.topology_name}: 'worker.childopts' is not applied (JVM options: squall's workers are "
              f"Python processes)")
    assert [r.getMessage() for r in caplog.records if "childopts" in r.getMessage()] == [warned]


def test_other_daemon_keys_are_still_refused_in_a_topologys_configuration():
    """Only Storm's JVM keys that squall warns of are let through; a daemon key that squall
    uses stays the cluster's, refused in a topology's configuration, naming it."""
    from squall._config import topology_conf
    with pytest.raises(InvalidTopologyException, match=r"may not set daemon setting 'nimbus.host'"):
        topology_conf({}, {"nimbus.host": "storm1"})
    assert "worker.childopts" not in topology_conf({}, {"worker.childopts": "-Xmx2g"})


def test_an_infinite_message_timeout_is_refused_at_submit_not_by_crash_looping_workers(tmp_path):
    """``topology.message.timeout.secs: .inf`` (YAML) or ``-c topology.message.timeout.secs=Infinity``
    passed the check; every worker then crashed (OverflowError in its spouts' pending limit) and
    was restarted over and over, and not one tuple flowed. The submission is refused instead,
    naming the key; so is the same value as a cluster default in squall.yaml."""
    from squall import LocalCluster, TopologyBuilder

    from .process.semantics_topology import ListSpout

    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a"]))
    with LocalCluster() as cluster:
        with pytest.raises(InvalidTopologyException,
                           match=r"^topology configuration: 'topology.message.timeout.secs' must be a positive "
                                 r"number of seconds, got inf$"):
            cluster.submit_topology("inf", {"topology.message.timeout.secs": float("inf")}, b.create_topology())
        assert cluster.get_cluster_info()["topologies"] == []
    (tmp_path / "squall.yaml").write_text("topology.message.timeout.secs: .inf\n")
    with pytest.raises(InvalidTopologyException, match="'topology.message.timeout.secs' must be a positive number"):
        cluster_conf(conf_file=tmp_path / "squall.yaml")


def test_a_components_own_task_cap_is_checked_even_where_the_topologys_overrides_it():
    """Both caps apply (squall.engine.plan.make_plan), so a bad own one is refused, naming the component."""
    with pytest.raises(InvalidTopologyException,
                       match=r"^configuration of component \[coord\]: 'topology.max.task.parallelism' must be"):
        component_conf(default_conf(), {"topology.max.task.parallelism": "1"},
                       {"topology.max.task.parallelism": 4}, "coord")


def test_a_components_lower_own_task_cap_is_not_reported_as_overridden():
    from squall._config import overridden_component_keys
    given = {"topology.max.task.parallelism": 4}
    assert overridden_component_keys(given, {"coord": {"topology.max.task.parallelism": 1}}, "t") == []
    [warning] = overridden_component_keys(given, {"wide": {"topology.max.task.parallelism": 8}}, "t")
    assert "component [wide] sets 'topology.max.task.parallelism' to 8" in warning


def test_a_component_key_that_is_not_a_string_is_refused_naming_the_component():
    """``add_configuration(5, 1)`` or a get_component_configuration of ``{5: 1}`` made
    submit_topology raise AttributeError ('int' object has no attribute 'startswith')."""
    from squall import LocalCluster, TopologyBuilder

    from .process.semantics_topology import ListSpout, RecordsConf

    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a"]))
    b.set_bolt("conf", RecordsConf()).shuffle_grouping("items").add_configuration(5, 1) \
        .add_configuration("topology.max.spout.pending", 3)
    with LocalCluster() as cluster:
        with pytest.raises(InvalidTopologyException,
                           match=r"^configuration of component \[conf\]: key 5 is not a string$"):
            cluster.submit_topology("intkey", {}, b.create_topology())


def test_a_typo_in_a_components_own_configuration_is_warned_of_at_submission(caplog):
    """``add_configuration("topology.tick.tuple.freq.sec", 1)`` (no "s") was dropped from the
    component's configuration (a ``topology.`` key off the whitelist) without a word: the bolt
    got no ticks and nothing said why. The submission warns, naming the component and the key
    meant, as it does for the topology's own keys."""
    import logging

    from squall import LocalCluster, TopologyBuilder

    from .process.semantics_topology import ListSpout, RecordsConf

    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a"]))
    b.set_bolt("ticking", RecordsConf()).shuffle_grouping("items") \
        .add_configuration("topology.tick.tuple.freq.sec", 1).add_configuration("my.setting", 1)
    with caplog.at_level(logging.WARNING, logger="squall.master"), LocalCluster() as cluster:
        cluster.submit_topology("typo", {}, b.create_topology(), initial_status="INACTIVE")
        cluster.kill_topology("typo", 0)
    said = [r.getMessage() for r in caplog.records if r.name == "squall.master" and "unknown" in r.getMessage()]
    assert said == ["typo: component [ticking] configuration key 'topology.tick.tuple.freq.sec' is unknown and "
                    "used by nothing; did you mean 'topology.tick.tuple.freq.secs'?"]


def test_the_overridden_component_key_warning_shows_no_credential(caplog):
    """A bolt's own ``topology.state.provider.config`` overridden by the topology's: the
    submission's warning (the master's log, LocalCluster's, what squall jar prints) showed both
    maps whole, passwords included. They are shown as a page shows them (redacted)."""
    import logging

    from squall import LocalCluster, TopologyBuilder

    from .process.semantics_topology import ListSpout, RecordsConf

    own = {"host": "redis-a", "password": "pw-own-5e1d", "url": "redis://:pw-url-77aa@redis-a:6379/0"}
    given = {"host": "redis-b", "password": "pw-given-0c3f"}
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a"]))
    b.set_bolt("stateful", RecordsConf()).shuffle_grouping("items") \
        .add_configuration(Config.TOPOLOGY_STATE_PROVIDER_CONFIG, own)
    with caplog.at_level(logging.WARNING, logger="squall.master"), LocalCluster() as cluster:
        cluster.submit_topology("creds", {Config.TOPOLOGY_STATE_PROVIDER_CONFIG: given}, b.create_topology(),
                                initial_status="INACTIVE")
        cluster.kill_topology("creds", 0)
    said = [r.getMessage() for r in caplog.records if "topology.state.provider.config" in r.getMessage()]
    assert len(said) == 1 and "redis-a" in said[0] and "redis-b" in said[0], said
    assert not any(pw in said[0] for pw in ("pw-own-5e1d", "pw-url-77aa", "pw-given-0c3f")), said


@pytest.mark.parametrize("line, key", [("1: x", "1"), ("on: 2", "True"), ("yes: 2", "True")])
def test_a_squall_yaml_key_that_is_not_a_string_is_refused_naming_the_file_not_at_each_submission(
        tmp_path, line, key):
    """``1: x`` or ``on: 2`` (YAML 1.1 reads ``on``/``yes`` as true) in squall.yaml was taken, and
    every submission then failed with AttributeError ('int' object has no attribute
    'startswith'). The file is refused when read, naming it and the key."""
    from squall import LocalCluster

    path = tmp_path / "squall.yaml"
    path.write_text(f"topology.workers: 1\n{line}\n")
    with pytest.raises(InvalidTopologyException,
                       match=rf"^{re.escape(str(path))}: configuration key {key} is not a string \(quote it in YAML\)$"):
        LocalCluster(conf_file=str(path))
    with pytest.raises(InvalidTopologyException, match=r"^cluster configuration: key 1 is not a string$"):
        cluster_conf({1: "x"})


def test_a_components_own_topology_key_that_is_no_config_key_passes_as_storms_does():
    """Storm's normalizedComponentConf drops only its Config keys off the whitelist; a custom key
    that happens to start with ``topology.`` (a library's own) reaches the component. squall
    dropped every ``topology.`` key off the whitelist, so such a setting vanished silently."""
    from squall import LocalCluster, TopologyBuilder

    from .process.semantics_topology import ListSpout, RecordsConf

    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a"]))
    b.set_bolt("conf", RecordsConf()).shuffle_grouping("items") \
        .add_configurations({"topology.mylib.batch.rows": 500, "topology.message.timeout.secs": 99})
    conf = component_conf(default_conf(), {"topology.mylib.batch.rows": 500, "topology.message.timeout.secs": 99},
                          {}, "conf")
    assert conf["topology.mylib.batch.rows"] == 500 and conf["topology.message.timeout.secs"] == 30
    with LocalCluster() as cluster:
        cluster.submit_topology("custom", {}, b.create_topology(), initial_status="INACTIVE")
        seen = cluster.master.topologies["custom"].plan.component_confs["conf"]  # what its tasks get
        cluster.kill_topology("custom", 0)
    assert seen["topology.mylib.batch.rows"] == 500 and seen["topology.message.timeout.secs"] == 30
