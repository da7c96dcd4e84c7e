"""The master's verbs, defined once: squall's ``Nimbus.Iface``.

`NimbusIface` lists every verb a client, a supervisor or a worker may send the master, each a
typed method: its name is the verb's name on the wire (served by ``Master.op_<name>``), its
parameters the request's fields, its return type the reply's. `verb` marks the verbs only the
leader answers (Storm's ``assertIsLeader``) and the reads (which change nothing, so a client may
send one again after a failure). `VERBS` is that table, read from the class.

The records the verbs carry are dataclasses here: a worker's `Heartbeat` and the master's
`HeartbeatReply`, a worker's `Assignment`, a supervisor's `SupervisorSync` (with its
`WorkerExit` and `RunningWorker` reports) and the master's `SyncReply`. They cross the wire as
msgpack maps: `encode` makes the map of a record, and a map received is checked field by field
against the declared types as it is decoded (`decode`), so that a peer that sends a wrong type
gets a `ProtocolError` naming the verb and the field, not a failure deep inside the master.

Two transports carry a verb: squall's authenticated RPC channel (`squall._wire`) and a direct
call in this process (`squall.cluster.inprocess.DirectMaster`, for a `LocalCluster`). Both are
a function ``call(op, **args)``; `NimbusClient` puts the typed methods of `NimbusIface` over
either (over RPC a request goes as its wire map; to a master in this process, ``typed``, its
records go as they are). On the master's side, `decoded_request` checks what arrived and makes
the arguments of ``op_<name>``: the records built once from the wire's maps, or passed through. This module imports nothing of the cluster, so workers use it too.
"""

from __future__ import annotations

import builtins
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, Protocol, TypeVar, Union, cast, get_args, get_origin

from ._errors import SquallError

MAX_WAIT_SECS = 2**31 - 1
"""The longest wait of a kill or rebalance (Storm's ``wait_secs`` is an int of seconds): the
master refuses a longer one, and the UI a longer path segment."""

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


class ProtocolError(SquallError, ValueError):
    """A verb's request or reply is not what `NimbusIface` declares (an unknown verb, a missing,
    unknown or mistyped field); the message names the verb and the field."""


# --- records ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Heartbeat:
    """A worker's beat (``heartbeat``): which launch it is, its exact engine counters (``stats``),
    Storm's windowed statistics of its tasks (``windows``), its process's figures (``figures``),
    the errors since the last beat, whether every executor opened (``started``), the data
    ``address`` it bound, what it knows of its peers (``addresses_version``) and of deaths
    (``lost_generation`` of the master's ``epoch``), its ``pid``, its transport's counts and the
    digest of the topology's `LogConfig` it applied (``log_config_digest``)."""

    storm_id: str
    slot: str
    launch_id: int
    stats: dict[Any, Any] | None = None
    errors: list[dict[str, Any]] | None = None
    started: bool = True
    address: str | None = None
    addresses_version: int | None = None
    pid: int | None = None
    lost_generation: int | None = None
    transport: dict[Any, Any] | None = None
    epoch: str | None = None
    windows: dict[Any, Any] | None = None
    figures: dict[Any, Any] | None = None
    log_config_digest: str | None = None  # of the `LogConfig` it applied (None: it applies none)
    # numbers ``errors`` within the launch: a batch whose beat got no reply is sent again as it
    # was, and the master keeps each number once (None: a worker that does not number them)
    errors_seq: int | None = None
    # errors that happened besides the records in ``errors`` (refused by the report throttle,
    # folded out of a component's newest records): the topology's error count adds them
    errors_unrecorded: int = 0


@dataclass(frozen=True)
class LogLevel:
    """One logger's setting of a topology's `LogConfig` (Storm's ``LogLevel``): ``action``
    (``"UPDATE"``: set it; ``"REMOVE"``: drop the setting and restore the level the logger had),
    the ``target_log_level`` (one of Storm's names, `squall.worker.log_levels.LEVELS`), the
    ``reset_log_level_timeout_secs`` a client asked for (0: none) and the wall time, in seconds,
    the master computed from it (``reset_log_level_timeout_epoch``), after which workers restore
    the logger; ``reset_log_level``: the level restored, as a worker's manager records it."""

    action: str = "UPDATE"
    target_log_level: str | None = None
    reset_log_level_timeout_secs: int = 0
    reset_log_level_timeout_epoch: float | None = None
    reset_log_level: str | None = None


@dataclass(frozen=True)
class LogConfig:
    """A topology's log levels by logger name (Storm's ``LogConfig``; ``ROOT``: the root logger),
    set with ``set_log_config`` (``squall set_log_level``) and kept with the topology."""

    named_logger_level: dict[str, LogLevel] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerLost:
    """A worker of the topology died (``HeartbeatReply.lost``): what was in it, or on its way to
    its ``tasks``, may be lost; ``time`` is when the master learned it (its wall clock).
    ``executing``: ``(task, root)`` of each input its bolts were executing when it died, as its
    host read it (`squall.engine.executing`), and ``how`` it ended (``exit status 7``).
    ``launch``: the launch id that died (0: not known), by which a peer that has heard from a
    later launch of the slot tells that what it sent since went to that one
    (`squall.engine.transport.Transport.loss_age`)."""

    generation: int
    slot: str
    tasks: list[int]
    time: float
    executing: tuple[tuple[int, int], ...] = ()
    how: str = ""
    launch: int = 0


@dataclass(frozen=True)
class HeartbeatReply:
    """The master's answer to a `Heartbeat`: ``stop`` (killed, moved, or a newer launch runs),
    whether spouts may run (``active``; ``activating``: not yet, only because other workers have
    not beaten yet, so beat again soon), and only when they changed since what the beat said:
    the peers' addresses and launch ids (with the new ``addresses_version``), and the deaths
    (``lost``, with the new ``lost_generation`` and the master's ``epoch``), and the topology's
    log levels (``log_config``, with its digest)."""

    stop: bool
    active: bool = False
    activating: bool = False
    peers: dict[int, str | None] | None = None
    launch_ids: dict[str, int] | None = None
    addresses_version: int | None = None
    lost: tuple[WorkerLost, ...] = ()
    lost_generation: int | None = None
    epoch: str | None = None
    log_config: LogConfig | None = None  # when it differs from the beat's ``log_config_digest``
    log_config_digest: str | None = None
    launch_floor: int | None = None  # with ``launch_ids``: the launch of every slot they do not name


@dataclass(frozen=True)
class Assignment:
    """A starting worker's assignment (``get_assignment``): its ``plan`` (pickled over RPC, the
    object itself in a `LocalCluster`; None unless asked for), its executors' indexes, the peers'
    addresses by task (None for a peer that has not reported one yet) and launch ids by slot,
    the counters it must send back in its beats, the launch id that should run on its slot and
    whether spouts may run."""

    plan: Any
    executors: list[int]
    peers: dict[int, str | None]
    addresses_version: int
    lost_generation: int
    epoch: str
    launch_ids: dict[str, int]
    launch_id: int
    active: bool
    log_config: LogConfig | None = None  # the topology's log levels (`set_log_config`)
    log_config_digest: str = ""
    launch_floor: int = 0  # the launch of every slot ``launch_ids`` does not name (a slot gone)


SPARK_HOST = "spark"
"""The host part of a Spark slot's name (``spark:0``, ``spark:1``, ...): its workers run on
whichever executor Spark gives their task, so the master words what it says of them for that
host (`squall.cluster.spark.SparkLauncher` names its slots so)."""


EXIT_LOST = -256
"""The status of a worker its host lost without an exit status (on the Spark host: its task
cancelled, or its Python worker or executor died, so the task returned no record). Below every
``-signal`` a dead process's status can be (Linux's signals end at 64), so that it never reads
as a signal."""


@dataclass(frozen=True)
class WorkerExit:
    """A worker that ended on its own (a crash, a failed start, or the master's stop), as its
    supervisor reports it (``SupervisorSync.exits``)."""

    storm_id: str
    slot: str        # "host:port"
    launch_id: int
    status: int      # its exit status (0: it was told to stop; -N: killed by signal N; EXIT_LOST)
    started: bool    # False: it ended before it could start (EXIT_CANNOT_START)
    output: str = ""  # the last lines it wrote, often why it died
    # (task, root) of each input its bolts were executing when it died without ending on its own
    # (squall.engine.executing; a host that keeps no board says none)
    executing: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class RunningWorker:
    """A worker a supervisor runs now (``SupervisorSync.running``)."""

    port: int
    storm_id: str
    launch_id: int


@dataclass(frozen=True)
class SupervisorSync:
    """A supervisor's sync (``supervisor_sync``): its id, host and slots' ports, the workers that
    ended since its last sync, the workers it runs (None from a supervisor too old to say), and
    why its node fails its health checks, if it does."""

    supervisor_id: str
    host: str
    ports: list[int]
    exits: tuple[WorkerExit, ...] = ()
    running: tuple[RunningWorker, ...] | None = None
    unhealthy: str | None = None


@dataclass(frozen=True)
class Launch:
    """What one slot must run: a launch of a topology (``SyncReply.slots``)."""

    storm_id: str
    name: str       # the topology's name, for logs
    launch_id: int


@dataclass(frozen=True)
class MasterAddress:
    """Where a master listens (``nimbus.host``, ``nimbus.thrift.port``): the one that answered a
    sync (`SyncReply`), or the leader (``get_leader``)."""

    host: str | None
    port: int | None


@dataclass(frozen=True)
class SyncReply:
    """The master's answer to a `SupervisorSync`: the launch each of the supervisor's slots must
    run, by port (as text: a msgpack map key), and the master's address."""

    slots: dict[str, Launch]
    master: MasterAddress | None = None


@dataclass(frozen=True)
class TxWrite:
    """One change in a `NimbusIface.trident_state_write`: ``key`` set to ``value``, or, with
    ``value`` None, ``key`` and every key under it removed (`squall._transactional`)."""

    key: str
    value: bytes | None = None


# --- records to and from the wire ---------------------------------------------------------------------
def encode(record: Any, sparse: bool = False) -> dict[str, Any]:
    """A record's msgpack-able map (nested records as maps, tuples as lists). ``sparse``: the
    fields at their default left out (`decode` puts them back): a master's replies, most of whose
    fields are usually at their default, go so."""
    if sparse:
        return {name: _encode(value, hint) if nested else value for name, hint, default, nested in _layout(type(record))
                if (value := getattr(record, name)) is not default and value != default}
    return {name: _encode(getattr(record, name), hint) if nested else getattr(record, name)
            for name, hint, _, nested in _layout(type(record))}


def decode(cls: type[R], data: Any, where: str = "") -> R:
    """The record ``cls`` of the map ``data``, each field checked against its declared type.
    Raises `ProtocolError` naming ``where`` (a verb) and the field."""
    return _decode(data, cls, where or cls.__name__, "")


_FIELDS: dict[type, tuple[tuple[Any, Any], ...]] = {}


def _fields(cls: type) -> tuple[tuple[Any, Any], ...]:
    """A record's fields with their resolved types (read once per record type)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple((f, hints[f.name]) for f in fields(cls))
    return found


_LAYOUTS: dict[type, tuple[tuple[str, Any, Any, bool], ...]] = {}
_NAMES: dict[type, frozenset[str]] = {}


def _layout(cls: type) -> tuple[tuple[str, Any, Any, bool], ...]:
    """A record's fields as (name, resolved type, default (`REQUIRED`: none), whether its values
    may hold a record), read once per record type: a heartbeat is decoded and its reply encoded
    many times a second, and `dataclasses.fields` and the typing module are slow."""
    found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = tuple((f.name, hint, _default(f), _holds_record(hint)) for f, hint in _fields(cls))
        _NAMES[cls] = frozenset(name for name, _, _, _ in found)
    return found


@cache
def _holds_record(spec: Any) -> bool:
    """Whether values of ``spec`` may hold a record (else they cross the wire as they are)."""
    if isinstance(spec, type) and is_dataclass(spec):
        return True
    return any(_holds_record(a) for a in get_args(spec) if a is not Ellipsis)


def _encode(value: Any, spec: Any) -> Any:
    if value is None or not _holds_record(spec):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, (list, tuple)):
        return [_encode(v, _element(spec)) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v, _value(spec)) for k, v in value.items()}
    return value


def _element(spec: Any) -> Any:
    for a in _options(spec):
        if get_origin(a) in (list, tuple):
            return get_args(a)[0]
    return Any


def _value(spec: Any) -> Any:
    for a in _options(spec):
        if get_origin(a) is dict:
            return get_args(a)[1]
    return Any


def _options(spec: Any) -> tuple[Any, ...]:
    return get_args(spec) if get_origin(spec) in (Union, types.UnionType) else (spec,)


_SCALARS: dict[Any, tuple[type, ...]] = {str: (str,), bytes: (bytes,), bool: (bool,), int: (int,),
                                         float: (int, float)}


def _decode(value: Any, spec: Any, verb_name: str, path: str) -> Any:
    """``value`` checked against ``spec`` (records built from their maps, tuples from lists)."""
    if spec is Any:
        return value
    if type(spec) is type:  # the common fields first: a scalar, a record
        allowed = _SCALARS.get(spec)
        if allowed is not None:
            if not isinstance(value, allowed) or (spec in (int, float) and isinstance(value, bool)):
                raise _mistyped(value, spec, verb_name, path)
            return value
        if is_dataclass(spec):
            return _decode_record(value, spec, verb_name, path)
    origin = get_origin(spec)
    if origin in (Union, types.UnionType):
        options = get_args(spec)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None) and _fits(value, option):
                return _decode(value, option, verb_name, path)
        raise _mistyped(value, spec, verb_name, path)
    if spec is None or spec is type(None):
        if value is not None:
            raise _mistyped(value, spec, verb_name, path)
        return None
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _mistyped(value, spec, verb_name, path)
        element = get_args(spec)[0]
        items = [_decode(v, element, verb_name, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise _mistyped(value, spec, verb_name, path)
        key, val = get_args(spec)
        if key is Any and val is Any:
            return value
        return {_decode(k, key, verb_name, f"{path} key"): _decode(v, val, verb_name, f"{path}[{k!r}]")
                for k, v in value.items()}
    if origin is not None:
        spec = origin
    allowed = _SCALARS.get(spec, (spec,))
    if not isinstance(value, allowed) or (spec in (int, float) and isinstance(value, bool)):
        raise _mistyped(value, spec, verb_name, path)
    return value


def _decode_record(value: Any, spec: type, verb_name: str, path: str) -> Any:
    """The record ``spec`` of the map ``value`` (each field checked), or ``value`` itself when it
    is that record already (passed in this process: the direct transport)."""
    if isinstance(value, spec):
        return value
    if not isinstance(value, Mapping):
        raise _mistyped(value, spec, verb_name, path)
    layout = _layout(spec)
    if not _NAMES[spec].issuperset(value):
        unknown = sorted(str(k) for k in value if k not in _NAMES[spec])
        raise ProtocolError(f"{verb_name}: unknown field {_join(path, unknown[0])!r}")
    made = {}
    for name, hint, default, _ in layout:
        if name in value:
            made[name] = _decode(value[name], hint, verb_name, _join(path, name))
        elif default is REQUIRED:
            raise ProtocolError(f"{verb_name}: field {_join(path, name)!r} is missing")
    return spec(**made)


def _fits(value: Any, spec: Any) -> bool:
    """Whether ``value`` is of ``spec``'s kind at its top (the union's option to decode it as)."""
    origin = get_origin(spec) or spec
    if spec is Any:
        return True
    if isinstance(spec, type) and is_dataclass(spec):
        return isinstance(value, (Mapping, spec))
    if origin in (list, tuple):
        return isinstance(value, (list, tuple))
    allowed = _SCALARS.get(origin, (origin,))
    return isinstance(value, allowed) and not (origin in (int, float) and isinstance(value, bool))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _mistyped(value: Any, spec: Any, verb_name: str, path: str) -> ProtocolError:
    return ProtocolError(f"{verb_name}: field {path or 'value'!r} must be {_describe(spec)}, "
                         f"got {type(value).__name__}")


def _describe(spec: Any) -> str:
    if isinstance(spec, type):
        return "None" if spec is type(None) else spec.__name__
    return str(spec).replace("typing.", "")


# --- the verbs -------------------------------------------------------------------------------------
def verb(*, leader_only: bool = False, read: bool = False) -> Callable[[F], F]:
    """Mark a method of `NimbusIface` as a verb: ``leader_only`` (a follower refuses it with
    `NotLeaderException`), ``read`` (it changes nothing: a client may send it again)."""
    def mark(fn: F) -> F:
        fn.__nimbus_verb__ = (leader_only, read)  # type: ignore[attr-defined]
        return fn
    return mark


class NimbusIface(Protocol):
    """Every verb of the master (Storm's ``Nimbus.Iface``); ``Master.op_<name>`` serves each."""

    # Storm's topology verbs: every change is the leader's
    @verb(leader_only=True)
    def submit(self, name: str, conf: dict[str, Any], topology: bytes, initial_status: str = "ACTIVE") -> str:
        """Submit the pickled ``topology`` under ``name``; its storm id."""
        ...

    @verb(leader_only=True)
    def check_submit(self, name: str, conf: dict[str, Any], topology: bytes, replacing: bool = False) -> None:
        """Whether ``submit`` would take the pickled ``topology`` under ``name``, without
        submitting it (raises as ``submit`` does); with ``replacing``, as if the topology of that
        name were gone, its slots free (sparse's ``-f`` asks before it kills)."""
        ...

    @verb(leader_only=True)
    def kill(self, name: str, wait_secs: float | None = None) -> None:
        """Kill ``name`` after ``wait_secs`` (default: its message timeout)."""
        ...

    @verb(leader_only=True)
    def activate(self, name: str) -> None:
        """Activate ``name``'s spouts."""
        ...

    @verb(leader_only=True)
    def deactivate(self, name: str) -> None:
        """Deactivate ``name``'s spouts."""
        ...

    @verb(leader_only=True)
    def rebalance(self, name: str, num_workers: Any = None, executors: Any = None,
                  wait_secs: float | None = None) -> None:
        """Move ``name`` to new worker and executor counts after ``wait_secs``. The counts (an int,
        and a map of component to int, or None) are checked by the master itself, whose
        `InvalidTopologyException` names what is wrong in the user's terms."""
        ...

    @verb(leader_only=True)
    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> dict[str, Any]:
        """Set the debug switch of ``name`` (or of its ``component``); the record kept."""
        ...

    @verb(leader_only=True)
    def set_log_config(self, name: str, config: LogConfig) -> LogConfig:
        """Storm's ``setLogConfig``: merge ``config``'s settings (``UPDATE``, ``REMOVE``) into
        ``name``'s log levels; the topology's `LogConfig` now."""
        ...

    # reads: any master answers them
    @verb(read=True)
    def get_log_config(self, name: str) -> LogConfig:
        """Storm's ``getLogConfig``: ``name``'s log levels."""
        ...

    @verb(read=True)
    def list(self) -> list[dict[str, Any]]:
        """One summary per topology."""
        ...

    @verb(read=True)
    def info(self, name: str) -> dict[str, Any]:
        """Status, counts, errors, configuration and workers of ``name``."""
        ...

    @verb(read=True)
    def cluster_info(self) -> dict[str, Any]:
        """The cluster's summary: masters, supervisors, slots, topologies."""
        ...

    @verb(read=True)
    def supervisors(self) -> builtins.list[dict[str, Any]]:
        """One summary per supervisor."""
        ...

    @verb(read=True)
    def configuration(self) -> dict[str, Any]:
        """The master's configuration."""
        ...

    @verb(read=True)
    def topology_page(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm UI's topology page of ``name``."""
        ...

    @verb(read=True)
    def component_page(self, name: str, component: str, window: str | None = None,
                       sys: bool = False) -> dict[str, Any]:
        """Storm UI's component page of ``name``'s ``component``."""
        ...

    @verb(read=True)
    def visualization(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm UI's visualization of ``name``."""
        ...

    @verb(read=True)
    def visualization_init(self, name: str, sys: bool = False) -> dict[str, Any]:
        """Storm UI's visualization layout of ``name``."""
        ...

    @verb(read=True)
    def statistics(self, name: str, window: str | None = None) -> dict[str, Any]:
        """The figures of ``name`` the Prometheus endpoint exports."""
        ...

    # Nimbus HA
    @verb(read=True)
    def get_leader(self) -> MasterAddress | None:
        """Where the leader listens; None while an election is under way."""
        ...

    @verb(read=True)
    def nimbuses(self) -> builtins.list[dict[str, Any]]:
        """Each master with its status."""
        ...

    @verb()
    def code(self, storm_id: str) -> bytes:
        """The sealed plan of ``storm_id`` (another master fetches it; not for clients)."""
        ...

    # supervisors and workers: squall's daemons reach the leader, as Storm's write its ZooKeeper
    @verb(leader_only=True)
    def supervisor_sync(self, sync: SupervisorSync) -> SyncReply:
        """A supervisor's slots and reports; what each slot must run."""
        ...

    @verb(leader_only=True)
    def get_assignment(self, storm_id: str, slot: str, address: str | None = None, launch_id: int | None = None,
                       want_plan: bool = True) -> Assignment:
        """A starting worker's assignment; it reports the data ``address`` it bound."""
        ...

    @verb(leader_only=True)
    def heartbeat(self, beat: Heartbeat) -> HeartbeatReply:
        """A worker's beat; what it must do next."""
        ...

    @verb(leader_only=True)
    def report_errors(self, storm_id: str, slot: str, launch_id: int, errors: builtins.list[dict[str, Any]]) -> None:
        """A worker that could not start says why."""
        ...

    # Trident's transactional state (`squall._transactional.MasterBackend`)
    @verb(leader_only=True)
    def trident_state_get(self, topology: str, key: str, storm_id: str | None = None, slot: str | None = None,
                          launch_id: int | None = None) -> bytes | None:
        """The value of ``key`` in ``topology``'s transactional state."""
        ...

    @verb(leader_only=True)
    def trident_state_put(self, topology: str, key: str, value: bytes, storm_id: str | None = None,
                          slot: str | None = None, launch_id: int | None = None) -> None:
        """Set ``key`` of ``topology``'s transactional state."""
        ...

    @verb(leader_only=True)
    def trident_state_delete(self, topology: str, key: str, prefix: bool = False, storm_id: str | None = None,
                             slot: str | None = None, launch_id: int | None = None) -> None:
        """Remove ``key`` (``prefix``: and every key under it) of ``topology``'s transactional state."""
        ...

    @verb(leader_only=True)
    def trident_state_write(self, topology: str, writes: builtins.list[TxWrite], storm_id: str | None = None,
                            slot: str | None = None, launch_id: int | None = None) -> None:
        """Apply ``writes`` to ``topology``'s transactional state, in order, in one call (a
        Trident coordinator's keys of one step: one round trip, not one a key)."""
        ...

    @verb(leader_only=True)
    def trident_state_list(self, topology: str, prefix: str = "", storm_id: str | None = None,
                           slot: str | None = None, launch_id: int | None = None) -> builtins.list[str]:
        """The keys of ``topology``'s transactional state under ``prefix``, sorted."""
        ...


@dataclass(frozen=True)
class Arg:
    """One field of a verb's request: its name, declared type, and default (`REQUIRED`: none)."""

    name: str
    type: Any
    default: Any


REQUIRED = inspect.Parameter.empty
"""`Arg.default` of a field the request must carry."""


@dataclass(frozen=True)
class Verb:
    """One verb of `NimbusIface`: its wire name, request fields, reply type and flags.

    ``record``: the request is that record (`Heartbeat`, `SupervisorSync`), the one argument
    ``param`` (``beat``, ``sync``) of ``Master.op_<name>``, sent over RPC as its fields."""

    name: str
    args: tuple[Arg, ...]
    reply: Any
    leader_only: bool
    read: bool
    record: type | None
    param: str | None
    signature: inspect.Signature

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The arguments of a call ``verb(*args, **kwargs)`` made as `NimbusIface` declares it, by
        name (a record verb's: its record, checked to be one)."""
        bound = self.signature.bind(None, *args, **kwargs)
        given = dict(bound.arguments)
        given.pop("self")
        if self.record is not None:
            (value,) = given.values()
            if not isinstance(value, self.record):
                raise ProtocolError(f"{self.name}: needs a {self.record.__name__}, got {type(value).__name__}")
        return given

    def encode_request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The wire arguments of a call ``verb(*args, **kwargs)`` made as `NimbusIface` declares it."""
        given = self.bind(*args, **kwargs)
        if self.param is not None:
            return encode(given[self.param])
        return {a.name: _encode(given[a.name], a.type) for a in self.args if a.name in given}

    def decode_request(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``Master.op_<name>``, as `NimbusIface` declares them, of a
        request as it arrived: over RPC its wire map (a record verb's record sent as its
        fields), each field checked against its declared type and each record built from its
        map; from a transport in this process, those arguments themselves, a record passed as it
        is (a record verb's ``{param: record}``). Defaults are left to the master's method.
        Raises `ProtocolError` naming the verb and the field."""
        if not isinstance(args, Mapping):
            raise ProtocolError(f"{self.name}: the request is a {type(args).__name__}, not a map")
        if self.param is not None:
            given = args.get(self.param)
            if isinstance(given, self.record) and len(args) == 1:  # type: ignore[arg-type]
                return {self.param: given}
            return {self.param: _decode(args, self.record, self.name, "")}
        known = {a.name for a in self.args}
        unknown = sorted(str(k) for k in args if k not in known)
        if unknown:
            raise ProtocolError(f"{self.name}: unknown field {unknown[0]!r}")
        decoded = {}
        for a in self.args:
            if a.name in args:
                decoded[a.name] = _decode(args[a.name], a.type, self.name, a.name)
            elif a.default is REQUIRED:
                raise ProtocolError(f"{self.name}: field {a.name!r} is missing")
        return decoded

    def encode_reply(self, value: Any) -> Any:
        """The reply ``Master.op_<name>`` returned, as it goes on the wire: a record as its map,
        without the fields at their default (`encode`'s ``sparse``; `decode_reply` restores them)."""
        if is_dataclass(value) and not isinstance(value, type):
            return encode(value, sparse=True)
        return _encode(value, self.reply)

    def decode_reply(self, value: Any) -> Any:
        """The reply as `NimbusIface` declares it (a record built from its map, or taken as it is
        from a master in this process). Raises `ProtocolError` naming the verb and the field."""
        return _decode(value, self.reply, f"{self.name} reply", "")


def _verbs(iface: type) -> dict[str, Verb]:
    out = {}
    for name, fn in vars(iface).items():
        flags = getattr(fn, "__nimbus_verb__", None)
        if flags is None:
            continue
        hints = typing.get_type_hints(fn)
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.name != "self"]
        record = param = None
        if len(params) == 1 and is_dataclass(hints[params[0].name]):
            record, param = hints[params[0].name], params[0].name
            args = tuple(Arg(f.name, hint, _default(f)) for f, hint in _fields(record))
        else:
            args = tuple(Arg(p.name, hints[p.name], p.default) for p in params)
        leader_only, read = flags
        out[name] = Verb(name, args, hints["return"], leader_only, read, record, param, sig)
    return out


def _default(f: Any) -> Any:
    """A record field's default, `REQUIRED` if it has none."""
    if f.default is not MISSING:
        return f.default
    return REQUIRED if f.default_factory is MISSING else f.default_factory()


VERBS: dict[str, Verb] = _verbs(NimbusIface)
"""Every verb of the master by wire name."""

LEADER_ONLY = frozenset(v.name for v in VERBS.values() if v.leader_only)
"""The verbs a follower refuses (Storm's leader-only requests, and squall's supervisors' syncs,
workers' heartbeats and Trident's transactional state, which Storm's daemons write to ZooKeeper
themselves)."""

READS = frozenset(v.name for v in VERBS.values() if v.read)
"""The verbs that change nothing."""


def verb_named(op: Any) -> Verb:
    """The verb ``op``. Raises `ProtocolError` (a `ValueError`) for an unknown one."""
    found = VERBS.get(op) if isinstance(op, str) else None
    if found is None:
        raise ProtocolError(f"unknown operation {op!r}")
    return found


def decoded_request(op: Any, args: Mapping[str, Any]) -> tuple[Verb, dict[str, Any]]:
    """The verb ``op`` and the arguments of ``Master.op_<name>`` (`Verb.decode_request`): what a
    master runs on what arrived, from the wire or from this process. Raises `ProtocolError`
    naming the verb and the field, or an unknown ``op``."""
    found = verb_named(op)
    return found, found.decode_request(args)


class NimbusClient:
    """`NimbusIface` over a transport ``call(op, **args)``: each method sends its request and
    returns the reply as the verb declares it (a record where it declares one). Over an RPC
    link the request goes as its wire map and the reply is decoded from its own; with
    ``typed``, the transport is a master in this process (`squall.cluster.inprocess.DirectMaster`)
    that takes the arguments and returns the reply as they are, records and all, no map
    between. The methods are made from `VERBS`, never written out; make one with `nimbus_client`
    to have them typed as `NimbusIface` declares them."""

    def __init__(self, call: Callable[..., Any], typed: bool = False) -> None:
        self.call = call
        self.typed = typed


def nimbus_client(call: Callable[..., Any], typed: bool = False) -> NimbusIface:
    """A `NimbusClient` over ``call`` (``typed``: a master in this process), typed as the
    `NimbusIface` it implements."""
    return cast(NimbusIface, NimbusClient(call, typed))


def _client_method(v: Verb) -> Callable[..., Any]:
    def method(self: NimbusClient, *args: Any, **kwargs: Any) -> Any:
        if self.typed:
            return self.call(v.name, **v.bind(*args, **kwargs))
        return v.decode_reply(self.call(v.name, **v.encode_request(*args, **kwargs)))
    method.__name__ = method.__qualname__ = v.name
    method.__doc__ = getattr(NimbusIface, v.name).__doc__
    return method


for _v in VERBS.values():
    setattr(NimbusClient, _v.name, _client_method(_v))
del _v
