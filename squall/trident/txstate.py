"""`TransactionalState`: Trident's coordinator's durable key-value (Storm's ZooKeeper
``/transactional/<id>/...``, its ``TransactionalState``).

The master batch coordinator keeps the current txid and the attempt ids there, and each spout
coordinator its batch metadata per txid, so that a restarted worker, or a restarted master,
resumes at the right txid. Where it lives is the host's business: `transactional_state` asks the
task's `TopologyContext` for what its host lends (``context.transactional_home``, a
`squall._transactional.TransactionalBackend`):

- `LocalCluster`: the cluster's master, in this process, in memory: it outlives the workers;
- the process and Spark hosts: the master, through the worker's master link, kept with the
  master's own state in ``storm.local.dir`` (one sealed file per key);
- Nimbus HA: ZooKeeper, under ``<root>/transactional/<topology>/<key>``, sealed like the master's
  other nodes, so a new leader has it.

The store is keyed by the topology's *name* and the ``name`` given here (Storm keys it by the
spout's txid id), not by the storm id: a topology killed and submitted again under the same name
resumes at the txid it stopped at, as Storm's does, and one meant to start afresh needs a new
name (or its state deleted). Killing a topology leaves its transactional state in place. A
worker's calls name its launch (`squall._transactional.WorkerLaunch`): the master refuses a launch
it no longer runs, and another topology's state.

Values are any picklable Python object: the task pickles them (so a later change to the object
put is not stored) and unpickles what it reads back; the master stores only bytes and never
unpickles them. Keys are ``/``-separated paths of ``A-Za-z0-9_.-``, no part ``.`` or ``..``
(at most 200 characters with the name); a value may be at most 512 KiB pickled and a topology
may hold at most 10,000 keys (`TransactionalStateError`, naming the key).
"""

from __future__ import annotations

import abc
import pickle
from typing import Any

import cloudpickle

from .._config import Config
from .._transactional import (MAX_KEY_CHARS, MAX_VALUE_BYTES, MemoryBackend, TransactionalBackend, TransactionalStateError,
                              check_key, check_prefix)

__all__ = ["BackedTransactionalState", "MemoryTransactionalState", "TransactionalState",
           "TransactionalStateError", "check_name", "name_key", "transactional_state"]


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
        full = self._full(key)
        try:
            blob = cloudpickle.dumps(value)
        except Exception as e:
            raise TransactionalStateError(f"transactional state value of key {key!r} cannot be pickled: "
                                          f"{type(e).__name__}: {e}") from e
        if len(blob) > MAX_VALUE_BYTES:
            raise TransactionalStateError(f"transactional state value of key {key!r} is {len(blob)} bytes "
                                          f"pickled; the limit is {MAX_VALUE_BYTES}")
        self.backend.put(self.topology, full, blob)

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


class MemoryTransactionalState(BackedTransactionalState):
    """A `TransactionalState` in memory, for unit tests (values are pickled as on a cluster,
    with the same limits); several may share one ``backend`` to play one store seen twice."""

    def __init__(self, backend: MemoryBackend | None = None, topology: str = "test", name: str = "state") -> None:
        super().__init__(backend if backend is not None else MemoryBackend(), topology, name)


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
