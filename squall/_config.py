"""Topology configuration: `Config`, the defaults, and how the layers merge.

Keys are Storm's. `Config` is a dict with the keys as constants and setters; the defaults live
in ``squall/defaults.yaml``. Layers are resolved once, at submit (`topology_conf` and
`component_conf`), and the resulting dicts are passed down; nothing reads a global.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ._encryption import parse_encryption
from ._errors import InvalidTopologyException
from ._redact import is_secret_key, redact

# Storm's whitelist (Executor.normalizedComponentConf): of the Config keys, a component may set
# only these; the others are dropped from its configuration. Custom keys always pass.
COMPONENT_KEYS = frozenset({
    "topology.debug",
    "topology.max.spout.pending",
    "topology.max.spout.pending.auto.min",
    "topology.max.spout.pending.auto.max",
    "topology.max.spout.pending.auto.interval.secs",
    "topology.max.task.parallelism",
    "topology.transactional.id",
    "topology.tick.tuple.freq.secs",
    "topology.sleep.spout.wait.strategy.time.ms",
    "topology.spout.wait.strategy",
    "topology.spout.wait.progressive.level1.count",
    "topology.spout.wait.progressive.level2.count",
    "topology.spout.wait.progressive.level3.sleep.millis",
    "topology.spout.wait.progressive.max.sleep.millis",
    "topology.state.provider",
    "topology.state.provider.config",
    "topology.executor.own.thread",
    "topology.executor.blocking.move",
    "topology.bolt.fail.fast",
    "topology.kryo.register",
    "topology.filespout.max.record.bytes",
})
_COMPONENT_KEY_PREFIXES = ("topology.bolts.window.", "topology.bolts.")

DAEMON_PREFIXES = ("storm.", "nimbus.", "supervisor.", "worker.", "ui.", "logviewer.", "drpc.",
                   "pacemaker.", "dev.zookeeper.", "transactional.zookeeper.", "isolation.", "squall.")

# The cluster settings a topology's configuration carries (Storm's does carry the cluster's, and
# user code reads these to know where it runs or to reach the master). Every other daemon key
# (squall.secret above all, and paths, ports and timeouts of the daemons) stays with the daemons:
# a worker reads its own from the configuration file its supervisor wrote for it.
TOPOLOGY_VISIBLE_DAEMON_KEYS = frozenset({"storm.cluster.mode", "nimbus.seeds", "nimbus.host", "nimbus.thrift.port"})


class Config(dict):
    """A topology's configuration: a dict of Storm's keys, with constants and setters.

    >>> conf = Config()
    >>> conf.set_num_workers(2)
    >>> conf[Config.TOPOLOGY_WORKERS]
    2
    """

    TOPOLOGY_WORKERS = "topology.workers"
    """Number of worker processes (in-process workers on LocalCluster)."""
    TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
    """Acker executors; None means one per worker, 0 turns acking off."""
    TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
    """Most spout tuples in flight per spout task (None: set automatically when acking is on;
    ``"auto"``: found by the tuner, within the two keys below)."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN = "topology.max.spout.pending.auto.min"
    """The tuner's lowest max spout pending per spout task (and where it starts)."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX = "topology.max.spout.pending.auto.max"
    """The tuner's highest max spout pending per spout task."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_INTERVAL_SECS = "topology.max.spout.pending.auto.interval.secs"
    """Seconds between two adjustments of the tuner (each measures one such interval)."""
    TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
    """Seconds before an incomplete spout tuple fails (it fails between T and 2T)."""
    TOPOLOGY_DEBUG = "topology.debug"
    """Log every emitted tuple with its component, task and stream."""
    TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
    """Send bolts a tick tuple every this many seconds."""
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
    """False disables message timeouts (spout tuples then wait for an ack or fail forever)."""
    TOPOLOGY_MAX_TASK_PARALLELISM = "topology.max.task.parallelism"
    """Cap on the number of tasks of every component."""
    TOPOLOGY_TASKS = "topology.tasks"
    """Number of tasks of a component (set per component with ``set_num_tasks``)."""
    TOPOLOGY_FALL_BACK_ON_PICKLE = "topology.fall.back.on.pickle"
    """Serialize unregistered types with pickle between workers (else it is an error)."""
    TOPOLOGY_KRYO_REGISTER = "topology.kryo.register"
    """Registered serializations: ``{"module:Class": "module:Serializer" or None}``."""
    TOPOLOGY_EXECUTOR_OWN_THREAD = "topology.executor.own.thread"
    """Run a component's executors on their own thread (for blocking user code)."""
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL = "topology.state.checkpoint.interval.ms"
    """Milliseconds between two checkpoints of a topology's stateful bolts (at least 100)."""
    TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
    """``"module:Class"`` of the `squall.state.StateProvider` of stateful bolts' states."""
    TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
    """The state provider's settings: a map, or a JSON object in a string (Storm's)."""
    TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS = "topology.trident.batch.emit.interval.millis"
    """Trident: the least milliseconds between two batches the master coordinator starts."""
    TOPOLOGY_SPOUT_MAX_BATCH_SIZE = "topology.spout.max.batch.size"
    """Trident: most tuples in one batch of a plain `Spout` (Storm's ``RichSpoutBatchExecutor``)."""
    TOPOLOGY_NAME = "topology.name"
    TOPOLOGY_METRICS_CONSUMER_REGISTER = "topology.metrics.consumer.register"
    """Metrics consumers: a list of maps (``class``, ``parallelism.hint``, ``argument``, ...)."""
    TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS = "topology.builtin.metrics.bucket.size.secs"
    """Seconds between two readings of the built-in metrics (``__ack-count``, ...)."""
    """The topology's name (set by squall at submit)."""

    def set_num_workers(self, n: int) -> None:
        """Set ``topology.workers``."""
        self[self.TOPOLOGY_WORKERS] = n

    def set_num_ackers(self, n: int) -> None:
        """Set ``topology.acker.executors`` (0 turns acking off)."""
        self[self.TOPOLOGY_ACKER_EXECUTORS] = n

    def set_max_spout_pending(self, n: int | str) -> None:
        """Set ``topology.max.spout.pending`` (a number per spout task, or ``"auto"``: the tuner)."""
        self[self.TOPOLOGY_MAX_SPOUT_PENDING] = n

    def set_message_timeout_secs(self, n: float) -> None:
        """Set ``topology.message.timeout.secs`` (squall accepts fractions of a second)."""
        self[self.TOPOLOGY_MESSAGE_TIMEOUT_SECS] = n

    def set_debug(self, flag: bool) -> None:
        """Set ``topology.debug``."""
        self[self.TOPOLOGY_DEBUG] = flag

    def set_max_task_parallelism(self, n: int) -> None:
        """Set ``topology.max.task.parallelism``."""
        self[self.TOPOLOGY_MAX_TASK_PARALLELISM] = n

    def set_num_event_loggers(self, n: int) -> None:
        """Set ``topology.eventlogger.executors``."""
        self["topology.eventlogger.executors"] = n

    def register_metrics_consumer(self, klass: type | str, argument: Any = None, parallelism_hint: int = 1) -> None:
        """Run metrics consumer ``klass`` (an `IMetricsConsumer` class, or its ``"module:Class"``
        name) with ``parallelism_hint`` tasks; its ``prepare`` gets ``argument``. Appends Storm's
        map to ``topology.metrics.consumer.register``."""
        name = klass if isinstance(klass, str) else _qualified(klass)
        entries = list(self.get(self.TOPOLOGY_METRICS_CONSUMER_REGISTER) or [])
        entries.append({"class": name, "parallelism.hint": parallelism_hint, "argument": argument})
        self[self.TOPOLOGY_METRICS_CONSUMER_REGISTER] = entries

    def register_serialization(self, cls: type, serializer_cls: type | None = None) -> None:
        """Register ``cls`` for serialization between workers, optionally with a serializer class.

        The serializer has ``serialize(obj) -> msgpack-able`` and ``deserialize(data) -> obj``.
        Without one, the class's ``__dict__`` (or ``__getstate__``) is sent.
        """
        reg = dict(self.get(self.TOPOLOGY_KRYO_REGISTER) or {})
        reg[_qualified(cls)] = _qualified(serializer_cls) if serializer_cls is not None else None
        self[self.TOPOLOGY_KRYO_REGISTER] = reg


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@cache
def _defaults() -> dict[str, Any]:
    text = resources.files("squall").joinpath("defaults.yaml").read_text()
    return yaml.safe_load(text)


def default_conf() -> dict[str, Any]:
    """A fresh copy of the built-in defaults."""
    return dict(_defaults())


@cache
def _known_keys() -> tuple[str, ...]:
    return tuple(sorted(set(_defaults()) | COMPONENT_KEYS | {
        v for k, v in vars(Config).items() if k.isupper() and isinstance(v, str)}))


def misspelling_of(key: str) -> str | None:
    """The known key that ``key`` is most likely a typo of, for a ``topology.`` or daemon key
    squall does not know (Storm passes unknown keys through silently, so a typo would do
    nothing); None for a known key, a custom one, or one like no known key."""
    known = _known_keys()
    if key in known or not (key.startswith("topology.") or is_daemon_key(key)):
        return None
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
    return close[0] if close else None


def misspellings(conf: Mapping[str, Any], topology: str) -> list[str]:
    """A warning for each key of a topology's ``conf`` that is likely a typo (`misspelling_of`)."""
    return [f"{topology}: topology configuration key {key!r} is unknown and used by nothing; did you mean {meant!r}?"
            for key in conf if isinstance(key, str) and (meant := misspelling_of(key)) is not None]


def read_conf_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``squall.yaml``; a clear error names the file if it is not a mapping."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise InvalidTopologyException(f"{p}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise InvalidTopologyException(f"{p}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def find_conf_file() -> Path | None:
    """The cluster's ``squall.yaml``: ``$SQUALL_CONF_DIR/squall.yaml``, else ``./squall.yaml``."""
    for d in (os.environ.get("SQUALL_CONF_DIR"), "."):
        if d:
            p = Path(d) / "squall.yaml"
            if p.is_file():
                return p
    return None


def cluster_conf(daemon_conf: Mapping[str, Any] | None = None, conf_file: str | os.PathLike | None = None,
                 ) -> dict[str, Any]:
    """Defaults overlaid with the cluster's ``squall.yaml`` and then ``daemon_conf``."""
    conf = default_conf()
    path = Path(conf_file) if conf_file is not None else find_conf_file()
    if path is not None:
        conf.update(read_conf_file(path))
    if daemon_conf:
        conf.update(daemon_conf)
    validate(conf, where="cluster configuration")
    return conf


def is_daemon_key(key: str) -> bool:
    """True for settings that belong to the cluster, not to a topology."""
    return key.startswith(DAEMON_PREFIXES)


def visible_to_topology(key: str) -> bool:
    """Whether a cluster setting may reach a topology (its plan, its components, ``info``):
    topology and custom keys, and `TOPOLOGY_VISIBLE_DAEMON_KEYS`; never ``squall.secret``."""
    return not is_daemon_key(key) or key in TOPOLOGY_VISIBLE_DAEMON_KEYS


def shown_configuration(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` as a page may show it, sorted: `squall._redact.redact` leaves out the keys that
    name a credential and masks credentials in values (a URL's password...), nested maps and
    lists included."""
    return dict(sorted(redact(conf).items()))


def topology_conf(cluster: Mapping[str, Any], conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """The cluster's conf, without what a topology may not see (`visible_to_topology`),
    overlaid with a topology's; daemon keys there are an error.

    Raises:
        InvalidTopologyException: a key is a daemon setting, or a value has the wrong type.
    """
    merged = {key: value for key, value in cluster.items() if visible_to_topology(key)}
    for key, value in (conf or {}).items():
        if not isinstance(key, str):
            raise InvalidTopologyException(f"topology configuration key {key!r} is not a string")
        if is_daemon_key(key):
            raise InvalidTopologyException(
                f"topology configuration may not set daemon setting {key!r}; "
                f"set it in the cluster's squall.yaml instead")
        merged[key] = value
    validate(merged, where="topology configuration")
    return merged


def component_conf(topology: Mapping[str, Any], component_own: Mapping[str, Any] | None,
                   topology_given: Mapping[str, Any] | None, component_id: str) -> dict[str, Any]:
    """The configuration one component's tasks see.

    Precedence, lowest first: the cluster's configuration (defaults and squall.yaml), the
    component's own configuration (only whitelisted ``topology.*`` keys and custom keys), then
    the keys the topology's `Config` set itself.
    """
    conf = dict(topology)
    for key, value in (component_own or {}).items():
        if key.startswith("topology.") and key not in COMPONENT_KEYS and not key.startswith(_COMPONENT_KEY_PREFIXES):
            continue  # Storm drops non-whitelisted Config keys from component configuration
        if is_daemon_key(key):
            continue
        conf[key] = value
    for key, value in (topology_given or {}).items():
        conf[key] = value
    validate(conf, where=f"configuration of component [{component_id}]")
    return conf


def _positive_int(v: Any) -> bool:
    return type(v) is int and v >= 1


def _non_negative_int(v: Any) -> bool:
    return type(v) is int and v >= 0


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def _positive_number(v: Any) -> bool:
    return _number(v) and v > 0


def _non_negative_number(v: Any) -> bool:
    return _number(v) and v >= 0


def _fraction(v: Any) -> bool:
    return _number(v) and 0 < v <= 1


def _unit_interval(v: Any) -> bool:
    return _number(v) and 0 <= v <= 1


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _string(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(_string(x) for x in v)


def _port(v: Any) -> bool:
    return type(v) is int and 0 <= v <= 65535


def _ports(v: Any) -> bool:
    return isinstance(v, list) and all(type(p) is int and 1 <= p <= 65535 for p in v)


def _gc_thresholds(v: Any) -> bool:
    return isinstance(v, list) and 1 <= len(v) <= 3 and all(_non_negative_int(x) for x in v)


def _encryption(v: Any) -> bool:
    return parse_encryption(v) is not None


SECRET_KEY = "squall.secret"
MIN_SECRET_CHARS = 16
"""The shortest secret accepted. Anyone who sees one handshake (its frames are not encrypted)
can test guesses of the secret offline against it, so it must be too long to guess: 16 random
characters are 64 bits as hex digits and more from a larger alphabet. The generated one is 64
hex digits."""


def _secret(v: Any) -> bool:
    return isinstance(v, (str, bytes)) and len(v.strip()) >= MIN_SECRET_CHARS


MIN_FRAME_BYTES = 4096
"""The least ``nimbus.thrift.max_buffer_size``: the frames a stranger may send before the
handshake (`squall.worker.rpc.PREAUTH_MAX_FRAME`) are this size, and a peer that holds the
secret may send at least as much."""


def _machines(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _positive_int(n) for k, n in v.items())


_BOOL = (_bool, "true or false", False)
_SECONDS = (_positive_number, "a positive number of seconds", False)
_MILLIS = (_positive_number, "a positive number of milliseconds", False)

_VALIDATORS: dict[str, tuple[Any, str, bool]] = {
    # key: (check, what it must be, None allowed); Storm's validators (ConfigValidation) for
    # every key of defaults.yaml that squall reads, so that a bad value is refused where it is
    # given (at submit, or when a daemon starts) and not by a worker that then cannot start
    "topology.workers": (_positive_int, "a positive integer", False),
    "topology.acker.executors": (_non_negative_int, "a non-negative integer or null", True),
    "topology.eventlogger.executors": (_non_negative_int, "a non-negative integer", False),
    "topology.max.spout.pending": (lambda v: _positive_int(v) or v == "auto",
                                   'a positive integer, "auto" (the tuner) or null', True),
    "topology.max.spout.pending.auto.min": (_positive_int, "a positive integer", False),
    "topology.max.spout.pending.auto.max": (_positive_int, "a positive integer", False),
    "topology.max.spout.pending.auto.interval.secs": _SECONDS,
    "topology.message.timeout.secs": _SECONDS,
    "topology.enable.message.timeouts": _BOOL,
    "topology.debug": _BOOL,
    "topology.tick.tuple.freq.secs": (_positive_number, "a positive number of seconds or null", True),
    "topology.max.task.parallelism": (_positive_int, "a positive integer or null", True),
    "topology.tasks": (_positive_int, "a positive integer or null", True),
    "topology.stats.sample.rate": (_fraction, "a number above 0 and at most 1", False),
    "topology.stats.enabled": _BOOL,
    "topology.fall.back.on.pickle": _BOOL,
    # its entries are checked one by one at submit (squall.metric._consumers.consumer_specs)
    "topology.metrics.consumer.register": (lambda v: isinstance(v, (list, tuple)),
                                           "a list of maps with a \"class\" each (docs/metrics.md)", True),
    "topology.builtin.metrics.bucket.size.secs": (_positive_int, "a positive whole number of seconds", False),
    "topology.skip.missing.kryo.registrations": _BOOL,
    "topology.disable.loadaware.messaging": _BOOL,
    "topology.localityaware.higher.bound": (_unit_interval, "a number from 0 to 1", False),
    "topology.localityaware.lower.bound": (_unit_interval, "a number from 0 to 1", False),
    "topology.executor.own.thread": _BOOL,
    "topology.executor.blocking.move": _BOOL,
    "topology.bolt.fail.fast": (_bool, "true, false or null", True),
    "topology.executor.receive.buffer.size": (_positive_int, "a positive integer", False),
    "topology.producer.batch.size": (_positive_int, "a positive integer", False),
    "topology.spout.recvq.skips": (_positive_int, "a positive integer", False),
    "topology.error.throttle.interval.secs": _SECONDS,
    "topology.max.error.report.per.interval": (_positive_int, "a positive integer", False),
    "topology.spout.wait.progressive.level1.count": (_non_negative_int, "a non-negative integer", False),
    "topology.spout.wait.progressive.level2.count": (_non_negative_int, "a non-negative integer", False),
    "topology.spout.wait.progressive.level3.sleep.millis": (_positive_number, "a positive number", False),
    "topology.spout.wait.progressive.max.sleep.millis": (_non_negative_number,
                                                         "a non-negative number of milliseconds", False),
    "topology.backpressure.check.millis": _MILLIS,
    "topology.executor.blocking.warn.millis": _MILLIS,
    "topology.worker.gc.thresholds": (_gc_thresholds, ("a list of 1 to 3 non-negative integers or null "
                                                       "(Python's gc.set_threshold)"), True),
    "topology.name": (_string, "a non-empty string", True),
    "topology.min.replication.count": (_positive_int, "a positive integer (masters)", False),
    "topology.max.replication.wait.time.sec": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                                               and (v >= 0 or v == -1),
                                               "a non-negative number of seconds, or -1 (wait as long as it takes)",
                                               False),
    "topology.state.checkpoint.interval.ms": _MILLIS,
    "topology.state.provider": (_string, "\"module:Class\" of a state provider (docs/state.md)", False),
    "topology.state.provider.config": (lambda v: isinstance(v, (str, dict)),
                                       "a map, or a JSON object in a string", True),
    "topology.filespout.max.record.bytes": (_positive_int, "a positive number of bytes", False),
    "topology.trident.batch.emit.interval.millis": (_non_negative_number, "a non-negative number of milliseconds",
                                                    False),
    "topology.spout.max.batch.size": (_positive_int, "a positive integer", False),
    # the cluster's (checked when a daemon or client reads its configuration, and at submit)
    "storm.local.dir": (_string, "a directory (a non-empty string)", False),
    "storm.local.hostname": (_string, "a host name or null", True),
    "storm.cluster.mode": (_string, "a non-empty string", False),
    "storm.scheduler": (_string, "\"module:Class\" of an IScheduler, or null", True),
    "nimbus.seeds": (_strings, "a list of host names (host, or host:port for a master on another port)", True),
    "storm.zookeeper.servers": (_strings, "a list of ZooKeeper host names (host, or host:port), or null (no Nimbus HA)",
                                True),
    "storm.zookeeper.port": (_port, "a port number", False),
    "storm.nimbus.retry.times": (_non_negative_int, "a non-negative integer", False),
    "storm.nimbus.retry.interval.millis": _MILLIS,
    "storm.zookeeper.root": (_string, "a ZooKeeper path, e.g. /storm", False),
    "storm.zookeeper.session.timeout": _MILLIS,
    "storm.zookeeper.connection.timeout": _MILLIS,
    "storm.zookeeper.retry.times": (_non_negative_int, "a non-negative integer", False),
    "storm.zookeeper.retry.interval": _MILLIS,
    "task.heartbeat.frequency.secs": _SECONDS,
    "nimbus.host": (_string, "a host name or address", False),
    "nimbus.thrift.port": (_port, "a port number (0 to 65535; 0: any free port)", False),
    "nimbus.task.timeout.secs": _SECONDS,
    "nimbus.supervisor.timeout.secs": _SECONDS,
    "nimbus.monitor.freq.secs": _SECONDS,
    "nimbus.task.launch.secs": _SECONDS,
    "supervisor.slots.ports": (_ports, "a list of port numbers (1 to 65535), e.g. [6700, 6701]", False),
    "supervisor.worker.timeout.secs": _SECONDS,
    "supervisor.worker.start.timeout.secs": _SECONDS,
    "supervisor.heartbeat.frequency.secs": _SECONDS,
    "supervisor.monitor.frequency.secs": _SECONDS,
    "worker.heartbeat.frequency.secs": _SECONDS,
    "isolation.scheduler.machines": (_machines, "a mapping of topology names to numbers of machines, or null",
                                     True),
    "squall.worker.max.launch.attempts": (_positive_int, "a positive integer", False),
    "storm.health.check.dir": (_string, "a directory (a non-empty string)", False),
    "storm.health.check.timeout.ms": _MILLIS,
    "storm.health.check.fail.on.timeouts": _BOOL,
    "squall.health.check.interval.secs": _SECONDS,
    "squall.local.supervisors": (_positive_int, "a positive integer (in-process machines)", False),
    "squall.encryption": (_encryption, "auto, true or false", True),
    SECRET_KEY: (_secret, (f"a string of at least {MIN_SECRET_CHARS} characters, hard to guess (quote it in YAML if "
                           f"it is all digits; unset, one is generated into <storm.local.dir>/secret)"), True),
    "nimbus.thrift.max_buffer_size": (lambda v: _positive_int(v) and v >= MIN_FRAME_BYTES,
                                      f"a number of bytes of at least {MIN_FRAME_BYTES}", False),
    "squall.transport.max.message.bytes": (lambda v: _positive_int(v) and v >= 1024,
                                           "a number of bytes of at least 1024", False),
    "squall.transport.wire": (lambda v: v in ("zmq", "tcp"), "zmq or tcp", False),
    "squall.log.max.bytes": (_non_negative_int, "a non-negative integer (0: never rotate)", False),
    "squall.log.backup.count": (_non_negative_int, "a non-negative integer", False),
    "storm.log.dir": (_string, "a directory (a non-empty string), or null for <storm.local.dir>/logs", True),
    "storm.workers.artifacts.dir": (_string, "a directory (a non-empty string; relative: under storm.log.dir)",
                                    False),
    "squall.spark.executor.wait.secs": (_non_negative_number, "a non-negative number of seconds", False),
    "squall.spark.stop.grace.secs": (_non_negative_number, "a non-negative number of seconds", False),
    "squall.spark.worker.host": (_string, "a host name or address, or null", True),
    "ui.host": (_string, "a host name or address", False),
    "ui.port": (_port, "a port number (0 to 65535)", False),
    "ui.allowed.hosts": (_strings, "a list of host names (\"*\": any; \"*.example.com\": any under it)", True),
    "ui.actions.enabled": _BOOL,
    "ui.max.connections": (_positive_int, "a positive integer", False),
    "ui.request.timeout.secs": _SECONDS,
    "nimbus.thrift.max.connections": (_positive_int, "a positive integer", False),
    "nimbus.thrift.handshake.timeout.secs": _SECONDS,
    "squall.ui.history.interval.secs": _SECONDS,
    "squall.ui.history.secs": _SECONDS,
    "drpc.servers": (_strings, "a list of host names (the machines running squall drpc), or null", True),
    "drpc.port": (_port, "a port number (0 to 65535)", False),
    "drpc.invocations.port": (_port, "a port number (0 to 65535)", False),
    "drpc.request.timeout.secs": _SECONDS,
    "drpc.max_buffer_size": (lambda v: _positive_int(v) and v >= MIN_FRAME_BYTES,
                             f"a number of bytes of at least {MIN_FRAME_BYTES}", False),
    "drpc.max.connections": (_positive_int, "a positive integer", False),
}


def validate(conf: Mapping[str, Any], where: str) -> None:
    """Check the types of the keys squall reads; the error names the key, value and place
    (a secret's type and length only, never its value)."""
    for key in _VALIDATORS:
        if key in conf:
            _check(key, conf[key], where)
    for low_key, high_key in (("topology.localityaware.lower.bound", "topology.localityaware.higher.bound"),
                              ("topology.max.spout.pending.auto.min", "topology.max.spout.pending.auto.max")):
        lower, higher = conf.get(low_key), conf.get(high_key)
        if lower is not None and higher is not None and lower > higher:
            raise InvalidTopologyException(
                f"{where}: {low_key!r} ({lower!r}) must not be above {high_key!r} ({higher!r})")


def setting(conf: Mapping[str, Any], key: str, default: Any = None, where: str = "cluster configuration") -> Any:
    """``conf[key]`` checked by the key's rule (the one `validate` applies); ``default`` when
    it is missing or null. For code that may be handed a configuration nothing validated.

    Raises:
        InvalidTopologyException: the value breaks the key's rule (naming the key).
    """
    v = conf.get(key)
    if v is None:
        return default
    _check(key, v, where)
    return v


def _check(key: str, v: Any, where: str) -> None:
    check, what, nullable = _VALIDATORS[key]
    if v is None and nullable:
        return
    if not check(v):
        shown = _described(v) if is_secret_key(key) else repr(redact(v))
        raise InvalidTopologyException(f"{where}: {key!r} must be {what}, got {shown}")


def _described(v: Any) -> str:
    """What ``v`` is, without its value."""
    if isinstance(v, str):
        return f"a string of {len(v)} characters"
    if isinstance(v, bytes):
        return f"{len(v)} bytes"
    return f"a value of type {type(v).__name__}"
