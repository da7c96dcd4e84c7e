"""`FileKeyValueStateProvider`: states in files, under ``<storm.local.dir>/state`` by default.

The process and Spark hosts' own store (what the default provider uses there). One directory
per state, ``<root>/<topology>/ns-<namespace, %-quoted>``, holding two files:

- ``committed``: the committed entries and the txid they are at;
- ``prepared``: the prepared transaction, while there is one.

Each file is replaced atomically (written aside, then renamed) and owner-only, and sealed with a
MAC under the cluster's secret, bound to its namespace and role (`squall._sealed`): a file in a
state directory is hostile until its MAC checks, since with ``topology.fall.back.on.pickle`` a
value may be a pickle. After the MAC, the layout is checked too; anything wrong is a `StateError`
naming the file. A commit writes ``committed`` before it removes ``prepared``: a crash between
leaves a prepared txid at or below the committed one, which loading drops.

A write that fails (a full disk, a quota, a read-only file system) raises `DiskWriteError` naming
the file, the state, the cause and what to do; the files as last written are intact, so the
last commit still loads (the checkpoint fails, and is tried again).

A commit rewrites the whole state (docs/state.md measures it): keep states small, or use Redis.
``topology.state.provider.config`` may set ``{"directory": path}`` (relative to the worker's
working directory), whose files are then authenticated by a secret of its own, ``<directory>/secret``.

**Which copy is the latest.** A state's files are on the machine whose worker wrote them: a task
that a rebalance (or a lost machine) moves to another machine finds there no copy, or an older
one from an earlier stay. Started from it, it would go on committing and lose every update the
other copy holds (and a move back would bring the older copy back). So ``committed`` also
records its `Lineage` (the storm id of the run that wrote it and how many times the file was
written), and each write is reported to the master, in its transactional state (the same for
every machine, and kept by Nimbus HA), under ``_squall_state/<namespace>`` of the topology
(`LastWrite`; over the network on a thread of its own, so a master away holds up no commit). A state opened on a machine whose copy is behind that record is refused with a
`StateError` naming the task, the machine that wrote the last commit and what to do
(`LastWrite.check`). A copy behind a write made on its own machine (the directory removed) is
taken with a warning: there is no other copy to prefer (``committed`` is fsynced, so a crash
loses no commit). A topology submitted again under the same name whose task finds no copy on
its machine is refused too, unless the provider's ``"start_afresh"`` says its states were
deleted on purpose.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

import msgpack

from .._config import Config
from .._errors import DiskWriteError
from .._private import Kept, private_dir, write_failure, write_private
from .._sealed import SealError, seal, unseal
from .._transactional import LaunchRefusedError, MasterBackend, name_key
from ._api import KeyValueState, StateError, StateProvider, state_key
from ._background import LatestWrites
from ._kv import Changes, MemoryStore, StateCodec, TransactionalKeyValueState, _apply
from ._names import PROVIDER_CONFIG_KEY, owner_of, provider_config, state_home, topology_of

if TYPE_CHECKING:
    from .._context import TopologyContext

log = logging.getLogger(__name__)

_FORMAT = 1  # [1, txid, entries]: ``prepared``, and ``committed`` as squall wrote it before lineages
_COMMITTED_FORMAT = 2  # [2, txid, entries, writer, writes]: ``committed``
_RECORD_PREFIX = "_squall_state"  # a key no Trident name makes (name_key writes "_" as "_5f")


class Lineage(NamedTuple):
    """Which write of a state's ``committed`` file a copy holds: ``writer``, the storm id of the
    run that wrote it (None: a file written before squall recorded it), and ``writes``, how many
    times the file had been written then (every run counting on from the copy it loaded)."""

    writer: str | None
    writes: int


def state_dir(root: str | os.PathLike, topology: str, namespace: str) -> Path:
    """The directory of ``namespace``'s state of ``topology`` under ``root``."""
    return Path(root) / quote(topology, safe="") / ("ns-" + quote(namespace, safe=""))


class FileStore(MemoryStore):
    """A `squall.state._kv.StateStore` in one directory (a `MemoryStore` that writes each change
    through to its files before it takes it); see the module docstring."""

    def __init__(self, directory: str | os.PathLike, namespace: str, key: bytes, kept: Kept | None = None,
                 writer: str | None = None) -> None:
        super().__init__()
        self.writer = writer  # the storm id recorded as the writer of what this store writes
        # told of each write of ``committed``, once it is on disk (`LastWrite.record`)
        self.on_write: Callable[[Lineage], None] | None = None
        self.kept = kept or Kept(f"the state of namespace {namespace!r}", "the state directory")
        try:
            self.dir = private_dir(directory)
        except OSError as e:
            raise write_failure(e, Path(directory), self.kept, atomic=False) from e
        self.namespace = namespace
        self._key = key
        self.commit_txid, committed, self.lineage = self._read("committed")
        self.committed = {k: v for k, v in committed.items() if v is not None}
        self.prepare_txid, self.prepared_changes, _ = self._read("prepared")
        if self.prepare_txid is not None and self.commit_txid is not None and self.prepare_txid <= self.commit_txid:
            self.prepare_txid, self.prepared_changes = None, {}  # committed, then the crash came

    def _kind(self, role: str) -> bytes:
        return f"state {quote(self.namespace, safe='')} {role}".encode()

    def _read(self, role: str) -> tuple[int | None, Changes, Lineage | None]:
        """``role``'s txid, entries and (``committed`` only) `Lineage`; None, {}, None when the
        file does not exist."""
        path = self.dir / role
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None, {}, None
        except OSError as e:
            raise StateError(f"state file {path} cannot be read: {e}") from e
        try:
            fmt, txid, entries, *rest = msgpack.unpackb(unseal(self._key, self._kind(role), blob), raw=False)
            if role == "committed" and fmt == _COMMITTED_FORMAT:
                writer, writes = rest
                if not ((writer is None or type(writer) is str) and type(writes) is int):
                    raise ValueError(f"writer {writer!r}, writes {writes!r}")
                lineage: Lineage | None = Lineage(writer, writes)
            elif fmt == _FORMAT and not rest:
                lineage = Lineage(None, 0) if role == "committed" else None
            else:
                raise ValueError(f"format {fmt!r}")
            if not (txid is None or type(txid) is int):
                raise ValueError(f"txid {txid!r}")
            changes: Changes = {}
            for k, v in entries:
                if type(k) is not bytes or not (type(v) is bytes or (v is None and role == "prepared")):
                    raise ValueError("an entry is not a pair of bytes")
                changes[k] = v
        except SealError as e:
            raise StateError(f"state file {path} is refused: {e} (it was not written by this cluster's "
                             f"state store; delete the directory {self.dir} to start this state afresh)") from None
        except Exception as e:  # noqa: BLE001 (whatever fails to decode: the file is malformed, said as a StateError)
            raise StateError(f"state file {path} is malformed ({type(e).__name__}: {e}); delete the "
                             f"directory {self.dir} to start this state afresh") from None
        return txid, changes, lineage

    def _write(self, role: str, txid: int | None, changes: Changes) -> None:
        payload = msgpack.packb([_FORMAT, txid, [[k, v] for k, v in changes.items()]], use_bin_type=True)
        # fsynced as ``committed`` is: once every bolt acked its prepare, the checkpoint spout
        # saves COMMITTING, and a restart then commits what ``prepared`` holds
        write_private(self.dir / role, seal(self._key, self._kind(role), payload), self.kept, durable=True)

    def _write_committed(self, txid: int | None, entries: Changes) -> None:
        """Write ``committed`` as the next write of this store's lineage, then tell `on_write`."""
        lineage = Lineage(self.writer, (self.lineage.writes if self.lineage else 0) + 1)
        payload = msgpack.packb([_COMMITTED_FORMAT, txid, [[k, v] for k, v in entries.items()], *lineage],
                                use_bin_type=True)
        # fsynced: once a commit returns its tuples are acked and never replayed, so a commit a
        # machine's crash lost before it reached the disk would be updates lost for good
        write_private(self.dir / "committed", seal(self._key, self._kind("committed"), payload), self.kept,
                      durable=True)
        self.lineage = lineage
        if self.on_write is not None:
            self.on_write(lineage)

    def prepare(self, txid: int, changes: Changes) -> None:
        """`StateStore.prepare`: write ``changes`` as transaction ``txid`` to the ``prepared`` file
        (replacing any), then hold it in memory."""
        with self.lock:
            self._write("prepared", txid, changes)
            self.prepare_txid, self.prepared_changes = txid, dict(changes)

    def commit(self, txid: int) -> None:
        """`StateStore.commit`: rewrite ``committed`` with the prepared changes at ``txid``, then remove
        ``prepared`` (a crash between leaves a prepared txid that loading drops)."""
        with self.lock:
            merged = dict(self.committed)
            _apply(merged, self.prepared_changes)
            self._write_committed(txid, merged)  # type: ignore[arg-type]
            (self.dir / "prepared").unlink(missing_ok=True)
            self.committed, self.commit_txid = merged, txid
            self.prepare_txid, self.prepared_changes = None, {}

    def apply(self, changes: Changes) -> None:
        """`StateStore.apply`: rewrite ``committed`` with ``changes`` at once, its txid unchanged
        (no transaction)."""
        with self.lock:
            merged = dict(self.committed)
            _apply(merged, changes)
            self._write_committed(self.commit_txid, merged)  # type: ignore[arg-type]
            self.committed = merged

    def rollback(self) -> None:
        """`StateStore.rollback`: remove the ``prepared`` file and forget the prepared transaction."""
        with self.lock:
            (self.dir / "prepared").unlink(missing_ok=True)
            self.prepare_txid, self.prepared_changes = None, {}


_SETTINGS = ("directory", "start_afresh")
"""What ``topology.state.provider.config`` may set for the file provider."""


def _start_afresh(options: dict[str, Any], owner: str) -> bool:
    afresh = options.get("start_afresh", False)
    if type(afresh) is not bool:
        raise StateError(f"{owner}: {PROVIDER_CONFIG_KEY!r}'s \"start_afresh\" must be true or false, got {afresh!r}")
    return afresh


class FileKeyValueStateProvider(StateProvider):
    """States in sealed files; see the module docstring."""

    @staticmethod
    def check_config(options: dict[str, Any], owner: str) -> None:
        """At submit: only `_SETTINGS`, each of its type. A misspelt ``"directory"`` was ignored,
        and the states went to ``storm.local.dir`` (a directory a redeployment may wipe) instead
        of the one the user named, without a word; Redis's provider refuses what it does not
        know too. (Not in `new_state`: the in-memory provider, the hosts' default, makes its
        states here with whatever settings its topology gives.)"""
        unknown = sorted(str(k) for k in options if k not in _SETTINGS)
        if unknown:
            raise StateError(f"{owner}: {PROVIDER_CONFIG_KEY!r} has unknown settings {unknown} for "
                             f"squall.state:FileKeyValueStateProvider (it takes \"directory\" and \"start_afresh\")")
        directory = options.get("directory")
        if directory is not None and (not isinstance(directory, (str, os.PathLike)) or not str(directory)):
            raise StateError(f"{owner}: {PROVIDER_CONFIG_KEY!r}'s \"directory\" must be a path, got {directory!r}")
        _start_afresh(options, owner)

    def new_state(self, namespace: str, conf: dict[str, Any], context: TopologyContext | None) -> KeyValueState:
        owner = owner_of(namespace, context)
        home = state_home(context)
        options = provider_config(conf, owner)
        given = options.get("directory")
        afresh = _start_afresh(options, owner)
        root = given or home.directory
        if root is None:
            raise StateError(f"{owner}: squall.state:FileKeyValueStateProvider needs a directory: this host "
                             f"has no storm.local.dir for states (LocalCluster); set "
                             f"topology.state.provider.config to {{\"directory\": \"...\"}}")
        # the host's key for the host's store; a directory of the user's own keeps its own key
        key = home.key if not given and home.key is not None else _local_key(Path(root))
        where = (f"the \"directory\" of {PROVIDER_CONFIG_KEY}" if given
                 else f"storm.local.dir (the host keeps states in {root})")
        kept = Kept(f"the state of {owner}, namespace {namespace!r}", where)
        # the master's record of the last write, where the host lends its transactional state
        backend = getattr(context, "transactional_home", None)
        storm_id = context.get_storm_id() if context is not None and backend is not None else None
        try:
            store = FileStore(state_dir(root, topology_of(conf), namespace), namespace, key, kept, writer=storm_id)
        except DiskWriteError:
            raise
        except OSError as e:
            raise StateError(f"{owner}: the state directory under {root} cannot be used: {e}") from e
        except StateError as e:
            raise StateError(f"{owner}: {e}") from None
        if backend is not None and storm_id is not None:
            last = LastWrite(backend, topology_of(conf), namespace, storm_id, home.machine or socket.gethostname(),
                             os.path.abspath(root), owner)
            last.check(store.lineage, store.dir, f"the \"directory\" of {PROVIDER_CONFIG_KEY}" if given
                       else Config.STORM_LOCAL_DIR, afresh)
            store.on_write = last.record
        return TransactionalKeyValueState(store, StateCodec(conf, owner))


def _local_key(root: Path) -> bytes:
    from .._secret import load_or_create_secret  # <root>/secret, owner-only, made on first use
    # checked as storm.local.dir is (another user's, or anyone's to write, is refused), and named
    # as the user gave it
    return state_key(load_or_create_secret({Config.STORM_LOCAL_DIR: str(root)},
                                           f"the \"directory\" of {PROVIDER_CONFIG_KEY!r}"))


class LastWrite:
    """The master's record of the last write of one state's ``committed`` file: ``[writer, writes,
    machine]`` (msgpack) in the topology's transactional state (see the module docstring).
    ``backend`` is the task's ``context.transactional_home``."""

    def __init__(self, backend: Any, topology: str, namespace: str, storm_id: str, host: str, root: str,
                 owner: str) -> None:
        self.backend = backend
        self.topology = topology
        self.key = f"{_RECORD_PREFIX}/{name_key(namespace)}"
        self.namespace = namespace
        self.storm_id = storm_id
        self.host = host
        self.machine = f"{host}, under {root}"  # as the record names where a write was made
        self.owner = owner
        self._warned = False

    def _read(self) -> tuple[Lineage, str] | None:
        try:
            blob = self.backend.get(self.topology, self.key)
        except Exception as e:  # the master unreachable, or refusing this launch: said as a StateError
            raise StateError(f"{self.owner}: cannot read from the master where state {self.namespace!r} was last "
                             f"committed ({type(e).__name__}: {e}); this worker launch has not checked it yet, "
                             f"so it needs the master") from e
        if blob is None:
            return None
        try:
            writer, writes, machine = msgpack.unpackb(blob, raw=False)
            if not ((writer is None or type(writer) is str) and type(writes) is int and type(machine) is str):
                raise ValueError("wrong types")
        except Exception:  # noqa: BLE001 (a record this code did not write: no record)
            log.warning("%s: the master's record of state %r is malformed; not checked", self.owner, self.namespace)
            return None
        return Lineage(writer, writes), machine

    def check(self, lineage: Lineage | None, directory: Path, setting: str, afresh: bool = False) -> None:
        """Refuse this machine's copy of the state (``lineage``: None when it has none) if it is
        behind the last write the master recorded. ``directory``: the state's; ``setting``: what
        chose it, as the error names it; ``afresh``: the provider's ``start_afresh``, under which
        a new submission's task that finds no copy here, while an earlier run committed it on
        another machine, starts it afresh (its states were deleted on purpose).

        A worker launch checks each of its states once: the launch's task is the state's only
        writer while the launch runs, so the copy here stays the latest. Its local restart while
        no master answers (the worker's kept answers, `squall._transactional.KeptAnswers`) goes
        on from the copy without asking; before, it could not read the record and crash-looped
        until a master answered.

        Raises:
            StateError: the copy is missing or older while the master recorded a later write on
                another machine (by this run: a task moved; by an earlier run: a resubmission
                placed the task elsewhere, unless ``afresh``), or the launch never checked it
                and the master cannot be reached.
        """
        answers = getattr(self.backend, "answers", None)
        what = f"last-write/{self.namespace}"
        if answers is not None and answers.was_checked(self.topology, what):
            log.info("%s: state %r was checked against the master's record of its last write when this launch "
                     "started; going on from the copy in %s", self.owner, self.namespace, directory)
            return
        self._check(lineage, directory, setting, afresh)
        if answers is not None:
            answers.note_checked(self.topology, what)

    def _check(self, lineage: Lineage | None, directory: Path, setting: str, afresh: bool) -> None:
        recorded = self._read()
        if recorded is None or (lineage is not None and lineage.writer is None):
            return  # nothing recorded, or a copy written before squall recorded writes
        last, machine = recorded
        if lineage is not None and ((lineage.writer == last.writer and lineage.writes >= last.writes)
                                    or (lineage.writer == self.storm_id != last.writer)):
            return  # the last write (or a later one whose record did not reach the master)
        if machine == self.machine:  # no other copy to prefer: this one lost its last writes
            log.warning("%s: the copy of state %r in %s is %s, though the last write recorded (write %d) was made "
                        "here: it was removed, or a crash lost writes that had not reached the disk; going on "
                        "from it", self.owner, self.namespace, directory,
                        "missing" if lineage is None else f"at write {lineage.writes}", last.writes)
            return
        earlier = last.writer != self.storm_id
        if lineage is None and earlier and afresh:
            log.warning("%s: no copy of state %r in %s; its last commit (by an earlier run of topology %r) was on "
                        "%s: starting it afresh (\"start_afresh\" of %s)", self.owner, self.namespace, directory,
                        self.topology, machine, PROVIDER_CONFIG_KEY)
            return
        here = "has no copy of it" if lineage is None else f"holds an older copy (write {lineage.writes})"
        moved = ("a submission of the topology again placed this task elsewhere" if earlier
                 else "this task was moved (a rebalance, or a lost machine)")
        on_purpose = (f", or, if its states were deleted on purpose, set \"start_afresh\": true in "
                      f"{PROVIDER_CONFIG_KEY}" if lineage is None and earlier else "")
        raise StateError(
            f"{self.owner}: state {self.namespace!r} was last committed on another machine ({machine}; write "
            f"{last.writes}); this machine ({self.host}) {here} in {directory} ({setting}). A file state lives on "
            f"the machine that committed it, and {moved}: it is "
            f"refused rather than started from {'nothing' if lineage is None else 'an older commit'}, which "
            f"would lose the updates the other copy holds. Rebalance the task back, copy that directory here, "
            f"or keep states where every machine reaches them: the Redis provider, or a \"directory\" every "
            f"machine shares in {PROVIDER_CONFIG_KEY} (docs/state.md){on_purpose}")

    def record(self, lineage: Lineage) -> None:
        """Tell the master of a write of ``committed`` (`FileStore.on_write`). A failure is logged,
        not raised: the write is on disk, and a record that lags only lets a copy through that
        is at or past it. To a master over the network the record goes on a thread of its own,
        the latest write only (`LatestWrites`): a master away is tried again for seconds
        (``storm.zookeeper.retry.times``), and a commit waiting for it held its worker's loop,
        and the topology, for as long as the master was away."""
        blob = msgpack.packb([lineage.writer, lineage.writes, self.machine])
        records = _records(self.backend)
        if records is None:
            self._put(blob)
        else:
            records.put((self.topology, self.key), lambda: self._put(blob))

    def _put(self, blob: bytes) -> None:
        try:
            self.backend.put(self.topology, self.key, blob)
        except LaunchRefusedError:
            log.info("%s: the master no longer runs this worker; the write of state %r is not recorded",
                     self.owner, self.namespace)
        except Exception as e:  # noqa: BLE001 (the master unreachable: logged once, tried at the next write)
            if not self._warned:
                self._warned = True
                log.warning("%s: cannot record the write of state %r with the master (%s: %s); a copy of it on "
                            "another machine may not be told apart from this one until a record goes through",
                            self.owner, self.namespace, type(e).__name__, e)


_RECORDS: weakref.WeakKeyDictionary[Any, LatestWrites] = weakref.WeakKeyDictionary()
_RECORDS_LOCK = threading.Lock()


def _records(backend: Any) -> LatestWrites | None:
    """The background records of ``backend`` when it reaches the master over the network (the
    process and Spark hosts); None when a put is a call in this process (`LocalCluster`, a test)."""
    if not isinstance(backend, MasterBackend) or getattr(backend.master, "passes_records", False) is True:
        return None
    with _RECORDS_LOCK:
        records = _RECORDS.get(backend)
        if records is None:
            records = _RECORDS[backend] = LatestWrites()
        return records
