"""Nimbus HA on ZooKeeper (Storm's "Highly Available Nimbus Design"): one master's side of it.

With ``storm.zookeeper.servers`` set, every master (`squall.cluster.master.Master`) keeps a
`Coordinator`: a ZooKeeper session (kazoo, imported here only, the ``ha`` extra) under
``storm.zookeeper.root`` (``/storm``), laid out as Storm's ``ClusterUtils``:

==================================  ==========================================================
``leader-lock/latch-<seq>``         ephemeral sequential: the election (Curator's LeaderLatch
                                    recipe: the lowest sequence leads), data ``host:port``
``nimbuses/<host:port>``            ephemeral: each running master (`NimbusSummary`)
``storms/<storm-id>``               a topology's base: name, status, waits, debug, code digest
``assignments/<storm-id>``          its executors per slot and the slots' launch ids
``errors/<storm-id>``               its errors (the master's records, newest last)
``workerbeats/<storm-id>/<slot>``   heartbeat summaries (exact counters, pid, address), written
                                    by the leader every ``task.heartbeat.frequency.secs``
``supervisors/<supervisor-id>``     each supervisor's host, ports and first sync
``counter``                         the last topology number (storm ids stay unique)
``blobstore/<storm-id>``            the digest of the topology's current code; its ephemeral
                                    children ``<host:port>`` are the masters that hold it
==================================  ==========================================================

Only the leader writes the state; followers read it every ``nimbus.monitor.freq.secs`` (at most
1 s) to answer reads (``list``, ``info``, the UI) and fetch the code they lack from a master that
holds it (``code`` over the authenticated RPC channel). Topology code (the sealed plan) lives in
each master's ``storm.local.dir``, as Storm's LocalFsBlobStore keeps it; a master that lacks the
code of a topology in ``storms`` does not take the lead (it leaves the election until it has
fetched it).

Everything read from ZooKeeper is hostile until proved otherwise: ZooKeeper is shared, often
without ACLs, so every value is sealed (`squall._sealed`: an HMAC under a key derived from the
cluster's secret, bound to the node's path, so a value moved to another node is refused too),
checked before its JSON is parsed, and its fields' types checked before use. A node that fails
is skipped with a warning naming it; nothing in ZooKeeper is ever unpickled (the plans are
fetched from masters, and sealed under the secret themselves).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import SquallError
from .seeds import NimbusAddress, parse_seed

log = logging.getLogger("squall.master")

LATCH_PREFIX = "latch-"
LEADER = "Leader"
NOT_A_LEADER = "Not a Leader"
OFFLINE = "Offline"


def zookeeper_servers(conf: Mapping[str, Any]) -> str | None:
    """kazoo's hosts string for ``storm.zookeeper.servers`` (each ``host`` at
    ``storm.zookeeper.port``, or ``host:port``); None when HA is off (no servers)."""
    servers = conf.get("storm.zookeeper.servers")
    if not servers:
        return None
    port = int(conf.get("storm.zookeeper.port") or 2181)
    return ",".join(str(parse_seed(str(s), port)) for s in servers)


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


class Coordinator:
    """One master's ZooKeeper session: its election entry, its summary, the cluster state it
    writes as leader or reads as follower, and the code it holds. See the module docstring.

    Raises:
        SquallError: ZooKeeper cannot be reached within ``storm.zookeeper.connection.timeout``
            (the message names the servers), or kazoo is not installed.
    """

    def __init__(self, conf: Mapping[str, Any], secret: bytes) -> None:
        try:
            from kazoo.client import KazooClient
        except ImportError as e:
            raise SquallError("storm.zookeeper.servers is set, so this master needs kazoo: "
                              "pip install 'squall[ha]'") from e
        self.hosts = zookeeper_servers(conf)
        self.root = "/" + str(conf.get("storm.zookeeper.root") or "/storm").strip("/")
        self.secret = secret
        session = float(conf.get("storm.zookeeper.session.timeout") or 20000) / 1000.0
        connect = float(conf.get("storm.zookeeper.connection.timeout") or 15000) / 1000.0
        tries = int(conf.get("storm.zookeeper.retry.times") or 5)
        interval = float(conf.get("storm.zookeeper.retry.interval") or 1000) / 1000.0
        self.zk = KazooClient(hosts=self.hosts, timeout=session,
                              connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": interval},
                              command_retry={"max_tries": tries, "delay": 0.1, "max_delay": interval})
        self._connected = threading.Event()
        self.zk.add_listener(self._on_state)
        try:
            self.zk.start(timeout=connect)
        except Exception as e:  # kazoo's timeout is a plain Exception subclass
            self.zk.stop()
            raise SquallError(f"cannot reach ZooKeeper at {self.hosts} (storm.zookeeper.servers) within "
                              f"{connect:g} s (storm.zookeeper.connection.timeout): {e}") from e
        self._connected.set()
        for sub in ("leader-lock", "nimbuses", "storms", "assignments", "errors", "workerbeats",
                    "supervisors", "blobstore"):
            self.zk.ensure_path(f"{self.root}/{sub}")
        self.me: NimbusAddress | None = None
        self.summary: NimbusSummary | None = None
        self._latch: str | None = None       # our latch node's name, while in the election
        self._latch_children: list[str] = []  # the election's nodes, kept by a watch
        self._leaders: dict[str, NimbusAddress | None] = {}  # latch node -> whose it is
        self._written: dict[str, bytes] = {}  # path -> the payload last written there (by us)

    # --- the session --------------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        # kazoo's thread: SUSPENDED (connection lost, session may live) and LOST (session gone,
        # ephemeral nodes with it) both end leadership at once; CONNECTED resumes it only if
        # our latch node is still the lowest
        if state == "CONNECTED":
            self._connected.set()
        else:
            self._connected.clear()
            if state == "LOST":
                self._latch = None

    @property
    def connected(self) -> bool:
        """Whether the session is connected now (requests would otherwise wait for retries)."""
        return self._connected.is_set()

    def path(self, *parts: str) -> str:
        """The node ``parts`` under the root."""
        return "/".join((self.root, *parts))

    # --- sealed values ------------------------------------------------------------------------------
    def _seal(self, path: str, value: Any) -> bytes:
        from .._sealed import seal
        return seal(self.secret, b"zk " + path.encode(), json.dumps(value, sort_keys=True).encode())

    def _open(self, path: str, data: bytes) -> Any:
        """The JSON value sealed in ``data`` for ``path``; None (with a warning) if it is not
        one this cluster's masters wrote there."""
        from .._sealed import SealError, unseal
        try:
            return json.loads(unseal(self.secret, b"zk " + path.encode(), data))
        except SealError as e:
            log.warning("ZooKeeper node %s skipped: %s", path, e)
        except ValueError as e:
            log.warning("ZooKeeper node %s skipped: its sealed value is not JSON (%s)", path, e)
        return None

    def read(self, path: str) -> Any:
        """The value at ``path`` (None: no such node, or not ours)."""
        from kazoo.exceptions import NoNodeError
        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return None
        return self._open(path, data)

    def children(self, path: str) -> list[str]:
        """The children of ``path`` (none if it is gone)."""
        from kazoo.exceptions import NoNodeError
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def write(self, path: str, value: Any, ephemeral: bool = False) -> None:
        """Set ``path`` to ``value`` (sealed), creating it; skipped when we wrote the same last."""
        from kazoo.exceptions import NodeExistsError, NoNodeError
        payload = json.dumps(value, sort_keys=True).encode()
        if self._written.get(path) == payload:
            return
        data = self._seal(path, value)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, ephemeral=ephemeral, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)
        self._written[path] = payload

    def delete(self, path: str) -> None:
        """Remove ``path`` and what is under it (nothing if it is gone)."""
        from kazoo.exceptions import NoNodeError
        try:
            self.zk.delete(path, recursive=True)
        except NoNodeError:
            pass
        for p in [p for p in self._written if p == path or p.startswith(path + "/")]:
            del self._written[p]

    def forget_writes(self) -> None:
        """Write everything again at the next `write` (another master may have written since)."""
        self._written.clear()

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
        node = self.zk.create(self.path("leader-lock", LATCH_PREFIX), self._seal(self.path("leader-lock"), str(self.me)),
                              ephemeral=True, sequence=True)
        self._latch = node.rsplit("/", 1)[1]
        self._latch_children = sorted(set(self._latch_children) | {self._latch}, key=_sequence)

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
        """The master that leads (the owner of the lowest latch node), if any."""
        children = self._latch_children
        if not children:
            return None
        node = children[0]
        if node == self._latch:
            return self.me
        if node not in self._leaders:
            path = self.path("leader-lock", node)
            from kazoo.exceptions import NoNodeError
            try:
                data, _stat = self.zk.get(path)
            except NoNodeError:
                return None
            value = _open_address(self, data)
            self._leaders = {node: value}
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
        except Exception as e:  # stopping anyway
            log.debug("closing the ZooKeeper session: %s", e)


def _sequence(node: str) -> int:
    """The sequence number ZooKeeper appended to a latch node's name."""
    tail = node.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 62


def _open_address(coordinator: Coordinator, data: bytes) -> NimbusAddress | None:
    value = coordinator._open(coordinator.path("leader-lock"), data)
    if not isinstance(value, str):
        return None
    try:
        return parse_seed(value, 0)
    except ValueError:
        return None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# --- the cluster state, as the leader writes it and followers read it --------------------------------
_STATUSES = ("ACTIVE", "INACTIVE", "KILLED", "REBALANCING")


@dataclass
class TopologyState:
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
    topologies: dict[str, TopologyState]
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
    if action is not None and not (isinstance(action, dict) and isinstance(action.get("kind"), str)
                                   and _is_number(action.get("due"))
                                   and (action.get("num_workers") is None or _is_int(action["num_workers"]))
                                   and isinstance(action.get("executors") or {}, dict)):
        return "malformed pending action"
    if not isinstance(v.get("debug") or {}, dict) or not isinstance(v.get("code"), str):
        return "malformed debug switches or code digest"
    return None


def check_assignment(v: Any, executors: int) -> str | None:
    """What is wrong with an ``assignments/<id>`` value for a plan of ``executors`` executors."""
    if not isinstance(v, dict) or not isinstance(v.get("assignment"), dict) or not isinstance(v.get("slots"), dict):
        return "not a map of assignment and slots"
    for slot, idx in v["assignment"].items():
        if not _is_slot(slot) or not isinstance(idx, list) \
                or not all(_is_int(i) and 0 <= i < executors for i in idx):
            return f"slot {slot!r}: not host:port with executor indexes of the plan"
    for slot, s in v["slots"].items():
        if not _is_slot(slot) or not isinstance(s, dict) \
                or not (s.get("launch_id") is None or _is_int(s["launch_id"])) \
                or not _is_int(s.get("failed_starts", 0)) or not isinstance(s.get("given_up", False), bool):
            return f"slot record {slot!r} is malformed"
    return None


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
            or not (v.get("address") is None or isinstance(v["address"], str)):
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
    """The state the leader wrote, every node checked: one that is not sealed by this cluster or
    not well formed is skipped with a warning naming it (a topology without a valid base is
    skipped whole). Assignments are checked against their plan by the master."""
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
        errors = c.read(c.path("errors", storm_id))
        errors = errors.get("errors") if isinstance(errors, dict) and isinstance(errors.get("errors"), list) else []
        beats = {}
        for slot in c.children(c.path("workerbeats", storm_id)):
            beat = c.read(c.path("workerbeats", storm_id, slot))
            if beat is not None and check_beat(beat) is None:
                beats[slot] = beat
        topologies[storm_id] = TopologyState(storm_id, base, assignment, errors, beats)
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
    return bool(host and sep and port.isdigit())
