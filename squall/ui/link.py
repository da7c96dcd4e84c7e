"""How the UI daemon reaches the master: `UiMasterLink`, the few calls its pages and actions need,
over RPC (`RpcLink`, the ``squall ui`` daemon and the Spark driver) or direct (`DirectLink`, a
`LocalCluster` in this process).

Every call blocks (the app runs them on threads, off its event loop). A master that cannot be
reached raises `MasterUnavailable`, whatever the link; the master's own refusals come back as the
exceptions it raised (`NotAliveException`, `UnknownComponentError`, `BadParameterError`,
`InvalidTopologyException`, `IllegalStateTransition`), over either link; anything else it raised
is a failure (over RPC a `RemoteError` naming its type), which the app answers 500.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._errors import SquallError
from .._nimbus import READS

if TYPE_CHECKING:
    from ..cluster.client import MasterClient
    from ..cluster.local import LocalCluster


R = TypeVar("R")


class MasterUnavailable(SquallError):
    """The master cannot be reached (down, restarting, or refusing our secret)."""


class UiMasterLink(Protocol):
    """The master's calls the UI daemon makes; each blocks until the master answers."""

    def read(self, op: str, **args: Any) -> Any:
        """A read verb of the master (`squall._nimbus.READS`: ``cluster_info``, ``list``, ``info``,
        ``supervisors``, ``configuration``, ``topology_page``, ``component_page``,
        ``visualization``, ``visualization_init``, ``statistics`` ...)."""
        ...

    def activate(self, name: str) -> None:
        """Activate ``name``'s spouts."""
        ...

    def deactivate(self, name: str) -> None:
        """Deactivate ``name``'s spouts."""
        ...

    def kill(self, name: str, wait_secs: float) -> None:
        """Kill ``name`` after ``wait_secs``."""
        ...

    def rebalance(self, name: str, num_workers: int | None, executors: dict[str, int] | None,
                  wait_secs: float) -> None:
        """Rebalance ``name`` after ``wait_secs``."""
        ...

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> None:
        """Set the debug switch of ``name`` (or of its ``component``)."""
        ...


def _check_read(op: str) -> None:
    if op not in READS:  # the protocol's reads: a page never changes the cluster
        raise ValueError(f"{op!r} is not a read verb of the master")


class _VerbLink:
    """The actions of `UiMasterLink`, written once over a cluster's verbs (`NimbusVerbs` of a
    `MasterClient`, or a `LocalCluster`), which `_run` lends each call."""

    def _run(self, action: Callable[[Any], R]) -> R:
        raise NotImplementedError

    def activate(self, name: str) -> None:
        """`UiMasterLink.activate`: the cluster's ``activate``."""
        self._run(lambda cluster: cluster.activate(name))

    def deactivate(self, name: str) -> None:
        """`UiMasterLink.deactivate`: the cluster's ``deactivate``."""
        self._run(lambda cluster: cluster.deactivate(name))

    def kill(self, name: str, wait_secs: float) -> None:
        """`UiMasterLink.kill`: the cluster's ``kill_topology``."""
        self._run(lambda cluster: cluster.kill_topology(name, wait_secs=wait_secs))

    def rebalance(self, name: str, num_workers: int | None, executors: dict[str, int] | None,
                  wait_secs: float) -> None:
        """`UiMasterLink.rebalance`: the cluster's ``rebalance``."""
        self._run(lambda cluster: cluster.rebalance(name, num_workers, executors, wait_secs=wait_secs))

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> None:
        """`UiMasterLink.debug`: the cluster's ``debug``."""
        self._run(lambda cluster: cluster.debug(name, component, enable, pct))


class RpcLink(_VerbLink):
    """`UiMasterLink` over the master's authenticated RPC channel (`MasterClient`). The connection
    is opened on first use, and again after a failure: the UI outlives a master restart."""

    def __init__(self, conf: dict[str, Any], timeout: float = 10.0) -> None:
        self._conf = conf
        self._timeout = timeout
        self._client: MasterClient | None = None
        self._lock = threading.Lock()  # one call at a time on the one connection

    def _run(self, action: Callable[[Any], R]) -> R:
        from .._errors import RpcError
        from ..cluster.client import MasterClient
        # the master's refusals come back as squall's exceptions (MasterClient maps them by
        # name); any other RemoteError is the master's failure, for the app to answer 500
        with self._lock:
            try:
                if self._client is None:
                    self._client = MasterClient(self._conf, timeout=self._timeout)
                return action(self._client)
            except RpcError as e:
                self._drop()
                raise MasterUnavailable(f"the master is unreachable: {e}") from None
            except OSError as e:
                self._drop()
                raise MasterUnavailable(f"the master is unreachable: {e.strerror or e}") from None

    def _drop(self) -> None:
        if self._client is not None:
            # a broken connection may fail to close, whatever it raises: it is gone anyway
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None

    def read(self, op: str, **args: Any) -> Any:
        """`UiMasterLink.read` over RPC; `ValueError` if ``op`` is not a read verb, `MasterUnavailable`
        if the master cannot be reached."""
        _check_read(op)
        return self._run(lambda client: client.request(op, **args))

    def close(self) -> None:
        """Close the connection, if open."""
        with self._lock:
            self._drop()


class DirectLink(_VerbLink):
    """`UiMasterLink` to a `LocalCluster` in this process: reads are the master's verbs under its
    lock (`squall.cluster.inprocess.DirectMaster.request`), actions the cluster's own verbs,
    which also tell its in-process workers and supervisors at once."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster

    def _run(self, action: Callable[[Any], R]) -> R:
        if self._cluster.closed:
            raise MasterUnavailable("the local cluster has been shut down")
        return action(self._cluster)

    def read(self, op: str, **args: Any) -> Any:
        """`UiMasterLink.read`: the master's verb ``op`` (``info``: the cluster's `get_topology_info`,
        with the workers' figures of this moment); `ValueError` if ``op`` is not a read verb,
        `MasterUnavailable` once the cluster is shut down."""
        _check_read(op)
        if op == "info":
            return self._run(lambda cluster: cluster.get_topology_info(**args))
        return self._run(lambda cluster: cluster.direct.request(op, **args))
