"""`MasterClient`: the master's verbs from a client (the CLI, `StormSubmitter`), with the
master's errors raised as the same exceptions `LocalCluster` raises."""

from __future__ import annotations

import importlib
import sys
import sysconfig
from typing import Any

import cloudpickle

from .. import _errors
from .._topology import StormTopology
from ..worker.rpc import Client, RemoteError, load_or_create_secret

_ERRORS = {name: getattr(_errors, name) for name in (
    "AlreadyAliveException", "NotAliveException", "InvalidTopologyException", "IllegalStateTransition",
    "SerializationError")}


def master_address(conf: dict[str, Any]) -> tuple[str, int]:
    """Where the master listens: the first of ``nimbus.seeds`` (else ``nimbus.host``) and
    ``nimbus.thrift.port``."""
    seeds = conf.get("nimbus.seeds") or []
    host = seeds[0] if seeds else conf.get("nimbus.host") or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    return host, int(conf.get("nimbus.thrift.port") or 6627)


def _ship_user_modules(topology: StormTopology) -> None:
    """Pickle the user's own modules by value, so workers need not import them (as Storm ships
    the topology's jar): every module of a component, grouping or their classes' bases that is
    not from the standard library, site-packages or squall itself."""
    skip = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    seen: set[str] = set()
    objs: list[Any] = []
    for spec in topology.components.values():
        objs.append(spec.obj)
        objs += [g.custom for g in spec.inputs.values() if g.custom is not None]
    for obj in objs:
        for cls in type(obj).__mro__:
            # the top-level package: its other modules (helpers the component calls) go too
            name = cls.__module__.split(".")[0]
            if name in seen or name in ("__main__", "squall", "builtins"):
                continue
            seen.add(name)
            module = sys.modules.get(name) or importlib.import_module(name)
            path = getattr(module, "__file__", None)
            if path and not any(path.startswith(p) for p in skip):
                cloudpickle.register_pickle_by_value(module)


class MasterClient:
    """The master's verbs; each raises what `LocalCluster` would for the same mistake."""

    def __init__(self, conf: dict[str, Any], timeout: float = 10.0) -> None:
        host, port = master_address(conf)
        self._client = Client(host, port, load_or_create_secret(conf), timeout)

    def _call(self, op: str, **args: Any) -> Any:
        try:
            return self._client.call(op, **args)
        except RemoteError as e:
            cls = _ERRORS.get(e.type)
            if cls is not None:
                raise cls(str(e)) from None
            raise

    def submit_topology(self, name: str, conf: dict[str, Any] | None, topology: StormTopology) -> str:
        """Submit; returns the topology id."""
        if not isinstance(topology, StormTopology):
            raise _errors.InvalidTopologyException(
                f"submit_topology needs a StormTopology, got {type(topology).__name__}")
        _ship_user_modules(topology)
        try:
            blob = cloudpickle.dumps(topology)
        except Exception as e:
            raise _errors.InvalidTopologyException(f"the topology cannot be serialized: {e}") from e
        return self._call("submit", name=name, conf=dict(conf or {}), topology=blob)

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Kill after ``wait_secs`` (default: its message timeout)."""
        self._call("kill", name=name, wait_secs=wait_secs)

    def activate(self, name: str) -> None:
        """Activate the topology's spouts."""
        self._call("activate", name=name)

    def deactivate(self, name: str) -> None:
        """Deactivate the topology's spouts."""
        self._call("deactivate", name=name)

    def rebalance(self, name: str, num_workers: int | None = None, executors: dict[str, int] | None = None,
                  wait_secs: float | None = None) -> None:
        """Move to new worker and executor counts after ``wait_secs``."""
        self._call("rebalance", name=name, num_workers=num_workers, executors=executors, wait_secs=wait_secs)

    def list_topologies(self) -> list[dict[str, Any]]:
        """One summary dict per topology."""
        return self._call("list")

    def get_topology_info(self, name: str) -> dict[str, Any]:
        """Status, counts per component and errors (the shape `LocalCluster` returns)."""
        return self._call("info", name=name)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self) -> MasterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
