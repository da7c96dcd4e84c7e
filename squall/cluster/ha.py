"""Nimbus HA on ZooKeeper (Storm's "Highly Available Nimbus Design"): one master's side of it.

With ``storm.zookeeper.servers`` set, every master (`squall.cluster.master.Master`) keeps a
`Coordinator`: a ZooKeeper session (kazoo, imported here only, the ``ha`` extra) under
``storm.zookeeper.root`` (``/storm``), laid out as Storm's ``ClusterUtils``:

==================================  ==========================================================
``leader-lock/latch-<seq>``         ephemeral sequential: the election (Curator's LeaderLatch
                                    recipe: the lowest sequence leads), data ``host:port``
``nimbuses/<host:port>``            ephemeral: each running master (`NimbusSummary`)
``storms/<storm-id>``               a topology's base: name, status, waits, debug, code digest
``assignments/<storm-id>``          its executors per slot, the slots' launch ids, the
                                    topology's error count (beside the error batches counted)
                                    and the last word of its ended launches (their counters)
``errors/<storm-id>``               its errors (the master's records, newest last)
``workerbeats/<storm-id>/<slot>``   heartbeat summaries (exact counters, pid, address, launch id), written
                                    by the leader every ``task.heartbeat.frequency.secs``
``supervisors/<supervisor-id>``     each supervisor's host, ports and first sync
``supervisors-alive/<id>``          ephemeral, written by the supervisor itself: its session
                                    lives (`squall.cluster.liveness`); its host and ports
``counter``                         the last topology number (storm ids stay unique)
``blobstore/<storm-id>``            the digest of the topology's current code; its ephemeral
                                    children ``<host:port>`` are the masters that hold it
``transactional/<topology>/<key>``  Trident's transactional state (`squall.cluster.txstore`),
                                    by topology *name*, ``/`` in a key as ``~``: written by the
                                    leader when a worker asks, and kept when the topology is killed
==================================  ==========================================================

Only the leader writes the state; followers read it every ``nimbus.monitor.freq.secs`` (at most
1 s) to answer reads (``list``, ``info``, the UI) and fetch the code they lack from a master that
holds it (``code`` over the authenticated RPC channel). Topology code (the sealed plan) lives in
each master's ``storm.local.dir``, as Storm's LocalFsBlobStore keeps it; a master that lacks the
code of a topology in ``storms`` does not take the lead (it leaves the election until it has
fetched it).

Everything read from ZooKeeper is hostile until proved otherwise: ZooKeeper is shared, so every
value is sealed (`squall._sealed`: an HMAC under a key derived from the cluster's secret), bound
to its node as it is after the write (`NodeVersion`: the path, the transaction that created the
node, and the data version the write gives it), so a value moved to another node, copied back
over a later version of its own node, or into a node deleted and created again, is refused. A
value is checked before its JSON is parsed, and its fields' types before use. A node that fails
is refused with a warning naming it (once per change of the node), and the last value that
passed is kept: a follower keeps the newer state when an old one is replayed. The leader watches
the nodes it wrote and writes again one that someone else changed or removed. Nothing in
ZooKeeper is ever unpickled (the plans are fetched from masters, and sealed themselves).

Every node is created with a digest ACL that admits only the cluster's masters (and its
supervisors, which hold the same secret, for their ``supervisors-alive`` nodes)
(`ZooKeeperCredential`, derived from the secret, never the secret itself, and never logged: the
kazoo logger hides it), so a client without it can neither read nor change anything. At start, a
master gives that ACL to every node under the root that is open to anyone (made by a squall
before ACLs), keeping any other ACL an operator set.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._config import Config, conf_value
from .._errors import SquallError
from .._keys import ZOOKEEPER, derive_key
from .seeds import NimbusAddress, parse_seed

log = logging.getLogger("squall.master")

LATCH_PREFIX = "latch-"
ALIVE = "supervisors-alive"
"""Where each supervisor's ephemeral node says its session lives (`squall.cluster.liveness`)."""
LEADER = "Leader"
NOT_A_LEADER = "Not a Leader"
OFFLINE = "Offline"


def zookeeper_servers(conf: Mapping[str, Any]) -> str | None:
    """kazoo's hosts string for ``storm.zookeeper.servers`` (each ``host`` at
    ``storm.zookeeper.port``, or ``host:port``); None when HA is off (no servers)."""
    servers = conf.get(Config.STORM_ZOOKEEPER_SERVERS)
    if not servers:
        return None
    port = int(conf_value(conf, Config.STORM_ZOOKEEPER_PORT))
    return ",".join(str(parse_seed(str(s), port)) for s in servers)


def zookeeper_root(conf: Mapping[str, Any]) -> str:
    """The cluster's root node (``storm.zookeeper.root``, ``/storm``)."""
    return "/" + str(conf_value(conf, Config.STORM_ZOOKEEPER_ROOT)).strip("/")


def kazoo_client(conf: Mapping[str, Any], credential: ZooKeeperCredential, who: str) -> Any:
    """A kazoo client (not started) for ``storm.zookeeper.servers`` with the cluster's session
    timeout and retries, authenticated as ``credential``, its nodes made with its ACL. ``who``:
    what needs it (a master, a supervisor), for the error when kazoo is missing.

    Raises:
        SquallError: kazoo is not installed.
    """
    try:
        from kazoo.client import KazooClient
    except ImportError as e:
        raise SquallError(f"storm.zookeeper.servers is set, so this {who} needs kazoo: "
                          "pip install 'squall[ha]'") from e
    session = float(conf_value(conf, Config.STORM_ZOOKEEPER_SESSION_TIMEOUT)) / 1000.0
    # Storm's key counts retries after the first try (Curator's); kazoo's max_tries counts
    # tries, and its 0 would retry for ever
    tries = int(conf_value(conf, Config.STORM_ZOOKEEPER_RETRY_TIMES)) + 1
    interval = float(conf_value(conf, Config.STORM_ZOOKEEPER_RETRY_INTERVAL)) / 1000.0
    return KazooClient(hosts=zookeeper_servers(conf), timeout=session,
                       connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": interval},
                       command_retry={"max_tries": tries, "delay": 0.1, "max_delay": interval},
                       auth_data=[credential.auth], default_acl=[credential.acl()], logger=_kazoo_logger())


class NodeRefused(SquallError):
    """A node's value is not one this cluster's masters wrote there (`Coordinator.read`)."""


@dataclass(frozen=True)
class ZooKeeperCredential:
    """The digest credential a cluster's masters give ZooKeeper, and its nodes' ACL admits:
    derived from the cluster's secret for this use only (`squall._keys`), so it is the same on
    every master, and neither is the secret nor leads back to it. Its password never appears in
    a repr or a log."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def of(cls, secret: bytes) -> ZooKeeperCredential:
        """The credential of the cluster whose secret is ``secret``."""
        return cls("squall", derive_key(secret, ZOOKEEPER).hex())

    @property
    def auth(self) -> tuple[str, str]:
        """kazoo's ``auth_data`` entry."""
        return ("digest", f"{self.user}:{self.password}")

    def acl(self) -> Any:
        """The ACL that gives this credential every permission, and no one else any."""
        from kazoo.security import make_digest_acl
        return make_digest_acl(self.user, self.password, all=True)


@dataclass(frozen=True)
class NodeVersion:
    """What a sealed value is bound to: its node's path, the transaction that created the node
    (``czxid``) and the data version the value was written as. ZooKeeper never gives a node the
    same creation and version twice, so a value sealed for one is genuine at that one only."""

    path: str
    czxid: int
    version: int

    def kind(self) -> bytes:
        """The seal's kind (`squall._sealed`), under the MAC."""
        return f"zk {self.path} {self.czxid:x}.{self.version}".encode()

    @classmethod
    def of_kind(cls, kind: bytes) -> NodeVersion | None:
        """The binding a seal's kind names (None: not a ZooKeeper value with a version)."""
        text = kind.decode(errors="replace")
        if not text.startswith("zk "):
            return None
        path, _, node = text[3:].rpartition(" ")
        czxid, _, version = node.partition(".")
        if not path:
            return None
        try:
            return cls(path, int(czxid, 16), int(version))
        except ValueError:
            return None

    def mismatch(self, node: NodeVersion) -> str | None:
        """Why a value sealed for this does not belong in ``node`` (None: it does)."""
        if self.path != node.path:
            return f"a value of node {self.path} moved here"
        if self.czxid != node.czxid:
            return ("an old value replayed: it was sealed for an earlier node at this path "
                    "(deleted and created again since)")
        if self.version != node.version:
            return (f"an old value replayed: it was sealed for version {self.version} of the node, which is at "
                    f"version {node.version} (written by someone who is not this cluster's leader)")
        return None


@dataclass(frozen=True)
class ExactRead:
    """One path's answer to `Coordinator.read_exact_many`: its ``value`` as `Coordinator.read_exact`
    gives it (None: no node, no value yet, or refused), or the ``error`` kazoo raised for it."""

    value: Any
    error: Exception | None = None


@dataclass(frozen=True)
class _Written:
    """What we last wrote at a node, and the node's creation and version after it."""

    payload: bytes
    czxid: int
    version: int


class _HideCredential(logging.Filter):
    """kazoo logs each request it sends at DEBUG, its Auth request (our password) included."""

    def filter(self, record: logging.LogRecord) -> bool:
        from kazoo.protocol.serialization import Auth
        if isinstance(record.args, tuple) and any(isinstance(a, Auth) for a in record.args):
            record.args = tuple(a._replace(auth="<hidden>") if isinstance(a, Auth) else a for a in record.args)
        return True


def _kazoo_logger() -> logging.Logger:
    kazoo_log = logging.getLogger("kazoo.squall")
    if not any(isinstance(f, _HideCredential) for f in kazoo_log.filters):
        kazoo_log.addFilter(_HideCredential())
    return kazoo_log


@dataclass(frozen=True)
class NimbusSummary:
    """A running master, as ``nimbuses/<host:port>`` holds it (Storm's ``NimbusSummary``)."""

    host: str
    port: int
    started: float     # its wall clock when it started
    version: str

    @property
    def address(self) -> NimbusAddress:
        """Where it listens."""
        return NimbusAddress(self.host, self.port)


_REQUESTS = frozenset({"get", "set", "create", "delete", "exists", "get_children", "ensure_path", "get_acls",
                       "set_acls", "get_async"})
"""The kazoo calls that send requests and wait for their answers (`_FailFast` guards them); and
``get_async``, whose answer the master waits for right after (`Coordinator.read_exact_many`)."""


class _FailFast:
    """A `KazooClient` whose requests (`_REQUESTS`) raise kazoo's ``ConnectionLoss`` at once,
    naming the servers, while the session is not connected (``connected`` clear), instead of
    waiting in kazoo's queue until ZooKeeper answers again. The master makes them on its
    server's event loop: one made while ZooKeeper was down (the leader's second, in flight when
    the connection dropped) stopped the master answering anyone, workers and supervisors
    included, and from saying it had lost the lead, for as long as ZooKeeper stayed away.
    Everything else (listeners, recipes, ``start``, ``stop``) is the client's own."""

    def __init__(self, client: Any, connected: threading.Event, hosts: str) -> None:
        self._client = client
        self._connected = connected
        self._hosts = hosts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in _REQUESTS:
            return attr

        def request(*args: Any, **kwargs: Any) -> Any:
            if not (self._connected.is_set() and self._client.connected):
                from kazoo.exceptions import ConnectionLoss
                raise ConnectionLoss(f"not connected to ZooKeeper at {self._hosts} (kazoo reconnects meanwhile)")
            return attr(*args, **kwargs)
        return request


class Coordinator:
    """One master's ZooKeeper session: its election entry, its summary, the cluster state it
    writes as leader or reads as follower, and the code it holds. See the module docstring.

    Raises:
        SquallError: ZooKeeper cannot be reached within ``storm.zookeeper.connection.timeout``
            (the message names the servers), or kazoo is not installed.
    """

    def __init__(self, conf: Mapping[str, Any], secret: bytes) -> None:
        self.hosts = zookeeper_servers(conf)
        self.root = zookeeper_root(conf)
        self.secret = secret
        connect = float(conf_value(conf, Config.STORM_ZOOKEEPER_CONNECTION_TIMEOUT)) / 1000.0
        self.credential = ZooKeeperCredential.of(secret)
        self.acl = self.credential.acl()
        self._connected = threading.Event()
        self.zk = _FailFast(kazoo_client(conf, self.credential, "master"), self._connected, str(self.hosts))
        self._written: dict[str, _Written] = {}  # path -> what we last wrote there
        self._watched: set[str] = set()  # nodes we wrote that a watch of ours is on
        self._touched: set[str] = set()  # nodes whose watch fired: changed, by us or someone else
        self.zk.add_listener(self._on_state)
        try:
            self.zk.start(timeout=connect)
        except Exception as e:  # kazoo's timeout is a plain Exception subclass
            self.zk.stop()
            raise SquallError(f"cannot reach ZooKeeper at {self.hosts} (storm.zookeeper.servers) within "
                              f"{connect:g} s (storm.zookeeper.connection.timeout): {e}") from e
        self._connected.set()
        try:
            self.zk.ensure_path(self.root)
            self._secure()
            for sub in ("leader-lock", "nimbuses", "storms", "assignments", "errors", "workerbeats",
                        "supervisors", ALIVE, "blobstore"):
                self.zk.ensure_path(f"{self.root}/{sub}")
        except Exception:
            self.close()
            raise
        self.me: NimbusAddress | None = None
        self.summary: NimbusSummary | None = None
        self._latch: str | None = None       # our latch node's name, while in the election
        self._latch_children: list[str] = []  # the election's nodes, kept by a watch
        self._leaders: dict[str, NimbusAddress] = {}  # latch node -> whose it is
        self._good: dict[str, Any] = {}  # path -> the last value read there that passed
        self._warned: dict[str, int] = {}  # path -> the change (mzxid) last warned about
        self._read: set[str] = set()  # paths read since the last `sweep`

    def _secure(self) -> None:
        """Give the cluster's ACL to every node under the root that anyone may use (made by a
        squall before ACLs, or by anyone while the root was open); other ACL entries stay."""
        from kazoo.exceptions import NoAuthError, NoNodeError
        secured, pending = 0, [self.root]
        while pending:
            path = pending.pop()
            try:
                acls, _stat = self.zk.get_acls(path)
                if any(a.id.scheme == "world" for a in acls):
                    self.zk.set_acls(path, [self.acl, *(a for a in acls if a.id.scheme != "world" and a != self.acl)])
                    secured += 1
                pending.extend(f"{path}/{child}" for child in self.zk.get_children(path))
            except NoNodeError:
                continue
            except NoAuthError:
                raise SquallError(
                    f"ZooKeeper node {path} does not admit this cluster's masters (its ACL names another "
                    f"credential): is storm.zookeeper.root {self.root} used by a cluster with another "
                    f"squall.secret?") from None
        if secured:
            log.info("gave %d ZooKeeper nodes under %s this cluster's ACL: they were open to anyone "
                     "(made by a squall before ACLs)", secured, self.root)

    # --- the session --------------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        # kazoo's thread: SUSPENDED (connection lost, session may live) and LOST (session gone,
        # ephemeral nodes with it) both end leadership at once; CONNECTED resumes it only if
        # our latch node is still the lowest
        if state == "CONNECTED":
            self._connected.set()
        else:
            self._connected.clear()
            if state == "LOST":  # our watches went with the session: each node is looked at again
                self._latch = None
                self._watched.clear()

    @property
    def connected(self) -> bool:
        """Whether the session is connected now (requests would otherwise wait for retries)."""
        return self._connected.is_set()

    def path(self, *parts: str) -> str:
        """The node ``parts`` under the root."""
        return "/".join((self.root, *parts))

    # --- sealed values ------------------------------------------------------------------------------
    def _set_sealed(self, path: str, czxid: int, version: int, payload: bytes) -> Any:
        """Set node ``path`` (created by transaction ``czxid``, at ``version``) to ``payload``
        sealed for the version this write gives it, unless the node has moved on (kazoo's
        BadVersionError); the node's stat after it."""
        from .._sealed import seal
        return self.zk.set(path, seal(self.secret, NodeVersion(path, czxid, version + 1).kind(), payload),
                           version=version)

    def _open(self, path: str, data: bytes, stat: Any) -> Any:
        """The JSON value sealed in ``data`` for node ``path`` as ``stat`` describes it; None
        if it is not one this cluster's masters wrote there (warned once per change of the
        node), or while the node has no value yet (created, not yet set: `_put`)."""
        from .._sealed import SealError, open_sealed
        if not data:
            return None
        try:
            kind, payload = open_sealed(self.secret, data)
            sealed_for = NodeVersion.of_kind(kind)
            if sealed_for is None:
                raise SealError(f"sealed as {kind!r}, without its node's version (by a squall before versions)")
            problem = sealed_for.mismatch(NodeVersion(path, stat.czxid, stat.version))
            if problem:
                raise SealError(problem)
            return json.loads(payload)
        except SealError as e:
            why = str(e)
        except ValueError as e:
            why = f"its sealed value is not JSON ({e})"
        if self._warned.get(path) != stat.mzxid:
            self._warned[path] = stat.mzxid
            log.warning("ZooKeeper node %s refused: %s", path, why)
        return None

    def read(self, path: str, strict: bool = False) -> Any:
        """The value at ``path``: None if there is no such node; if its value is not one this
        cluster's masters wrote there, the last one read there that was (None if none, or with
        ``strict``, `NodeRefused`: for a value whose absence means "start afresh")."""
        from kazoo.exceptions import NoNodeError
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            self._good.pop(path, None)
            return None
        self._read.add(path)
        value = self._open(path, data, stat)
        if value is None:
            if strict and data and path not in self._good:
                raise NodeRefused(f"ZooKeeper node {path} holds a value this cluster's masters did not write there "
                                  "(altered, or sealed under another squall.secret)")
            return self._good.get(path)
        self._good[path] = value
        self._warned.pop(path, None)
        return value

    def read_exact(self, path: str) -> Any:
        """The value at ``path`` only as the node is now: None if there is no such node, it has
        no value yet, or its value is not one this cluster wrote there (warned). Unlike `read`,
        never the last value that passed: a liveness node's old value would say a gone machine
        lives (`squall.cluster.liveness`)."""
        from kazoo.exceptions import NoNodeError
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return self._open(path, data, stat)

    def read_exact_many(self, paths: Sequence[str]) -> dict[str, ExactRead]:
        """`read_exact` of each of ``paths``, in one round trip to ZooKeeper: every request is
        sent before any answer is awaited (kazoo pipelines them on the session's connection).
        The master asks on its event loop for every machine it has not heard
        (`squall.cluster.liveness.read_presences`): one `read_exact` after another took a round
        trip each, and with ZooKeeper 50 ms away and 20 silent machines held the loop, and every
        RPC and heartbeat with it, for 0.8 to 1 s of each second. A path's answer is its value
        (as `read_exact`), or the error kazoo gave for it (other paths are still answered).

        Raises:
            ConnectionLoss: the session is not connected (nothing was sent: `_FailFast`).
        """
        from kazoo.exceptions import NoNodeError
        sent = [(path, self.zk.get_async(path)) for path in paths]
        answers = {}
        for path, result in sent:
            try:
                data, stat = result.get()
            except NoNodeError:
                answers[path] = ExactRead(None)
                continue
            except Exception as e:  # noqa: BLE001 (whatever kazoo answers for this path: the caller judges it)
                answers[path] = ExactRead(None, e)
                continue
            answers[path] = ExactRead(self._open(path, data, stat))
        return answers

    def sweep(self) -> None:
        """Forget what was read at nodes not read since the last sweep (they are gone)."""
        for kept in (self._good, self._warned):
            for path in set(kept) - self._read:
                del kept[path]
        self._read = set()

    def children(self, path: str) -> list[str]:
        """The children of ``path`` (none if it is gone)."""
        from kazoo.exceptions import NoNodeError
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def write(self, path: str, value: Any, ephemeral: bool = False) -> None:
        """Set ``path`` to ``value``, sealed for the version the write gives the node, creating
        it; skipped when we wrote the same last and no one changed the node since (a watch on
        each node we wrote says when it changed: one that someone else changed or removed is
        written again, with a warning)."""
        payload = json.dumps(value, sort_keys=True).encode()
        last = self._written.get(path)
        if last is not None and (path in self._touched or path not in self._watched):
            # its watch fired (someone changed it, or we did), or none is on it yet: look at it
            self._touched.discard(path)
            try:
                stat = self.zk.exists(path, watch=self._on_change)
            except Exception:
                self._touched.add(path)
                raise
            self._watched.add(path)
            if stat is None or (stat.czxid, stat.version) != (last.czxid, last.version):
                _overwritten(path, stat is None)
                last = None
        if last is not None and last.payload == payload:
            return
        stat = self._put(path, payload, last, ephemeral)
        self._written[path] = _Written(payload, stat.czxid, stat.version)

    def _on_change(self, event: Any) -> None:
        # kazoo's thread: the node changed or went (our own writes fire it too): look at it at
        # its next write. A lost session calls it without a path (`_on_state` covers that)
        if event.path:
            self._watched.discard(event.path)
            if event.path in self._written:  # not one we deleted (Trident's keys come and go)
                self._touched.add(event.path)

    def _put(self, path: str, payload: bytes, last: _Written | None, ephemeral: bool) -> Any:
        """``payload`` sealed at ``path`` for the version the write gives it, set only if the
        node is still at the version we sealed for (someone else's write in between is looked
        at, not overwritten blind); the node's stat after it."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
        for _attempt in range(5):
            try:
                if last is not None:
                    czxid, version = last.czxid, last.version
                else:
                    stat = self.zk.exists(path)
                    if stat is None:
                        _node, stat = self.zk.create(path, b"", ephemeral=ephemeral, makepath=True, include_data=True)
                    czxid, version = stat.czxid, stat.version
                return self._set_sealed(path, czxid, version, payload)
            except (BadVersionError, NoNodeError, NodeExistsError) as e:
                if last is not None:
                    _overwritten(path, isinstance(e, NoNodeError))
                last = None
        raise SquallError(f"ZooKeeper node {path} changed under each of 5 writes: not written (the next save tries again)")

    def delete(self, path: str) -> None:
        """Remove ``path`` and what is under it (nothing if it is gone)."""
        from kazoo.exceptions import NoNodeError
        try:
            self.zk.delete(path, recursive=True)
        except NoNodeError:
            pass
        for p in [p for p in self._written if p == path or p.startswith(path + "/")]:
            del self._written[p]
            self._touched.discard(p)

    def forget_writes(self) -> None:
        """Write everything again at the next `write` (another master may have written since)."""
        self._written.clear()
        self._touched.clear()

    # --- the election --------------------------------------------------------------------------------
    def join(self, me: NimbusAddress, started: float, version: str) -> None:
        """Register as a running master (``nimbuses``) and enter the election."""
        self.me = me
        self.summary = NimbusSummary(me.host, me.port, started, version)
        self.zk.ChildrenWatch(self.path("leader-lock"), self._on_latch)
        self.register()
        self.join_election()

    def _on_latch(self, children: list[str]) -> None:
        self._latch_children = sorted(children, key=_sequence)

    def register(self) -> None:
        """Make sure our ``nimbuses`` entry exists (it goes with a lost session)."""
        assert self.summary is not None
        path = self.path("nimbuses", str(self.summary.address))
        if self.zk.exists(path) is None:
            self._written.pop(path, None)
        self.write(path, {"host": self.summary.host, "port": self.summary.port,
                          "started": self.summary.started, "version": self.summary.version}, ephemeral=True)

    def join_election(self) -> None:
        """Enter the election (again), unless in it."""
        assert self.me is not None
        if self.in_election:
            return
        # the value is sealed for the node itself, so it is set once the node (and its name) exists
        node, stat = self.zk.create(self.path("leader-lock", LATCH_PREFIX), b"", ephemeral=True, sequence=True,
                                    include_data=True)
        self._latch = node.rsplit("/", 1)[1]
        self._latch_children = sorted(set(self._latch_children) | {self._latch}, key=_sequence)
        self._set_sealed(node, stat.czxid, stat.version, json.dumps(str(self.me)).encode())

    @property
    def in_election(self) -> bool:
        """Whether our latch node exists (it goes with a lost session, or `quit_election`)."""
        return self._latch is not None and self.zk.exists(self.path("leader-lock", self._latch)) is not None

    def quit_election(self) -> None:
        """Leave the election (Storm 2.x ``quitElectionFor``): a master that lacks code."""
        if self._latch is not None:
            self.delete(self.path("leader-lock", self._latch))
            self._latch = None

    def is_leader(self) -> bool:
        """Whether we lead now: connected, and our latch node is the lowest (read from the
        latch each time, never from a stored flag)."""
        children = self._latch_children
        return self._connected.is_set() and self._latch is not None and bool(children) \
            and children[0] == self._latch

    def leader(self) -> NimbusAddress | None:
        """The master that leads (the owner of the lowest latch node), if any: none while
        ZooKeeper is unreachable (the latch may have changed unseen), or while the lowest node
        has no value of this cluster's (not set yet, or not one of ours: warned)."""
        children = self._latch_children
        if not children or not self._connected.is_set():
            return None
        node = children[0]
        if node == self._latch:
            return self.me
        if node not in self._leaders:
            path = self.path("leader-lock", node)
            from kazoo.exceptions import NoNodeError
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                return None
            address = _address(self._open(path, data, stat))
            if address is None:
                return None
            self._leaders = {node: address}
        return self._leaders[node]

    def nimbuses(self) -> list[NimbusSummary]:
        """The running masters (from ``nimbuses``; malformed entries skipped)."""
        out = []
        for name in self.children(self.path("nimbuses")):
            v = self.read(self.path("nimbuses", name))
            if isinstance(v, dict) and isinstance(v.get("host"), str) and _is_int(v.get("port")) \
                    and _is_number(v.get("started")) and isinstance(v.get("version"), str):
                out.append(NimbusSummary(v["host"], v["port"], float(v["started"]), v["version"]))
            elif v is not None:
                log.warning("ZooKeeper node %s skipped: not a master's summary", self.path("nimbuses", name))
        return out

    # --- code ----------------------------------------------------------------------------------------
    def publish_code(self, storm_id: str, digest: str) -> None:
        """The leader wrote ``storm_id``'s code (``digest``): name it the current version."""
        self.write(self.path("blobstore", storm_id), {"code": digest})
        self.hold(storm_id, digest)

    def hold(self, storm_id: str, digest: str) -> None:
        """We hold ``storm_id``'s code ``digest`` (ephemeral: goes with our session)."""
        assert self.me is not None
        path = self.path("blobstore", storm_id, str(self.me))
        if self.zk.exists(path) is None:
            self._written.pop(path, None)
        self.write(path, {"code": digest}, ephemeral=True)

    def code_keys(self) -> dict[str, str]:
        """Storm id -> the digest of its current code, for every topology with code."""
        out = {}
        for storm_id in self.children(self.path("blobstore")):
            v = self.read(self.path("blobstore", storm_id))
            if isinstance(v, dict) and isinstance(v.get("code"), str):
                out[storm_id] = v["code"]
        return out

    def holders(self, storm_id: str, digest: str) -> list[NimbusAddress]:
        """The masters that hold ``storm_id``'s code ``digest``."""
        out = []
        for name in self.children(self.path("blobstore", storm_id)):
            v = self.read(self.path("blobstore", storm_id, name))
            if isinstance(v, dict) and v.get("code") == digest:
                try:
                    out.append(parse_seed(name, 0))
                except ValueError:
                    log.warning("ZooKeeper node %s skipped: not host:port", self.path("blobstore", storm_id, name))
        return out

    def close(self) -> None:
        """End the session (our ephemeral nodes go at once: a clean stop hands the lead over
        without waiting for the session timeout)."""
        try:
            self.zk.stop()
            self.zk.close()
        except Exception as e:  # noqa: BLE001 (whatever kazoo raises on the way out: stopping anyway)
            log.debug("closing the ZooKeeper session: %s", e)


def _sequence(node: str) -> int:
    """The sequence number ZooKeeper appended to a latch node's name."""
    tail = node.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 62


def _address(value: Any) -> NimbusAddress | None:
    """The master a latch value names."""
    if not isinstance(value, str):
        return None
    try:
        return parse_seed(value, 0)
    except ValueError:
        return None


def _overwritten(path: str, removed: bool) -> None:
    log.warning("ZooKeeper node %s was %s by someone who is not this master: written again", path,
                "removed" if removed else "changed")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def int_beyond_64_bits(v: Any) -> str | None:
    """Where in ``v`` (a JSON document: dicts, lists, scalars) the first integer lies that does
    not fit in 64 bits (``topologies.t.slots.h:1.launch_id``), None if none. Everything a master
    holds goes out through msgpack (`squall._wire`), which packs no larger integer: one such
    integer in a record edited by hand made every answer that carried it fail (a supervisor's
    sync, ``squall list``), so the topology ran nowhere, with nothing said but a warning per
    refused connection."""
    todo: list[tuple[str, Any]] = [("", v)]
    while todo:
        at, x = todo.pop()
        if isinstance(x, int) and not isinstance(x, bool) and not -(2 ** 63) <= x < 2 ** 63:
            return at or "the top"
        if isinstance(x, dict):
            todo.extend((f"{at}.{k}" if at else str(k), y) for k, y in reversed(x.items()))
        elif isinstance(x, list):
            todo.extend((f"{at}[{i}]", y) for i, y in reversed(list(enumerate(x))))
    return None


def _is_number(v: Any) -> bool:
    # finite: JSON as Python reads it takes NaN and Infinity, and a start time of NaN made every
    # uptime NaN
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# --- the cluster state, as the leader writes it and followers read it --------------------------------
_STATUSES = ("ACTIVE", "INACTIVE", "KILLED", "REBALANCING")
# master_records.REMOVE_ACTION and REBALANCE_ACTION, spelt out: the master's store imports this
# module, and master_records sits above the store (pyproject's "master" layers). Another kind
# crashed the master's timer when its wait was over
_ACTIONS = ("remove", "rebalance")


@dataclass
class TopologyRecord:
    """One topology's nodes: ``storms/<id>`` (``base``), ``assignments/<id>``, ``errors/<id>``
    and ``workerbeats/<id>/*`` (``beats``, slot -> summary), each checked (`check_base`, ...)."""

    storm_id: str
    base: dict[str, Any]
    assignment: dict[str, Any]
    errors: list[Any]
    beats: dict[str, dict[str, Any]]


@dataclass
class ClusterState:
    """What the leader keeps in ZooKeeper: the topology counter, the topologies by storm id and
    the supervisors by id (``{"host", "ports", "since"}``)."""

    counter: int
    topologies: dict[str, TopologyRecord]
    supervisors: dict[str, dict[str, Any]]


def check_base(v: Any) -> str | None:
    """What is wrong with a ``storms/<id>`` value (None: nothing)."""
    if not isinstance(v, dict):
        return "not a map"
    if not isinstance(v.get("name"), str) or not v["name"]:
        return "no name"
    if v.get("status") not in _STATUSES or v.get("previous") not in (None, *_STATUSES):
        return f"status {v.get('status')!r} (previous {v.get('previous')!r}) is not a topology status"
    if not _is_number(v.get("launched")):
        return "launched is not a time"
    action = v.get("pending_action")
    if action is not None and not (isinstance(action, dict) and action.get("kind") in _ACTIONS
                                   and _is_number(action.get("due"))
                                   and (action.get("num_workers") is None or _is_int(action["num_workers"]))
                                   and isinstance(action.get("executors") or {}, dict)):
        return "malformed pending action"
    if not isinstance(v.get("debug") or {}, dict) or not isinstance(v.get("code"), str):
        return "malformed debug switches or code digest"
    parallelism = v.get("parallelism")
    if not (v.get("num_workers") is None or _is_int(v["num_workers"])) or not (
            parallelism is None or (isinstance(parallelism, dict)
                                    and all(isinstance(c, str) and _is_int(n) for c, n in parallelism.items()))):
        return "malformed worker or executor counts"
    return None


def check_assignment(v: Any, executors: int | None) -> str | None:
    """What is wrong with an ``assignments/<id>`` value for a plan of ``executors`` executors
    (None: the indexes' form only, for a record whose plan is not known yet)."""
    if not isinstance(v, dict) or not isinstance(v.get("assignment"), dict) or not isinstance(v.get("slots"), dict):
        return "not a map of assignment and slots"
    for slot, idx in v["assignment"].items():
        if not _is_slot(slot) or not isinstance(idx, list) \
                or not all(_is_int(i) and 0 <= i and (executors is None or i < executors) for i in idx):
            return f"slot {slot!r}: not host:port with executor indexes of the plan"
    for slot, s in v["slots"].items():
        if not _is_slot(slot) or not isinstance(s, dict) \
                or not (s.get("launch_id") is None or _is_int(s["launch_id"])) \
                or not _is_int(s.get("failed_starts", 0)) or not isinstance(s.get("given_up", False), bool) \
                or not _is_int(s.get("restarts", 0)):
            return f"slot record {slot!r} is malformed"
    return None


def check_saved_topology(t: Any, executors: int | None) -> str | None:
    """What is wrong with a lone master's ``state.json`` record of one topology, for a plan of
    ``executors`` executors (None: nothing; ``executors`` None: its form only, for the counts that
    rebalance the plan to read). ``state.json`` is not sealed as the plans are, so
    its records get the checks a Nimbus HA leader's nodes get (`check_base`, `check_assignment`),
    on the forms an older master wrote too: slot records as three maps, the pending action as a
    ``[kind, due, args]`` list, no code digest."""
    if not isinstance(t, dict):
        return "not a map"
    beyond = int_beyond_64_bits(t)
    if beyond is not None:
        return f"its integer at {beyond} does not fit in 64 bits"
    action = t.get("pending_action") or None
    if isinstance(action, list) and len(action) == 3 and isinstance(action[2], dict):
        action = {**action[2], "kind": action[0], "due": action[1]}
    problem = check_base({**t, "name": "-", "code": t.get("code") or "", "pending_action": action})
    if problem is not None:
        return problem
    slots = t.get("slots")
    if "slots" not in t:  # an older master's three maps
        ids, failures, given_up = t.get("launch_ids") or {}, t.get("launch_failures") or {}, t.get("given_up") or []
        if not isinstance(ids, dict) or not isinstance(failures, dict) or not isinstance(given_up, list) \
                or not all(isinstance(slot, str) for slot in given_up):
            return "malformed slot records (launch_ids, launch_failures, given_up)"
        slots = {slot: {"launch_id": launch} for slot, launch in ids.items()}
        for slot, n in failures.items():
            slots.setdefault(slot, {})["failed_starts"] = n
        for slot in given_up:
            slots.setdefault(slot, {})["given_up"] = True
    return check_assignment({"assignment": t.get("assignment"), "slots": slots}, executors)


def check_supervisor(v: Any) -> str | None:
    """What is wrong with a ``supervisors/<id>`` value."""
    if not isinstance(v, dict) or not isinstance(v.get("host"), str) or not isinstance(v.get("ports"), list) \
            or not all(_is_int(p) and 0 < p < 65536 for p in v["ports"]) \
            or not (v.get("since") is None or _is_number(v["since"])):
        return "not a supervisor's host, ports and start"
    return None


def check_beat(v: Any) -> str | None:
    """What is wrong with a ``workerbeats/<id>/<slot>`` value."""
    if not isinstance(v, dict) or not _is_number(v.get("time")) or not isinstance(v.get("stats"), dict) \
            or not (v.get("figures") is None or isinstance(v["figures"], dict)) \
            or not (v.get("pid") is None or _is_int(v["pid"])) \
            or not (v.get("address") is None or isinstance(v["address"], str)) \
            or not (v.get("launch_id") is None or _is_int(v["launch_id"])):
        return "not a heartbeat summary"
    return None


def write_state(c: Coordinator, state: ClusterState, replicating: frozenset[str] = frozenset()) -> None:
    """The leader's state into ZooKeeper: changed nodes only; nodes of topologies and
    supervisors that are gone are removed (heartbeat summaries: `write_beat`), except the code
    of the submissions ``replicating`` (not started until enough masters hold it)."""
    c.write(c.path("counter"), {"counter": state.counter})
    for storm_id, t in state.topologies.items():
        c.write(c.path("storms", storm_id), t.base)
        c.write(c.path("assignments", storm_id), t.assignment)
        c.write(c.path("errors", storm_id), {"errors": t.errors})
        for slot in set(c.children(c.path("workerbeats", storm_id))) - set(t.assignment.get("assignment", {})):
            c.delete(c.path("workerbeats", storm_id, slot))  # rebalanced away: its figures would mislead
    for sub in ("storms", "assignments", "errors", "workerbeats", "blobstore"):
        for storm_id in set(c.children(c.path(sub))) - set(state.topologies) - replicating:
            c.delete(c.path(sub, storm_id))
    for sid, sup in state.supervisors.items():
        c.write(c.path("supervisors", sid), sup)
    for sid in set(c.children(c.path("supervisors"))) - set(state.supervisors):
        c.delete(c.path("supervisors", sid))


def write_beat(c: Coordinator, storm_id: str, slot: str, beat: dict[str, Any]) -> None:
    """A worker's heartbeat summary (the leader, every ``task.heartbeat.frequency.secs``)."""
    c.write(c.path("workerbeats", storm_id, slot), beat)


def read_state(c: Coordinator) -> ClusterState:
    """The state the leader wrote, every node checked: at one whose value this cluster's leader
    did not write there (`Coordinator.read`), the last value that passed is used; a node not
    well formed is skipped with a warning naming it (a topology without a valid base is skipped
    whole). Assignments are checked against their plan by the master."""
    counter = c.read(c.path("counter"))
    topologies = {}
    for storm_id in c.children(c.path("storms")):
        base = c.read(c.path("storms", storm_id))
        if base is None:
            continue
        problem = check_base(base)
        if problem:
            log.warning("ZooKeeper node %s skipped: %s", c.path("storms", storm_id), problem)
            continue
        assignment = c.read(c.path("assignments", storm_id)) or {"assignment": {}, "slots": {}}
        stored = c.read(c.path("errors", storm_id))
        errors = stored["errors"] if isinstance(stored, dict) and isinstance(stored.get("errors"), list) else []
        beats = {}
        for slot in c.children(c.path("workerbeats", storm_id)):
            beat = c.read(c.path("workerbeats", storm_id, slot))
            if beat is not None and check_beat(beat) is None:
                beats[slot] = beat
        topologies[storm_id] = TopologyRecord(storm_id, base, assignment, errors, beats)
    supervisors = {}
    for sid in c.children(c.path("supervisors")):
        sup = c.read(c.path("supervisors", sid))
        problem = None if sup is None else check_supervisor(sup)
        if problem:
            log.warning("ZooKeeper node %s skipped: %s", c.path("supervisors", sid), problem)
        elif sup is not None:
            supervisors[sid] = sup
    return ClusterState(counter["counter"] if isinstance(counter, dict) and _is_int(counter.get("counter")) else 0,
                        topologies, supervisors)


def _is_slot(slot: Any) -> bool:
    if not isinstance(slot, str):
        return False
    host, sep, port = slot.rpartition(":")
    # ASCII digits: str.isdigit() takes "²" too, which int() refuses, and a slot "h:²" kept its
    # topology, whose info, pages and every supervisor's sync then failed with a bare ValueError
    return bool(host and sep and port.isascii() and port.isdigit())
