"""`InMemoryKeyValueStateProvider`, the default provider, and `HostMemory`, where a host keeps it.

Storm's in-memory state lives in its worker and dies with it. squall's lives with the host,
outside the workers, so that what the checkpoint protocol promises holds on every host:
`LocalCluster` keeps it in a `HostMemory` of its own (it survives worker restarts and ends at
``shutdown()``); the process and Spark hosts, whose workers share no memory, keep it in their
file store under ``storm.local.dir`` (`squall.state.file`). With no host (a state made by hand),
it is a plain map, Storm's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ._api import KeyValueState, StateProvider
from ._kv import MemoryStore, StateCodec, TransactionalKeyValueState
from ._names import owner_of, state_home, topology_of

if TYPE_CHECKING:
    from .._context import TopologyContext


class HostMemory:
    """The in-memory states of one host (a `LocalCluster`), by topology name and namespace."""

    def __init__(self) -> None:
        self._stores: dict[tuple[str, str], MemoryStore] = {}
        self._lock = threading.Lock()

    def store(self, topology: str, namespace: str) -> MemoryStore:
        """The store of ``namespace`` of ``topology`` (made empty the first time)."""
        with self._lock:
            s = self._stores.get((topology, namespace))
            if s is None:
                s = self._stores[(topology, namespace)] = MemoryStore()
            return s

    def namespaces(self, topology: str) -> list[str]:
        """The namespaces of ``topology``'s states, sorted."""
        with self._lock:
            return sorted(ns for (t, ns) in self._stores if t == topology)

    def clear(self) -> None:
        """Forget every state (the host shuts down)."""
        with self._lock:
            self._stores.clear()


class InMemoryKeyValueStateProvider(StateProvider):
    """The default ``topology.state.provider``; see the module docstring."""

    def new_state(self, namespace: str, conf: dict[str, Any], context: TopologyContext | None) -> KeyValueState:
        home = state_home(context)
        if home.memory is None and home.directory is not None:
            from .file import FileKeyValueStateProvider  # the process and Spark hosts' own store
            return FileKeyValueStateProvider().new_state(namespace, conf, context)
        codec = StateCodec(conf, owner_of(namespace, context))
        store = home.memory.store(topology_of(conf), namespace) if home.memory is not None else MemoryStore()
        return TransactionalKeyValueState(store, codec)
