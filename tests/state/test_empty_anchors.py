"""Anchors given as a set, a generator or another iterable in a stateful topology, on
LocalCluster: the "must emit anchored tuples" check sees what the engine will take.

`Relay` passes each id of a `DurableSpout` on, its anchors given as the test says, and fails
the input if the emit is refused; `FailingSink` (stateful) fails its first 10 tuples and
writes the rest. An empty set or generator passed the check (it looked only at None and an
empty list or tuple), and the engine emitted the tuple unanchored: the 10 the sink failed were
acked at the spout and never written (10 of 100 lost). Now every empty collection is refused,
naming the component and stream; a non-empty one, read once, anchors as a list does."""

from pathlib import Path

import pytest

from squall import BaseStatefulBolt, Bolt, Config, EmitError, Fields, LocalCluster, TopologyBuilder
from tests.written import finished_lines

from ..conftest import wait_until
from ..process.recovery_topology import DurableSpout, acked

ANCHORS = {
    "empty set": lambda tup: set(),
    "empty frozenset": lambda tup: frozenset(),
    "empty generator": lambda tup: (t for t in [tup] if False),
    "empty list": lambda tup: [],
    "set of the input": lambda tup: {tup},
    "generator of the input": lambda tup: (t for t in [tup]),
}


class Relay(Bolt):
    """Emits each id anchored as ``test.anchors`` says; an emit refused is written to
    ``refused.txt`` (the error's text) and its input failed."""

    def prepare(self, conf, context, collector):
        self.collector, self.anchors = collector, ANCHORS[conf["test.anchors"]]
        self.refused = open(Path(conf["test.out.dir"]) / "refused.txt", "a")  # noqa: SIM115

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup):
        try:
            self.collector.emit([tup[0]], anchors=self.anchors(tup))
        except EmitError as e:
            self.refused.write(f"{e}\n")
            self.refused.flush()
            self.collector.fail(tup)
            return
        self.collector.ack(tup)


class FailingSink(BaseStatefulBolt):
    """Fails its first 10 tuples (as a write to a server that is down), writes the others'
    ids to ``written.txt`` and acks them."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.to_fail = 10
        self.written = open(Path(conf["test.out.dir"]) / "written.txt", "a")  # noqa: SIM115

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        if self.to_fail > 0:
            self.to_fail -= 1
            self.collector.fail(tup)
            return
        self.written.write(f"{tup[0]}\n")
        self.written.flush()
        self.collector.ack(tup)


def _lines(path: Path) -> list[str]:
    return finished_lines(path)


def _run(tmp_path: Path, anchors: str, n: int, done) -> tuple[set[int], set[int], list[str]]:
    b = TopologyBuilder()
    b.set_spout("ids", DurableSpout(n))
    b.set_bolt("relay", Relay()).shuffle_grouping("ids")
    b.set_bolt("sink", FailingSink()).shuffle_grouping("relay")
    conf = Config()
    conf["test.out.dir"] = str(tmp_path)
    conf["test.anchors"] = anchors
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf.set_message_timeout_secs(10)
    with LocalCluster() as cluster:
        cluster.submit_topology("anchors", conf, b.create_topology())
        wait_until(lambda: done(acked(tmp_path), _lines(tmp_path / "refused.txt")), 15, interval=0.1)
    written = {int(x) for x in _lines(tmp_path / "written.txt")}
    return acked(tmp_path), written, _lines(tmp_path / "refused.txt")


@pytest.mark.parametrize("anchors", ["empty set", "empty frozenset", "empty generator", "empty list"])
def test_an_empty_collection_of_anchors_is_refused_naming_component_and_stream(tmp_path, anchors):
    n = 100
    acked_ids, written, refused = _run(tmp_path, anchors, n, lambda a, r: len(r) >= n)
    print(f"{anchors}: {n} ids sent, {len(acked_ids)} acked, {len(written)} written, {len(refused)} emits refused")
    assert not acked_ids and not written, \
        f"{len(acked_ids)} ids acked, {len(written)} written: emitted unanchored ({len(acked_ids - written)} lost)"
    assert len(refused) >= n
    kind = anchors.split()[1]
    assert refused[0] == ("Bolts in a stateful topology must emit anchored tuples (component [relay], stream "
                          f"[default]; got an empty {kind}: pass the input(s) the tuple comes from as anchors)")


@pytest.mark.parametrize("anchors", ["set of the input", "generator of the input"])
def test_anchors_in_a_set_or_a_generator_replay_what_the_sink_failed(tmp_path, anchors):
    n = 100
    acked_ids, written, refused = _run(tmp_path, anchors, n, lambda a, r: len(a) >= n)
    print(f"{anchors}: {n} ids sent, {len(acked_ids)} acked, {len(written)} written, {len(refused)} emits refused")
    assert not refused
    assert acked_ids == set(range(n)), f"{n - len(acked_ids)} of {n} never acked"
    assert written == acked_ids, f"{len(acked_ids - written)} ids acked never written"
