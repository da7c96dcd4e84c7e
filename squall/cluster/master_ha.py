"""The master's side of Nimbus HA (`squall.cluster.ha`): `Election`, leading or following, the
state in ZooKeeper (`squall.cluster.store.ZooKeeperStore`), code replication, and the leader-only
rule. The server (`squall.cluster.server.MasterServer`) of a master whose store is a
`ZooKeeperStore` makes one, gives it to the master (its ``election``) and drives it. The election
reaches its master only through `ElectedMaster`, and this module imports neither the master nor
the server (tests/test_layers.py checks it).

A master that leads does what a lone master does, and its store writes its state to ZooKeeper
(changed nodes only) each time it commits, and at least every second. A follower refuses what
only the leader may do (`LEADER_ONLY`, Storm's ``assertIsLeader``: "not a leader, current
leader is HOST:PORT"), reads the leader's state every second to answer reads, and fetches the
code it lacks. On winning the election it takes the workers over as a restarted master does:
each gets the launch timeout to beat again (they rediscover the leader through
``nimbus.seeds``), nothing is restarted or resubmitted.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .. import _nimbus as nimbus_verbs
from .._config import Config, conf_value
from .._errors import NotLeaderException
from .master_records import Outcome, Planned, SlotBeat
from .store import PutBeat, StoredState

if TYPE_CHECKING:
    from ..engine.plan import TopologyPlan
    from .ha import Coordinator
    from .seeds import NimbusAddress
    from .store import ZooKeeperStore

log = logging.getLogger("squall.master")

LEADER_ONLY = nimbus_verbs.LEADER_ONLY
"""The verbs marked leader-only in `squall._nimbus.NimbusIface`: Storm's leader-only requests (every change of a topology), and squall's supervisors' syncs,
workers' heartbeats and Trident's transactional state, which Storm's daemons write to ZooKeeper
themselves."""

FOLLOW_SECS = 1.0  # how often a follower reads the leader's state and fetches code


class ElectedMaster(Protocol):
    """What the election asks of its master (`squall.cluster.master.Master` is one): whether it
    leads, to lead, to take the leader's state as a follower, to open sealed code, and
    ``submit`` in two halves around the wait for replication. Each change of the master's state
    comes back as an `Outcome`, which the caller's ``keep`` (`squall.cluster.server.Keeper.keep`)
    hands to the store."""

    conf: dict[str, Any]
    secret: bytes
    started: float
    leading: bool

    def me(self) -> NimbusAddress:
        """Where it listens."""
        ...

    def lead(self) -> None:
        """It leads from now: the workers get the launch timeout to find it; its next outcome holds its whole state."""

    def adopt(self, state: StoredState, plans: Mapping[str, TopologyPlan]) -> bool:
        """Take the leader's ``state`` (``plans``: the code held, by digest); whether every topology's code was held."""
        ...

    def heartbeats(self) -> list[SlotBeat]:
        """The last heartbeat of each assigned worker that has beaten, with its launch id."""
        ...

    def unseal_plan(self, blob: bytes, path: Any) -> TopologyPlan | None:
        """The plan sealed in ``blob`` by this cluster's master (else None, with a warning naming ``path``)."""
        ...

    def plan_submission(self, name: str, conf: dict[str, Any], topology: bytes,
                        initial_status: str = "ACTIVE") -> Outcome:
        """``submit``'s checks and plan: a `Planned`, not started."""
        ...

    def start(self, planned: Planned) -> Outcome:
        """Start ``planned``: its storm id."""
        ...

    def abandon(self, planned: Planned) -> Outcome:
        """``planned`` will not start: its plan goes."""
        ...


class Election:
    """Nimbus HA for one `Master` whose store is a `ZooKeeperStore`: its election, following and
    leading, and code replication; see the module docstring. Run by the master's server
    (`squall.cluster.server.MasterServer`), which calls `join` once it listens, then `tick` four
    times a second and `monitor` each second while it leads."""

    def __init__(self, master: ElectedMaster, store: ZooKeeperStore) -> None:
        self.master = master
        self.store = store
        self.ha: Coordinator = store.coordinator
        self.conf = master.conf
        self.secret = master.secret
        self._replicating = store.replicating  # submissions waiting for their code's replication
        self._plans: dict[str, TopologyPlan] = {}  # code digest -> plan (a follower's cache)
        self._beats_written: dict[tuple[str, str], float] = {}
        self._followed_at = 0.0

    # --- the leader-only rule --------------------------------------------------------------------
    def assert_leader(self) -> None:
        """Storm's ``assertIsLeader``: refuse unless this master leads now."""
        if self.master.leading and self.ha.is_leader():
            return
        if self.ha.is_leader():  # won the election since the last tick: take the lead now
            self.take_lead()
            if self.master.leading:
                return
        if not self.ha.connected:
            raise NotLeaderException(f"not a leader (this master is {self.ha.me}): it cannot reach ZooKeeper at "
                                     f"{self.ha.hosts}, so it does not know which master leads")
        leader = self.ha.leader()
        if leader is None or leader == self.ha.me:
            raise NotLeaderException(f"not a leader (this master is {self.ha.me}), and no master leads yet: "
                                     f"an election is under way, try again in a few seconds")
        raise NotLeaderException(f"not a leader, current leader is {leader}")

    # --- leading and following -------------------------------------------------------------------
    def join(self) -> None:
        """Once listening: register and enter the election."""
        from .. import __version__
        self._codes_at_start()
        self.ha.join(self.master.me(), self.master.started, __version__)
        self._followed_at = 0.0
        log.info("Nimbus HA: %s joined the election at ZooKeeper %s%s", self.master.me(), self.ha.hosts, self.ha.root)

    def tick(self, now: float) -> bool:
        """Lead or follow (called 4 times a second; ``now``: the server's monotonic clock, in
        seconds); whether this master leads."""
        leader = self.ha.is_leader()
        if self.master.leading and not leader:
            log.warning("lost the lead (ZooKeeper connection or session lost): following")
            self.master.leading = False
        if not self.master.leading:
            if leader:
                self.take_lead()
            elif now - self._followed_at >= FOLLOW_SECS:
                self._followed_at = now
                self.follow()
        return self.master.leading

    def take_lead(self) -> None:
        """Won the election: lead, if we hold the code of every topology (else leave the
        election until we fetched it, as Storm's leader does)."""
        if not self.follow():
            log.warning("won the election but lacks the code of some topology: leaving it until the code is fetched")
            self.ha.quit_election()
            return
        self.store.lead()  # written whole: another master may have written since
        self.master.lead()  # its whole state goes with its next outcome (the server keeps it)

    def follow(self) -> bool:
        """Read the leader's state into this master, fetch the code it lacks, and (re)enter the
        election once it holds every topology's code; whether it does."""
        if not self.ha.connected:  # kazoo reconnects meanwhile; a request would only block
            return False
        try:
            self.ha.register()
            self._sync_code(self.ha.code_keys())
            state = self.store.load()
        except Exception as e:  # noqa: BLE001 (ZooKeeper unreachable, whatever kazoo raises: keep what we knew, try again)
            log.warning("cannot read the cluster state from ZooKeeper: %s", e)
            return False
        complete = self.master.adopt(state, self._plans)
        if complete and not self.ha.in_election:
            self.ha.join_election()
            log.info("holds every topology's code: back in the election")
        return complete

    def monitor(self, now: float) -> list[PutBeat]:
        """The leader's second (``now``: the server's monotonic clock), after its server kept the
        master's changes: write the state again where ZooKeeper's differs, keep holding code,
        and return the heartbeat summaries due for the followers (the server keeps them)."""
        self.store.refresh()  # nodes someone else changed are written again
        every = float(conf_value(self.conf, Config.TASK_HEARTBEAT_FREQUENCY_SECS))
        beats = []
        # kept for the workers of now only: a killed topology's, a moved worker's are forgotten
        written, self._beats_written = self._beats_written, {}
        for storm_id, slot, launch_id, hb in self.master.heartbeats():
            key = (storm_id, slot)
            last = written.get(key, -every)
            if hb.starting or now - last < every:
                if key in written:
                    self._beats_written[key] = last
                continue
            beats.append(PutBeat(storm_id, slot, {"time": hb.time, "stats": hb.stats, "figures": hb.figures,
                                                  "pid": hb.pid, "address": hb.address,
                                                  "launch_id": launch_id}))
            self._beats_written[key] = now
        try:
            self._sync_code(self.ha.code_keys())
            self.ha.sweep()
        except Exception as e:  # noqa: BLE001 (logged: the next second tries again)
            log.error("cannot hold the topologies' code in ZooKeeper: %s", e)
        return beats

    # --- code ------------------------------------------------------------------------------------
    def hold_plan(self, digest: str, plan: TopologyPlan) -> None:
        """This master wrote ``plan`` (code ``digest``): it holds it."""
        self._plans[digest] = plan

    def _codes_at_start(self) -> None:
        """The plans this master's ``storm.local.dir`` holds from an earlier run, by digest."""
        for stored in self.store.plan_files().values():
            plan = self.master.unseal_plan(stored.sealed, stored.where)
            if plan is not None:
                self._plans[hashlib.sha256(stored.sealed).hexdigest()] = plan

    def _sync_code(self, codes: dict[str, str]) -> None:
        """Hold the current code of every topology (``codes``: storm id -> digest): fetch what
        we lack from a master that holds it, and drop the code of topologies that are gone
        (Storm's blob sync)."""
        held = {plan.storm_id: digest for digest, plan in self._plans.items()}
        for storm_id, digest in codes.items():
            if held.get(storm_id) != digest and not self._fetch_code(storm_id, digest):
                continue
            self.ha.hold(storm_id, digest)
        for digest, plan in list(self._plans.items()):
            if codes.get(plan.storm_id) != digest and plan.storm_id not in self._replicating:
                del self._plans[digest]
                if plan.storm_id not in codes:
                    self.store.remove_plan_file(plan.storm_id)

    def _fetch_code(self, storm_id: str, digest: str) -> bool:
        """Fetch ``storm_id``'s code ``digest`` from a master that holds it; whether we have it.
        What comes back must match the digest and carry the cluster's seal before it is kept."""
        from .._wire import Client, rpc_settings
        for holder in self.ha.holders(storm_id, digest):
            if holder == self.ha.me:
                continue
            try:
                client = Client(holder.host, holder.port, self.secret, timeout=5.0, settings=rpc_settings(self.conf))
                try:
                    blob = nimbus_verbs.nimbus_client(client.call).code(storm_id)
                finally:
                    client.close()
            except Exception as e:  # noqa: BLE001 (another holder is tried)
                log.warning("cannot fetch the code of %s from %s: %s", storm_id, holder, e)
                continue
            if not isinstance(blob, bytes) or hashlib.sha256(blob).hexdigest() != digest:
                log.warning("the code of %s from %s does not match its digest: not kept", storm_id, holder)
                continue
            plan = self.master.unseal_plan(blob, f"the code of {storm_id} from {holder}")
            if plan is None or plan.storm_id != storm_id:
                continue
            self.store.write_plan_file(storm_id, blob)
            self._plans = {d: p for d, p in self._plans.items() if p.storm_id != storm_id}
            self._plans[digest] = plan
            log.info("fetched the code of %s from %s", storm_id, holder)
            return True
        return False

    async def submit_replicated(self, keep: Callable[[Outcome], Any], name: str, conf: dict[str, Any],
                                topology: bytes, initial_status: str = "ACTIVE") -> str:
        """``submit`` on the leader: the plan is kept (``keep``: the server's
        `squall.cluster.server.Keeper.keep`) and so offered to the other masters, and the
        topology starts once ``topology.min.replication.count`` masters hold it, or after
        ``topology.max.replication.wait.time.sec`` (-1: no limit) with a warning (Storm's
        ``wait-for-desired-code-replication``)."""
        planning = self.master.plan_submission(name, conf, topology, initial_status)
        planned: Planned = planning.reply
        plan = planned.plan
        self._replicating.add(plan.storm_id)  # first: the state written with its code must not sweep that away
        started = False
        try:
            keep(planning)
            await self._wait_for_replication(plan, planned.code or "")
            self.assert_leader()
            storm_id: str = keep(self.master.start(planned))
            started = True
            return storm_id
        finally:
            self._replicating.discard(plan.storm_id)
            if not started:
                self._plans.pop(planned.code or "", None)
                keep(self.master.abandon(planned))

    async def _wait_for_replication(self, plan: TopologyPlan, code: str) -> None:
        want = int(conf_value(plan.conf, Config.TOPOLOGY_MIN_REPLICATION_COUNT))
        limit = float(conf_value(plan.conf, Config.TOPOLOGY_MAX_REPLICATION_WAIT_TIME_SEC))
        start = time.monotonic()
        while True:
            have = len(self.ha.holders(plan.storm_id, code))
            if have >= want:
                log.info("the code of %s is on %d masters (topology.min.replication.count %d)", plan.name, have, want)
                return
            waited = time.monotonic() - start
            if 0 <= limit <= waited:
                log.warning("the code of %s is on %d of the %d masters topology.min.replication.count asks for "
                            "after %g s (topology.max.replication.wait.time.sec): starting it anyway",
                            plan.name, have, want, waited)
                return
            log.info("waiting for the code of %s to reach %d masters (now %d)", plan.name, want, have)
            await asyncio.sleep(1.0)  # as Storm polls
            self.assert_leader()
