"""`StormSubmitter`: submit a topology to the cluster the configuration names: the master at
``nimbus.seeds``/``nimbus.thrift.port`` (``squall nimbus``), using the cluster's secret.

As Storm's ``storm local`` does, ``squall local FILE`` points the submitter at the in-process
`LocalCluster` it runs, so a file written for a real cluster (its main calls
``StormSubmitter.submit_topology``) runs unchanged on LocalCluster.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ._errors import SquallError

_lock = threading.Lock()
_target: Any = None  # the cluster submissions go to; set by `squall local`
_daemon_conf: dict[str, Any] | None = None  # settings given to `squall jar` (--config, -c)


class StormSubmitter:
    """Submits topologies to the configured cluster."""

    @staticmethod
    def submit_topology(name: str, conf: Mapping[str, Any] | None, topology: Any) -> None:
        """Submit ``topology`` as ``name`` to the configured cluster.

        Raises the same errors as `LocalCluster.submit_topology`, and `SquallError` when the
        master cannot be reached or refuses the secret.
        """
        with _lock:
            target = _target
        if target is not None:
            target.submit_topology(name, conf, topology)
            return
        # The master named by the configuration (imported here: the cluster layer sits above).
        from ._config import cluster_conf
        from ._errors import RpcError
        from .cluster.client import MasterClient
        try:
            with MasterClient(cluster_conf(_daemon_conf)) as master:
                master.submit_topology(name, None if conf is None else dict(conf), topology)
        except RpcError as e:
            raise SquallError(f"StormSubmitter: cannot submit {name!r} to the master: {e}") from e

    @staticmethod
    @contextlib.contextmanager
    def using_conf(daemon_conf: dict[str, Any]) -> Iterator[None]:
        """Within this block, find the master with these settings over ``squall.yaml``'s."""
        global _daemon_conf
        previous, _daemon_conf = _daemon_conf, dict(daemon_conf)
        try:
            yield
        finally:
            _daemon_conf = previous

    @staticmethod
    @contextlib.contextmanager
    def submitting_to(cluster: Any) -> Iterator[Any]:
        """Within this block, `submit_topology` goes to ``cluster`` (used by ``squall local``)."""
        global _target
        with _lock:
            previous, _target = _target, cluster
        try:
            yield cluster
        finally:
            with _lock:
                _target = previous
