"""Where a Trident window keeps its tuples and its triggers' results (Storm's ``WindowsStore``,
``WindowsStoreFactory``, ``InMemoryWindowsStore`` and ``InMemoryWindowsStoreFactory``).

A window operation writes its store once per batch, in one `WindowsStore.put_all`: that batch's
tuples, the results of the windows that fired, and a record of where the window stands (which
txid it last took, its policies' progress). So a store whose ``put_all`` is atomic brings the
window back exactly where a batch left it, and a worker that dies between two batches loses
nothing of it.

- `InMemoryWindowsStoreFactory`: a dict per task, in the worker's memory (Storm's): lost with the
  worker, which then restarts its windows empty.
- `KeyValueWindowsStoreFactory`: squall's own, a store in the topology's state provider
  (``topology.state.provider``: the cluster's memory on `LocalCluster`, files under the
  supervisor's ``storm.local.dir`` on the process host, Redis with
  ``squall.state.redis.RedisKeyValueStateProvider``), each write one commit of that state: a
  worker killed and restarted resumes its windows where the last batch left them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any, NamedTuple

KEY_SEPARATOR = "|"
"""What separates the parts of a key (Storm's ``WindowsStore.KEY_SEPARATOR``)."""


class Entry(NamedTuple):
    """One key and value for `WindowsStore.put_all` (Storm's ``WindowsStore.Entry``)."""

    key: str
    value: Any


class WindowsStore(abc.ABC):
    """A key-value store of string keys (Storm's ``WindowsStore``); values are lists and numbers
    of the window's tuples' values, and must be serializable for a store that leaves the worker."""

    KEY_SEPARATOR = KEY_SEPARATOR

    @abc.abstractmethod
    def get(self, key: str | list[str]) -> Any:
        """The value of ``key`` (None if absent); for a list of keys, the list of their values."""

    @abc.abstractmethod
    def get_all_keys(self) -> Iterable[str]:
        """Every key in the store."""

    def put(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value``."""
        self.put_all([Entry(key, value)])

    @abc.abstractmethod
    def put_all(self, entries: Iterable[Entry | tuple[str, Any]]) -> None:
        """Set each entry's key to its value; a store that can does it at once (the window relies
        on it to come back from a worker's death where a batch left it)."""

    def remove(self, key: str) -> None:
        """Remove ``key`` (absent: nothing)."""
        self.remove_all([key])

    @abc.abstractmethod
    def remove_all(self, keys: Iterable[str]) -> None:
        """Remove each of ``keys``."""

    def shutdown(self) -> None:
        """The task stops: release what the store holds."""


class WindowsStoreFactory(abc.ABC):
    """Makes a task's `WindowsStore` (Storm's ``WindowsStoreFactory``); pickled with the topology."""

    @abc.abstractmethod
    def create(self, conf: dict, context: Any = None, name: str = "windows") -> WindowsStore:
        """The store of the task ``context`` is (None outside a topology) for the window
        operations called ``name`` in it."""


def _checked(entry: Entry | tuple[str, Any]) -> Entry:
    key, value = entry
    if not isinstance(key, str):
        raise ValueError(f"a windows store key must be a str, got {key!r}")  # noqa: TRY004 (Storm's Entry checks its arguments)
    if value is None:
        raise ValueError(f"a windows store value may not be None (key {key!r})")
    return Entry(key, value)


class InMemoryWindowsStore(WindowsStore):
    """A dict (Storm's ``InMemoryWindowsStore``, without its backing store)."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    def get(self, key: str | list[str]) -> Any:
        """See `WindowsStore.get`."""
        if isinstance(key, list):
            return [self._data.get(k) for k in key]
        return self._data.get(key)

    def get_all_keys(self) -> list[str]:
        """See `WindowsStore.get_all_keys`."""
        return list(self._data)

    def put_all(self, entries: Iterable[Entry | tuple[str, Any]]) -> None:
        """See `WindowsStore.put_all`."""
        checked = [_checked(e) for e in entries]
        self._data.update(checked)

    def remove_all(self, keys: Iterable[str]) -> None:
        """See `WindowsStore.remove_all`."""
        for k in keys:
            self._data.pop(k, None)

    def shutdown(self) -> None:
        """Forget everything (Storm's)."""
        self._data.clear()

    def __repr__(self) -> str:
        return f"InMemoryWindowsStore({len(self._data)} keys)"


class InMemoryWindowsStoreFactory(WindowsStoreFactory):
    """A fresh `InMemoryWindowsStore` per task (Storm's ``InMemoryWindowsStoreFactory``): the
    windows live in the worker's memory and die with it."""

    def create(self, conf: dict, context: Any = None, name: str = "windows") -> WindowsStore:
        """See `WindowsStoreFactory.create`."""
        return InMemoryWindowsStore()


_COMMITS_KEY = "$commits"  # the store's own count of its commits: the next commit's txid


class KeyValueWindowsStore(WindowsStore):
    """A `WindowsStore` over a `squall.state.KeyValueState`; each write is one commit of it."""

    def __init__(self, state: Any) -> None:
        self.state = state
        # a write that died between its prepare and its commit never happened
        state.rollback()
        self._commits = int(state.get(_COMMITS_KEY, 0))

    def get(self, key: str | list[str]) -> Any:
        """See `WindowsStore.get`."""
        if isinstance(key, list):
            return [self.state.get(k) for k in key]
        return self.state.get(key)

    def get_all_keys(self) -> list[str]:
        """See `WindowsStore.get_all_keys`."""
        return [k for k, _ in self.state if k != _COMMITS_KEY]

    def put_all(self, entries: Iterable[Entry | tuple[str, Any]]) -> None:
        """Every entry in one commit of the state."""
        for key, value in (_checked(e) for e in entries):
            self.state.put(key, value)
        self._commit()

    def remove_all(self, keys: Iterable[str]) -> None:
        """Every key removed in one commit of the state."""
        for k in keys:
            self.state.delete(k)
        self._commit()

    def _commit(self) -> None:
        self._commits += 1
        self.state.put(_COMMITS_KEY, self._commits)
        self.state.prepare_commit(self._commits)
        self.state.commit(self._commits)


class KeyValueWindowsStoreFactory(WindowsStoreFactory):
    """Each task's windows in the topology's state provider (``topology.state.provider``, see
    ``squall.state``), namespace ``<component>-<task index>-<name>``: they outlive the worker. Its
    task count is recorded with the master: the topology submitted again with another
    parallelism of the window is refused (``topology.state.allow.task.count.change``)."""

    def create(self, conf: dict, context: Any = None, name: str = "windows") -> WindowsStore:
        """See `WindowsStoreFactory.create`.

        Raises:
            ValueError: without a task's ``context`` (the namespace is the task's).
        """
        if context is None:
            raise ValueError("KeyValueWindowsStoreFactory.create: needs the task's context (its state namespace "
                             "is the task's)")
        from ...state import get_state
        from ...state._names import recorded_namespace

        # The store is the task index's: submitted again with fewer tasks, the tuples a removed
        # index held would never reach a window (lost), with more, a window's keys split. They
        # cannot be moved (a count window is the tuples one task took, in its order), so the
        # layout is recorded with the master as a stateful bolt's is, and another task count
        # is refused at submit (`squall.cluster.master.Master._check_state_layouts`).
        base = recorded_namespace(conf, context, f"{context.get_this_component_id()}-{context.get_this_task_index()}")
        return KeyValueWindowsStore(get_state(f"{base}-{name}", conf, context))


__all__ = ["KEY_SEPARATOR", "Entry", "InMemoryWindowsStore", "InMemoryWindowsStoreFactory", "KeyValueWindowsStore",
           "KeyValueWindowsStoreFactory", "WindowsStore", "WindowsStoreFactory"]
