"""How the UI daemon reaches the master: `MasterLink`, the few calls its pages and actions need,
over RPC (`RpcLink`, the ``squall ui`` daemon and the Spark driver) or direct (`DirectLink`, a
`LocalCluster` in this process).

Every call blocks (the app runs them on threads, off its event loop). A master that cannot be
reached raises `MasterUnavailable`, whatever the link; the master's own refusals come back as the
exceptions it raised (`NotAliveException`, `UnknownComponentError`, `BadParameterError`,
`InvalidTopologyException`, `IllegalStateTransition`), over either link; anything else it raised
is a failure (over RPC a `RemoteError` naming its type), which the app answers 500.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import SquallError

if TYPE_CHECKING:
    from ..cluster.client import MasterClient
    from ..cluster.local import LocalCluster


class MasterUnavailable(SquallError):
    """The master cannot be reached (down, restarting, or refusing our secret)."""


class MasterLink(Protocol):
    """The master's calls the UI daemon makes; each blocks until the master answers."""

    def read(self, op: str, **args: Any) -> Any:
        """A read verb of the master (``cluster_info``, ``list``, ``info``, ``supervisors``,
        ``configuration``, ``topology_page``, ``component_page``, ``visualization``,
        ``visualization_init``)."""
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


_READ_VERBS = frozenset({"cluster_info", "list", "info", "supervisors", "configuration", "topology_page",
                         "component_page", "visualization", "visualization_init", "statistics"})


def _check_read(op: str) -> None:
    if op not in _READ_VERBS:
        raise ValueError(f"{op!r} is not a read verb of the master")


class RpcLink:
    """`MasterLink` over the master's authenticated RPC channel (`MasterClient`). The connection
    is opened on first use, and again after a failure: the UI outlives a master restart."""

    def __init__(self, conf: dict[str, Any], timeout: float = 10.0) -> None:
        self._conf = conf
        self._timeout = timeout
        self._client: MasterClient | None = None
        self._lock = threading.Lock()  # one call at a time on the one connection

    def _call(self, op: str, **args: Any) -> Any:
        from ..cluster.client import MasterClient
        from ..worker.calls import RpcError
        # the master's refusals come back as squall's exceptions (MasterClient maps them by
        # name); any other RemoteError is the master's failure, for the app to answer 500
        with self._lock:
            try:
                if self._client is None:
                    self._client = MasterClient(self._conf, timeout=self._timeout)
                return self._client.request(op, **args)
            except RpcError as e:
                self._drop()
                raise MasterUnavailable(f"the master is unreachable: {e}") from None
            except OSError as e:
                self._drop()
                raise MasterUnavailable(f"the master is unreachable: {e.strerror or e}") from None

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close: it is gone anyway
                pass
        self._client = None

    def read(self, op: str, **args: Any) -> Any:
        """`MasterLink.read` over RPC; `ValueError` if ``op`` is not a read verb, `MasterUnavailable`
        if the master cannot be reached."""
        _check_read(op)
        return self._call(op, **args)

    def activate(self, name: str) -> None:
        """`MasterLink.activate`: the master's ``activate`` over RPC."""
        self._call("activate", name=name)

    def deactivate(self, name: str) -> None:
        """`MasterLink.deactivate`: the master's ``deactivate`` over RPC."""
        self._call("deactivate", name=name)

    def kill(self, name: str, wait_secs: float) -> None:
        """`MasterLink.kill`: the master's ``kill`` over RPC."""
        self._call("kill", name=name, wait_secs=wait_secs)

    def rebalance(self, name: str, num_workers: int | None, executors: dict[str, int] | None,
                  wait_secs: float) -> None:
        """`MasterLink.rebalance`: the master's ``rebalance`` over RPC."""
        self._call("rebalance", name=name, num_workers=num_workers, executors=executors, wait_secs=wait_secs)

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> None:
        """`MasterLink.debug`: the master's ``debug`` over RPC."""
        self._call("debug", name=name, component=component, enable=enable, pct=pct)

    def close(self) -> None:
        """Close the connection, if open."""
        with self._lock:
            self._drop()


class DirectLink:
    """`MasterLink` to a `LocalCluster` in this process: reads call its master under its lock
    (`squall.cluster.inprocess.DirectMaster.run`), actions go through the cluster's own verbs,
    which also tell its in-process workers and supervisors at once."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster

    def read(self, op: str, **args: Any) -> Any:
        """`MasterLink.read`: the master's ``op_<op>`` under the cluster's lock (``info``: the cluster's
        `get_topology_info`, with the workers' figures of this moment); `ValueError` if ``op`` is not a
        read verb, `MasterUnavailable` once the cluster is shut down."""
        _check_read(op)
        if self._cluster.closed:
            raise MasterUnavailable("the local cluster has been shut down")
        if op == "info":
            return self._cluster.get_topology_info(**args)  # with the workers' figures of this moment
        master = self._cluster.master
        return self._cluster.direct.run(getattr(master, f"op_{op}"), **args)

    def activate(self, name: str) -> None:
        """`MasterLink.activate`: `LocalCluster.activate`, which tells its workers at once."""
        self._cluster.activate(name)

    def deactivate(self, name: str) -> None:
        """`MasterLink.deactivate`: `LocalCluster.deactivate`, which tells its workers at once."""
        self._cluster.deactivate(name)

    def kill(self, name: str, wait_secs: float) -> None:
        """`MasterLink.kill`: `LocalCluster.kill_topology`."""
        self._cluster.kill_topology(name, wait_secs=wait_secs)

    def rebalance(self, name: str, num_workers: int | None, executors: dict[str, int] | None,
                  wait_secs: float) -> None:
        """`MasterLink.rebalance`: `LocalCluster.rebalance`."""
        self._cluster.rebalance(name, num_workers, executors, wait_secs=wait_secs)

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> None:
        """`MasterLink.debug`: the master's ``op_debug`` under the cluster's lock."""
        self._cluster.direct.run(self._cluster.master.op_debug, name, component, enable, pct)
