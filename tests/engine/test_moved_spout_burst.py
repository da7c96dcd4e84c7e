"""A spout whose next_tuple blocked on the shared loop, and which the watchdog gave that thread
to itself, is called once between two looks at its acks, as a spout given its own thread from
the start is (`squall.engine.loop.BLOCKING_SPOUT_BURST`)."""

import re
import threading

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder
from squall.testing._registry import SharedLog

from ..acceptance.components import Gate
from ..conftest import wait_until

N = 100


class StallsThenPaced(Spout):
    """Blocks in its first next_tuple until ``gate`` opens, then emits the ids 0 .. N-1, one a
    call, each call first waiting until the bolt has acked the id before (a source that answers
    once the last record went through); logs ``("ack", id, calls)``: how many calls had emitted
    when the ack came. The pace is the bolt's, so the count of calls does not depend on the
    machine's speed: a loop that looks at the spout's acks after every call hears each within a
    call or two; one that calls it 64 times in a row hears them 64 calls late."""

    def __init__(self, gate: Gate, log: SharedLog, bolt_acked: SharedLog) -> None:
        self.gate, self.log, self.bolt_acked = gate, log, bolt_acked

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.emitted = 0
        self.stalled = False

    def next_tuple(self):
        if not self.stalled:
            self.stalled = True
            self.gate.wait(30)
            return
        if self.emitted < N:
            wait_until(lambda: len(self.bolt_acked.items()) >= self.emitted, 10)
            self.collector.emit([self.emitted], msg_id=self.emitted)
            self.emitted += 1

    def ack(self, msg_id):
        self.log.append(("ack", msg_id, self.emitted))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["i"]))


class Acks(Bolt):
    def __init__(self, acked: SharedLog) -> None:
        self.acked = acked

    def execute(self, tup):
        self.collector.ack(tup)
        self.acked.append(tup[0])


def _split_loops():
    """The threads of loops the watchdog split off (``squall-worker-PORT-N``)."""
    return [t.name for t in threading.enumerate() if re.fullmatch(r"squall-worker-\d+-\d+", t.name)]


def test_a_spout_the_watchdog_gave_its_thread_to_is_called_once_between_two_looks_at_its_acks():
    """The spout blocks in next_tuple on the worker's shared loop; the watchdog moves the bolt
    and the acker to a new thread and leaves the spout the old one. Its later calls each wait
    for the bolt's ack of the id before. Before, that loop still called it up to 64 times in a row while each call emitted
    (the shared loop's burst), so its first ack waited for 64 calls, and every later one for
    the next 64; now it hears of an ack within a few calls, as Storm's executor hands the spout
    its acks before every nextTuple. Every id is acked once."""
    gate, log, bolt_acked = Gate(), SharedLog(), SharedLog()
    b = TopologyBuilder()
    b.set_spout("slow", StallsThenPaced(gate, log, bolt_acked))
    b.set_bolt("acks", Acks(bolt_acked)).shuffle_grouping("slow")
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 300
    with LocalCluster() as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        try:
            assert wait_until(lambda: _split_loops() != [], 20), "the watchdog did not move the bolt and the acker"
        finally:
            gate.open()
        assert wait_until(lambda: len(log.items()) == N, 20), f"{len(log.items())} of {N} ids acked"
        acks = log.items()
        assert sorted(i for _, i, _ in acks) == list(range(N))
        first_ack_after = acks[0][2]
        assert first_ack_after < 16, f"the spout heard of its first ack only after {first_ack_after} calls"
        # (64 calls a burst: at most two acks could arrive between two bursts' ends, 64 apart)
        late = max(emitted - (i + 1) for _, i, emitted in acks)
        assert late < 32, f"an ack reached the spout {late} calls after its id's"
