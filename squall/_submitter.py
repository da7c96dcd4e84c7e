"""`StormSubmitter`: submit a topology to the cluster the configuration names.

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


class StormSubmitter:
    """Submits topologies to the configured cluster."""

    @staticmethod
    def submit_topology(name: str, conf: Mapping[str, Any] | None, topology: Any) -> None:
        """Submit ``topology`` as ``name`` to the configured cluster.

        Raises the same errors as `LocalCluster.submit_topology`, and `SquallError` when no
        cluster is configured.
        """
        with _lock:
            target = _target
        if target is None:
            raise SquallError(
                "StormSubmitter: no cluster to submit to; run this file with `squall local FILE`, "
                "or use LocalCluster() directly")
        target.submit_topology(name, conf, topology)

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
