"""Spouts the tests share.

`PreemptedFeederSpout`: a `FeederSpout` preempted between taking a fed tuple and emitting it, for
the tests that move a simulated clock once what they fed was executed: with it, a test that waits
a fixed sleep instead (and so loses on a loaded machine, where a spout thread is preempted for
longer) fails every run. `CrashOnceSpout`: a spout whose worker crashes once when the test says
so, for the figures read across a restart."""

from __future__ import annotations

import time

from squall import Fields, Spout
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


# LocalCluster's workers are threads of the test's process: they read this. "sends": the tuples
# the spout emits before its worker crashes, and after its restart
STAGE: dict = {"now": "before", "sends": {"before": 0, "after": 0}}


class CrashOnceSpout(Spout):
    """Emits ``STAGE["sends"]["before"]`` ids, raises in ``next_tuple`` (crashing its worker)
    once the test sets ``STAGE["now"] = "crash"``, and its restarted instance emits
    ``STAGE["sends"]["after"]`` more. Failed tuples are not replayed."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n = 0

    def next_tuple(self):
        if STAGE["now"] == "crash":
            STAGE["now"] = "after"
            raise RuntimeError("test: the spout's worker crashes")
        if self.n < STAGE["sends"][STAGE["now"]]:
            self.n += 1
            self.collector.emit([self.n], msg_id=(STAGE["now"], self.n))
