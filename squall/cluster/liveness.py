"""Supervisors' liveness in ZooKeeper: a master cut off from one machine, not from ZooKeeper,
does not take it for lost.

The master takes a machine for lost when its supervisor (and its workers) fell silent for
``nimbus.supervisor.timeout.secs`` (or ``nimbus.task.timeout.secs``), and moves its executors to
the machines it hears. When only the link between the master and that machine is cut (a partial
partition: the machine still reaches ZooKeeper and the other machines), its workers run on: their
supervisor never hears the new assignment, and their peers still take their tuples. Every
executor of the machine then ran twice: two copies of a spout read its source, two owners of a
stateful bolt committed its checkpoints, and what they emitted meanwhile was taken twice (measured
on network namespaces, a leader cut off from the spout's machine for 8 s under 3 s timeouts: the
spout and two of four sink tasks in two processes each, 68 and 151 of 2,400 ids taken twice in
two runs; now none, `tests/process/test_partial_partition.py`).

Storm's Nimbus reads supervisor liveness from ZooKeeper (each supervisor's ephemeral node), so a
Nimbus cut off from a supervisor but not from ZooKeeper does not take it for lost. With
``storm.zookeeper.servers`` set, squall's supervisors on the process host do the same: each holds
a ZooKeeper session of its own and an ephemeral node ``supervisors-alive/<supervisor-id>`` under
``storm.zookeeper.root``, its value (host and ports) sealed as every squall value in ZooKeeper
is (`squall.cluster.ha`: an HMAC under the cluster's secret, bound to the node's path, creation
and version), written with the digest ACL the masters use. ZooKeeper removes the node when the
session ends: at a clean stop at once, when the process dies or is cut off from ZooKeeper too
after ``storm.zookeeper.session.timeout``.

The leader, for each machine silent past its timeout, reads that node (`read_presences`: all of
them in one round trip, as it asks on its event loop): a node that exists, passes its seal and
names the machine's host means the machine lives and only the master's link to it is down. The
master then does not take it for lost: its executors stay, its workers run on (its supervisor
restarts one that ends from its local assignment), and the master says, once, in its log and in
each topology's errors, that it cannot reach the machine but ZooKeeper hears it
(`PresenceWatch`). When the machine's supervisor is heard again, its workers get
``nimbus.task.launch.secs`` anew to be heard, so that none is restarted for the link the master
lost. A machine whose node is gone (or refused) is lost as before.

Without ZooKeeper (one master, its state in ``storm.local.dir``) the master has nothing else to
hear a machine through, and a machine cut off from it alone is taken for lost as before
(`squall.cluster.silence` keeps a master that hears *none* of its machines from moving anything).

A supervisor whose process lives but whose loop hangs keeps its session (kazoo pings on a
thread of its own), and so is held, not lost, as Storm's supervisor, whose heartbeat is a timer
of its own, is.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config, conf_value
from .._errors import SquallError
from .ha import ALIVE, Coordinator, NodeVersion, ZooKeeperCredential, kazoo_client, zookeeper_root, zookeeper_servers

log = logging.getLogger("squall.supervisor")
master_log = logging.getLogger("squall.master")

_ID = re.compile(r"^[A-Za-z0-9_.:@+-]{1,200}$")  # a supervisor id that is one node's name


@dataclass(frozen=True, slots=True)
class Presence:
    """What a supervisor's ``supervisors-alive`` node says: its session lives, on ``host``."""

    supervisor_id: str
    host: str
    ports: tuple[int, ...]


def _node_name(supervisor_id: str) -> str | None:
    """``supervisor_id`` as a node's name (None: it cannot be one: a ``/``, ``..``, too long)."""
    if not _ID.match(supervisor_id) or supervisor_id in (".", ".."):
        return None
    return supervisor_id


def check_presence(v: Any, supervisor_id: str) -> Presence | None:
    """The `Presence` a node's (opened) value states for ``supervisor_id``; None when it is not
    one: its fields are checked here, before use, as everything read from ZooKeeper is."""
    if not isinstance(v, dict) or v.get("id") != supervisor_id or not isinstance(v.get("host"), str) \
            or not isinstance(v.get("ports"), list) \
            or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in v["ports"]):
        return None
    return Presence(supervisor_id, v["host"], tuple(v["ports"]))


def read_presence(c: Coordinator, supervisor_id: str) -> Presence | None:
    """Whether ZooKeeper hears supervisor ``supervisor_id`` now (`read_presences` of it alone).

    Raises:
        ConnectionLoss: (kazoo's, or another connection error) ZooKeeper cannot be asked now.
    """
    reads = read_presences(c, [supervisor_id])
    if supervisor_id in reads.unanswered:
        raise reads.unanswered[supervisor_id]
    return reads.alive.get(supervisor_id)


@dataclass(frozen=True)
class PresenceReads:
    """What ZooKeeper said of some supervisors (`read_presences`): ``alive``, those whose node
    lives and states them; ``unanswered``, those it could not be asked about (the connection
    dropped or is down: the error), of which nothing is known; the others, it does not hear."""

    alive: dict[str, Presence]
    unanswered: dict[str, Exception]


def read_presences(c: Coordinator, supervisor_ids: Iterable[str]) -> PresenceReads:
    """Whether ZooKeeper hears each of ``supervisor_ids`` now: its node, if it exists and holds a
    value sealed for it by this cluster (`Coordinator.read_exact_many`, which warns of one that is
    not) that states that supervisor. All are asked in one round trip, as the master asks on its
    event loop. A node ZooKeeper refuses to show (its ACL changed by someone else) is warned of,
    and does not say its supervisor lives."""
    from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError

    paths = {sid: c.path(ALIVE, name) for sid in supervisor_ids if (name := _node_name(sid)) is not None}
    try:
        answers = c.read_exact_many(list(paths.values()))
    except (ConnectionLoss, ConnectionClosedError, SessionExpiredError) as e:
        return PresenceReads({}, dict.fromkeys(paths, e))
    alive: dict[str, Presence] = {}
    unanswered: dict[str, Exception] = {}
    for sid, path in paths.items():
        answer = answers[path]
        if answer.error is not None:
            if isinstance(answer.error, (ConnectionLoss, ConnectionClosedError, SessionExpiredError,
                                         OperationTimeoutError)):
                unanswered[sid] = answer.error
            else:
                master_log.warning("ZooKeeper node %s refused: cannot be read (%s: %s)", path,
                                   type(answer.error).__name__, answer.error)
            continue
        presence = None if answer.value is None else check_presence(answer.value, sid)
        if answer.value is not None and presence is None:
            master_log.warning("ZooKeeper node %s refused: not a supervisor's id, host and ports", path)
        if presence is not None:
            alive[sid] = presence
    return PresenceReads(alive, unanswered)


@dataclass(frozen=True, slots=True)
class HeldByZooKeeper:
    """A machine the master cannot hear but ZooKeeper can, held back from being taken for lost."""

    supervisor_id: str
    host: str
    since: float    # the master's monotonic time it first held it
    unheard: float  # how long (s) the master had not heard it then


class PresenceWatch:
    """The machines the master holds because ZooKeeper hears them (see the module docstring):
    `hold` says whether one is new (to be said once), `heard` ends a hold when the master hears
    the machine itself again, `keep_only` ends those ZooKeeper no longer hears."""

    def __init__(self) -> None:
        self.held: dict[str, HeldByZooKeeper] = {}

    def hold(self, supervisor_id: str, host: str, now: float, unheard: float) -> HeldByZooKeeper | None:
        """Hold ``supervisor_id``; the new hold if it was not held (None: it already was)."""
        if supervisor_id in self.held:
            return None
        held = self.held[supervisor_id] = HeldByZooKeeper(supervisor_id, host, now, unheard)
        return held

    def heard(self, supervisor_id: str) -> HeldByZooKeeper | None:
        """The master heard ``supervisor_id`` itself: the hold that ends (None: it was not held)."""
        return self.held.pop(supervisor_id, None)

    def keep_only(self, supervisor_ids: set[str]) -> list[HeldByZooKeeper]:
        """End the holds of machines not in ``supervisor_ids`` (ZooKeeper no longer hears them, or
        they were heard); those ended."""
        gone = [h for sid, h in self.held.items() if sid not in supervisor_ids]
        for h in gone:
            del self.held[h.supervisor_id]
        return gone


class SupervisorPresence:
    """A supervisor's ZooKeeper session and its ephemeral ``supervisors-alive/<id>`` node (see
    the module docstring). `start` connects in the background: a ZooKeeper that is down does not
    keep the supervisor from starting; a thread of its own makes the node (again, after a lost
    session) every ``supervisor.monitor.frequency.secs`` while it is missing. `stop` ends the
    session, and the node with it."""

    def __init__(self, conf: Mapping[str, Any], secret: bytes, supervisor_id: str, host: str,
                 ports: list[int]) -> None:
        """Raises:
            SquallError: kazoo is not installed, or ``supervisor_id`` cannot name a node.
        """
        name = _node_name(supervisor_id)
        if name is None:
            raise SquallError(f"supervisor id {supervisor_id!r} cannot name a ZooKeeper node "
                              "(letters, digits and _.:@+- only, 200 at most)")
        self.secret = secret
        self.hosts = zookeeper_servers(conf)
        self.path = f"{zookeeper_root(conf)}/{ALIVE}/{name}"
        self.value = json.dumps({"id": supervisor_id, "host": host, "ports": sorted(ports)}, sort_keys=True).encode()
        self.period = float(conf_value(conf, Config.SUPERVISOR_MONITOR_FREQUENCY_SECS))
        self.connect_secs = float(conf_value(conf, Config.STORM_ZOOKEEPER_CONNECTION_TIMEOUT)) / 1000.0
        self.zk = kazoo_client(conf, ZooKeeperCredential.of(secret), "supervisor")
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="squall-supervisor-presence", daemon=True)
        self._said: str | None = None  # the last problem logged (each said once until it changes)
        self._made: tuple[int, int] | None = None  # (creation, version) of the node as we last wrote it

    def start(self) -> SupervisorPresence:
        """Connect (in the background) and keep the node."""
        self.zk.start_async()
        self._thread.start()
        return self

    def _run(self) -> None:
        unconnected = time.monotonic()  # since when the session is not connected (kazoo reconnects)
        while not self._stopping.is_set():
            try:
                if not self.zk.connected:
                    if time.monotonic() - unconnected > self.connect_secs:
                        raise ConnectionError(f"not connected for over {self.connect_secs:g} s "
                                              "(storm.zookeeper.connection.timeout)")
                else:
                    unconnected = time.monotonic()
                    if self._ensure():
                        log.info("supervisor's liveness is in ZooKeeper at %s%s", self.hosts, self.path)
                    self._said = None
            except Exception as e:  # noqa: BLE001 (whatever kazoo raises: said once, tried again)
                if str(e) != self._said:
                    self._said = str(e)
                    log.warning("cannot keep this supervisor's liveness in ZooKeeper at %s%s: %s (tried again every "
                                "%g s; meanwhile a master cut off from this machine alone takes it for lost)",
                                self.hosts, self.path, e, self.period)
            self._stopping.wait(self.period)

    def _ensure(self) -> bool:
        """Make the node unless our session holds it as we wrote it; whether it made it. One left
        by an earlier session of this supervisor (restarted before that session expired), or
        changed by someone else, is replaced."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        from .._sealed import seal
        stat = self.zk.exists(self.path)
        session = self.zk.client_id[0] if self.zk.client_id else None
        if stat is not None and stat.ephemeralOwner == session and (stat.czxid, stat.version) == self._made:
            return False
        if stat is not None:
            try:
                self.zk.delete(self.path)
            except NoNodeError:
                pass
        try:
            # the value is sealed for the node as its first write leaves it (its creation is in the seal)
            _node, stat = self.zk.create(self.path, b"", ephemeral=True, makepath=True, include_data=True)
        except NodeExistsError:
            return False  # made meanwhile: looked at again next time
        stat = self.zk.set(self.path, seal(self.secret, NodeVersion(self.path, stat.czxid, stat.version + 1).kind(),
                                           self.value), version=stat.version)
        self._made = (stat.czxid, stat.version)
        return True

    def stop(self) -> None:
        """End the session: the node goes at once."""
        self._stopping.set()
        self._thread.join(5)
        try:
            self.zk.stop()
            self.zk.close()
        except Exception as e:  # noqa: BLE001 (whatever kazoo raises on the way out: stopping anyway)
            log.debug("closing the supervisor's ZooKeeper session: %s", e)


def supervisor_presence(conf: Mapping[str, Any], secret: bytes, supervisor_id: str, host: str,
                        ports: list[int]) -> SupervisorPresence | None:
    """The started `SupervisorPresence` of a supervisor, with ``storm.zookeeper.servers`` set
    (None without: a lone master hears machines only through their syncs). Without kazoo, or
    with an id that cannot name a node, it says why and returns None: the supervisor runs, and a
    master cut off from this machine alone takes it for lost, as without ZooKeeper."""
    if zookeeper_servers(conf) is None:
        return None
    try:
        return SupervisorPresence(conf, secret, supervisor_id, host, ports).start()
    except SquallError as e:
        log.warning("this supervisor's liveness is not kept in ZooKeeper: %s", e)
        return None
