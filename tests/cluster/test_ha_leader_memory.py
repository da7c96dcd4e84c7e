"""What Nimbus HA's leader keeps between its seconds (`squall.cluster.master_ha.Election`),
without a ZooKeeper: a master and a store that only answer what `Election.monitor` asks."""

from __future__ import annotations

from types import SimpleNamespace

from squall.cluster.master_ha import Election
from squall.cluster.master_records import LastBeat, SlotBeat


class _Master:
    def __init__(self) -> None:
        self.conf = {"task.heartbeat.frequency.secs": 3}
        self.secret = b"s" * 32
        self.beating: list[SlotBeat] = []

    def heartbeats(self):
        return list(self.beating)


class _Coordinator:
    def code_keys(self):
        return {}

    def sweep(self):
        pass


def test_the_leader_forgets_when_it_wrote_the_beats_of_workers_that_are_gone():
    """The leader remembered, per (topology, slot), when it last wrote that worker's heartbeat
    summary to ZooKeeper, and never forgot one: every topology ever submitted and killed, and
    every slot a worker ever ran on, stayed in its memory for as long as it led."""
    master = _Master()
    store = SimpleNamespace(coordinator=_Coordinator(), replicating=set(), refresh=lambda: None,
                            remove_plan_file=lambda storm_id: None)
    election = Election(master, store)
    now = 0.0
    for n in range(2_000):  # topologies submitted, run for a while and killed, one after the other
        master.beating = [SlotBeat(f"t-{n}-1", f"10.0.0.{n % 7}:{6700 + p}", 1, LastBeat(now, stats={}))
                          for p in range(4)]
        for _ in range(3):
            now += 3.0
            beats = election.monitor(now)
        assert beats or n == 0
        assert len(election._beats_written) <= 4, n
    master.beating = []
    election.monitor(now + 3.0)
    assert not election._beats_written
