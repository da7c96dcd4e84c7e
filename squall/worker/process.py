"""What a worker process opens to reach its peers: `open_transport` picks the wire.

The process itself (``python -m squall.worker``) is a host's, as a Spark task's and a
LocalCluster's thread are: `squall.cluster.worker_process`.
"""

from __future__ import annotations

from typing import Any

from .._config import Config, setting
from .._encryption import encryption_setting
from . import curve
from .batching import BatchingTransport
from .envelope import Origin
from .tcp import TcpTransport
from .transport import MAX_MESSAGE_KEY, ZmqTransport

WIRE_KEY = Config.SQUALL_TRANSPORT_WIRE
TCP_WIRE = "tcp"  # squall.transport.wire's value for TcpTransport; "zmq" is the other


def open_transport(bind: str, serializer: Any, secret: bytes, receive: Any, origin: Origin,
                   conf: dict[str, Any]) -> BatchingTransport:
    """A worker's transport, bound on ``bind``: `TcpTransport` (no thread woken per message)
    where the data port is not encrypted, `ZmqTransport` (with CurveZMQ) where it is or where
    ``squall.transport.wire`` is ``zmq``.

    Every worker of a cluster decides from its own address by the same rule, and a sender
    reaches each peer at the address the peer bound, so the two ends of a connection agree as
    long as the cluster's workers are all on loopback or all not (``squall.encryption: auto``);
    `TcpTransport` refuses to send to a peer that would be encrypted (docs/cluster.md).
    """
    options = _transport_options(conf)
    if setting(conf, WIRE_KEY) == TCP_WIRE and not curve.wants_encryption(options["encryption"], bind):
        return TcpTransport(bind, {}, serializer, secret, receive, origin=origin, **options)
    return ZmqTransport(bind, {}, serializer, secret, receive, origin=origin, **options)


def _transport_options(conf: dict[str, Any]) -> dict[str, Any]:
    """The transport settings of the cluster's configuration (checked by the keys' rules in
    `squall._config`; an error names a bad key)."""
    return {"max_message_bytes": setting(conf, MAX_MESSAGE_KEY),
            "encryption": encryption_setting(conf)}
