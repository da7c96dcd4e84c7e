"""A `FeederSpout` preempted between taking a fed tuple and emitting it, for the tests that move
a simulated clock once what they fed was executed: with it, a test that waits a fixed sleep
instead (and so loses on a loaded machine, where a spout thread is preempted for longer) fails
every run."""

from __future__ import annotations

import time

from squall import Fields
from squall.testing import FeederSpout


class PreemptedFeederSpout(FeederSpout):
    """A `FeederSpout` whose thread is held ``held_secs`` between taking each fed tuple and
    emitting it, as a spout thread preempted on a loaded machine."""

    def __init__(self, fields: Fields | list[str], held_secs: float) -> None:
        super().__init__(fields)
        self.held_secs = held_secs

    def next_tuple(self) -> None:
        try:
            values, msg_id = self._queue.take()
        except IndexError:
            return
        time.sleep(self.held_secs)
        self.collector.emit(values, msg_id)


def executed(cluster, topology: str, component: str) -> int:
    """How many inputs ``component`` of ``topology`` has executed (each is in its window then,
    stamped with the cluster's time or counted in the watermark)."""
    return cluster.get_topology_info(topology)["components"][component]["executed"]
