"""The master's side of Nimbus HA (`squall.cluster.ha`): `Election`, leading or following, the
state in ZooKeeper (`squall.cluster.store.ZooKeeperStore`), code replication, and the leader-only
rule. A `squall.cluster.master.Master` whose store is a `ZooKeeperStore` has one (its
``election``); the server (`squall.cluster.server.MasterServer`) drives it.

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
import dataclasses
import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

from .. import _nimbus as nimbus_verbs
from .._config import Config, conf_value
from .._errors import NotLeaderException
from .ha import check_assignment
from .master_records import Heartbeat, SupervisorInfo
from .store import PutBeat, RemovePlan, StoredState

if TYPE_CHECKING:
    from ..engine.plan import TopologyPlan
    from .ha import Coordinator
    from .master import Master
    from .store import ZooKeeperStore

log = logging.getLogger("squall.master")

LEADER_ONLY = nimbus_verbs.LEADER_ONLY
"""The verbs marked leader-only in `squall._nimbus.NimbusIface`: Storm's leader-only requests (every change of a topology), and squall's supervisors' syncs,
workers' heartbeats and Trident's transactional state, which Storm's daemons write to ZooKeeper
themselves."""

FOLLOW_SECS = 1.0  # how often a follower reads the leader's state and fetches code


class Election:
    """Nimbus HA for one `Master` whose store is a `ZooKeeperStore`: its election, following and
    leading, and code replication; see the module docstring. Run by the master's server
    (`squall.cluster.server.MasterServer`), which calls `join` once it listens, then `tick` four
    times a second and `monitor` each second while it leads."""

    def __init__(self, master: Master, store: ZooKeeperStore) -> None:
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
        now = self.master.clock.wall()
        for topo in self.master.topologies.values():
            for slot in topo.assignment:
                state = topo.slot(slot)
                hb = state.heartbeat
                # the workers must find us first: the launch timeout, as after a restart
                state.heartbeat = Heartbeat.launched(now) if hb is None else dataclasses.replace(
                    hb, time=now, starting=True)
        self.store.lead()
        self.master.forget_persisted()
        self.master.leading = True
        log.info("this master (%s) is the leader now: %d topologies, %d supervisors", self.ha.me,
                 len(self.master.topologies), len(self.master.supervisors))
        self.master._commit()

    def follow(self) -> bool:
        """Read the leader's state into this master, fetch the code it lacks, and (re)enter the
        election once it holds every topology's code; whether it does."""
        if not self.ha.connected:  # kazoo reconnects meanwhile; a request would only block
            return False
        try:
            self.ha.register()
            self._sync_code(self.ha.code_keys())
            state = self.master.store.load()
        except Exception as e:  # noqa: BLE001 (ZooKeeper unreachable, whatever kazoo raises: keep what we knew, try again)
            log.warning("cannot read the cluster state from ZooKeeper: %s", e)
            return False
        complete = self._adopt(state)
        if complete and not self.ha.in_election:
            self.ha.join_election()
            log.info("holds every topology's code: back in the election")
        return complete

    def _adopt(self, state: StoredState) -> bool:
        """Make ``state`` (read from ZooKeeper) this master's; whether every topology's code
        was there."""
        complete = True
        topologies = {}
        for name, t in state.topologies.items():
            storm_id = t["storm_id"]
            plan = self._plans.get(t["code"])
            if plan is None or plan.storm_id != storm_id:
                complete = False  # not fetched yet
                continue
            problem = check_assignment(t, len(plan.executors))
            if problem:
                log.warning("ZooKeeper node %s ignored: %s", self.ha.path("assignments", storm_id), problem)
                t.update(assignment={}, slots={})
            topo = self.master._restore(plan, t)
            for slot, beat in state.beats.get(storm_id, {}).items():
                if slot in topo.assignment:
                    topo.slot(slot).heartbeat = Heartbeat(float(beat["time"]), stats=beat["stats"],
                                                          figures=beat.get("figures"), pid=beat.get("pid"),
                                                          address=beat.get("address"))
            topologies[name] = topo
        self.master.topologies = topologies
        self.master.counter = max(self.master.counter, state.counter)
        now = self.master.clock.wall()
        self.master.supervisors = {sid: SupervisorInfo(s["host"], list(s["ports"]), now, s.get("since"))
                            for sid, s in state.supervisors.items()}
        return complete

    def monitor(self, now: float) -> None:
        """The leader's second (``now``: the server's monotonic clock): save, write heartbeat
        summaries that are due, keep holding code."""
        self.master._commit()
        self.store.refresh()  # nodes someone else changed are written again
        every = float(conf_value(self.conf, Config.TASK_HEARTBEAT_FREQUENCY_SECS))
        try:
            self._sync_code(self.ha.code_keys())
            for topo in self.master.topologies.values():
                for slot in topo.assignment:
                    hb = topo.slot(slot).heartbeat
                    key = (topo.plan.storm_id, slot)
                    if hb is None or hb.starting or now - self._beats_written.get(key, -every) < every:
                        continue
                    self.master.store.apply([PutBeat(topo.plan.storm_id, slot, {
                        "time": hb.time, "stats": hb.stats, "figures": hb.figures, "pid": hb.pid,
                        "address": hb.address})])
                    self._beats_written[key] = now
            self.ha.sweep()
        except Exception as e:  # noqa: BLE001 (logged: the next second writes them again)
            log.error("cannot write heartbeat summaries to ZooKeeper: %s", e)

    # --- code ------------------------------------------------------------------------------------
    def hold_plan(self, digest: str, plan: TopologyPlan) -> None:
        """This master wrote ``plan`` (code ``digest``): it holds it."""
        self._plans[digest] = plan

    def _codes_at_start(self) -> None:
        """The plans this master's ``storm.local.dir`` holds from an earlier run, by digest."""
        for stored in self.store.plan_files().values():
            plan = self.master._unseal_plan(stored.sealed, stored.where)
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
        from ..worker.rpc import Client, rpc_settings
        for holder in self.ha.holders(storm_id, digest):
            if holder == self.ha.me:
                continue
            try:
                client = Client(holder.host, holder.port, self.secret, timeout=5.0, settings=rpc_settings(self.conf))
                try:
                    blob = client.call("code", storm_id=storm_id)
                finally:
                    client.close()
            except Exception as e:  # noqa: BLE001 (another holder is tried)
                log.warning("cannot fetch the code of %s from %s: %s", storm_id, holder, e)
                continue
            if not isinstance(blob, bytes) or hashlib.sha256(blob).hexdigest() != digest:
                log.warning("the code of %s from %s does not match its digest: not kept", storm_id, holder)
                continue
            plan = self.master._unseal_plan(blob, f"the code of {storm_id} from {holder}")
            if plan is None or plan.storm_id != storm_id:
                continue
            self.store.write_plan_file(storm_id, blob)
            self._plans = {d: p for d, p in self._plans.items() if p.storm_id != storm_id}
            self._plans[digest] = plan
            log.info("fetched the code of %s from %s", storm_id, holder)
            return True
        return False

    async def submit_replicated(self, name: str, conf: dict[str, Any], topology: bytes,
                                 initial_status: str = "ACTIVE") -> str:
        """``submit`` on the leader: the plan is offered to the other masters, and the topology
        starts once ``topology.min.replication.count`` masters hold it, or after
        ``topology.max.replication.wait.time.sec`` (-1: no limit) with a warning (Storm's
        ``wait-for-desired-code-replication``)."""
        import cloudpickle
        self.master._check_new_name(name)
        plan, status, code = self.master._new_plan(name, conf, cloudpickle.loads(topology), initial_status)
        self._replicating.add(plan.storm_id)
        started = False
        try:
            await self._wait_for_replication(plan, code or "")
            self.assert_leader()
            storm_id: str = self.master._start(plan, status, code)
            started = True
            return storm_id
        finally:
            self._replicating.discard(plan.storm_id)
            if not started:
                self._plans.pop(code or "", None)
                self.master.store.apply([RemovePlan(plan.storm_id)])
                self.master._commit()

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
