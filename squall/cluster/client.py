"""`MasterClient`: the master's verbs from a client (the CLI, `StormSubmitter`), with the
master's errors raised as the same exceptions `LocalCluster` raises."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

import msgpack

from .. import _errors
from .._config import Config, conf_value
from .._errors import RemoteError, RpcError
from .._nimbus import READS, LogConfig, NimbusIface, nimbus_client, verb_named
from .._secret import load_or_create_secret
from .._wire import AuthenticationError, Client, rpc_settings
from .seeds import LeaderLink, NimbusAddress, nimbus_seeds

if TYPE_CHECKING:
    from .._topology import StormTopology

log = logging.getLogger("squall.client")

_ERRORS = {name: getattr(_errors, name) for name in (
    "AlreadyAliveException", "NotAliveException", "NotLeaderException", "InvalidTopologyException", "IllegalStateTransition",
    "SerializationError", "UnknownComponentError", "BadParameterError")}


def master_address(conf: dict[str, Any]) -> tuple[str, int]:
    """Where the master listens: the first of ``nimbus.seeds`` (else ``nimbus.host``) and
    ``nimbus.thrift.port`` (with several seeds, the leader is found among them: `LeaderLink`)."""
    first = nimbus_seeds(conf)[0]
    return first.host, first.port


def sendable_conf(conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """``conf`` as a dict, each of its values checked to cross to the master (msgpack, as Storm's
    travels as JSON): a value that cannot is refused naming its key, not by the wire's error
    naming nothing (a LocalCluster, which takes the dict as it is, ran the same topology).

    Raises:
        InvalidTopologyException: a value msgpack cannot carry (an int past 64 bits, a set, an
            object, a map with tuple keys), naming the key (never the value: it may be a
            credential).
    """
    conf = dict(conf or {})
    for key, value in conf.items():
        try:  # both ways, as the wire does (a map with tuple keys packs, and the master cannot read it)
            msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False, strict_map_key=False)
        except (OverflowError, TypeError, ValueError) as e:
            raise _errors.InvalidTopologyException(
                f"topology configuration: the value of {key!r} cannot be sent to the master ({e}): a value must "
                f"be null, a bool, an int from -2**63 to 2**64-1, a float, a string, bytes, or lists and maps "
                f"of these") from None
    return conf


def _shipped(topology: Any) -> bytes:
    """``topology`` as the master receives it (`shipping.pickle_topology`); the error of
    `squall._topology.not_a_topology` if it is none."""
    # lazy: the builder's module and cloudpickle, for a submission; not for `squall list`'s client
    from .._topology import StormTopology, not_a_topology
    from .shipping import pickle_topology

    if not isinstance(topology, StormTopology):
        raise not_a_topology(topology)
    return pickle_topology(topology)


class NimbusVerbs:
    """Storm's client verbs (``NimbusClient``'s, and `LocalCluster`'s names) written once over
    the master's `squall._nimbus.NimbusIface` (``nimbus``): `MasterClient` has them over RPC, the
    acceptance tests' ``RemoteCluster`` over a host's client."""

    nimbus: NimbusIface

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology,
                        initial_status: str = "ACTIVE") -> str:
        """Submit; returns the topology id. ``initial_status``: ``"ACTIVE"`` or ``"INACTIVE"``
        (no user code runs until `activate`), Storm's ``SubmitOptions``."""
        return self.nimbus.submit(name, sendable_conf(conf), _shipped(topology), initial_status)

    def check_submit(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology,
                     replacing: bool = False) -> None:
        """Raise as `submit_topology` would, submitting nothing; with ``replacing``, as if the
        topology ``name`` were gone (its name and slots free)."""
        self.nimbus.check_submit(name, sendable_conf(conf), _shipped(topology), replacing)

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Kill after ``wait_secs`` (default: its message timeout)."""
        self.nimbus.kill(name, wait_secs)

    def activate(self, name: str) -> None:
        """Activate the topology's spouts."""
        self.nimbus.activate(name)

    def deactivate(self, name: str) -> None:
        """Deactivate the topology's spouts."""
        self.nimbus.deactivate(name)

    def rebalance(self, name: str, num_workers: int | None = None, executors: Mapping[str, int] | None = None,
                  wait_secs: float | None = None) -> None:
        """Move to new worker and executor counts after ``wait_secs``."""
        self.nimbus.rebalance(name, num_workers, None if executors is None else dict(executors), wait_secs)

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> dict[str, Any]:
        """Storm's ``debug``: set the debug switch of ``name`` (or of its ``component``), sampling
        ``pct`` percent; returns the record kept (``{"enable", "samplingpct"}``)."""
        return self.nimbus.debug(name, component, enable, pct)

    def set_log_config(self, name: str, config: LogConfig) -> LogConfig:
        """Storm's ``setLogConfig``: merge ``config``'s settings into ``name``'s log levels, which
        every worker applies (``squall set_log_level``); returns the topology's `LogConfig` now."""
        return self.nimbus.set_log_config(name, config)

    def get_log_config(self, name: str) -> LogConfig:
        """Storm's ``getLogConfig``: ``name``'s log levels."""
        return self.nimbus.get_log_config(name)

    def list_topologies(self) -> list[dict[str, Any]]:
        """One summary dict per topology."""
        return self.nimbus.list()

    def get_topology_names(self) -> list[str]:
        """Names of the topologies on the cluster (killed ones until removed)."""
        return [t["name"] for t in self.list_topologies()]

    def get_cluster_info(self) -> dict[str, Any]:
        """A summary of the cluster (supervisors, slots) and its topologies, as `LocalCluster`'s."""
        return self.nimbus.cluster_info()

    def get_topology_page(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm's topology page statistics of ``name`` (see `LocalCluster.get_topology_page`)."""
        return self.nimbus.topology_page(name, window, sys)

    def get_component_page(self, name: str, component: str, window: str | None = None,
                           sys: bool = False) -> dict[str, Any]:
        """Storm's component page statistics (see `LocalCluster.get_component_page`)."""
        return self.nimbus.component_page(name, component, window, sys)

    def get_topology_info(self, name: str) -> dict[str, Any]:
        """Status, counts per component (with ``task_stats``), the acker, errors, the
        configuration and the workers: the master's ``info``, the same on every host."""
        return self.nimbus.info(name)


class MasterClient(NimbusVerbs):
    """The master's verbs (`NimbusVerbs` over RPC); each raises what `LocalCluster` would for the
    same mistake.

    A call that fails on the connection (`RpcError`) leaves it closed; the next call opens a
    new one. A read (``list``, ``info``) is tried again at once on a new connection; a change
    (``submit``, ``kill``, ...) raises, since the master may have run it. With several
    ``nimbus.seeds`` (Nimbus HA) it talks to the leader, found as `LeaderLink` says; a change a
    follower refused is sent to the new leader."""

    def __init__(self, conf: dict[str, Any], timeout: float = 10.0) -> None:
        self._secret = load_or_create_secret(conf)
        self._timeout: float | None = timeout
        self._replication_wait = conf_value(conf, Config.TOPOLOGY_MAX_REPLICATION_WAIT_TIME_SEC)
        self._settings = rpc_settings(conf)
        self._closed = False
        self._client = LeaderLink(nimbus_seeds(conf), self._connect)
        self.nimbus = nimbus_client(self._call)  # the master's verbs, typed, over this connection
        # with several masters, finding the leader is tried again as Storm's NimbusClient does
        # (storm.nimbus.retry.*): during a failover there is none for a few seconds
        retries = int(conf_value(conf, Config.STORM_NIMBUS_RETRY_TIMES)) if len(self._client.seeds) > 1 else 0
        interval = float(conf_value(conf, Config.STORM_NIMBUS_RETRY_INTERVAL_MILLIS)) / 1000.0
        for attempt in itertools.count():
            try:
                self._client.connect()
                break
            except AuthenticationError:
                raise
            except RpcError as e:
                if attempt >= retries:
                    raise
                log.info("%s; trying again in %g s (storm.nimbus.retry.times)", e, interval)
                time.sleep(interval)

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology,
                        initial_status: str = "ACTIVE") -> str:
        """See `NimbusVerbs.submit_topology`. The leader answers once enough masters hold the
        code (``topology.min.replication.count``), up to ``topology.max.replication.wait.time.sec``
        (-1: no limit): the call waits that long beyond its timeout, or a submission reported
        failed would start all the same."""
        wait = (conf or {}).get(Config.TOPOLOGY_MAX_REPLICATION_WAIT_TIME_SEC, self._replication_wait)
        timeout = self._timeout
        self._timeout = None if timeout is None or not isinstance(wait, (int, float)) or wait < 0 \
            else timeout + float(wait)
        self._client.close()  # the next connection gets the longer timeout
        try:
            return super().submit_topology(name, conf, topology, initial_status)
        finally:
            self._timeout = timeout
            self._client.close()

    def _connect(self, address: NimbusAddress) -> Client:
        return Client(address.host, address.port, self._secret, self._timeout, self._settings)

    def _call(self, op: str, **args: Any) -> Any:
        try:
            return self._send(op, args)
        except RemoteError as e:
            cls = _ERRORS.get(e.type)
            if cls is not None:
                raise cls(str(e)) from None
            raise

    def _send(self, op: str, args: dict[str, Any]) -> Any:
        if self._closed:
            raise RpcError("the client was closed")
        if self._client.broken:  # an earlier call failed; nothing was sent on a new connection yet
            self._client.close()
        try:
            return self._client.send(op, args, resend=op in READS)
        except RpcError:
            if op not in READS or len(self._client.seeds) > 1:  # several: send already tried again
                raise
        self._client.close()
        return self._client.call(op, **args)

    def request(self, op: str, **args: Any) -> Any:
        """The master's verb ``op`` with ``args``, its reply as it crossed the wire (for the UI
        daemon, which forwards the reads by name), its errors raised as the other methods raise
        them. Raises `ProtocolError` for a name that is not a verb."""
        verb_named(op)
        return self._call(op, **args)

    def get_leader(self) -> NimbusAddress:
        """The master that leads now (the one this client talks to)."""
        return self._client.address

    def close(self) -> None:
        """Close the connection."""
        self._closed = True
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
