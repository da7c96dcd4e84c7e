"""Which inputs hold checkpoints (`squall.state._lineage`): a persistent window's results and
what descends from them; not a spout's emits without a message id."""

from squall import BaseStatefulWindowedBolt, Bolt, Duration, Fields, Spout, TopologyBuilder
from squall._tuple import Source, Tuple
from squall.state._bolt import CheckpointTupleForwarder
from squall.state.checkpoint import PREPARE
from squall.state.memory import HostMemory

from .test_core import BoltCtx, Recorder, WritesLater, cp, passed_on


class Src(Spout):
    def declare_output_fields(self, d):
        d.declare(Fields("w"))


class Pass(Bolt):
    def declare_output_fields(self, d):
        d.declare(Fields("w"))


class Windows(BaseStatefulWindowedBolt):
    def declare_output_fields(self, d):
        d.declare(Fields("w"))


def test_only_the_streams_that_may_carry_a_persistent_windows_results_hold_checkpoints():
    b = TopologyBuilder()
    b.set_spout("unreliable", Src())
    b.set_spout("reliable", Src())
    b.set_bolt("parse", Pass()).shuffle_grouping("unreliable")
    b.set_bolt("batch", Pass()).shuffle_grouping("parse")
    b.set_bolt("windows", Windows().with_tumbling_window(Duration.of(100)).with_persistence()
               .with_late_tuple_stream("late")).shuffle_grouping("reliable")
    b.set_bolt("join", Pass()).shuffle_grouping("windows").shuffle_grouping("parse")
    b.set_bolt("sink", Pass()).shuffle_grouping("join")
    b.set_bolt("lates", Pass()).shuffle_grouping("windows", "late")
    comps = b.create_topology().components
    held = {cid: comps[cid].obj.held_streams for cid in ("parse", "batch", "windows", "join", "sink", "lates")}
    assert held == {"parse": frozenset(), "batch": frozenset(), "windows": frozenset(),
                    "join": {("windows", "default")}, "sink": {("join", "default")}, "lates": frozenset()}


WINDOW = Source("windows", "default", 5, Fields("w"))
SPOUT = Source("unreliable", "default", 1, Fields("w"))


def wired_forwarder():
    sink = WritesLater()
    ex, rec = CheckpointTupleForwarder(sink, held_streams=frozenset({("windows", "default")})), Recorder()
    ex.prepare({}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    return ex, sink, rec


def test_a_spouts_emit_without_a_message_id_holds_no_checkpoint_a_windows_result_does():
    """Storm's forwarder never waits for an unreliable emit (at most once, by the user's
    choice); held, a bolt that batched such emits held every stateful bolt's commit until its
    batch filled (`tests/state/test_unreliable_batching.py`)."""
    ex, sink, rec = wired_forwarder()
    ex.execute(Tuple([1], SPOUT))
    ex.execute(cp(0, PREPARE))
    assert passed_on(rec) == [[0, PREPARE]]
    ex.execute(Tuple(["result"], WINDOW))
    ex.execute(cp(1, PREPARE))
    assert passed_on(rec) == [[0, PREPARE]]
    sink.write()
    assert passed_on(rec) == [[0, PREPARE], [1, PREPARE]]

