"""Where the master's store (`squall.cluster.store`) keeps Trident's transactional state
(`squall._transactional`): values it stores for workers as opaque bytes, by topology name and
key, and never unpickles.

- a `MemoryStore` (`LocalCluster`'s): in memory (`MemoryBackend`), in the cluster, which
  outlives its workers;
- a `LocalDirStore` (the process and Spark hosts): `FileStore`, one sealed file per key
  under ``<storm.local.dir>/nimbus/transactional/<topology>/`` (``<key>.v``, ``/`` in a key
  written ``~``), written atomically and fsynced;
- the store's `squall.cluster.store.ZooKeeperStore` (Nimbus HA): this module's `ZooKeeperStore`,
  one sealed node per key under ``<storm.zookeeper.root>/transactional/<topology>/<key>`` (``/``
  in a key is written ``~``), so a new leader has it.

What is read back is checked before it is returned: a file must carry the cluster's seal for
its own topology and key (a file copied to another key is refused), a node its seal for its
own path and version (`squall.cluster.ha`).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .._errors import NotLeaderException
from .._nimbus import TxWrite
from .._private import Kept, fsync_dir, private_dir, unresolved_link, write_private
from .._transactional import (
    MAX_KEYS,
    MemoryBackend,
    TransactionalStateError,
    check_key,
    check_prefix,
    check_value,
    key_to_name,
    name_to_key,
    starting,
    too_many_keys,
    under,
    write_each,
)
from .ha import NodeRefused

__all__ = ["FileStore", "MemoryBackend", "ZooKeeperStore", "topology_dir_name"]

_MAX_DIR_NAME = 200
_SUFFIX = ".v"  # a value file's: write_private's temporaries (".<name>.<pid>.<tid>.tmp") lack it
_WHERE = "storm.local.dir (the master keeps its files in <storm.local.dir>/nimbus)"
_AFRESH = ("restore it from a backup, or, to start that topology's Trident state afresh, kill the topology, "
           "delete its state and the map states it wrote, and submit it again")


def topology_dir_name(topology: str) -> str:
    """``topology`` as one file or node name: percent-quoted, or its digest when that is too long."""
    quoted = quote(topology, safe="")
    if len(quoted) <= _MAX_DIR_NAME:
        return quoted
    return "sha256-" + hashlib.sha256(topology.encode()).hexdigest()


def _kind(topology: str, key: str) -> bytes:
    """What a value of ``key`` of ``topology`` is sealed as: bound to both, so a file moved to
    another key or topology is refused."""
    return b"txstate " + hashlib.sha256(f"{topology}\0{key}".encode()).hexdigest().encode()


class FileStore:
    """A `squall._transactional.TransactionalBackend` in ``directory``, one sealed file per key;
    see the module docstring."""

    def __init__(self, directory: Path, secret: bytes) -> None:
        self.directory = Path(directory)
        self.secret = secret

    def _dir(self, topology: str) -> Path:
        return self.directory / topology_dir_name(topology)

    def _file(self, topology: str, key: str) -> Path:
        return self._dir(topology) / (key_to_name(key) + _SUFFIX)

    def get(self, topology: str, key: str) -> bytes | None:
        """See `TransactionalBackend.get`.

        Raises:
            TransactionalStateError: the file does not carry this cluster's seal for this key,
                naming it. Not read as none: a Trident coordinator without its state starts
                its txids again, and states that keep a txid per key would apply the new
                batches over the old counts.
        """
        from .._sealed import SealError, unseal
        path = self._file(topology, check_key(key))
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            self._check_resolves(path, f"transactional state file {path} of key {key!r} of topology {topology!r}")
            return None
        except OSError as e:  # a directory or a symlink loop in its place, a damaged disk
            # the worker got a bare "[Errno 21] Is a directory: ..." back, naming no state
            raise TransactionalStateError(
                f"transactional state file {path} of key {key!r} of topology {topology!r} cannot be read "
                f"({e.strerror or e}); {_AFRESH}") from None
        try:
            return unseal(self.secret, _kind(topology, key), blob)
        except SealError as e:
            raise TransactionalStateError(
                f"transactional state file {path} refused: not one this cluster's master wrote for key {key!r} of "
                f"topology {topology!r} ({e}); {_AFRESH}") from None

    def put(self, topology: str, key: str, blob: bytes) -> None:
        """See `TransactionalBackend.put`: durable (fsynced) once it returns."""
        from .._sealed import seal
        blob = check_value(check_key(key), blob)
        d = self._dir(topology)
        path = self._file(topology, key)
        if not path.exists() and len(self._names(d)) >= MAX_KEYS:
            raise TransactionalStateError(too_many_keys(topology, key, MAX_KEYS))
        private_dir(d)
        write_private(path, seal(self.secret, _kind(topology, key), blob),
                      Kept(f"the transactional state {key!r} of topology {topology!r} (Trident)", _WHERE),
                      durable=True)

    def delete(self, topology: str, key: str, prefix: bool = False) -> None:
        """See `TransactionalBackend.delete`."""
        d = self._dir(topology)
        keys = under(self.list(topology), key) if prefix else [check_key(key)]
        for k in keys:
            self._file(topology, k).unlink(missing_ok=True)
        if keys and d.exists():
            fsync_dir(d)

    def list(self, topology: str, prefix: str = "") -> builtins.list[str]:  # `list` is this method here
        """See `TransactionalBackend.list`."""
        return starting((name_to_key(n[:-len(_SUFFIX)]) for n in self._names(self._dir(topology))),
                        check_prefix(prefix))

    def write(self, topology: str, writes: Sequence[TxWrite]) -> None:
        """See `TransactionalBackend.write`: each key as its own put or delete, in order."""
        write_each(self, topology, writes)

    def _names(self, d: Path) -> builtins.list[str]:
        try:
            return [n for n in os.listdir(d) if n.endswith(_SUFFIX)]
        except FileNotFoundError:
            self._check_resolves(d, f"the transactional state directory {d}")
            return []
        except OSError as e:  # a file in the directory's place
            raise TransactionalStateError(f"the transactional state directory {d} cannot be listed "
                                          f"({e.strerror or e}); {_AFRESH}") from None


    def _check_resolves(self, path: Path, what: str) -> None:
        """``path`` (under ``directory``) was not found: refuse it if a symlink on its way does not
        resolve (``directory`` linked to a disk not mounted yet, a link whose target is gone).
        Read as "no value", a Trident coordinator started its txids again and states that keep a
        txid per key applied the new batches over the old counts; listed as no keys, likewise.

        Raises:
            TransactionalStateError: it is so, naming ``what`` and the link.
        """
        link = unresolved_link(path, self.directory)
        if link is not None:
            raise TransactionalStateError(f"{what} cannot be read ({link} is a symlink to {os.readlink(link)}, which "
                                          f"does not resolve); {_AFRESH}")


@contextlib.contextmanager
def _reaching(what: str, topology: str, key: str) -> Iterator[None]:
    """Kazoo's errors of a lost connection or session, raised by ``what`` of ``key``, as the
    `NotLeaderException` a master cut off from ZooKeeper answers: the worker's link then looks
    for the leader and sends its call again (`squall._transactional.MasterBackend` retries as
    ``storm.zookeeper.retry.times`` says, as Storm's coordinator's ZooKeeper client does),
    instead of its coordinator stopping on a ``RemoteError`` with no message (kazoo's
    ``ConnectionLoss`` has none). Every transactional operation may be sent again."""
    from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError
    try:
        yield
    except (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError,
            KazooTimeoutError) as e:
        cause = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise NotLeaderException(
            f"not a leader now: this master lost its ZooKeeper connection during the {what} of key {key!r} of "
            f"topology {topology!r}'s transactional state ({cause}); ask the leader again") from None


class ZooKeeperStore:
    """A `squall._transactional.TransactionalBackend` in ZooKeeper, through the master's
    `squall.cluster.ha.Coordinator` (sealed nodes, the cluster's ACL); see the module docstring.
    A lost connection or session is a `NotLeaderException` (`_reaching`)."""

    def __init__(self, coordinator: Any) -> None:
        self.zk = coordinator

    def _path(self, topology: str, key: str = "") -> str:
        parts = ["transactional", topology_dir_name(topology)]
        return self.zk.path(*parts, key_to_name(key)) if key else self.zk.path(*parts)

    def get(self, topology: str, key: str) -> bytes | None:
        """See `TransactionalBackend.get`; a node this cluster's masters did not write there
        reads as none (`Coordinator.read` warns, naming it)."""
        path = self._path(topology, check_key(key))
        try:
            with _reaching("read", topology, key):
                value = self.zk.read(path, strict=True)
        except NodeRefused as e:
            raise TransactionalStateError(f"{e}; {_AFRESH}") from None
        if value is None:
            return None
        if not (isinstance(value, dict) and isinstance(value.get("value"), str)):
            raise TransactionalStateError(f"ZooKeeper node {path} refused: not a transactional state value; {_AFRESH}")
        return base64.b64decode(value["value"])

    def put(self, topology: str, key: str, blob: bytes) -> None:
        """See `TransactionalBackend.put`."""
        blob = check_value(check_key(key), blob)
        path = self._path(topology, key)
        with _reaching("write", topology, key):
            if self.zk.zk.exists(path) is None and len(self.zk.children(self._path(topology))) >= MAX_KEYS:
                raise TransactionalStateError(too_many_keys(topology, key, MAX_KEYS))
            self.zk.write(path, {"value": base64.b64encode(blob).decode()})

    def delete(self, topology: str, key: str, prefix: bool = False) -> None:
        """See `TransactionalBackend.delete`."""
        for k in (under(self.list(topology), key) if prefix else [check_key(key)]):
            with _reaching("delete", topology, k):
                self.zk.delete(self._path(topology, k))

    def list(self, topology: str, prefix: str = "") -> builtins.list[str]:  # `list` is this method here
        """See `TransactionalBackend.list`."""
        with _reaching("listing", topology, prefix):
            names = self.zk.children(self._path(topology))
        return starting((name_to_key(n) for n in names), check_prefix(prefix))

    def write(self, topology: str, writes: Sequence[TxWrite]) -> None:
        """See `TransactionalBackend.write`: each key as its own put or delete, in order."""
        write_each(self, topology, writes)
