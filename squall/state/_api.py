"""Storm's state interfaces (``org.apache.storm.state``): `State`, `KeyValueState`,
`StateProvider`, and `StateHome`, what a host lends its workers' state providers."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import SquallError
from .._keys import STATE, derive_key

if TYPE_CHECKING:
    from .._context import TopologyContext


class StateError(SquallError):
    """A state cannot be read, written or reached; the message names the component, the
    configuration key or state key, and the file or server at fault."""


class State(abc.ABC):
    """A state that takes part in Storm's two-phase checkpoint (Storm's ``State``)."""

    @abc.abstractmethod
    def prepare_commit(self, txid: int) -> None:
        """Make the changes since the last prepare durable, as transaction ``txid``, without
        making them the committed state yet."""

    @abc.abstractmethod
    def commit(self, txid: int | None = None) -> None:
        """Make prepared transaction ``txid`` the committed state; with no ``txid``, commit the
        changes since the last prepare at once (what the checkpoint spout does)."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Drop everything since the last commit."""


class KeyValueState(State):
    """A map that takes part in checkpoints (Storm's ``KeyValueState``): keys and values are
    any values squall can serialize (see ``topology.fall.back.on.pickle``)."""

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` (a copy: changing ``value`` afterwards changes nothing)."""

    @abc.abstractmethod
    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""

    @abc.abstractmethod
    def delete(self, key: Any) -> Any:
        """Remove ``key``; returns its old value (or None)."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """The ``(key, value)`` pairs, changes not yet committed included."""


class StateProvider(abc.ABC):
    """Makes the state of one namespace (Storm's ``StateProvider``). ``topology.state.provider``
    names one as ``"module:Class"``; squall makes it with no arguments."""

    @abc.abstractmethod
    def new_state(self, namespace: str, conf: dict[str, Any], context: TopologyContext) -> State:
        """The state of ``namespace`` (``"<component>-<task>"``) as last committed."""

    @staticmethod
    def check_config(options: dict[str, Any], owner: str) -> None:
        """Refuse ``topology.state.provider.config`` settings (``options``) this provider cannot
        use, raising `StateError` that names ``owner`` and them. Called at submit, where a
        mistake costs no worker; the default takes any."""


@dataclass(frozen=True)
class StateHome:
    """What the host that runs a worker lends its state providers.

    ``memory``: the host's in-memory states, outside the workers (`LocalCluster`), or None;
    ``directory``: where the file store keeps states (``<storm.local.dir>/state`` on the process
    and Spark hosts), or None; ``key``: the key, derived from the cluster's secret for this use
    only (`state_key`), that authenticates what the file and Redis stores read back, or None;
    ``machine``: the address of the machine the worker runs on, as errors name it (None: the
    host name).
    """

    memory: Any = None
    directory: Path | None = None
    key: bytes | None = None
    machine: str | None = None


def state_key(secret: bytes) -> bytes:
    """The states' key under the cluster's ``secret`` (the secret itself never reaches a component)."""
    return derive_key(secret, STATE)
