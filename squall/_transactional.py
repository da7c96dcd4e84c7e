"""The host's side of Trident's transactional state: keys, limits, and what a worker reaches.

Trident's coordinator keeps its durable state (the current txid, the attempt ids, each spout
coordinator's batch metadata) where the cluster keeps its own (Storm: ZooKeeper, under
``/transactional/<id>/...``). A task reaches it through a `TransactionalBackend` the host's
worker agent hands its `TopologyContext` (``context.transactional_home``); the engine knows
nothing more of it. Values cross it as opaque bytes: the task's
`TransactionalState` (here, so that `TopologyContext.transactional_state` needs no Trident)
pickles and unpickles them, the master only stores them, and what it reads back from its disk
or ZooKeeper carries its seal (`squall._sealed`).

Every store is namespaced by the topology's *name*, not its storm id, so that a topology killed
and submitted again under the same name resumes where it stopped, as Storm's coordinator does.
"""

from __future__ import annotations

import abc
import pickle
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import cloudpickle

from ._config import Config
from ._errors import SquallError
from ._nimbus import TxWrite
from ._waits import waiting_for

MAX_KEY_CHARS = 200
"""A key's longest length: it is a file name on the process host, a node name in ZooKeeper."""
MAX_VALUE_BYTES = 512 * 1024
"""A value's largest size, pickled: ZooKeeper's default ``jute.maxbuffer`` is 1 MiB, and a value
there is sealed and base64-encoded (4/3)."""
MAX_KEYS = 10_000
"""Keys one topology may hold: a coordinator keeps a few per batch in flight, so more is a leak."""

# keys are paths of segments made of these characters; "/" separates them (Storm's ZK paths)
_SEGMENT = re.compile(r"^[A-Za-z0-9_.\-]+$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.\-/]*$")
_SEP_IN_NAME = "~"  # how "/" is written in a file or node name: a character no key contains


class TransactionalStateError(SquallError):
    """A key or value the transactional state refuses (bad key, too large, too many keys)."""


class LaunchRefusedError(TransactionalStateError):
    """The master refused the transactional state to the calling worker launch: it no longer
    runs it (the topology was killed, or the worker moved or relaunched). It never will again,
    so a Trident coordinator stops its work on it (`squall.trident.coordinator`)."""


def check_key(key: Any, what: str = "key") -> str:
    """``key`` if it is a valid transactional-state key, else `TransactionalStateError` saying why.

    A key is 1-200 characters of ``A-Za-z0-9_.-``, in ``/``-separated segments, none empty, ``.``
    or ``..``.
    """
    if not isinstance(key, str):
        raise TransactionalStateError(f"transactional state {what} must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_KEY_CHARS:
        raise TransactionalStateError(f"transactional state {what} {key[:MAX_KEY_CHARS]!r} has {len(key)} "
                                      f"characters: it needs 1 to {MAX_KEY_CHARS}")
    for seg in key.split("/"):
        if not _SEGMENT.match(seg) or seg in (".", ".."):
            raise TransactionalStateError(
                f"transactional state {what} {key!r}: each '/'-separated part must be non-empty "
                f"characters A-Z a-z 0-9 _ . - (and not '.' or '..'), got {seg!r}")
    return key


def check_prefix(prefix: Any) -> str:
    """``prefix`` if keys may start with it (``""``: every key), else `TransactionalStateError`."""
    if not isinstance(prefix, str) or len(prefix) > MAX_KEY_CHARS or not _PREFIX.match(prefix):
        raise TransactionalStateError(f"transactional state prefix {prefix!r} must be a str of at most "
                                      f"{MAX_KEY_CHARS} characters A-Z a-z 0-9 _ . - /")
    return prefix


def checked_write(w: TxWrite) -> TxWrite:
    """``w`` if its key (a prefix, for a delete) and value are valid, else `TransactionalStateError`."""
    if w.value is None:
        check_prefix(w.key)
        return w
    return TxWrite(check_key(w.key), check_value(w.key, w.value))


def check_value(key: str, blob: Any) -> bytes:
    """``blob`` if it is bytes within `MAX_VALUE_BYTES`, else `TransactionalStateError` naming ``key``."""
    if not isinstance(blob, (bytes, bytearray)):
        raise TransactionalStateError(f"transactional state value of key {key!r} must be bytes, "
                                      f"got {type(blob).__name__}")
    if len(blob) > MAX_VALUE_BYTES:
        raise TransactionalStateError(f"transactional state value of key {key!r} is {len(blob)} bytes pickled; "
                                      f"the limit is {MAX_VALUE_BYTES}")
    return bytes(blob)


def key_to_name(key: str) -> str:
    """``key`` as one file or ZooKeeper node name (its ``/`` as ``~``)."""
    return key.replace("/", _SEP_IN_NAME)


def name_to_key(name: str) -> str:
    """The key `key_to_name` wrote as ``name``."""
    return name.replace(_SEP_IN_NAME, "/")


class TransactionalBackend(Protocol):
    """What the host lends a task (``context.transactional_home``): the cluster's durable
    store of opaque values, by topology name and key. Raises `TransactionalStateError` for a
    bad key or value, and whatever its link raises while the cluster is unreachable."""

    def get(self, topology: str, key: str) -> bytes | None:
        """The value of ``key``, None if there is none."""
        ...

    def put(self, topology: str, key: str, blob: bytes) -> None:
        """Set ``key`` to ``blob``, durably once this returns."""
        ...

    def delete(self, topology: str, key: str, prefix: bool = False) -> None:
        """Remove ``key`` (with ``prefix``: every key equal to it or under ``key/``; ``""``: all)."""
        ...

    def list(self, topology: str, prefix: str = "") -> list[str]:
        """The keys that start with ``prefix``, sorted."""
        ...

    def write(self, topology: str, writes: Sequence[TxWrite]) -> None:
        """Apply ``writes`` in order (`TxWrite`: a put, or a prefix delete), each durable once
        this returns; over a link, in one call."""
        ...


class MemoryBackend:
    """A `TransactionalBackend` in a dict: a `LocalCluster`'s master (which outlives its
    workers) keeps one; unit tests use it directly."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, bytes]] = {}

    def get(self, topology: str, key: str) -> bytes | None:
        """See `TransactionalBackend.get`."""
        return self._data.get(topology, {}).get(check_key(key))

    def put(self, topology: str, key: str, blob: bytes) -> None:
        """See `TransactionalBackend.put`."""
        blob = check_value(check_key(key), blob)
        keys = self._data.setdefault(topology, {})
        if key not in keys and len(keys) >= MAX_KEYS:
            raise TransactionalStateError(too_many_keys(topology, key, MAX_KEYS))
        keys[key] = blob

    def delete(self, topology: str, key: str, prefix: bool = False) -> None:
        """See `TransactionalBackend.delete`."""
        keys = self._data.get(topology, {})
        for k in (under(list(keys), key) if prefix else [check_key(key)]):
            keys.pop(k, None)

    def list(self, topology: str, prefix: str = "") -> list[str]:
        """See `TransactionalBackend.list`."""
        return starting(self._data.get(topology, {}), check_prefix(prefix))

    def write(self, topology: str, writes: Sequence[TxWrite]) -> None:
        """See `TransactionalBackend.write`."""
        write_each(self, topology, writes)


def write_each(backend: TransactionalBackend, topology: str, writes: Sequence[TxWrite]) -> None:
    """`TransactionalBackend.write` as ``backend``'s puts and prefix deletes, in order: what a
    store that keeps each key apart (memory, files, ZooKeeper nodes) does."""
    for w in writes:
        if w.value is None:
            backend.delete(topology, w.key, prefix=True)
        else:
            backend.put(topology, w.key, w.value)


def too_many_keys(topology: str, key: str, limit: int) -> str:
    """The error for a new ``key`` beyond ``limit`` (`MAX_KEYS`)."""
    return (f"transactional state of topology {topology!r} holds {limit} keys already: key {key!r} "
            f"not added (delete what a finished batch no longer needs)")


def starting(keys: Any, prefix: str) -> list[str]:
    """The keys among ``keys`` that start with ``prefix``, sorted."""
    return sorted(k for k in keys if k.startswith(prefix))


def under(keys: Any, key: str) -> list[str]:
    """The keys among ``keys`` that a prefix delete of ``key`` removes: ``key`` itself and every
    key below ``key/`` (every key for ``""``)."""
    base = check_prefix(key).rstrip("/")
    if base == "":
        return list(keys)
    return [k for k in keys if k == base or k.startswith(base + "/")]


TASK_NAMESPACE_PREFIX = "_squall_task"
"""Where the master records the state namespace each stateful task index keeps its keys in
(`squall.state._names.state_namespace`; a key no Trident name makes: `name_key` writes "_" as
"_5f"). Written once and never changed, so an answer a worker launch got from the master is
still the master's later, when none answers (`KeptAnswers`)."""


LAUNCH_CHECKED_PREFIX = "_squall_checked"
"""Not a key of the master's: under it `KeptAnswers` notes what a worker launch checked against
the master's records once (`KeptAnswers.note_checked`), which holds for the rest of the launch."""


class StoredKey(NamedTuple):
    """A key of one topology's transactional state."""

    topology: str
    key: str


class KeptAnswers:
    """The master's answers for keys it writes once and never changes (`TASK_NAMESPACE_PREFIX`)
    that a worker launch got, served again without asking the master, and what the launch checked
    against the master's records once (`note_checked`). The worker agent keeps them in its sealed
    copy of the assignment (``on_learned`` gets them all after each new one), so that its
    supervisor's restart of the launch while no master answers reads them from there: before,
    its stateful tasks asked the master for their namespaces (and a file state for the master's
    record of its last write), and the worker crash-looped until a master answered. A key never
    answered to the launch still needs the master."""

    def __init__(self, on_learned: Callable[[dict[StoredKey, bytes]], None] | None = None) -> None:
        self._answers: dict[StoredKey, bytes] = {}
        self._lock = threading.Lock()
        self.on_learned = on_learned

    @staticmethod
    def kept(key: str) -> bool:
        """Whether ``key`` is one whose answer is kept (written once by the master, or a check's)."""
        return key.startswith((TASK_NAMESPACE_PREFIX + "/", LAUNCH_CHECKED_PREFIX + "/"))

    def restore(self, answers: dict[StoredKey, bytes]) -> None:
        """Take ``answers`` (from the launch's kept copy) as known, without telling ``on_learned``."""
        with self._lock:
            self._answers.update({k: v for k, v in answers.items() if self.kept(k.key)})

    def known(self, topology: str, key: str) -> bytes | None:
        """The master's answer for ``key`` of ``topology`` this launch got, or None."""
        with self._lock:
            return self._answers.get(StoredKey(topology, key))

    def learned(self, topology: str, key: str, blob: bytes) -> None:
        """The master answered (or took) ``blob`` for ``key``: keep it if it is written once."""
        if not self.kept(key):
            return
        with self._lock:
            if self._answers.get(StoredKey(topology, key)) == blob:
                return
            self._answers[StoredKey(topology, key)] = blob
            answers = dict(self._answers)
        if self.on_learned is not None:
            self.on_learned(answers)

    def note_checked(self, topology: str, what: str) -> None:
        """This launch checked ``what`` of ``topology`` against the master's records, and it
        passed: nothing but this launch can change the answer while it runs (say, a state only
        this launch's task writes)."""
        self.learned(topology, f"{LAUNCH_CHECKED_PREFIX}/{what}", b"")

    def was_checked(self, topology: str, what: str) -> bool:
        """Whether `note_checked` noted ``what`` of ``topology`` for this launch."""
        return self.known(topology, f"{LAUNCH_CHECKED_PREFIX}/{what}") is not None

    def all(self) -> dict[StoredKey, bytes]:
        """Every answer known."""
        with self._lock:
            return dict(self._answers)


class WorkerLaunch(NamedTuple):
    """Which worker launch a `MasterBackend` speaks for: the master refuses the transactional
    state to a launch it no longer runs (killed, moved, relaunched) and to another topology's."""

    storm_id: str
    slot: str
    launch_id: int


class MasterBackend:
    """A `TransactionalBackend` through a link to the master (its ``trident_state_*``
    operations): what the worker agent hands its tasks on every host. One call at a time (the
    worker's tasks share it); a master that cannot be reached is tried ``retries`` more times,
    ``interval`` seconds apart (Storm's ``storm.zookeeper.retry.times``/``interval``, which its
    coordinator's ZooKeeper client obeys), then `squall._errors.RpcError` is raised. Every
    operation is idempotent, so one the master may have run is safe to send again. ``caller``
    (`WorkerLaunch`) goes with every call. ``answers`` (`KeptAnswers`): the master's answers for
    keys it writes once, kept as they come and read from there rather than from the master.
    ``stopping``: set when the worker stops; a call waiting to be sent again then gives up at
    once (`squall._errors.WorkerStoppingError`), rather than hold its executor's loop past the worker's
    stop (its loop was abandoned, still retrying, its ``cleanup`` never run)."""

    def __init__(self, master: Any, retries: int = 5, interval: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep, caller: WorkerLaunch | None = None,
                 answers: KeptAnswers | None = None, stopping: threading.Event | None = None) -> None:
        from ._nimbus import nimbus_client
        self.master = master  # squall.worker.calls.MasterCalls
        # the trident_state_* verbs, as NimbusIface declares them; to a master in this process
        # (LocalCluster's, `squall.worker.calls.RecordCalls`) the records go as they are, no wire map
        self._nimbus = nimbus_client(self._call, typed=getattr(master, "passes_records", False) is True)
        # sent with every call: the master refuses a launch that no longer runs, or another topology
        self._caller = caller._asdict() if caller is not None else {}
        self.retries, self.interval, self._sleep = retries, interval, sleep
        self.stopping = stopping
        self._lock = threading.Lock()
        self.answers = answers

    def _call(self, op: str, **args: Any) -> Any:
        """``op`` on the master, tried again while it is unreachable or cannot write the cluster
        state; the master's refusals of the launch or of a limit raised as themselves."""
        from ._errors import RemoteError, RpcError, WorkerStoppingError, transient
        with self._lock, waiting_for(lambda: self._waited(op)):
            for attempt in range(self.retries + 1):
                try:
                    return self.master.call(op, **args)
                except (RpcError, RemoteError) as e:
                    # unreachable, or the leader cannot write the cluster state now: sent again
                    if not transient(e):
                        if isinstance(e, RemoteError) and e.type == LaunchRefusedError.__name__:
                            raise LaunchRefusedError(str(e)) from None
                        if isinstance(e, RemoteError) and e.type == TransactionalStateError.__name__:
                            raise TransactionalStateError(str(e)) from None  # a limit the master enforces
                        raise
                    if attempt == self.retries:
                        raise
                    if self._stopped_waiting():
                        raise WorkerStoppingError(f"{op} not sent again: the worker is stopping ({e})") from e
        raise AssertionError("unreachable")

    def _waited(self, op: str) -> str:
        """What a call of ``op`` waits for, for a report of a call that does not return."""
        address = getattr(self.master, "address", None)  # a LeaderLink's: the master it calls now
        where = "the master" if address is None else f"the master at {address}"
        return f"{where} ({op}, tried up to {self.retries + 1} times: {Config.STORM_ZOOKEEPER_RETRY_TIMES} {self.retries})"

    def _stopped_waiting(self) -> bool:
        """Wait ``interval`` before the next try; True if the worker stopped meanwhile (or had)."""
        if self.stopping is None:
            self._sleep(self.interval)
            return False
        return self.stopping.wait(self.interval)

    def get(self, topology: str, key: str) -> bytes | None:
        """See `TransactionalBackend.get`; a key written once, whose answer this launch got
        before (`KeptAnswers`), is not asked again."""
        key = check_key(key)
        if self.answers is not None and (kept := self.answers.known(topology, key)) is not None:
            return kept
        blob = self._nimbus.trident_state_get(topology, key, **self._caller)
        if self.answers is not None and blob is not None:
            self.answers.learned(topology, key, blob)
        return blob

    def put(self, topology: str, key: str, blob: bytes) -> None:
        """See `TransactionalBackend.put`."""
        key, blob = check_key(key), check_value(key, blob)
        self._nimbus.trident_state_put(topology, key, blob, **self._caller)
        if self.answers is not None:
            self.answers.learned(topology, key, blob)

    def delete(self, topology: str, key: str, prefix: bool = False) -> None:
        """See `TransactionalBackend.delete`."""
        self._nimbus.trident_state_delete(topology, check_prefix(key) if prefix else check_key(key), bool(prefix),
                                          **self._caller)

    def list(self, topology: str, prefix: str = "") -> list[str]:
        """See `TransactionalBackend.list`."""
        return list(self._nimbus.trident_state_list(topology, check_prefix(prefix), **self._caller))

    def write(self, topology: str, writes: Sequence[TxWrite]) -> None:
        """See `TransactionalBackend.write`: one call to the master."""
        self._nimbus.trident_state_write(topology, [checked_write(w) for w in writes], **self._caller)


class Put(NamedTuple):
    """One change of a `TransactionalState.write`: ``key`` set to ``value``."""

    key: str
    value: Any


class Delete(NamedTuple):
    """One change of a `TransactionalState.write`: ``key`` and every key below ``key/`` removed."""

    key: str


class TransactionalState(abc.ABC):
    """A durable map from string keys to picklable values (Storm's ``TransactionalState``:
    ``setData``/``getData``/``delete``/``list``). Keys are ``/``-separated paths."""

    @abc.abstractmethod
    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, None if there is none."""

    @abc.abstractmethod
    def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``; durable once this returns.

        Raises:
            TransactionalStateError: a bad key, a value over the size limit, or too many keys.
        """

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key`` and every key below ``key/`` (Storm deletes a node with its children);
        nothing if there is none."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """The keys that start with ``prefix`` (``""``: all), sorted."""

    def write(self, changes: Sequence[Put | Delete]) -> None:
        """Apply ``changes`` in order, as `put` and `delete` would, each durable once this
        returns; where the state is the master's, in one round trip.

        Raises:
            TransactionalStateError: as `put` would, for the first change refused; the changes
                before it may have been applied.
        """
        for change in changes:
            if isinstance(change, Put):
                self.put(change.key, change.value)
            else:
                self.delete(change.key)


class BackedTransactionalState(TransactionalState):
    """A `TransactionalState` over a host's `TransactionalBackend`: the keys of ``topology``
    under ``name/``, values pickled here."""

    def __init__(self, backend: TransactionalBackend, topology: str, name: str) -> None:
        self.backend = backend
        self.topology = topology
        self.name = check_key(name, "name")

    def _full(self, key: str) -> str:
        return check_key(f"{self.name}/{check_key(key)}")

    def get(self, key: str) -> Any | None:
        """See `TransactionalState.get`."""
        blob = self.backend.get(self.topology, self._full(key))
        return None if blob is None else pickle.loads(blob)

    def put(self, key: str, value: Any) -> None:
        """See `TransactionalState.put`."""
        self.backend.put(self.topology, self._full(key), self._blob(key, value))

    def write(self, changes: Sequence[Put | Delete]) -> None:
        """See `TransactionalState.write`: one `TransactionalBackend.write`."""
        self.backend.write(self.topology, [
            TxWrite(self._full(c.key), self._blob(c.key, c.value)) if isinstance(c, Put) else TxWrite(self._full(c.key))
            for c in changes])

    @staticmethod
    def _blob(key: str, value: Any) -> bytes:
        try:
            blob = cloudpickle.dumps(value)
        except Exception as e:
            raise TransactionalStateError(f"transactional state value of key {key!r} cannot be pickled: "
                                          f"{type(e).__name__}: {e}") from e
        if len(blob) > MAX_VALUE_BYTES:
            raise TransactionalStateError(f"transactional state value of key {key!r} is {len(blob)} bytes "
                                          f"pickled; the limit is {MAX_VALUE_BYTES}")
        return blob

    def delete(self, key: str) -> None:
        """See `TransactionalState.delete`."""
        self.backend.delete(self.topology, self._full(key), prefix=True)

    def list(self, prefix: str = "") -> list[str]:
        """See `TransactionalState.list`."""
        base = f"{self.name}/"
        return [k[len(base):] for k in self.backend.list(self.topology, base + check_prefix(prefix))]


def name_key(name: str) -> str:
    """``name`` (a spout's txid id as the user gave it to ``new_stream``, any text, as Storm's
    ZooKeeper paths take) as a key: each ``/``-separated part keeps ``A-Za-z0-9.-`` and writes
    every other UTF-8 byte, ``_`` included, as ``_`` and two hex digits (so two names never share
    a key), and a part ``.`` or ``..`` as escapes too.

    Raises:
        TransactionalStateError: ``name`` is not a str, or is empty.
    """
    if not isinstance(name, str) or not name:
        raise TransactionalStateError(f"transactional state name must be a non-empty str, got {name!r}")

    def part(text: str) -> str:
        if text in (".", ".."):
            return "_2e" * len(text)
        return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in ".-") else f"_{b:02x}"
                       for b in text.encode())
    return "/".join(part(p) for p in name.split("/"))


def check_name(name: Any, what: str = "name") -> str:
    """``name`` if `transactional_state` takes it (a non-empty str with no empty ``/`` part),
    else `TransactionalStateError` naming it as ``what``."""
    key = name_key(name)
    if "" in key.split("/") or len(key) > MAX_KEY_CHARS:
        raise TransactionalStateError(f"transactional state {what} {name!r} must have no empty '/'-separated part "
                                      f"and fit {MAX_KEY_CHARS} characters once escaped (it takes {len(key)})")
    check_key(key, what)
    return name


def transactional_state(context: Any, name: str) -> TransactionalState:
    """The durable state ``name`` of the topology ``context`` belongs to, where its host keeps it
    (see the module docstring): the same for every task of the topology, and for the topology
    submitted again under the same name.

    Raises:
        TransactionalStateError: ``name`` is not a valid key, or the task's host lends no
            transactional state (a `TopologyContext` built by hand).
    """
    name = check_key(name_key(name), "name")
    backend = getattr(context, "transactional_home", None)
    if backend is None:
        raise TransactionalStateError(
            f"transactional state {name!r}: the host of task {context.get_this_task_id()} lends none "
            f"(run the topology on a LocalCluster, the process or Spark host; tests use MemoryTransactionalState)")
    conf = context.get_storm_conf() or {}
    topology = conf.get(Config.TOPOLOGY_NAME) or context.get_storm_id().rsplit("-", 2)[0]
    return BackedTransactionalState(backend, str(topology), name)
