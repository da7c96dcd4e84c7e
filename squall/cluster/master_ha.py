"""The master's side of Nimbus HA (`squall.cluster.ha`): leading or following, the state in
ZooKeeper, code replication, and the leader-only rule. A base class of
`squall.cluster.master.Master`, whose attributes it works on; inert without
``storm.zookeeper.servers`` (``self.ha`` is None), where the single master keeps its state in
``storm.local.dir`` as before.

A master that leads does what a lone master does, and writes its state to ZooKeeper (changed
nodes only) each time it would save it, and at least every second. A follower refuses what
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

from .._errors import NotAliveException, NotLeaderException
from .. import _nimbus as nimbus_verbs
from .ha import LEADER, NOT_A_LEADER, OFFLINE, check_assignment
from .master_records import Heartbeat, SupervisorInfo
from .seeds import NimbusAddress, nimbus_seeds
from .store import PutBeat, RemovePlan, StoredState, plan_file

if TYPE_CHECKING:
    from ..engine.plan import TopologyPlan
    from .ha import Coordinator

log = logging.getLogger("squall.master")

LEADER_ONLY = nimbus_verbs.LEADER_ONLY
"""The verbs marked leader-only in `squall._nimbus.NimbusIface`: Storm's leader-only requests (every change of a topology), and squall's supervisors' syncs,
workers' heartbeats and Trident's transactional state, which Storm's daemons write to ZooKeeper
themselves."""

FOLLOW_SECS = 1.0  # how often a follower reads the leader's state and fetches code


class HaMaster:
    """Nimbus HA for `Master`; see the module docstring."""

    ha: Coordinator | None
    leading: bool
    conf: dict[str, Any]
    secret: bytes
    port: int | None
    _replicating: set[str]
    _plans: dict[str, TopologyPlan]
    _beats_written: dict[tuple[str, str], float]

    # --- what any master answers -----------------------------------------------------------------
    def me(self) -> NimbusAddress:
        """Where this master listens."""
        return NimbusAddress(str(self.conf.get("nimbus.host") or "127.0.0.1"), int(self.port or 0))

    def op_get_leader(self) -> dict[str, Any] | None:
        """The master that leads (Storm's ``getLeader``): ``{"host", "port"}``, None while an
        election is under way. A lone master (no ZooKeeper) leads."""
        leader = self.me() if self.ha is None else self.ha.leader()
        return None if leader is None else {"host": leader.host, "port": leader.port}

    def op_nimbuses(self) -> list[dict[str, Any]]:
        """Each master, as Storm's UI nimbus summary lists them: ``host``, ``port``, ``status``
        (``Leader``, ``Not a Leader``, or ``Offline`` for a seed that does not run),
        ``uptime_secs`` and ``version`` (None when offline). Who leads is read from the
        election now, not from a stored flag."""
        from .. import __version__
        now = self.clock.wall()  # type: ignore[attr-defined]
        if self.ha is None:
            return [{"host": self.me().host, "port": self.me().port, "status": LEADER,
                     "uptime_secs": now - self.started, "version": __version__}]  # type: ignore[attr-defined]
        leader = self.ha.leader()
        alive = self.ha.nimbuses()
        out = [{"host": n.host, "port": n.port, "status": LEADER if n.address == leader else NOT_A_LEADER,
                "uptime_secs": max(0.0, now - n.started), "version": n.version}
               for n in sorted(alive, key=lambda n: n.address)]
        running = {n.address for n in alive}
        out += [{"host": s.host, "port": s.port, "status": OFFLINE, "uptime_secs": None, "version": None}
                for s in nimbus_seeds(self.conf) if s not in running]
        return out

    def replication_count(self, topo: Any) -> int:
        """How many masters hold ``topo``'s current code (Storm's UI ``replicationCount``); a
        lone master holds all."""
        if self.ha is None or not topo.code:
            return 1
        try:
            return len(self.ha.holders(topo.plan.storm_id, topo.code))
        except Exception:  # ZooKeeper unreachable: a summary still answers
            return 0

    def op_code(self, storm_id: str) -> bytes:
        """The sealed plan of ``storm_id`` that this master holds (another master fetches it).

        Raises:
            NotAliveException: this master holds no code for ``storm_id``.
        """
        from .master import _NAME_RE  # storm ids are names with counters: no path separators
        if not isinstance(storm_id, str) or not _NAME_RE.match(storm_id):
            raise NotAliveException(f"no code for {storm_id!r}")
        try:
            return (self.local_dir / f"{storm_id}.plan").read_bytes()  # type: ignore[attr-defined]
        except OSError:
            raise NotAliveException(f"this master holds no code for {storm_id}") from None

    # --- the leader-only rule --------------------------------------------------------------------
    def _assert_leader(self) -> None:
        """Storm's ``assertIsLeader``: refuse unless this master leads now."""
        if self.ha is None or (self.leading and self.ha.is_leader()):
            return
        if self.ha.is_leader():  # won the election since the last tick: take the lead now
            self._take_lead()
            if self.leading:
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
    def _ha_join(self) -> None:
        """Once listening: register and enter the election."""
        from .. import __version__
        assert self.ha is not None
        self._codes_at_start()
        self.ha.join(self.me(), self.started, __version__)  # type: ignore[attr-defined]
        self._followed_at = 0.0
        log.info("Nimbus HA: %s joined the election at ZooKeeper %s%s", self.me(), self.ha.hosts, self.ha.root)

    def _ha_tick(self) -> bool:
        """Lead or follow (called 4 times a second); whether this master leads."""
        assert self.ha is not None
        leader = self.ha.is_leader()
        if self.leading and not leader:
            log.warning("lost the lead (ZooKeeper connection or session lost): following")
            self.leading = False
        if not self.leading:
            now = time.monotonic()
            if leader:
                self._take_lead()
            elif now - self._followed_at >= FOLLOW_SECS:
                self._followed_at = now
                self._follow()
        return self.leading

    def _take_lead(self) -> None:
        """Won the election: lead, if we hold the code of every topology (else leave the
        election until we fetched it, as Storm's leader does)."""
        assert self.ha is not None
        if not self._follow():
            log.warning("won the election but lacks the code of some topology: leaving it until the code is fetched")
            self.ha.quit_election()
            return
        now = self.clock.wall()  # type: ignore[attr-defined]
        for topo in self.topologies.values():  # type: ignore[attr-defined]
            for slot in topo.assignment:
                state = topo.slot(slot)
                hb = state.heartbeat
                # the workers must find us first: the launch timeout, as after a restart
                state.heartbeat = Heartbeat.launched(now) if hb is None else dataclasses.replace(
                    hb, time=now, starting=True)
        self.store.lead()  # type: ignore[attr-defined]
        self._persisted = type(self._persisted)()  # type: ignore[attr-defined]  # everything is written again
        self.leading = True
        log.info("this master (%s) is the leader now: %d topologies, %d supervisors", self.ha.me,
                 len(self.topologies), len(self.supervisors))  # type: ignore[attr-defined]
        self._commit()  # type: ignore[attr-defined]

    def _follow(self) -> bool:
        """Read the leader's state into this master, fetch the code it lacks, and (re)enter the
        election once it holds every topology's code; whether it does."""
        assert self.ha is not None
        if not self.ha.connected:  # kazoo reconnects meanwhile; a request would only block
            return False
        try:
            self.ha.register()
            self._sync_code(self.ha.code_keys())
            state = self.store.load()  # type: ignore[attr-defined]
        except Exception as e:  # ZooKeeper unreachable: keep what we knew, try again
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
                log.warning("ZooKeeper node %s ignored: %s", self.ha.path("assignments", storm_id), problem)  # type: ignore[union-attr]
                t.update(assignment={}, slots={})
            topo = self._restore(plan, t)  # type: ignore[attr-defined]
            for slot, beat in state.beats.get(storm_id, {}).items():
                if slot in topo.assignment:
                    topo.slot(slot).heartbeat = Heartbeat(float(beat["time"]), stats=beat["stats"],
                                                          figures=beat.get("figures"), pid=beat.get("pid"),
                                                          address=beat.get("address"))
            topologies[name] = topo
        self.topologies = topologies  # type: ignore[attr-defined]
        self.counter = max(self.counter, state.counter)  # type: ignore[attr-defined]
        now = self.clock.wall()  # type: ignore[attr-defined]
        self.supervisors = {sid: SupervisorInfo(s["host"], list(s["ports"]), now, s.get("since"))  # type: ignore[attr-defined]
                            for sid, s in state.supervisors.items()}
        return complete

    def _ha_monitor(self) -> None:
        """The leader's second: save, write heartbeat summaries that are due, keep holding code."""
        assert self.ha is not None
        self._commit()  # type: ignore[attr-defined]
        self.store.refresh()  # type: ignore[attr-defined]  # nodes someone else changed are written again
        every = float(self.conf.get("task.heartbeat.frequency.secs") or 3)
        now = time.monotonic()
        try:
            self._sync_code(self.ha.code_keys())
            for topo in self.topologies.values():  # type: ignore[attr-defined]
                for slot in topo.assignment:
                    hb = topo.slot(slot).heartbeat
                    key = (topo.plan.storm_id, slot)
                    if hb is None or hb.starting or now - self._beats_written.get(key, -every) < every:
                        continue
                    self.store.apply([PutBeat(topo.plan.storm_id, slot, {  # type: ignore[attr-defined]
                        "time": hb.time, "stats": hb.stats, "figures": hb.figures, "pid": hb.pid,
                        "address": hb.address})])
                    self._beats_written[key] = now
            self.ha.sweep()
        except Exception as e:
            log.error("cannot write heartbeat summaries to ZooKeeper: %s", e)

    # --- code ------------------------------------------------------------------------------------
    def _codes_at_start(self) -> None:
        """The plans this master's ``storm.local.dir`` holds from an earlier run, by digest."""
        for f in sorted(self.local_dir.glob("*.plan")):  # type: ignore[attr-defined]
            try:
                blob = f.read_bytes()
            except OSError:
                continue
            plan = self._unseal_plan(blob, f)  # type: ignore[attr-defined]
            if plan is not None:
                self._plans[hashlib.sha256(blob).hexdigest()] = plan

    def _sync_code(self, codes: dict[str, str]) -> None:
        """Hold the current code of every topology (``codes``: storm id -> digest): fetch what
        we lack from a master that holds it, and drop the code of topologies that are gone
        (Storm's blob sync)."""
        assert self.ha is not None
        held = {plan.storm_id: digest for digest, plan in self._plans.items()}
        for storm_id, digest in codes.items():
            if held.get(storm_id) != digest and not self._fetch_code(storm_id, digest):
                continue
            self.ha.hold(storm_id, digest)
        for digest, plan in list(self._plans.items()):
            if codes.get(plan.storm_id) != digest and plan.storm_id not in self._replicating:
                del self._plans[digest]
                if plan.storm_id not in codes:
                    (self.local_dir / f"{plan.storm_id}.plan").unlink(missing_ok=True)  # type: ignore[attr-defined]

    def _fetch_code(self, storm_id: str, digest: str) -> bool:
        """Fetch ``storm_id``'s code ``digest`` from a master that holds it; whether we have it.
        What comes back must match the digest and carry the cluster's seal before it is kept."""
        from .._private import write_private
        from ..worker.rpc import Client, rpc_settings
        assert self.ha is not None
        for holder in self.ha.holders(storm_id, digest):
            if holder == self.ha.me:
                continue
            try:
                client = Client(holder.host, holder.port, self.secret, timeout=5.0, settings=rpc_settings(self.conf))
                try:
                    blob = client.call("code", storm_id=storm_id)
                finally:
                    client.close()
            except Exception as e:
                log.warning("cannot fetch the code of %s from %s: %s", storm_id, holder, e)
                continue
            if not isinstance(blob, bytes) or hashlib.sha256(blob).hexdigest() != digest:
                log.warning("the code of %s from %s does not match its digest: not kept", storm_id, holder)
                continue
            plan = self._unseal_plan(blob, f"the code of {storm_id} from {holder}")  # type: ignore[attr-defined]
            if plan is None or plan.storm_id != storm_id:
                continue
            write_private(self.local_dir / f"{storm_id}.plan", blob, plan_file(storm_id))  # type: ignore[attr-defined]
            self._plans = {d: p for d, p in self._plans.items() if p.storm_id != storm_id}
            self._plans[digest] = plan
            log.info("fetched the code of %s from %s", storm_id, holder)
            return True
        return False

    async def _submit_replicated(self, name: str, conf: dict[str, Any], topology: bytes,
                                 initial_status: str = "ACTIVE") -> str:
        """``submit`` on the leader: the plan is offered to the other masters, and the topology
        starts once ``topology.min.replication.count`` masters hold it, or after
        ``topology.max.replication.wait.time.sec`` (-1: no limit) with a warning (Storm's
        ``wait-for-desired-code-replication``)."""
        import cloudpickle
        self._check_new_name(name)  # type: ignore[attr-defined]
        plan, status, code = self._new_plan(name, conf, cloudpickle.loads(topology), initial_status)  # type: ignore[attr-defined]
        self._replicating.add(plan.storm_id)
        started = False
        try:
            await self._wait_for_replication(plan, code or "")
            self._assert_leader()
            storm_id: str = self._start(plan, status, code)  # type: ignore[attr-defined]
            started = True
            return storm_id
        finally:
            self._replicating.discard(plan.storm_id)
            if not started:
                self._plans.pop(code or "", None)
                self.store.apply([RemovePlan(plan.storm_id)])  # type: ignore[attr-defined]
                self._commit()  # type: ignore[attr-defined]

    async def _wait_for_replication(self, plan: TopologyPlan, code: str) -> None:
        assert self.ha is not None
        want = int(plan.conf.get("topology.min.replication.count") or 1)
        limit = float(plan.conf.get("topology.max.replication.wait.time.sec", 60))
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
            self._assert_leader()
