"""What a worker process opens to reach its peers: `open_transport` picks the wire.

The process itself (``python -m squall.worker``) is a host's, as a Spark task's and a
LocalCluster's thread are: `squall.cluster.worker_process`.
"""

from __future__ import annotations

from typing import Any

from .._config import Config, setting
from .._encryption import address_wants_encryption, encryption_setting
from .batching import FLUSH_INTERVAL_KEY, MAX_MESSAGE_KEY, TRANSFER_BATCH_KEY, BatchingTransport, silent_bound
from .envelope import Origin
from .tcp import TcpTransport

WIRE_KEY = Config.SQUALL_TRANSPORT_WIRE
KEEPALIVE_KEY = Config.SQUALL_TCP_KEEPALIVE_SECS
MIN_WAIT_KEY = Config.STORM_MESSAGING_NETTY_MIN_WAIT_MS
MAX_WAIT_KEY = Config.STORM_MESSAGING_NETTY_MAX_WAIT_MS
TCP_WIRE = "tcp"  # squall.transport.wire's value for TcpTransport; "zmq" is the other


def open_transport(bind: str, serializer: Any, secret: bytes, receive: Any, origin: Origin,
                   conf: dict[str, Any], topology_conf: dict[str, Any] | None = None) -> BatchingTransport:
    """A worker's transport, bound on ``bind``: `TcpTransport` (no thread woken per message)
    where the data port is not encrypted, `ZmqTransport` (with CurveZMQ) where it is or where
    ``squall.transport.wire`` is ``zmq``.

    Every worker of a cluster decides from its own address by the same rule, and a sender
    reaches each peer at the address the peer bound, so the two ends of a connection agree as
    long as the cluster's workers are all on loopback or all not (``squall.encryption: auto``);
    `TcpTransport` refuses to send to a peer that would be encrypted (docs/cluster.md).

    How long items wait to share a message (``topology.transfer.batch.size`` and
    ``topology.batch.flush.interval.millis``) is the topology's (``topology_conf``), else the
    cluster's.
    """
    options = _transport_options(conf, topology_conf)
    keepalive = float(setting(conf, KEEPALIVE_KEY))
    max_wait = float(setting(conf, MAX_WAIT_KEY)) / 1000
    if setting(conf, WIRE_KEY) == TCP_WIRE and not address_wants_encryption(options["encryption"], bind):
        # storm.messaging.netty.min_wait_ms and max_wait_ms: `squall._config.validate` checked
        # the first is not above the second
        return TcpTransport(bind, {}, serializer, secret, receive, origin=origin, keepalive=keepalive,
                            min_wait=float(setting(conf, MIN_WAIT_KEY)) / 1000, max_wait=max_wait, **options)
    # lazy: pyzmq (with asyncio, which its monitor module loads) only for a worker that uses it
    from .transport import ZmqTransport

    # ZeroMQ times its attempts to connect itself (CONNECT_TIMEOUT): min_wait has no use there
    return ZmqTransport(bind, {}, serializer, secret, receive, origin=origin, keepalive=keepalive, max_wait=max_wait,
                        **options)


def _transport_options(conf: dict[str, Any], topology_conf: dict[str, Any] | None = None) -> dict[str, Any]:
    """The transport settings of the cluster's configuration, and the topology's batching ones
    (checked by the keys' rules in `squall._config`; an error names a bad key)."""
    def batching(key: str) -> Any:
        if topology_conf is not None and topology_conf.get(key) is not None:
            return setting(topology_conf, key, where="topology configuration")
        return setting(conf, key)
    return {"max_message_bytes": setting(conf, MAX_MESSAGE_KEY),
            "encryption": encryption_setting(conf),
            "transfer_batch_size": batching(TRANSFER_BATCH_KEY),
            "flush_interval_ms": batching(FLUSH_INTERVAL_KEY),
            # a peer is said to be unreachable before the topology's tuples that crossed to it time out
            "silent_secs": silent_bound(float(batching(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)))}
