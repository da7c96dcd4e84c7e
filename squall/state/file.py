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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgpack

from .._config import Config
from .._errors import DiskWriteError
from .._private import Kept, private_dir, write_failure, write_private
from .._sealed import SealError, seal, unseal
from ._api import KeyValueState, StateError, StateProvider, state_key
from ._kv import Changes, MemoryStore, StateCodec, TransactionalKeyValueState, _apply
from ._names import PROVIDER_CONFIG_KEY, owner_of, provider_config, state_home, topology_of

if TYPE_CHECKING:
    from .._context import TopologyContext

_FORMAT = 1


def state_dir(root: str | os.PathLike, topology: str, namespace: str) -> Path:
    """The directory of ``namespace``'s state of ``topology`` under ``root``."""
    return Path(root) / quote(topology, safe="") / ("ns-" + quote(namespace, safe=""))


class FileStore(MemoryStore):
    """A `squall.state._kv.StateStore` in one directory (a `MemoryStore` that writes each change
    through to its files before it takes it); see the module docstring."""

    def __init__(self, directory: str | os.PathLike, namespace: str, key: bytes, kept: Kept | None = None) -> None:
        super().__init__()
        self.kept = kept or Kept(f"the state of namespace {namespace!r}", "the state directory")
        try:
            self.dir = private_dir(directory)
        except OSError as e:
            raise write_failure(e, Path(directory), self.kept, atomic=False) from e
        self.namespace = namespace
        self._key = key
        self.commit_txid, committed = self._read("committed")
        self.committed = {k: v for k, v in committed.items() if v is not None}
        self.prepare_txid, self.prepared_changes = self._read("prepared")
        if self.prepare_txid is not None and self.commit_txid is not None and self.prepare_txid <= self.commit_txid:
            self.prepare_txid, self.prepared_changes = None, {}  # committed, then the crash came

    def _kind(self, role: str) -> bytes:
        return f"state {quote(self.namespace, safe='')} {role}".encode()

    def _read(self, role: str) -> tuple[int | None, Changes]:
        path = self.dir / role
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None, {}
        except OSError as e:
            raise StateError(f"state file {path} cannot be read: {e}") from e
        try:
            fmt, txid, entries = msgpack.unpackb(unseal(self._key, self._kind(role), blob), raw=False)
            if fmt != _FORMAT or not (txid is None or type(txid) is int):
                raise ValueError(f"format {fmt!r}, txid {txid!r}")
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
        return txid, changes

    def _write(self, role: str, txid: int | None, changes: Changes) -> None:
        payload = msgpack.packb([_FORMAT, txid, [[k, v] for k, v in changes.items()]], use_bin_type=True)
        write_private(self.dir / role, seal(self._key, self._kind(role), payload), self.kept)

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
            self._write("committed", txid, merged)  # type: ignore[arg-type]
            (self.dir / "prepared").unlink(missing_ok=True)
            self.committed, self.commit_txid = merged, txid
            self.prepare_txid, self.prepared_changes = None, {}

    def apply(self, changes: Changes) -> None:
        """`StateStore.apply`: rewrite ``committed`` with ``changes`` at once, its txid unchanged
        (no transaction)."""
        with self.lock:
            merged = dict(self.committed)
            _apply(merged, changes)
            self._write("committed", self.commit_txid, merged)  # type: ignore[arg-type]
            self.committed = merged

    def rollback(self) -> None:
        """`StateStore.rollback`: remove the ``prepared`` file and forget the prepared transaction."""
        with self.lock:
            (self.dir / "prepared").unlink(missing_ok=True)
            self.prepare_txid, self.prepared_changes = None, {}


class FileKeyValueStateProvider(StateProvider):
    """States in sealed files; see the module docstring."""

    def new_state(self, namespace: str, conf: dict[str, Any], context: TopologyContext | None) -> KeyValueState:
        owner = owner_of(namespace, context)
        home = state_home(context)
        given = provider_config(conf, owner).get("directory")
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
        try:
            store = FileStore(state_dir(root, topology_of(conf), namespace), namespace, key, kept)
        except DiskWriteError:
            raise
        except OSError as e:
            raise StateError(f"{owner}: the state directory under {root} cannot be used: {e}") from e
        except StateError as e:
            raise StateError(f"{owner}: {e}") from None
        return TransactionalKeyValueState(store, StateCodec(conf, owner))


def _local_key(root: Path) -> bytes:
    from .._secret import load_or_create_secret  # <root>/secret, owner-only, made on first use
    return state_key(load_or_create_secret({Config.STORM_LOCAL_DIR: str(root)}))
