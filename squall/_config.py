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

from ._errors import InvalidTopologyException
from ._redact import is_secret_key, redact


class Config(dict):
    """A topology's configuration: a dict of Storm's keys, with constants and setters.

    >>> conf = Config()
    >>> conf.set_num_workers(2)
    >>> conf[Config.TOPOLOGY_WORKERS]
    2
    """

    # Every key squall knows is named here once, as Storm's Config.java names each; their
    # defaults are in squall/defaults.yaml and nowhere else (`default_of`), but for the keys in
    # `KEYS_WITHOUT_DEFAULT`. Code reads a key by its constant, through `conf_value` or `setting`.

    # --- topology settings (a topology's Config may set these) -------------------------------
    TOPOLOGY_WORKERS = "topology.workers"
    """Number of worker processes (in-process workers on LocalCluster)."""
    TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
    """Acker executors; None means one per worker, 0 turns acking off."""
    TOPOLOGY_EVENTLOGGER_EXECUTORS = "topology.eventlogger.executors"
    """Event logger executors (Storm's; squall starts none)."""
    TOPOLOGY_TASKS = "topology.tasks"
    """Number of tasks of a component (set per component with ``set_num_tasks``)."""
    TOPOLOGY_MAX_TASK_PARALLELISM = "topology.max.task.parallelism"
    """Cap on the number of tasks of every component."""
    TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
    """Seconds before an incomplete spout tuple fails (it fails between T and 2T)."""
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
    """False disables message timeouts (spout tuples then wait for an ack or fail forever)."""
    TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
    """Most spout tuples in flight per spout task (None: set automatically when acking is on;
    ``"auto"``: found by the tuner, within the two keys below)."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN = "topology.max.spout.pending.auto.min"
    """The tuner's lowest max spout pending per spout task (and where it starts)."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX = "topology.max.spout.pending.auto.max"
    """The tuner's highest max spout pending per spout task."""
    TOPOLOGY_MAX_SPOUT_PENDING_AUTO_INTERVAL_SECS = "topology.max.spout.pending.auto.interval.secs"
    """Seconds between two adjustments of the tuner (each measures one such interval)."""
    TOPOLOGY_DEBUG = "topology.debug"
    """Log every emitted tuple with its component, task and stream."""
    TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
    """Send bolts a tick tuple every this many seconds."""
    TOPOLOGY_TRANSACTIONAL_ID = "topology.transactional.id"
    """Storm's transactional topologies' id; a component may set it (whitelisted), squall reads it nowhere."""
    TOPOLOGY_STATS_SAMPLE_RATE = "topology.stats.sample.rate"
    """Fraction of tuples whose statistics are sampled."""
    TOPOLOGY_STATS_ENABLED = "topology.stats.enabled"
    """squall's: False samples no statistics (to measure their cost)."""
    TOPOLOGY_METRICS_CONSUMER_REGISTER = "topology.metrics.consumer.register"
    """Metrics consumers: a list of maps (``class``, ``parallelism.hint``, ``argument``, ...)."""
    TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS = "topology.builtin.metrics.bucket.size.secs"
    """Seconds between two readings of the built-in metrics (``__ack-count``, ...)."""
    TOPOLOGY_FALL_BACK_ON_PICKLE = "topology.fall.back.on.pickle"
    """Serialize unregistered types with pickle between workers (else it is an error)."""
    TOPOLOGY_KRYO_REGISTER = "topology.kryo.register"
    """Registered serializations: ``{"module:Class": "module:Serializer" or None}``."""
    TOPOLOGY_SKIP_MISSING_KRYO_REGISTRATIONS = "topology.skip.missing.kryo.registrations"
    """A registration whose class or serializer cannot be imported is skipped, not an error."""
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL = "topology.state.checkpoint.interval.ms"
    """Milliseconds between two checkpoints of a topology's stateful bolts (at least 100)."""
    TOPOLOGY_STATE_CHECKPOINT_HELD_REPORT_SECS = "topology.state.checkpoint.held.report.secs"
    """Seconds a checkpoint may wait at a bolt behind inputs that may carry a persistent window's
    results before it is reported, once (null: the message timeout, or 30 with message timeouts off)."""
    TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
    """``"module:Class"`` of the `squall.state.StateProvider` of stateful bolts' states."""
    TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
    """The state provider's settings: a map, or a JSON object in a string (Storm's)."""
    TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE = "topology.state.allow.task.count.change"
    """squall's: True lets a stateful component start with another number of tasks than an earlier
    submission kept its states in (keys then go to tasks whose state may not hold them, as in Storm);
    false (the default) refuses it, naming the component (docs/state.md)."""
    TOPOLOGY_FILESPOUT_MAX_RECORD_BYTES = "topology.filespout.max.record.bytes"
    """FileSpout: a longer record is skipped and written to the dead-letter file."""
    TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS = "topology.trident.batch.emit.interval.millis"
    """Trident: the least milliseconds between two batches the master coordinator starts."""
    TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE = "topology.trident.spark.bolt.in.source"
    """Trident on Spark's engine: a spout's one reader runs in the spout's source read (Spark's
    input rows then count what that bolt emits); false: in a ``mapInArrow`` of its own."""
    TOPOLOGY_SPOUT_MAX_BATCH_SIZE = "topology.spout.max.batch.size"
    """Trident: most tuples in one batch of a plain `Spout` (Storm's ``RichSpoutBatchExecutor``)."""
    TOPOLOGY_DISABLE_LOADAWARE_MESSAGING = "topology.disable.loadaware.messaging"
    """True: shuffle grouping is plain round-robin, not load-aware."""
    TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND = "topology.localityaware.higher.bound"
    """Load above which a load-aware shuffle spreads tuples over other workers' tasks."""
    TOPOLOGY_LOCALITYAWARE_LOWER_BOUND = "topology.localityaware.lower.bound"
    """Load below which a load-aware shuffle keeps tuples in the emitting worker again."""
    TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE = "topology.executor.receive.buffer.size"
    """Tuples an executor's inbox holds before backpressure."""
    TOPOLOGY_PRODUCER_BATCH_SIZE = "topology.producer.batch.size"
    """Tuples batched per destination before they are sent (Storm's)."""
    TOPOLOGY_TRANSFER_BATCH_SIZE = "topology.transfer.batch.size"
    """Items queued for a peer worker that make a message go out at once, however young (Storm's)."""
    TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS = "topology.batch.flush.interval.millis"
    """How long items for a peer worker may wait for more while the loop works (Storm's; 0: every round)."""
    TOPOLOGY_SPOUT_RECVQ_SKIPS = "topology.spout.recvq.skips"
    """Storm's: rounds a spout skips reading its inbox when acking is off."""
    TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS = "topology.error.throttle.interval.secs"
    """Seconds over which a component's reported errors are counted (with the key below)."""
    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL = "topology.max.error.report.per.interval"
    """Errors a component reports at most per error throttle interval."""
    TOPOLOGY_BOLT_FAIL_FAST = "topology.bolt.fail.fast"
    """True: an exception escaping a bolt crashes its worker (Storm's); see defaults.yaml."""
    TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS = "topology.sleep.spout.wait.strategy.time.ms"
    """Storm 1.x's sleep spout wait strategy's sleep; a component may set it (whitelisted)."""
    TOPOLOGY_SPOUT_WAIT_STRATEGY = "topology.spout.wait.strategy"
    """What a loop whose spouts may emit but emitted nothing does: ``"module:Class"`` of a
    `squall.engine.wait.WaitStrategy` (or Storm's class name)."""
    TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC = "topology.spout.wait.park.microsec"
    """`WaitStrategyPark` for spouts: microseconds of each wait (0: spin)."""
    TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL1_COUNT = "topology.spout.wait.progressive.level1.count"
    """Progressive spout wait: idle rounds that poll again at once."""
    TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL2_COUNT = "topology.spout.wait.progressive.level2.count"
    """Progressive spout wait: idle rounds after those that yield the thread."""
    TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS = "topology.spout.wait.progressive.level3.sleep.millis"
    """Progressive spout wait: the first sleep (ms) after levels 1 and 2."""
    TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS = "topology.spout.wait.progressive.max.sleep.millis"
    """squall's: each further idle round doubles the sleep up to this many ms."""
    TOPOLOGY_BACKPRESSURE_CHECK_MILLIS = "topology.backpressure.check.millis"
    """Milliseconds between two checks of the inboxes' backlogs by the transport."""
    TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY = "topology.backpressure.wait.strategy"
    """What a loop whose spouts backpressure holds back does: ``"module:Class"`` of a
    `squall.engine.wait.WaitStrategy` (or Storm's class name)."""
    TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC = "topology.backpressure.wait.park.microsec"
    """`WaitStrategyPark` under backpressure: microseconds of each wait (0: spin)."""
    TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL1_COUNT = "topology.backpressure.wait.progressive.level1.count"
    """`WaitStrategyProgressive` under backpressure: idle rounds that poll again at once."""
    TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL2_COUNT = "topology.backpressure.wait.progressive.level2.count"
    """`WaitStrategyProgressive` under backpressure: idle rounds after those that yield the thread."""
    TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS = (
        "topology.backpressure.wait.progressive.level3.sleep.millis")
    """`WaitStrategyProgressive` under backpressure: the wait (ms) after levels 1 and 2."""
    TOPOLOGY_EXECUTOR_OWN_THREAD = "topology.executor.own.thread"
    """Run a component's executors on their own thread (for blocking user code)."""
    TOPOLOGY_EXECUTOR_BLOCKING_WARN_MILLIS = "topology.executor.blocking.warn.millis"
    """A user call holding a shared loop longer than this gets the loop's thread to itself."""
    TOPOLOGY_EXECUTOR_BLOCKING_MOVE = "topology.executor.blocking.move"
    """False keeps a component's executors on their first thread even when another blocks it."""
    TOPOLOGY_WORKER_GC_THRESHOLDS = "topology.worker.gc.thresholds"
    """Python's ``gc.set_threshold`` values set when a worker starts (None keeps Python's)."""
    TOPOLOGY_WORKER_MAX_HEAP_SIZE_MB = "topology.worker.max.heap.size.mb"
    """The topology's cap (MB) on each worker process's resident memory; None: no cap (docs/cluster.md)."""
    TOPOLOGY_NAME = "topology.name"
    """The topology's name (set by squall at submit)."""
    TOPOLOGY_MIN_REPLICATION_COUNT = "topology.min.replication.count"
    """Nimbus HA: masters that must hold a topology's code before it starts."""
    TOPOLOGY_MAX_REPLICATION_WAIT_TIME_SEC = "topology.max.replication.wait.time.sec"
    """Nimbus HA: seconds a submission waits for replication (-1: as long as it takes)."""
    TOPOLOGY_MULTILANG_SERIALIZER = "topology.multilang.serializer"
    """Multilang: how ShellBolt/ShellSpout talk to their subprocess: Storm's JsonSerializer
    (``"json"``) or MessagePack (``"msgpack"``); see docs/multilang.md."""
    TOPOLOGY_SHELLBOLT_MAX_PENDING = "topology.shellbolt.max.pending"
    """Multilang: tuples a ShellBolt holds for its subprocess before its execute waits."""
    TOPOLOGY_SUBPROCESS_TIMEOUT_SECS = "topology.subprocess.timeout.secs"
    """Multilang: seconds a shell subprocess may stay silent before it is a fault (None:
    ``supervisor.worker.timeout.secs``)."""

    # --- windowed bolts' component keys (set by BaseWindowedBolt's builders; no default) -------
    TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT = "topology.bolts.window.length.count"
    """A window's length in tuples."""
    TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS = "topology.bolts.window.length.duration.ms"
    """A window's length in milliseconds."""
    TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT = "topology.bolts.window.sliding.interval.count"
    """A window's slide in tuples."""
    TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS = "topology.bolts.window.sliding.interval.duration.ms"
    """A window's slide in milliseconds."""
    TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME = "topology.bolts.tuple.timestamp.field.name"
    """The field holding an event-time window's timestamps."""
    TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS = "topology.bolts.tuple.timestamp.max.lag.ms"
    """Event time: how late (ms) a tuple may be before it is late."""
    TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS = "topology.bolts.watermark.event.interval.ms"
    """Event time: milliseconds between two watermarks."""
    TOPOLOGY_BOLTS_WATERMARK_IDLE_TIMEOUT_MS = "topology.bolts.watermark.idle.timeout.ms"
    """Event time: a source task silent this long (ms) no longer holds the watermark back, until
    it delivers again (squall's; unset: the message timeout; 0: Storm's per-stream watermark)."""
    TOPOLOGY_BOLTS_LATE_TUPLE_STREAM = "topology.bolts.late.tuple.stream"
    """The stream late tuples go to (else they are dropped)."""

    # --- daemon settings (only squall.yaml may set these) -------------------------------------
    STORM_LOCAL_DIR = "storm.local.dir"
    """The daemons' working directory (state, code, secret, logs)."""
    STORM_CLUSTER_MODE = "storm.cluster.mode"
    """``"distributed"``, or ``"local"`` on LocalCluster."""
    NIMBUS_SEEDS = "nimbus.seeds"
    """Where clients and supervisors reach the master(s); None: ``nimbus.host``."""
    STORM_NIMBUS_RETRY_TIMES = "storm.nimbus.retry.times"
    """A client that finds no leader tries again this many times..."""
    STORM_NIMBUS_RETRY_INTERVAL_MILLIS = "storm.nimbus.retry.interval.millis"
    """... this far apart."""
    NIMBUS_HOST = "nimbus.host"
    """The master's host."""
    NIMBUS_THRIFT_PORT = "nimbus.thrift.port"
    """The master's port."""
    NIMBUS_TASK_TIMEOUT_SECS = "nimbus.task.timeout.secs"
    """A worker not heard from for this long is restarted."""
    NIMBUS_SUPERVISOR_TIMEOUT_SECS = "nimbus.supervisor.timeout.secs"
    """A supervisor not heard from for this long is dead; its workers move."""
    NIMBUS_MONITOR_FREQ_SECS = "nimbus.monitor.freq.secs"
    """Seconds between two of the master's checks of the cluster."""
    NIMBUS_TASK_LAUNCH_SECS = "nimbus.task.launch.secs"
    """A worker's first heartbeat may take this long."""
    STORM_ZOOKEEPER_SERVERS = "storm.zookeeper.servers"
    """Nimbus HA: ZooKeeper servers; None: one master, its state on disk."""
    STORM_ZOOKEEPER_PORT = "storm.zookeeper.port"
    """ZooKeeper's port for servers given without one."""
    STORM_ZOOKEEPER_ROOT = "storm.zookeeper.root"
    """The ZooKeeper path under which the cluster's state lives."""
    STORM_ZOOKEEPER_SESSION_TIMEOUT = "storm.zookeeper.session.timeout"
    """Milliseconds of a ZooKeeper session (bounds a failover)."""
    STORM_ZOOKEEPER_CONNECTION_TIMEOUT = "storm.zookeeper.connection.timeout"
    """Milliseconds a master waits for ZooKeeper at start."""
    STORM_ZOOKEEPER_RETRY_TIMES = "storm.zookeeper.retry.times"
    """Retries of a ZooKeeper operation..."""
    STORM_ZOOKEEPER_RETRY_INTERVAL = "storm.zookeeper.retry.interval"
    """... this many milliseconds apart."""
    TASK_HEARTBEAT_FREQUENCY_SECS = "task.heartbeat.frequency.secs"
    """How often the leader writes workers' heartbeat summaries to ZooKeeper."""
    SUPERVISOR_SLOTS_PORTS = "supervisor.slots.ports"
    """A supervisor's worker ports (one slot each)."""
    SUPERVISOR_WORKER_TIMEOUT_SECS = "supervisor.worker.timeout.secs"
    """A worker not heard from for this long is restarted by its supervisor."""
    SUPERVISOR_WORKER_START_TIMEOUT_SECS = "supervisor.worker.start.timeout.secs"
    """A starting worker may take this long before its first heartbeat."""
    SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS = "supervisor.worker.shutdown.sleep.secs"
    """How long a supervisor lets a worker stop cleanly after SIGTERM before it SIGKILLs it."""
    SUPERVISOR_HEARTBEAT_FREQUENCY_SECS = "supervisor.heartbeat.frequency.secs"
    """Seconds between two of a supervisor's heartbeats."""
    SUPERVISOR_MONITOR_FREQUENCY_SECS = "supervisor.monitor.frequency.secs"
    """How often a supervisor syncs with the master."""
    SQUALL_WORKER_MAX_LAUNCH_ATTEMPTS = "squall.worker.max.launch.attempts"
    """Failed starts in a row before the master gives a slot up."""
    SQUALL_WORKER_CRASH_BACKOFF_SECS = "squall.worker.crash.backoff.secs"
    """The master's wait before it restarts a worker that crashed a second time in a row, each
    soon after its start; doubled for each further such crash, up to 30 s."""
    STORM_LOCAL_HOSTNAME = "storm.local.hostname"
    """The address this machine's workers bind and their peers reach."""
    STORM_HEALTH_CHECK_DIR = "storm.health.check.dir"
    """Supervisor health checks: the directory of their executables."""
    STORM_HEALTH_CHECK_TIMEOUT_MS = "storm.health.check.timeout.ms"
    """Health checks: how long one may run."""
    STORM_HEALTH_CHECK_FAIL_ON_TIMEOUTS = "storm.health.check.fail.on.timeouts"
    """Health checks: whether one that times out fails."""
    SQUALL_HEALTH_CHECK_INTERVAL_SECS = "squall.health.check.interval.secs"
    """Health checks: seconds between two runs."""
    SQUALL_LOG_MAX_BYTES = "squall.log.max.bytes"
    """Daemon and worker logs rotate before this size (0: never)."""
    SQUALL_LOG_BACKUP_COUNT = "squall.log.backup.count"
    """Rotated log files kept."""
    STORM_LOG_DIR = "storm.log.dir"
    """Where logs go; None: ``<storm.local.dir>/logs``."""
    STORM_WORKERS_ARTIFACTS_DIR = "storm.workers.artifacts.dir"
    """Workers' logs directory (relative: under ``storm.log.dir``)."""
    LOGVIEWER_CLEANUP_INTERVAL_SECS = "logviewer.cleanup.interval.secs"
    """How often the supervisor cleans up worker logs (None: never)."""
    LOGVIEWER_CLEANUP_AGE_MINS = "logviewer.cleanup.age.mins"
    """A dead worker's log directory is removed once everything in it is this old."""
    LOGVIEWER_MAX_SUM_WORKER_LOGS_SIZE_MB = "logviewer.max.sum.worker.logs.size.mb"
    """The most all worker log directories of a machine may hold (MB)."""
    LOGVIEWER_MAX_PER_WORKER_LOGS_SIZE_MB = "logviewer.max.per.worker.logs.size.mb"
    """The most one worker log directory may hold (MB; at most half the total)."""
    SQUALL_SECRET = "squall.secret"
    """The cluster's shared secret (never shown; generated into storm.local.dir when unset)."""
    SQUALL_ENCRYPTION = "squall.encryption"
    """Encrypt the control channel and data path: auto, true or false."""
    NIMBUS_THRIFT_MAX_BUFFER_SIZE = "nimbus.thrift.max_buffer_size"
    """Largest RPC frame (bytes) from an authenticated peer."""
    NIMBUS_THRIFT_HANDSHAKE_TIMEOUT_SECS = "nimbus.thrift.handshake.timeout.secs"
    """A connection not authenticated within this many seconds is closed."""
    NIMBUS_THRIFT_MAX_CONNECTIONS = "nimbus.thrift.max.connections"
    """Connections the master keeps open at most."""
    SQUALL_TCP_KEEPALIVE_SECS = "squall.tcp.keepalive.secs"
    """A connection whose other end's machine stopped answering (it died, or a partition outlasted
    its own timeout) is closed after about this many seconds of silence (TCP keepalive)."""
    STORM_MESSAGING_NETTY_MIN_WAIT_MS = "storm.messaging.netty.min_wait_ms"
    """The TCP wire between workers: milliseconds before connecting again to a peer that refused,
    and the timeout of the first attempt to connect to one that answers nothing."""
    STORM_MESSAGING_NETTY_MAX_WAIT_MS = "storm.messaging.netty.max_wait_ms"
    """The TCP wire between workers: the longest timeout of an attempt to connect (each doubles the
    last), and the cap (at least 1 s) of a connection's retransmission backoff while its peer answers."""
    STORM_SCHEDULER = "storm.scheduler"
    """``"module:Class"`` of an IScheduler; None: even (or isolation)."""
    ISOLATION_SCHEDULER_MACHINES = "isolation.scheduler.machines"
    """The isolation scheduler's ``{topology name: machines}``."""
    SQUALL_LOCAL_SUPERVISORS = "squall.local.supervisors"
    """LocalCluster: in-process machines."""
    WORKER_HEARTBEAT_FREQUENCY_SECS = "worker.heartbeat.frequency.secs"
    """Seconds between two of a worker's heartbeats."""
    WORKER_HEAP_MEMORY_MB = "worker.heap.memory.mb"
    """The cluster's cap (MB) on each worker process's resident memory; None: no cap (docs/cluster.md)."""
    SQUALL_TRANSPORT_MAX_MESSAGE_BYTES = "squall.transport.max.message.bytes"
    """The largest message a worker's data port takes (bytes)."""
    SQUALL_TRANSPORT_WIRE = "squall.transport.wire"
    """How workers send each other tuples: ``tcp`` or ``zmq``."""
    SQUALL_SPARK_EXECUTOR_WAIT_SECS = "squall.spark.executor.wait.secs"
    """Spark host: how long to wait at start for the executors asked for."""
    SQUALL_SPARK_STOP_GRACE_SECS = "squall.spark.stop.grace.secs"
    """Spark host: a worker still running this long after a stop has its job cancelled."""
    SQUALL_SPARK_WORKER_HOST = "squall.spark.worker.host"
    """Spark host: the address workers bind on executors."""
    UI_HOST = "ui.host"
    """The UI daemon's address."""
    UI_PORT = "ui.port"
    """The UI daemon's port."""
    UI_ALLOWED_HOSTS = "ui.allowed.hosts"
    """Host header names the UI accepts beside loopback and ``ui.host``."""
    UI_ACTIONS_ENABLED = "ui.actions.enabled"
    """False switches the UI's actions off."""
    UI_REQUEST_TIMEOUT_SECS = "ui.request.timeout.secs"
    """A request not all arrived this many seconds after its first byte gets 408."""
    UI_MAX_CONNECTIONS = "ui.max.connections"
    """Connections the UI keeps open at most."""
    SQUALL_UI_HISTORY_INTERVAL_SECS = "squall.ui.history.interval.secs"
    """The UI's charts: seconds between two samples."""
    SQUALL_UI_HISTORY_SECS = "squall.ui.history.secs"
    """The UI's charts: seconds of samples kept."""
    DRPC_SERVERS = "drpc.servers"
    """Hosts running the DRPC server (None: none)."""
    DRPC_PORT = "drpc.port"
    """Callers' DRPC port."""
    DRPC_INVOCATIONS_PORT = "drpc.invocations.port"
    """The DRPC spouts' and return bolts' port."""
    DRPC_REQUEST_TIMEOUT_SECS = "drpc.request.timeout.secs"
    """A DRPC request with no result by then fails."""
    DRPC_MAX_BUFFER_SIZE = "drpc.max_buffer_size"
    """Largest frame (bytes) a DRPC connection takes."""
    DRPC_MAX_CONNECTIONS = "drpc.max.connections"
    """Connections a DRPC server keeps open at most."""
    DRPC_HTTP_PORT = "drpc.http.port"
    """The DRPC server's HTTP port (None or negative: no HTTP interface; 0: a free port)."""
    DRPC_HTTP_HOST = "drpc.http.host"
    """The address the DRPC server's HTTP interface binds."""
    DRPC_HTTP_ALLOWED_HOSTS = "drpc.http.allowed.hosts"
    """Host header names the DRPC HTTP interface accepts beside loopback and ``drpc.http.host``."""
    DRPC_HTTP_SECRET_REQUIRED = "drpc.http.secret.required"
    """False opens the DRPC HTTP interface to callers without the cluster's secret."""

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
        self[self.TOPOLOGY_EVENTLOGGER_EXECUTORS] = n

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


# Storm's whitelist (Executor.normalizedComponentConf): of the Config keys, a component may set
# only these; the others are dropped from its configuration. Custom keys always pass.
COMPONENT_KEYS = frozenset({
    Config.TOPOLOGY_DEBUG,
    Config.TOPOLOGY_MAX_SPOUT_PENDING,
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN,
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX,
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_INTERVAL_SECS,
    Config.TOPOLOGY_MAX_TASK_PARALLELISM,
    Config.TOPOLOGY_TRANSACTIONAL_ID,
    Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS,
    Config.TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS,
    Config.TOPOLOGY_SPOUT_WAIT_STRATEGY,
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL1_COUNT,
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL2_COUNT,
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS,
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS,
    Config.TOPOLOGY_STATE_PROVIDER,
    Config.TOPOLOGY_STATE_PROVIDER_CONFIG,
    Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE,
    Config.TOPOLOGY_EXECUTOR_OWN_THREAD,
    Config.TOPOLOGY_EXECUTOR_BLOCKING_MOVE,
    Config.TOPOLOGY_BOLT_FAIL_FAST,
    Config.TOPOLOGY_KRYO_REGISTER,
    Config.TOPOLOGY_FILESPOUT_MAX_RECORD_BYTES,
})
_COMPONENT_KEY_PREFIXES = ("topology.bolts.window.", "topology.bolts.")

DAEMON_PREFIXES = ("storm.", "nimbus.", "supervisor.", "worker.", "ui.", "logviewer.", "drpc.",
                   "pacemaker.", "dev.zookeeper.", "transactional.zookeeper.", "isolation.", "squall.")

# The cluster settings a topology's configuration carries (Storm's does carry the cluster's, and
# user code reads these to know where it runs or to reach the master). Every other daemon key
# (squall.secret above all, and paths, ports and timeouts of the daemons) stays with the daemons:
# a worker reads its own from the configuration file its supervisor wrote for it.
TOPOLOGY_VISIBLE_DAEMON_KEYS = frozenset({Config.STORM_CLUSTER_MODE, Config.NIMBUS_SEEDS, Config.NIMBUS_HOST,
                                          Config.NIMBUS_THRIFT_PORT,
                                          # a shell subprocess's silence limit when
                                          # topology.subprocess.timeout.secs is unset (Storm's ShellBolt)
                                          Config.SUPERVISOR_WORKER_TIMEOUT_SECS})

# The keys with no entry in defaults.yaml, and why: a window is unset until a windowed bolt's
# builder sets it (its keys' fallbacks are the window's rules, squall.windowing.config); the
# secret is generated into storm.local.dir when unset; Storm's transactional id and 1.x sleep
# strategy time are accepted from components (whitelisted) and read by nothing.
KEYS_WITHOUT_DEFAULT = frozenset({
    Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT, Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS,
    Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT, Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS,
    Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME, Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS,
    Config.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS, Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM,
    Config.TOPOLOGY_BOLTS_WATERMARK_IDLE_TIMEOUT_MS, Config.SQUALL_SECRET, Config.TOPOLOGY_TRANSACTIONAL_ID, Config.TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS,
})


def config_keys() -> dict[str, str]:
    """Every key `Config` names, by its constant's name (``{"TOPOLOGY_WORKERS": "topology.workers", ...}``)."""
    return {name: v for name, v in vars(Config).items() if name.isupper() and isinstance(v, str)}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@cache
def _defaults() -> dict[str, Any]:
    text = resources.files("squall").joinpath("defaults.yaml").read_text()
    # libyaml's loader where PyYAML has it: every worker and CLI command reads this file as it
    # starts, 0.7 ms against 8.8 ms (25 ms on a loaded machine) for the same mapping
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def default_conf() -> dict[str, Any]:
    """A fresh copy of the built-in defaults."""
    return dict(_defaults())


def default_of(key: str) -> Any:
    """``key``'s value in ``squall/defaults.yaml``, the one place a default lives.

    Raises:
        KeyError: ``key`` has no default there (a `KEYS_WITHOUT_DEFAULT` key, or not a `Config` key).
    """
    try:
        return _defaults()[key]
    except KeyError:
        raise KeyError(f"configuration key {key!r} has no default in squall/defaults.yaml") from None


def conf_value(conf: Mapping[str, Any], key: str) -> Any:
    """``conf[key]``, or its default from ``squall/defaults.yaml`` when it is missing (or null,
    for a key whose rule does not allow null).

    Read every key with a default through this, by its `Config` constant: a default then lives in
    one place, and a configuration built without `cluster_conf` (a test's, a bare dict) reads the
    same values as one built with it. A null given for a key that allows it is kept: it means
    something of its own (``topology.worker.gc.thresholds``: keep Python's).
    """
    v = conf.get(key, _MISSING)
    if v is _MISSING or (v is None and not _VALIDATORS.get(key, _NULL_ALLOWED)[2]):
        return default_of(key)
    return v


_MISSING: Any = object()
_NULL_ALLOWED = (None, "", True)


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


def component_misspellings(own: Mapping[str, Mapping[str, Any] | None], topology: str) -> list[str]:
    """A warning for each key of a component's own configuration (``own``, by component id) that
    is likely a typo (`misspelling_of`): it reaches the component as a custom key would, and
    nothing reads it, so the setting meant changes nothing, silently."""
    return [f"{topology}: component [{cid}] configuration key {key!r} is unknown and used by nothing; "
            f"did you mean {meant!r}?"
            for cid, component in sorted(own.items()) for key in (component or {})
            if isinstance(key, str) and (meant := misspelling_of(key)) is not None]


def overridden_component_keys(conf: Mapping[str, Any], own: Mapping[str, Mapping[str, Any] | None],
                              topology: str) -> list[str]:
    """A warning for each key a component's own configuration (``own``, by component id) sets
    that the topology's ``conf`` sets to another value: squall's rule gives the topology's
    (`component_conf`), Storm's the component's, so a port from Storm (a bolt asking for its
    own tick frequency while the topology sets one for the others) changes silently."""
    warnings = []
    for cid, component in sorted(own.items()):
        for key, value in sorted((component or {}).items(), key=lambda item: str(item[0])):
            if key in COMPONENT_KEYS and key in conf and conf[key] != value \
                    and not _lower_cap_applies(key, value, conf[key]):
                # values as a page shows them: a state provider's config may hold a password
                warnings.append(f"{topology}: component [{cid}] sets {key!r} to {redact(value)!r}, but the "
                                f"topology's Config sets it to {redact(conf[key])!r}, which wins (squall's rule; "
                                f"Storm's gives the component's): leave it out of the Config for the component's "
                                f"to apply")
    return warnings


def _lower_cap_applies(key: str, own: Any, given: Any) -> bool:
    """Whether a component's own ``topology.max.task.parallelism`` applies though the topology's
    Config sets another: both caps hold, so the lower one does (`squall.engine.plan.make_plan`)."""
    return (key == Config.TOPOLOGY_MAX_TASK_PARALLELISM and _positive_int(own)
            and (given is None or (_positive_int(given) and own <= given)))


# Storm's keys for its workers' JVM and environment: a Storm topology's conf carries them, and
# squall's Python workers apply none (said at submission, not dropped without a word)
UNAPPLIED_STORM_KEYS = {
    "topology.environment": "squall's workers inherit their supervisor's environment",
    "topology.worker.childopts": "JVM options: squall's workers are Python processes",
    "worker.childopts": "JVM options: squall's workers are Python processes",
    "topology.worker.gc.childopts": "JVM options: squall's workers are Python processes",
    "topology.worker.logwriter.childopts": "JVM options: squall's workers are Python processes",
}

# Storm's settings for its daemons' and workers' JVMs and for its Netty transport, which a
# storm.yaml copied to squall.yaml carries: squall's daemons and workers are Python processes that
# talk over their own wire, so none applies; the master and each supervisor say so when they
# start, rather than ignore them without a word (a worker.childopts' -Xmx capped nothing)
_JVM = "JVM options: squall's daemons and workers are Python processes"
UNAPPLIED_STORM_DAEMON_KEYS = {
    "worker.childopts": f"{_JVM}; worker.heap.memory.mb caps a worker's memory",
    "worker.gc.childopts": _JVM, "worker.profiler.childopts": _JVM, "nimbus.childopts": _JVM,
    "supervisor.childopts": _JVM, "ui.childopts": _JVM, "drpc.childopts": _JVM,
    "logviewer.childopts": _JVM, "pacemaker.childopts": _JVM, "java.library.path": _JVM,
}
# (storm.messaging.netty.min_wait_ms and max_wait_ms are squall's too: its reconnect backoff)
_UNAPPLIED_STORM_DAEMON_PREFIXES = {
    "storm.messaging.": "Storm's Netty transport: squall's workers talk over their own wire, squall.transport.wire",
}


def unapplied_daemon_keys(conf: Mapping[str, Any], where: str) -> list[str]:
    """A warning for each of Storm's JVM and Netty settings (`UNAPPLIED_STORM_DAEMON_KEYS`, and
    the ``storm.messaging.`` keys squall does not know) that the cluster's configuration ``conf``
    (``where``) sets."""
    warnings = []
    for key in sorted(k for k in conf if isinstance(k, str)):
        why = UNAPPLIED_STORM_DAEMON_KEYS.get(key) or next(
            (why for prefix, why in _UNAPPLIED_STORM_DAEMON_PREFIXES.items()
             if key.startswith(prefix) and key not in _known_keys()), None)
        if why is not None:
            warnings.append(f"{where}: {key!r} is not applied ({why})")
    return warnings


# The keys that cap a worker process's memory (`squall.worker.memory_cap`): applied where each
# worker is a process of its own (the process host, Spark), not by LocalCluster, whose workers
# are threads of the user's process
MEMORY_CAP_KEYS = (Config.WORKER_HEAP_MEMORY_MB, Config.TOPOLOGY_WORKER_MAX_HEAP_SIZE_MB)


def unapplied_keys(conf: Mapping[str, Any], topology: str) -> list[str]:
    """A warning for each key of ``conf`` that is Storm's for its JVM workers
    (`UNAPPLIED_STORM_KEYS`)."""
    return [f"{topology}: {key!r} is not applied ({why})" for key, why in UNAPPLIED_STORM_KEYS.items()
            if conf.get(key) not in (None, "", [], {})]


def uncapped_memory_keys(conf: Mapping[str, Any], topology: str) -> list[str]:
    """A warning for each memory cap key (`MEMORY_CAP_KEYS`) that ``conf`` sets, for a host that
    cannot apply it: a `LocalCluster`, whose workers are threads of the user's process."""
    return [f"{topology}: {key!r} is not applied (LocalCluster's workers are threads of this process; the "
            f"process host and Spark cap each worker process, docs/cluster.md)"
            for key in MEMORY_CAP_KEYS if conf.get(key) is not None]


def submit_warnings(conf: Mapping[str, Any], topology: Any, name: str, memory_capped: bool = True) -> list[str]:
    """What submitting ``topology`` (a `StormTopology`) as ``name`` with ``conf`` warns of:
    likely typos in ``conf`` and in components' own configurations (`misspellings`,
    `component_misspellings`), Storm's JVM worker keys squall does not apply (`unapplied_keys`;
    with ``memory_capped`` False, a `LocalCluster`'s submission, the memory caps too:
    `uncapped_memory_keys`) and components' own keys it overrides (`overridden_component_keys`)."""
    # squall's own components (a Trident topology's coordinators and executors, whose ticks and
    # single tasks are squall's choice) say nothing: the user set none of their keys
    own = {cid: spec.conf for cid, spec in getattr(topology, "components", {}).items()
           if not cid.startswith("$") and not type(spec.obj).__module__.startswith("squall.trident.")}
    return (misspellings(conf, name) + component_misspellings(own, name) + unapplied_keys(conf, name)
            + ([] if memory_capped else uncapped_memory_keys(conf, name)) + overridden_component_keys(conf, own, name))


def yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's error without the text it quotes: where and what, never the line itself (a
    ``password:`` line with a stray quote would put the password in the message)."""
    def at(mark: Any) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    if not isinstance(error, yaml.MarkedYAMLError):
        return type(error).__name__
    parts = []
    if error.problem:
        parts.append(f"{at(error.problem_mark)}: {error.problem}" if error.problem_mark else str(error.problem))
    if error.context:
        parts.append(f"{error.context} at {at(error.context_mark)}" if error.context_mark else str(error.context))
    return ", ".join(parts) or type(error).__name__


def read_conf_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``squall.yaml``; a clear error names the file if it is not a mapping."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise InvalidTopologyException(f"{p}: not valid YAML: {yaml_problem(e)}") from None
    if not isinstance(data, dict):
        raise InvalidTopologyException(f"{p}: expected a mapping of config keys, got {type(data).__name__}")
    for key in data:
        if not isinstance(key, str):  # YAML reads `1:` as an int and `on:` or `yes:` as true
            raise InvalidTopologyException(f"{p}: configuration key {key!r} is not a string (quote it in YAML)")
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
    for key in conf:
        if not isinstance(key, str):
            raise InvalidTopologyException(f"cluster configuration: key {key!r} is not a string")
    validate(conf, where="cluster configuration")
    return with_whole_numbers(conf)


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
            if key in UNAPPLIED_STORM_KEYS:
                # Storm's worker.childopts, which a Storm topology's Config may set for its own
                # workers: taken, as Storm takes it, and left out, as squall applies it nowhere
                # (the submission says so: `unapplied_keys`); refused, the error sent the user to
                # put it in squall.yaml, where it did nothing without a word
                continue
            raise InvalidTopologyException(
                f"topology configuration may not set daemon setting {key!r}; "
                f"set it in the cluster's squall.yaml instead")
        merged[key] = value
    validate(merged, where="topology configuration")
    return with_whole_numbers(merged)


def component_conf(topology: Mapping[str, Any], component_own: Mapping[str, Any] | None,
                   topology_given: Mapping[str, Any] | None, component_id: str) -> dict[str, Any]:
    """The configuration one component's tasks see.

    Precedence, lowest first: the cluster's configuration (defaults and squall.yaml), the
    component's own configuration (only whitelisted ``topology.*`` keys and custom keys), then
    the keys the topology's `Config` set itself.
    """
    where = f"configuration of component [{component_id}]"
    own = {}
    for key, value in (component_own or {}).items():
        if not isinstance(key, str):
            raise InvalidTopologyException(f"{where}: key {key!r} is not a string")
        if key.startswith("topology.") and key not in COMPONENT_KEYS and not key.startswith(_COMPONENT_KEY_PREFIXES) \
                and key in _known_keys():
            continue  # Storm drops non-whitelisted Config keys from component configuration; others pass
        if is_daemon_key(key):
            continue
        own[key] = value
    # the component's own values are checked even where the topology's override them: a task
    # cap is applied from both (squall.engine.plan.make_plan)
    validate(own, where=where)
    conf = {**topology, **own, **(topology_given or {})}
    validate(conf, where=where)
    return with_whole_numbers(conf)


def _positive_int(v: Any) -> bool:
    return type(v) is int and v >= 1


def _non_negative_int(v: Any) -> bool:
    return type(v) is int and v >= 0


def _number(v: Any) -> bool:
    # finite, as a float too (the code computes with float(v)): Storm's are Integer or Double
    # seconds and counts; an infinite one (YAML's .inf, -c key=Infinity) passed the check and
    # crash-looped the workers that computed with it, and an int past a float's range raised
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


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


def _registrations(v: Any) -> bool:
    """``topology.kryo.register``'s shape: squall's map of class name to serializer name (or
    null), or Storm's list of class names and ``{class: serializer}`` maps (of any number of
    entries, as Storm's KryoRegValidator and the worker's `squall.engine.serialize` take them).
    Whether the names resolve is the worker's to say (the classes may be in modules only it
    imports)."""
    def pair(name: Any, serializer: Any) -> bool:
        return _string(name) and (serializer is None or _string(serializer))
    if isinstance(v, Mapping):
        return all(pair(k, x) for k, x in v.items())
    return isinstance(v, (list, tuple)) and all(
        _string(e) or (isinstance(e, Mapping) and all(pair(k, x) for k, x in e.items())) for e in v)


def _port(v: Any) -> bool:
    return type(v) is int and 0 <= v <= 65535


def _ports(v: Any) -> bool:
    return isinstance(v, list) and all(type(p) is int and 1 <= p <= 65535 for p in v)


GC_THRESHOLD_MAX = 2**31 - 1
"""The largest count ``gc.set_threshold`` takes (a C int): a larger one passed submit's check before
2026-12-07 and was refused only as each worker started."""


def _gc_thresholds(v: Any) -> bool:
    return isinstance(v, list) and 1 <= len(v) <= 3 and all(_non_negative_int(x) and x <= GC_THRESHOLD_MAX
                                                            for x in v)


MULTILANG_SERIALIZERS = {
    "json": "json", "org.apache.storm.multilang.JsonSerializer": "json",
    "msgpack": "msgpack", "org.apache.storm.multilang.MessagePackSerializer": "msgpack",
    "com.yelp.pyleus.serializer.MessagePackSerializer": "msgpack",
}
"""``topology.multilang.serializer``'s accepted values and the wire each names
(`squall.multilang.serializer`): short names, and the Java class names Storm users set (Storm's
JSON one; the MessagePack ones of STORM-1565 and of pyleus, which pystorm users ran)."""


def _multilang_serializer(v: Any) -> bool:
    return isinstance(v, str) and v in MULTILANG_SERIALIZERS


def _encryption(v: Any) -> bool:
    from ._encryption import parse_encryption  # here: _encryption names its key by its Config constant
    return parse_encryption(v) is not None


SECRET_KEY = Config.SQUALL_SECRET
MIN_SECRET_CHARS = 16
"""The shortest secret accepted. Anyone who sees one handshake (its frames are not encrypted)
can test guesses of the secret offline against it, so it must be too long to guess: 16 random
characters are 64 bits as hex digits and more from a larger alphabet. The generated one is 64
hex digits."""


def _secret(v: Any) -> bool:
    return isinstance(v, (str, bytes)) and len(v.strip()) >= MIN_SECRET_CHARS


MIN_FRAME_BYTES = 4096
"""The least ``nimbus.thrift.max_buffer_size``: the frames a stranger may send before the
handshake (`squall._wire.PREAUTH_MAX_FRAME`) are this size, and a peer that holds the
secret may send at least as much."""


def _machines(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _positive_int(n) for k, n in v.items())


_BOOL = (_bool, "true or false", False)
_SECONDS = (_positive_number, "a positive number of seconds", False)
_MILLIS = (_positive_number, "a positive number of milliseconds", False)
_MEGABYTES_CAP = (_positive_number, "a positive number of megabytes, or null (no cap)", True)

_VALIDATORS: dict[str, tuple[Any, str, bool]] = {
    # key: (check, what it must be, None allowed); Storm's validators (ConfigValidation) for
    # every key of defaults.yaml that squall reads, so that a bad value is refused where it is
    # given (at submit, or when a daemon starts) and not by a worker that then cannot start
    Config.TOPOLOGY_WORKERS: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_ACKER_EXECUTORS: (_non_negative_int, "a non-negative integer or null", True),
    Config.TOPOLOGY_EVENTLOGGER_EXECUTORS: (_non_negative_int, "a non-negative integer", False),
    Config.TOPOLOGY_MAX_SPOUT_PENDING: (lambda v: _positive_int(v) or v == "auto",
                                        'a positive integer, "auto" (the tuner) or null', True),
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_INTERVAL_SECS: _SECONDS,
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: _SECONDS,
    Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: _BOOL,
    Config.TOPOLOGY_DEBUG: _BOOL,
    Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: (_positive_number, "a positive number of seconds or null", True),
    Config.TOPOLOGY_MAX_TASK_PARALLELISM: (_positive_int, "a positive integer or null", True),
    Config.TOPOLOGY_TASKS: (_positive_int, "a positive integer or null", True),
    Config.TOPOLOGY_STATS_SAMPLE_RATE: (_fraction, "a number above 0 and at most 1", False),
    Config.TOPOLOGY_STATS_ENABLED: _BOOL,
    Config.TOPOLOGY_FALL_BACK_ON_PICKLE: _BOOL,
    # its entries are checked one by one at submit (squall.metric._consumers.consumer_specs)
    Config.TOPOLOGY_METRICS_CONSUMER_REGISTER: (lambda v: isinstance(v, (list, tuple)),
                                                "a list of maps with a \"class\" each (docs/metrics.md)", True),
    Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS: (_positive_int, "a positive whole number of seconds", False),
    Config.TOPOLOGY_KRYO_REGISTER: (_registrations, ("a map of class names to serializer names (or null), or a list "
                                    "of class names and {class: serializer} maps (Config.register_serialization)"),
                                    True),
    Config.TOPOLOGY_SKIP_MISSING_KRYO_REGISTRATIONS: _BOOL,
    Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: _BOOL,
    Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND: (_unit_interval, "a number from 0 to 1", False),
    Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND: (_unit_interval, "a number from 0 to 1", False),
    Config.TOPOLOGY_EXECUTOR_OWN_THREAD: _BOOL,
    Config.TOPOLOGY_EXECUTOR_BLOCKING_MOVE: _BOOL,
    Config.TOPOLOGY_BOLT_FAIL_FAST: (_bool, "true, false or null", True),
    Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_PRODUCER_BATCH_SIZE: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_TRANSFER_BATCH_SIZE: (_positive_int, "a positive integer (items a message)", False),
    Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: (_non_negative_number, "a non-negative number of milliseconds",
                                                  False),
    Config.TOPOLOGY_SPOUT_RECVQ_SKIPS: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS: _SECONDS,
    Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL1_COUNT: (_non_negative_int, "a non-negative integer", False),
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL2_COUNT: (_non_negative_int, "a non-negative integer", False),
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS: (_positive_number, "a positive number", False),
    Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS: (_non_negative_number,
                                                              "a non-negative number of milliseconds", False),
    Config.TOPOLOGY_BACKPRESSURE_CHECK_MILLIS: _MILLIS,
    # loaded (and refused, naming the key, if they are not wait strategies) where a worker starts
    Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: (_string, "\"module:Class\" of a wait strategy (docs/configuration.md)",
                                          False),
    Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY: (_string,
                                                 "\"module:Class\" of a wait strategy (docs/configuration.md)",
                                                 False),
    Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC: (_non_negative_number, "a non-negative number of microseconds", False),
    Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC: (_non_negative_number, "a non-negative number of microseconds",
                                                      False),
    Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL1_COUNT: (_non_negative_int, "a non-negative integer", False),
    Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL2_COUNT: (_non_negative_int, "a non-negative integer", False),
    Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS: (_positive_number, "a positive number", False),
    Config.TOPOLOGY_EXECUTOR_BLOCKING_WARN_MILLIS: _MILLIS,
    Config.TOPOLOGY_WORKER_GC_THRESHOLDS: (_gc_thresholds, ("a list of 1 to 3 integers from 0 to 2147483647, or null "
                                           "(Python's gc.set_threshold)"), True),
    Config.TOPOLOGY_WORKER_MAX_HEAP_SIZE_MB: _MEGABYTES_CAP,
    Config.TOPOLOGY_NAME: (_string, "a non-empty string", True),
    Config.TOPOLOGY_MIN_REPLICATION_COUNT: (_positive_int, "a positive integer (masters)", False),
    Config.TOPOLOGY_MAX_REPLICATION_WAIT_TIME_SEC: (lambda v: _number(v) and (v >= 0 or v == -1),
                                                    ("a non-negative number of seconds, "
                                                     "or -1 (wait as long as it takes)"), False),
    Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: _MILLIS,
    Config.TOPOLOGY_STATE_CHECKPOINT_HELD_REPORT_SECS: (_positive_number, "a positive number of seconds or null", True),
    Config.TOPOLOGY_STATE_PROVIDER: (_string, "\"module:Class\" of a state provider (docs/state.md)", False),
    Config.TOPOLOGY_STATE_PROVIDER_CONFIG: (lambda v: isinstance(v, (str, dict)),
                                            "a map, or a JSON object in a string", True),
    Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE: _BOOL,
    Config.TOPOLOGY_FILESPOUT_MAX_RECORD_BYTES: (_positive_int, "a positive number of bytes", False),
    Config.TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE: _BOOL,
    Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: (_non_negative_number, "a non-negative number of milliseconds",
                                                         False),
    Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_MULTILANG_SERIALIZER: (_multilang_serializer,
                                           ("\"json\", \"msgpack\" or Storm's class name of either "
                                            "(docs/multilang.md)"), False),
    Config.TOPOLOGY_SHELLBOLT_MAX_PENDING: (_positive_int, "a positive integer", False),
    Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS: (_positive_number, "a positive number of seconds or null", True),
    # the cluster's (checked when a daemon or client reads its configuration, and at submit)
    Config.STORM_LOCAL_DIR: (_string, "a directory (a non-empty string)", False),
    Config.STORM_LOCAL_HOSTNAME: (_string, "a host name or null", True),
    Config.STORM_CLUSTER_MODE: (_string, "a non-empty string", False),
    Config.STORM_SCHEDULER: (_string, "\"module:Class\" of an IScheduler, or null", True),
    Config.NIMBUS_SEEDS: (_strings, "a list of host names (host, or host:port for a master on another port)", True),
    Config.STORM_ZOOKEEPER_SERVERS: (_strings, ("a list of ZooKeeper host names (host, or host:port), "
                                     "or null (no Nimbus HA)"), True),
    Config.STORM_ZOOKEEPER_PORT: (_port, "a port number", False),
    Config.STORM_NIMBUS_RETRY_TIMES: (_non_negative_int, "a non-negative integer", False),
    Config.STORM_NIMBUS_RETRY_INTERVAL_MILLIS: _MILLIS,
    Config.STORM_ZOOKEEPER_ROOT: (_string, "a ZooKeeper path, e.g. /storm", False),
    Config.STORM_ZOOKEEPER_SESSION_TIMEOUT: _MILLIS,
    Config.STORM_ZOOKEEPER_CONNECTION_TIMEOUT: _MILLIS,
    Config.STORM_ZOOKEEPER_RETRY_TIMES: (_non_negative_int, "a non-negative integer", False),
    Config.STORM_ZOOKEEPER_RETRY_INTERVAL: _MILLIS,
    Config.TASK_HEARTBEAT_FREQUENCY_SECS: _SECONDS,
    Config.NIMBUS_HOST: (_string, "a host name or address", False),
    Config.NIMBUS_THRIFT_PORT: (_port, "a port number (0 to 65535; 0: any free port)", False),
    Config.NIMBUS_TASK_TIMEOUT_SECS: _SECONDS,
    Config.NIMBUS_SUPERVISOR_TIMEOUT_SECS: _SECONDS,
    Config.NIMBUS_MONITOR_FREQ_SECS: _SECONDS,
    Config.NIMBUS_TASK_LAUNCH_SECS: _SECONDS,
    Config.SUPERVISOR_SLOTS_PORTS: (_ports, "a list of port numbers (1 to 65535), e.g. [6700, 6701]", False),
    Config.SUPERVISOR_WORKER_TIMEOUT_SECS: _SECONDS,
    Config.SUPERVISOR_WORKER_START_TIMEOUT_SECS: _SECONDS,
    Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS: _SECONDS,
    Config.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS: _SECONDS,
    Config.SUPERVISOR_MONITOR_FREQUENCY_SECS: _SECONDS,
    Config.WORKER_HEARTBEAT_FREQUENCY_SECS: _SECONDS,
    Config.WORKER_HEAP_MEMORY_MB: _MEGABYTES_CAP,
    Config.ISOLATION_SCHEDULER_MACHINES: (_machines, "a mapping of topology names to numbers of machines, or null",
                                          True),
    Config.SQUALL_WORKER_MAX_LAUNCH_ATTEMPTS: (_positive_int, "a positive integer, or null (never give up)", True),
    Config.SQUALL_WORKER_CRASH_BACKOFF_SECS: _SECONDS,
    Config.STORM_HEALTH_CHECK_DIR: (_string, "a directory (a non-empty string)", False),
    Config.STORM_HEALTH_CHECK_TIMEOUT_MS: _MILLIS,
    Config.STORM_HEALTH_CHECK_FAIL_ON_TIMEOUTS: _BOOL,
    Config.SQUALL_HEALTH_CHECK_INTERVAL_SECS: _SECONDS,
    Config.SQUALL_LOCAL_SUPERVISORS: (_positive_int, "a positive integer (in-process machines)", False),
    Config.SQUALL_ENCRYPTION: (_encryption, "auto, true or false", True),
    SECRET_KEY: (_secret, (f"a string of at least {MIN_SECRET_CHARS} characters, hard to guess (quote it in YAML if "
                 f"it is all digits; unset, one is generated into <storm.local.dir>/secret)"), True),
    Config.NIMBUS_THRIFT_MAX_BUFFER_SIZE: (lambda v: _positive_int(v) and v >= MIN_FRAME_BYTES,
                                           f"a number of bytes of at least {MIN_FRAME_BYTES}", False),
    Config.SQUALL_TRANSPORT_MAX_MESSAGE_BYTES: (lambda v: _positive_int(v) and v >= 1024,
                                                "a number of bytes of at least 1024", False),
    Config.SQUALL_TRANSPORT_WIRE: (lambda v: v in ("zmq", "tcp"), "zmq or tcp", False),
    Config.SQUALL_LOG_MAX_BYTES: (_non_negative_int, "a non-negative integer (0: never rotate)", False),
    Config.SQUALL_LOG_BACKUP_COUNT: (_non_negative_int, "a non-negative integer", False),
    Config.STORM_LOG_DIR: (_string, "a directory (a non-empty string), or null for <storm.local.dir>/logs", True),
    Config.STORM_WORKERS_ARTIFACTS_DIR: (_string, "a directory (a non-empty string; relative: under storm.log.dir)",
                                         False),
    Config.LOGVIEWER_CLEANUP_INTERVAL_SECS: (_positive_int, "a positive integer number of seconds, or null (never clean up)",
                                             True),
    Config.LOGVIEWER_CLEANUP_AGE_MINS: (_positive_int, "a positive integer number of minutes", False),
    Config.LOGVIEWER_MAX_SUM_WORKER_LOGS_SIZE_MB: (_positive_int, "a positive integer number of megabytes", False),
    Config.LOGVIEWER_MAX_PER_WORKER_LOGS_SIZE_MB: (_positive_int, "a positive integer number of megabytes", False),
    Config.SQUALL_SPARK_EXECUTOR_WAIT_SECS: (_non_negative_number, "a non-negative number of seconds", False),
    Config.SQUALL_SPARK_STOP_GRACE_SECS: (_non_negative_number, "a non-negative number of seconds", False),
    Config.SQUALL_SPARK_WORKER_HOST: (_string, "a host name or address, or null", True),
    Config.UI_HOST: (_string, "a host name or address", False),
    Config.UI_PORT: (_port, "a port number (0 to 65535)", False),
    Config.UI_ALLOWED_HOSTS: (_strings, "a list of host names (\"*\": any; \"*.example.com\": any under it)", True),
    Config.UI_ACTIONS_ENABLED: _BOOL,
    Config.UI_MAX_CONNECTIONS: (_positive_int, "a positive integer", False),
    Config.UI_REQUEST_TIMEOUT_SECS: _SECONDS,
    Config.NIMBUS_THRIFT_MAX_CONNECTIONS: (_positive_int, "a positive integer", False),
    Config.NIMBUS_THRIFT_HANDSHAKE_TIMEOUT_SECS: _SECONDS,
    Config.SQUALL_TCP_KEEPALIVE_SECS: _SECONDS,
    Config.STORM_MESSAGING_NETTY_MIN_WAIT_MS: _MILLIS,
    Config.STORM_MESSAGING_NETTY_MAX_WAIT_MS: _MILLIS,
    Config.SQUALL_UI_HISTORY_INTERVAL_SECS: _SECONDS,
    Config.SQUALL_UI_HISTORY_SECS: _SECONDS,
    Config.DRPC_SERVERS: (_strings, "a list of host names (the machines running squall drpc), or null", True),
    Config.DRPC_PORT: (_port, "a port number (0 to 65535)", False),
    Config.DRPC_INVOCATIONS_PORT: (_port, "a port number (0 to 65535)", False),
    Config.DRPC_REQUEST_TIMEOUT_SECS: _SECONDS,
    Config.DRPC_MAX_BUFFER_SIZE: (lambda v: _positive_int(v) and v >= MIN_FRAME_BYTES,
                                  f"a number of bytes of at least {MIN_FRAME_BYTES}", False),
    Config.DRPC_MAX_CONNECTIONS: (_positive_int, "a positive integer", False),
    Config.DRPC_HTTP_PORT: (lambda v: type(v) is int and v <= 65535,
                            "a port number (0 to 65535; 0: any free port; negative or null: no HTTP interface)", True),
    Config.DRPC_HTTP_HOST: (_string, "a host name or address", False),
    Config.DRPC_HTTP_ALLOWED_HOSTS: (_strings, "a list of host names (\"*\": any; \"*.example.com\": any under it)",
                                     True),
    Config.DRPC_HTTP_SECRET_REQUIRED: _BOOL,
}


def validate(conf: Mapping[str, Any], where: str) -> None:
    """Check the types of the keys squall reads; the error names the key, value and place
    (a secret's type and length only, never its value)."""
    for key in _VALIDATORS:
        if key in conf:
            _check(key, conf[key], where)
    for low_key, high_key in ((Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND, Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND),
                              (Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN, Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX),
                              (Config.STORM_MESSAGING_NETTY_MIN_WAIT_MS, Config.STORM_MESSAGING_NETTY_MAX_WAIT_MS)):
        lower, higher = conf.get(low_key), conf.get(high_key)
        if lower is not None and higher is not None and lower > higher:
            raise InvalidTopologyException(
                f"{where}: {low_key!r} ({lower!r}) must not be above {high_key!r} ({higher!r})")


_FROM_DEFAULTS: Any = object()


def setting(conf: Mapping[str, Any], key: str, default: Any = _FROM_DEFAULTS,
            where: str = "cluster configuration") -> Any:
    """``conf[key]`` checked by the key's rule (the one `validate` applies); when it is missing
    or null, ``default`` if given, else the key's default in ``squall/defaults.yaml`` (None for
    a key without one). For code that may be handed a configuration nothing validated.

    Raises:
        InvalidTopologyException: the value breaks the key's rule (naming the key).
    """
    v = conf.get(key)
    if v is None:
        return _defaults().get(key) if default is _FROM_DEFAULTS else default
    _check(key, v, where)
    return checked_value(key, v)


def _whole(v: Any) -> Any:
    """``v`` with each whole-number float in it (a list's items, a map's values) as the int."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [_whole(x) for x in v]
    if isinstance(v, dict):
        return {k: _whole(x) for k, x in v.items()}
    return v


def checked_value(key: str, v: Any) -> Any:
    """``v`` as ``key``'s rule takes it: for an integer key, a whole-number float (``2.0``) as the
    int. Storm's IntegerValidator takes any Number whose value is whole (``topology.workers:
    2.0`` in a storm.yaml or a Flux file, a Double put in a Java topology's Config, a JSON
    writer's ``2.0``), and its workers read it with ``ObjectReader.getInt``; squall refused it.
    Given back as the int, so that no worker computes with a float where it counts (``range``,
    list sizes). Any other value is given back as it is (`validate` says what is wrong with it)."""
    rule = _VALIDATORS.get(key)
    if rule is None or v is None or rule[0](v):
        return v
    whole = _whole(v)
    return whole if rule[0](whole) else v


def with_whole_numbers(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``conf`` with each integer key's whole-number float as the int (`checked_value`)."""
    return {key: checked_value(key, value) if isinstance(key, str) else value for key, value in conf.items()}


def _check(key: str, v: Any, where: str) -> None:
    check, what, nullable = _VALIDATORS[key]
    if v is None and nullable:
        return
    if not check(checked_value(key, v)):
        shown = _described(v) if is_secret_key(key) else repr(redact(v))
        raise InvalidTopologyException(f"{where}: {key!r} must be {what}, got {shown}")


def _described(v: Any) -> str:
    """What ``v`` is, without its value."""
    if isinstance(v, str):
        return f"a string of {len(v)} characters"
    if isinstance(v, bytes):
        return f"{len(v)} bytes"
    return f"a value of type {type(v).__name__}"
