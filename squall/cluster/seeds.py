"""Finding the leading master among ``nimbus.seeds`` (Storm's ``NimbusClient.getConfiguredClientAs``).

With Nimbus HA (`squall.cluster.ha`) several masters run and one leads; only the leader takes
submissions, kills, rebalances, supervisors' syncs and workers' heartbeats, and the others refuse
them (`NotLeaderException`, naming the leader). Clients, supervisors and workers find the leader
as Storm's clients do: ask each seed in turn for the leader (``get_leader``, which every master
answers), and talk to the one it names.

A seed is ``host`` (port ``nimbus.thrift.port``, Storm's form) or ``host:port`` (squall: several
masters on one machine, on different ports). Without seeds, ``nimbus.host`` is the only one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from .._config import Config, conf_value
from .._errors import NotLeaderException, RemoteError, RpcError
from .._nimbus import MasterAddress, nimbus_client

log = logging.getLogger("squall.client")

NOT_LEADER = NotLeaderException.__name__  # the RemoteError type a follower's refusal carries


class NimbusAddress(NamedTuple):
    """Where one master listens (Storm's ``NimbusInfo`` without its leader flag)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_seed(seed: str, default_port: int) -> NimbusAddress:
    """``host`` or ``host:port`` (``localhost`` is 127.0.0.1, as the master binds it).

    Raises:
        ValueError: the port part is not a port number (the message names the seed).
    """
    host, sep, port = seed.rpartition(":")
    if not sep or ":" in host:  # no port, or a bare IPv6 address
        host, port = seed, ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"nimbus.seeds entry {seed!r}: {port!r} is not a port number")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    return NimbusAddress(host, int(port) if port else default_port)


def nimbus_seeds(conf: Mapping[str, Any]) -> list[NimbusAddress]:
    """The masters ``conf`` names: each of ``nimbus.seeds``, else ``nimbus.host``; at
    ``nimbus.thrift.port`` unless a seed gives its own port."""
    port = int(conf_value(conf, Config.NIMBUS_THRIFT_PORT))
    seeds = conf.get(Config.NIMBUS_SEEDS) or [conf_value(conf, Config.NIMBUS_HOST)]
    return [parse_seed(str(s), port) for s in seeds]


def describe_seeds(conf: Mapping[str, Any]) -> str:
    """The seeds as a user reads them: ``host:port`` (one) or ``[a:1, b:2]``."""
    seeds = nimbus_seeds(conf)
    return str(seeds[0]) if len(seeds) == 1 else "[" + ", ".join(map(str, seeds)) + "]"


def leader_of(reply: MasterAddress | None) -> NimbusAddress | None:
    """The leader a ``get_leader`` reply names (None: no leader now, or one without an address)."""
    if reply is None or reply.host is None or reply.port is None:
        return None
    return NimbusAddress(reply.host, reply.port)


class LeaderLink:
    """`MasterCalls` to whichever master leads, found among the seeds (see the module docstring).

    ``connect(address)`` opens a link with ``call`` and ``close`` to one master
    (`squall._wire.ReconnectingClient`, or a `Client` for `MasterClient`). A call that cannot reach
    its master, or that a follower refuses, looks for the leader again and is sent once more (a
    read or a sync: callers retry what fails anyway); while no master leads (an election is
    under way) it raises `RpcError`, which workers and supervisors ride out as they ride out a
    master that is down.
    """

    def __init__(self, seeds: list[NimbusAddress], connect: Any, first: NimbusAddress | None = None) -> None:
        """``first``: the master to try before asking the seeds (the leader a worker's
        supervisor found), added to them if they lack it."""
        if not seeds:
            raise ValueError("no masters to reach: nimbus.seeds and nimbus.host are empty")
        self.seeds = list(seeds)
        if first is not None and first not in self.seeds:
            self.seeds.insert(0, first)
        self._connect = connect
        self.address: NimbusAddress = first or self.seeds[0]
        self._link: Any = None
        self._found = first is not None  # else: with several seeds, ask them before the first call
        self._unreachable: NimbusAddress | None = None  # the master a call could not reach last

    def call(self, op: str, **args: Any) -> Any:
        """``op`` on the leader with ``args``; its reply."""
        return self.send(op, args)

    def send(self, op: str, args: dict[str, Any], resend: bool = True) -> Any:
        """``op`` on the leader; ``resend``: after a failure on the connection, find the leader
        and send it again (False for a change the master may have run: only a refusal by a
        follower, which ran nothing, is sent again). A master that could not be reached is
        not called again before the seeds are asked who leads (it is asked last): the leader
        that a partition cut off was called again at every call, each waiting out the connect
        timeout, while another master led."""
        if not self._found and len(self.seeds) > 1:
            self.find(self._unreachable)
        try:
            return self._sent(op, args)
        except RpcError:
            if len(self.seeds) == 1 or not resend:
                raise
            self.find(self._unreachable)
        except RemoteError as e:
            if e.type != NOT_LEADER:
                raise
            self.find(self._unreachable)
        try:
            return self._sent(op, args)
        except RemoteError as e:
            if e.type == NOT_LEADER:  # the election is still under way
                raise RpcError(str(e)) from e
            raise

    def _sent(self, op: str, args: dict[str, Any]) -> Any:
        """``op`` on the master the link points at; one it cannot reach is noted (`find`)."""
        try:
            reply = self._current().call(op, **args)
        except RpcError:
            if len(self.seeds) > 1:
                self._unreachable, self._found = self.address, False
            raise
        if self._unreachable == self.address:
            self._unreachable = None
        return reply

    def connect(self) -> None:
        """Open the connection now (to the leader, with several seeds), raising `RpcError` here
        rather than at the first call."""
        if len(self.seeds) > 1:
            self.find()
        self._current()

    def _current(self) -> Any:
        if self._link is None:
            self._link = self._connect(self.address)
        return self._link

    def find(self, unreachable: NimbusAddress | None = None) -> NimbusAddress:
        """Ask each seed in turn which master leads, and point the link at it. ``unreachable``:
        a master that a call could not reach, asked last: in a partition that drops its
        packets, connecting to it waits out the whole timeout (5 s a supervisor's, 10 s a
        worker's), and asked first (the cut-off leader is often the first seed) it held every
        worker's and supervisor's calls that long before the master that answers: a Trident
        coordinator's save past the message timeout, a supervisor's sync past the new leader's
        ``nimbus.supervisor.timeout.secs``, which moved every worker of the machine.

        Raises:
            RpcError: no seed answered ("Could not find leader nimbus from seed hosts ..."), or
                none knows a leader yet.
        """
        self.close()
        errors, electing = [], []
        for seed in sorted(self.seeds, key=lambda seed: seed == unreachable):  # stable: the others keep their order
            try:
                link = self._connect(seed)
            except RpcError as e:
                errors.append(f"{seed}: {e}")
                continue
            try:
                leader = leader_of(nimbus_client(link.call).get_leader())
            except RpcError as e:
                link.close()
                errors.append(f"{seed}: {e}")
                continue
            except RemoteError as e:  # up, but cut off from ZooKeeper: another seed may know
                link.close()
                electing.append(f"{seed}: {e}")
                continue
            if leader is None:  # an election under way, as this seed sees it
                link.close()
                electing.append(f"{seed} knows of none")
                continue
            self.address, self._found = leader, True
            if leader == seed:
                self._link = link
            else:
                link.close()
            return leader
        if electing:
            raise RpcError(f"Could not find a nimbus leader, please try again after some time "
                           f"(an election is under way: {'; '.join(electing + errors)})")
        raise RpcError(f"Could not find leader nimbus from seed hosts {[str(s) for s in self.seeds]}. Did you "
                       f"specify a valid list of nimbus hosts for config nimbus.seeds? ({'; '.join(errors)})")

    @property
    def broken(self) -> bool:
        """Whether the next call opens a new connection (`Client`'s word, for `MasterClient`)."""
        return self._link is None or bool(getattr(self._link, "broken", False))

    def close(self) -> None:
        """Close the connection (the next call opens one, to the leader)."""
        if self._link is not None:
            self._link.close()
            self._link = None


def master_link(conf: Mapping[str, Any], timeout: float = 10.0, first: NimbusAddress | None = None) -> LeaderLink:
    """The leader, over the authenticated RPC channel (`squall._wire.ReconnectingClient`), for a
    supervisor or a worker: ``first`` (the address a worker was started with) then the seeds."""
    from .._secret import load_or_create_secret  # the network's parts
    from .._wire import ReconnectingClient, rpc_settings

    secret, settings = load_or_create_secret(conf), rpc_settings(conf)
    return LeaderLink(nimbus_seeds(conf), lambda a: ReconnectingClient(a.host, a.port, secret, settings, timeout=timeout),
                      first)
