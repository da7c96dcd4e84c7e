"""`MasterStore`: where the master (`squall.cluster.master.Master`) keeps what must outlive it.

The master decides; a store only keeps. The master hands a store the *changes* its state went
through, as small named records (`PutTopology`, `RemoveTopology`, `SetCounter`, `PutPlan`,
`RemovePlan`, `PutSupervisors`, `PutBeat`, `PutTxState`, `DeleteTxState`), and reads
everything back once, at its start (or, for a Nimbus HA follower, every second: `load`).
Three stores, chosen by `store_for` from the configuration where the master used to take
``durable``/``ha`` flags:

- `MemoryStore`: a `LocalCluster`'s master, which writes nothing; a test restarts a master
  from one (a new `Master` given the same store resumes what the first one kept).
- `LocalDirStore`: a lone master's ``<storm.local.dir>/nimbus``: ``state.json`` (the counter and
  each topology's record), one sealed ``<storm-id>.plan`` per topology, and Trident's
  transactional state under ``transactional/`` (`squall.cluster.txstore.FileStore`). The files
  are those masters wrote before this seam (``state.json``'s records gained a ``code`` key).
- `ZooKeeperStore`: Nimbus HA (`squall.cluster.ha`): the cluster state in ZooKeeper as the
  leader writes it, the plans in ``storm.local.dir`` as Storm's LocalFsBlobStore keeps them.

A write that fails raises from `MasterStore.apply` (a full disk: `DiskWriteError`, naming the
file), except ZooKeeper's cluster state, which `ZooKeeperStore` logs and writes again at the
next change or `ZooKeeperStore.refresh` (at most a second later), as the leader always did.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import SECRET_KEY, Config, conf_value, setting
from .._errors import ClusterStateUnavailableError, SquallError
from .._private import Kept, hold_lock, own_local_dir, private_dir, unresolved_link, write_private
from .._transactional import MemoryBackend

log = logging.getLogger("squall.master")

_WHERE = "storm.local.dir (the master keeps its files in <storm.local.dir>/nimbus)"
STATE_FILE = Kept("the master's state: the topologies, their status and placement", _WHERE)


def plan_file(storm_id: str) -> Kept:
    """What the plan file of ``storm_id`` holds, for the error a failed write of it raises."""
    return Kept(f"the plan of topology {storm_id}: its code and configuration", _WHERE)


# --- the changes -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SetCounter:
    """The last topology number (storm ids stay unique across restarts)."""

    counter: int


@dataclass(frozen=True, slots=True)
class PutTopology:
    """A topology's persisted record, new or changed (``record``: `TopologyRecord.to_json`, with ``code``)."""

    name: str
    storm_id: str
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RemoveTopology:
    """A topology is gone (its kill's wait is over)."""

    name: str
    storm_id: str


@dataclass(frozen=True, slots=True)
class PutPlan:
    """A topology's plan, sealed by the master (`squall._sealed`): its code and configuration.
    A `MemoryStore`, which nothing outside the process reads, is given the ``plan`` itself
    (``sealed`` empty): sealing would pickle the user's code for nothing."""

    storm_id: str
    sealed: bytes
    digest: str | None  # sha256 of ``sealed``: the code's version (Nimbus HA's followers fetch a new one)
    plan: Any = None


@dataclass(frozen=True, slots=True)
class RemovePlan:
    """A topology's plan is no longer needed."""

    storm_id: str


@dataclass(frozen=True, slots=True)
class PutSupervisors:
    """The supervisors, by id (``{"host", "ports", "since"}``): kept by ZooKeeper only, for the
    followers' pages; a lone master learns them again within a second of a restart."""

    supervisors: dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PutBeat:
    """A worker's heartbeat summary, for Nimbus HA's followers (``{"time", "stats", ...}``)."""

    storm_id: str
    slot: str
    beat: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PutTxState:
    """Trident's transactional state: ``key`` of ``topology`` is ``value`` (durable once applied)."""

    topology: str
    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class DeleteTxState:
    """Trident's transactional state: ``key`` of ``topology`` (``prefix``: and every key under it) goes."""

    topology: str
    key: str
    prefix: bool = False


Change = (SetCounter | PutTopology | RemoveTopology | PutPlan | RemovePlan | PutSupervisors | PutBeat
          | PutTxState | DeleteTxState)


@dataclass(frozen=True, slots=True)
class StoredPlan:
    """A sealed plan as a store holds it, and where (for the warning a bad one gets); a
    `MemoryStore`'s plan itself (`PutPlan`)."""

    sealed: bytes
    where: str
    plan: Any = None


@dataclass
class StoredState:
    """Everything a store holds but Trident's state, as `MasterStore.load` reads it."""

    counter: int = 0
    topologies: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> `PutTopology.record`
    plans: dict[str, StoredPlan] = field(default_factory=dict)  # storm id -> its plan
    supervisors: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> `PutSupervisors` value
    beats: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # storm id -> slot -> `PutBeat.beat`


# --- the stores ----------------------------------------------------------------------------------------
class MasterStore:
    """Where the master keeps its state; see the module docstring. Subclasses keep the records
    (`_keep`) and Trident's transactional state (``transactional``, a
    `squall._transactional.TransactionalBackend`)."""

    secret: bytes  # the cluster's secret: the master seals plans with it, and serves RPC with it
    transactional: Any
    directory: Path | None = None  # where plans are files (None: in memory)
    shared = False  # several masters share it (Nimbus HA): only the one that leads writes

    def apply(self, changes: Iterable[Change]) -> None:
        """Keep ``changes``, in order.

        Raises:
            DiskWriteError: a file could not be written (named); what was applied before stays.
            TransactionalStateError: a transactional key or value is refused (named).
        """
        for change in changes:
            if isinstance(change, PutTxState):
                self.transactional.put(change.topology, change.key, change.value)
            elif isinstance(change, DeleteTxState):
                self.transactional.delete(change.topology, change.key, change.prefix)
            else:
                self._keep(change)
        self._flush()

    def load(self) -> StoredState:
        """What the store holds now."""
        raise NotImplementedError

    def tx_get(self, topology: str, key: str) -> bytes | None:
        """The transactional value of ``key`` of ``topology`` (None: none)."""
        return self.transactional.get(topology, key)

    def tx_list(self, topology: str, prefix: str = "") -> list[str]:
        """The transactional keys of ``topology`` under ``prefix``, sorted."""
        return self.transactional.list(topology, prefix)

    def _keep(self, change: Change) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        """After a batch of changes: write what the batch made stale (a whole file, say)."""

    # --- plans as files in ``directory`` (as Storm's LocalFsBlobStore keeps them) --------------------
    def plan_files(self) -> dict[str, StoredPlan]:
        """Storm id -> the sealed plan file this master holds (an unreadable one skipped, named)."""
        plans: dict[str, StoredPlan] = {}
        for f in sorted(self.directory.glob("*.plan")) if self.directory is not None else ():
            try:
                plans[f.name[:-len(".plan")]] = StoredPlan(f.read_bytes(), str(f))
            except OSError as e:
                log.warning("skipped %s: %s; it was not loaded", f, e)
        return plans

    def sealed_plan(self, storm_id: str) -> bytes | None:
        """The sealed plan file of ``storm_id`` (a storm id: no path separators), None if none."""
        if self.directory is None:
            return None
        try:
            return (self.directory / f"{storm_id}.plan").read_bytes()
        except OSError:
            return None

    def write_plan_file(self, storm_id: str, sealed: bytes) -> None:
        """Keep ``storm_id``'s sealed plan in ``directory``.

        Raises:
            DiskWriteError: it cannot be written (named); nothing is left behind.
        """
        assert self.directory is not None, "a store in memory keeps no files"
        write_private(self.directory / f"{storm_id}.plan", sealed, plan_file(storm_id))

    def remove_plan_file(self, storm_id: str) -> None:
        """Remove ``storm_id``'s plan file, if any."""
        if self.directory is not None:
            (self.directory / f"{storm_id}.plan").unlink(missing_ok=True)


class MemoryStore(MasterStore):
    """Everything in this process (a `LocalCluster`, tests): a master made again with the same
    store resumes where the first one was, as a restarted master does from its files."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.transactional = MemoryBackend()
        self.state = StoredState()

    @classmethod
    def for_conf(cls, conf: Mapping[str, Any]) -> MemoryStore:
        """A store whose secret is ``squall.secret`` (checked as a durable master checks it), else
        a random one (nothing leaves the process)."""
        given = setting(conf, SECRET_KEY)
        return cls(given.encode() if isinstance(given, str) else os.urandom(32))

    def load(self) -> StoredState:
        """See `MasterStore.load` (copies: the master's changes reach the store only by `apply`)."""
        s = self.state
        return StoredState(s.counter, json.loads(json.dumps(s.topologies)), dict(s.plans),
                           json.loads(json.dumps(s.supervisors)), json.loads(json.dumps(s.beats)))

    def _keep(self, change: Change) -> None:
        _keep_in(self.state, change, "memory")


def _keep_in(state: StoredState, change: Change, where: str) -> bool:
    """Apply ``change`` to ``state``; whether it changed the topologies, counter or supervisors."""
    if isinstance(change, SetCounter):
        state.counter = change.counter
    elif isinstance(change, PutTopology):
        state.topologies[change.name] = json.loads(json.dumps(change.record))
    elif isinstance(change, RemoveTopology):
        state.topologies.pop(change.name, None)
        state.beats.pop(change.storm_id, None)
    elif isinstance(change, PutSupervisors):
        state.supervisors = json.loads(json.dumps(change.supervisors))
    elif isinstance(change, PutPlan):
        state.plans[change.storm_id] = StoredPlan(change.sealed, f"the plan of {change.storm_id} in {where}",
                                                  change.plan)
        return False
    elif isinstance(change, RemovePlan):
        state.plans.pop(change.storm_id, None)
        return False
    elif isinstance(change, PutBeat):
        state.beats.setdefault(change.storm_id, {})[change.slot] = change.beat
        return False
    return True


class LocalDirStore(MasterStore):
    """A lone master's ``directory`` (``<storm.local.dir>/nimbus``); see the module docstring."""

    directory: Path

    def __init__(self, directory: Path, secret: bytes) -> None:
        from .txstore import FileStore
        self.directory = Path(directory)
        self.secret = secret
        private_dir(self.directory)
        self.transactional = FileStore(self.directory / "transactional", secret)
        self._state = StoredState()
        self._stale = False  # state.json needs writing
        path = self._state_path()
        # a symlink that does not resolve (its target on a disk not mounted yet, a loop) is a
        # state that cannot be read, not none: exists() said False, and the master started with
        # no topologies (0 of 3 resumed, every worker stopped) and wrote a new state over it
        if path.exists() or path.is_symlink():
            self._state.counter, self._state.topologies = _read_state(path)

    def _state_path(self) -> Path:
        return self.directory / "state.json"

    def load(self) -> StoredState:
        """See `MasterStore.load`: ``state.json`` and every ``*.plan`` file."""
        s = self._state
        return StoredState(s.counter, json.loads(json.dumps(s.topologies)), self.plan_files())

    def _keep(self, change: Change) -> None:
        if isinstance(change, PutPlan):
            self.write_plan_file(change.storm_id, change.sealed)
        elif isinstance(change, RemovePlan):
            self.remove_plan_file(change.storm_id)
        elif isinstance(change, (PutSupervisors, PutBeat)):
            return  # learnt again from the supervisors and workers within seconds of a restart
        else:
            self._stale |= _keep_in(self._state, change, str(self.directory))

    def _flush(self) -> None:
        if self._stale:
            data = {"counter": self._state.counter, "topologies": self._state.topologies}
            # fsynced: after a power loss an empty state.json would stop the master (`_read_state`)
            write_private(self._state_path(), json.dumps(data), STATE_FILE, durable=True)
            self._stale = False


def _read_state(path: Path) -> tuple[int, dict[str, Any]]:
    """The counter and topologies of a lone master's ``state.json``.

    Raises:
        SquallError: it cannot be read as the master wrote it (cut short, edited, another
            file), naming it and what to do: starting without it would forget every topology.
    """
    try:
        try:
            data = json.loads(path.read_bytes())
        except OSError as e:
            if unresolved_link(path) is not None:   # "No such file" named the link, which is there
                raise OSError(f"a symlink to {os.readlink(path)} that does not resolve: {e.strerror}") from None
            raise
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        missing = [k for k in ("counter", "topologies") if k not in data]
        if missing:  # every master wrote both: an object without them is not its state, and
            # reading it as "no topologies" would stop every topology's workers
            raise ValueError(f"it has no {' and no '.join(missing)}")
        counter, topologies = data["counter"], data["topologies"]
        if not isinstance(counter, int) or isinstance(counter, bool):
            raise TypeError(f"its counter is {counter!r}, not a number")
        if not isinstance(topologies, dict) or not all(isinstance(t, dict) for t in topologies.values()):
            raise TypeError("its topologies are not an object of records")
        if not 0 <= counter < 2 ** 63:  # storm ids are numbered on from it
            raise ValueError(f"its counter is {counter}, not a count of topologies submitted")
    except (OSError, TypeError, ValueError) as e:  # json's and UnicodeDecodeError are ValueErrors
        raise SquallError(f"the master's state {path} cannot be read ({e}): restore it from a backup, or move it "
                          "aside to start with no topologies (their workers are then stopped)") from None
    return counter, topologies


class ZooKeeperStore(MasterStore):
    """Nimbus HA's store: the cluster state in ZooKeeper through ``coordinator``
    (`squall.cluster.ha.Coordinator`), the plans in ``directory``; see the module docstring."""

    shared = True

    def __init__(self, coordinator: Any, directory: Path, secret: bytes) -> None:
        from .ha import ClusterState
        from .txstore import ZooKeeperStore as TxZooKeeper
        self.coordinator = coordinator
        self.directory = Path(directory)
        self.secret = secret
        private_dir(self.directory)
        self.transactional = TxZooKeeper(coordinator)
        self._mirror = ClusterState(0, {}, {})  # what the leader wrote last (written again on `refresh`)
        self._stale = False
        # submissions waiting for their code's replication: their code nodes are not swept
        self.replicating: set[str] = set()

    def load(self) -> StoredState:
        """See `MasterStore.load`: the cluster state as the leader wrote it (every node checked,
        `squall.cluster.ha.read_state`), and the plans this master holds in ``directory``.

        Raises:
            Exception: ZooKeeper could not be read (kazoo's errors).
        """
        from .ha import read_state
        read = read_state(self.coordinator)
        self.coordinator.sweep()
        plans = self.plan_files()
        topologies = {t.base["name"]: {**t.base, **t.assignment, "errors": t.errors, "storm_id": storm_id}
                      for storm_id, t in read.topologies.items()}
        beats = {storm_id: t.beats for storm_id, t in read.topologies.items()}
        return StoredState(read.counter, topologies, plans, read.supervisors, beats)

    def _keep(self, change: Change) -> None:
        from .ha import TopologyRecord, write_beat
        m = self._mirror
        if isinstance(change, PutPlan):
            self.write_plan_file(change.storm_id, change.sealed)
            self.coordinator.publish_code(change.storm_id, change.digest)  # followers fetch it from us
        elif isinstance(change, RemovePlan):
            self.remove_plan_file(change.storm_id)
        elif isinstance(change, PutBeat):
            write_beat(self.coordinator, change.storm_id, change.slot, change.beat)
        elif isinstance(change, SetCounter):
            m.counter, self._stale = change.counter, True
        elif isinstance(change, PutTopology):
            r = change.record
            base = {k: r.get(k) for k in ("status", "previous", "launched", "pending_action", "debug",
                                          "num_workers", "parallelism")}
            base.update(name=change.name, code=r.get("code") or "")
            m.topologies = {sid: t for sid, t in m.topologies.items() if t.base["name"] != change.name}
            # errors_happened (the topology's error count, which its kept records undercount) in the
            # node of the slots' records, whose errors_kept numbers the last error batch counted:
            # the nodes are written one by one, and a leader that died after the base, which held
            # the count, left the next one the count with a batch in it but not its number, so the
            # worker's resent batch counted twice (16 errors of 8). In one node, both or neither
            # so are the ended launches' last words with the slots' launch ids: a leader that died
            # between two nodes left the next one a slot's new launch without its old launch's
            # rest, which `squall monitor` and the UI's history then lost
            assignment = {"assignment": r["assignment"], "slots": r["slots"], "errors_happened": r.get("errors_happened"),
                          "ended": r.get("ended") or []}
            m.topologies[change.storm_id] = TopologyRecord(change.storm_id, base, assignment, r["errors"], {})
            self._stale = True
        elif isinstance(change, RemoveTopology):
            m.topologies.pop(change.storm_id, None)
            self._stale = True
        elif isinstance(change, PutSupervisors):
            m.supervisors, self._stale = change.supervisors, True

    def _flush(self) -> None:
        """Write the changes just kept, or fail their request: a kill the leader acknowledged
        but could not write would be lost with its lead (Storm writes the StormBase inside the
        call too).

        Raises:
            ClusterStateUnavailableError: ZooKeeper refused or did not answer (its error named):
                transient, its sender tries again.
        """
        if self._stale:
            try:
                self._write()
            except Exception as e:
                raise ClusterStateUnavailableError(f"cannot write the cluster state to ZooKeeper ({_named(e)}): the change is "
                                  f"not kept yet (this master writes it if it still leads once ZooKeeper answers)") from e

    def refresh(self) -> None:
        """Write the cluster state again where it differs from ZooKeeper's (changed nodes only;
        nodes someone else changed are written again: `Coordinator.write`). A failure is logged:
        the next change or refresh writes it."""
        try:
            self._write()
        except Exception as e:  # noqa: BLE001 (logged: the next change or refresh writes it)
            log.error("cannot write the cluster state to ZooKeeper (the next save tries again): %s", _named(e))

    def _write(self) -> None:
        from .ha import write_state
        write_state(self.coordinator, self._mirror, frozenset(self.replicating))
        self._stale = False

    def lead(self) -> None:
        """This master leads from now: its master hands it the whole state again, all of which
        is written (another master may have written since)."""
        from .ha import ClusterState
        self._mirror = ClusterState(0, {}, {})
        self.coordinator.forget_writes()


def _named(e: BaseException) -> str:
    """An error's type and text (kazoo's errors often have no text)."""
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


MASTER_LOCK = "master.lock"


def hold_master_lock(conf: Mapping[str, Any]) -> int:
    """Lock ``<storm.local.dir>/nimbus`` for this process's master, for as long as the returned
    descriptor is open. A lone master runs what its directory holds, so a second one started
    there (on another port) would run every topology a second time beside the first. Under
    Nimbus HA each master keeps its own copies of the topologies' code there (Storm's
    LocalFsBlobStore: one blob directory a nimbus), and drops the code of every topology
    ZooKeeper does not list: sharing the directory, a standby would remove the plan the leader
    has just written and not yet published, and the topology could not run after a failover.
    The lock names this master (its pid and ``nimbus.host:nimbus.thrift.port``; once it listens,
    `name_master_lock` names the port it took).

    Raises:
        SquallError: another master holds it (its pid, and its address when known, named).
    """
    from .ha import zookeeper_servers
    directory = private_dir(own_local_dir(conf) / "nimbus")
    path = directory / MASTER_LOCK
    fd = hold_lock(path)
    if fd is None:
        holder = _master_lock_holder(path)
        if zookeeper_servers(conf):
            raise SquallError(f"another master ({holder}) runs for storm.local.dir {directory.parent}: under Nimbus "
                              "HA each master keeps its own copies of the topologies' code in its storm.local.dir, "
                              "and removes the code of topologies ZooKeeper does not list (another master's code "
                              "written but not yet published too), so each master needs a storm.local.dir of its "
                              "own")
        raise SquallError(f"another master ({holder}) runs for storm.local.dir {directory.parent}: a lone master "
                          "runs every topology its directory holds, so a second one needs a storm.local.dir of its "
                          "own (or Nimbus HA, storm.zookeeper.servers)")
    name_master_lock(fd, str(conf_value(conf, Config.NIMBUS_HOST)), conf_value(conf, Config.NIMBUS_THRIFT_PORT))
    return fd


def name_master_lock(fd: int, host: str, port: Any) -> None:
    """Write into the held master lock ``fd`` who holds it: this pid, and ``host:port`` (left
    out while the port is 0, not yet taken), for the error a second master gets."""
    named = f"{os.getpid()} {host}:{port}" if port else str(os.getpid())
    os.ftruncate(fd, 0)
    os.pwrite(fd, named.encode(), 0)


def _master_lock_holder(path: Path) -> str:
    """The master that holds the lock at ``path``, as its `name_master_lock` wrote it."""
    try:
        words = path.read_text(errors="replace").split()
    except OSError:
        words = []
    if not words:
        return "pid unknown"
    named = f"pid {words[0][:16]}"
    return f"{named}, nimbus {words[1][:64]}" if len(words) > 1 else named


def store_for(conf: Mapping[str, Any]) -> MasterStore:
    """The store a master started with ``conf`` keeps its state in: ZooKeeper with
    ``storm.zookeeper.servers``, else ``<storm.local.dir>/nimbus``.

    Raises:
        SquallError: the secret is invalid, or ZooKeeper cannot be reached (named).
        DiskWriteError: the secret file or directory cannot be made.
    """
    from .._secret import load_or_create_secret  # the network's parts: not in a LocalCluster
    from .ha import Coordinator, zookeeper_servers
    directory = Path(conf_value(conf, Config.STORM_LOCAL_DIR)) / "nimbus"
    private_dir(directory)
    secret = load_or_create_secret(conf)
    if zookeeper_servers(conf):
        return ZooKeeperStore(Coordinator(conf, secret), directory, secret)  # kazoo is imported there
    return LocalDirStore(directory, secret)
