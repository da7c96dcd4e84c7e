"""Which inputs hold checkpoints (`squall.state._lineage`): a persistent window's results and
what descends from them, in a spout's tree or not; not a spout's emits without a message id."""

from squall import BaseStatefulWindowedBolt, Bolt, Duration, Fields, Spout, TopologyBuilder
from squall._tuple import UNROOTED_LINEAGE, Source, Tuple, has_unrooted_lineage
from squall.state._bolt import AnchoringCollector, CheckpointTupleForwarder
from squall.state._lineage import LINEAGE_ANCHOR
from squall.state.checkpoint import PREPARE, ROLLBACK
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


def test_the_late_tuple_stream_of_a_window_that_takes_another_windows_results_holds_checkpoints():
    """A persistent window's late-tuple stream is anchored to its inputs: a spout's tuples for a
    window fed by a spout, but another window's results (in no spout's tree) for one fed by that
    window. Taken for one that carries no results, it let a checkpoint past a sink that failed
    3 of them, lost (`tests/state/test_late_window_results.py`)."""
    b = TopologyBuilder()
    b.set_spout("reliable", Src())
    b.set_bolt("first", Windows().with_tumbling_window(Duration.of(100)).with_persistence()
               .with_late_tuple_stream("late")).shuffle_grouping("reliable")
    b.set_bolt("second", Windows().with_tumbling_window(Duration.of(100)).with_persistence()
               .with_late_tuple_stream("late")).shuffle_grouping("first")
    b.set_bolt("first_lates", Pass()).shuffle_grouping("first", "late")
    b.set_bolt("second_lates", Pass()).shuffle_grouping("second", "late")
    b.set_bolt("after", Pass()).shuffle_grouping("second_lates")
    comps = b.create_topology().components
    held = {cid: comps[cid].obj.held_streams for cid in ("first_lates", "second_lates", "after")}
    assert held == {"first_lates": frozenset(), "second_lates": {("second", "late")},
                    "after": {("second_lates", "default")}}


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


def test_an_input_in_a_spouts_tree_that_descends_from_a_windows_result_holds_checkpoints():
    """A join emits a window's result anchored to it and to a spout's tuple: the child has a
    root, but the spout's replay would not bring the result back. Passed at once, the commit
    recorded the window as fired while the sink had not written the child (lost for good when
    the sink's worker died: `tests/process/test_window_lineage_sigkill.py`)."""
    ex, sink, rec = wired_forwarder()
    child = Tuple(["result + pulse"], Source("join", "default", 6, Fields("w")), {0x5EED: 0x1}, UNROOTED_LINEAGE)
    assert has_unrooted_lineage(child)
    ex.execute(child)
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    assert passed_on(rec) == []
    sink.write(fail=True)  # its failure rolls the window back: it fires again
    assert prepare in rec.failed
    ex.execute(cp(0, ROLLBACK))
    assert passed_on(rec) == [[0, ROLLBACK]]


def test_an_emit_anchored_to_a_windows_result_and_to_a_spouts_tuple_is_marked():
    rec = Recorder()
    held = frozenset({("windows", "default")})
    out = AnchoringCollector(rec, "join", defer_acks=False, held=lambda t: (t._src.component, t._src.stream) in held)
    result, unreliable = Tuple(["result"], WINDOW), Tuple([1], SPOUT)
    pulse = Tuple(["pulse"], Source("pulse", "default", 2, Fields("w")), 0x5EED, 0x1)
    out.emit(["x"], [result, pulse])
    out.emit(["x"], (unreliable, pulse))  # not a window's: as given
    out.emit(["x"], [result, unreliable])  # in no tree at all: the child is in none, held as such
    out.emit(["x"], pulse)
    assert [anchors for _s, _v, anchors in rec.emitted] == [
        [result, pulse, LINEAGE_ANCHOR], (unreliable, pulse), [result, unreliable], pulse]
