"""``topology.debug``: every emitted tuple is logged with its component, task and stream."""

import logging

from squall import Bolt, Config, Fields, TopologyBuilder
from squall.testing import complete_topology


class Upper(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare_stream("loud", Fields("w"))

    def execute(self, tup):
        self.collector.emit([tup[0].upper()], tup, stream="loud")
        self.collector.ack(tup)


def _topology(debug_component=False):
    from squall.testing import FeederSpout
    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(Fields("w")))
    d = b.set_bolt("upper", Upper()).shuffle_grouping("words")
    if debug_component:
        d.set_debug(True)
    return b.create_topology()


def test_topology_debug_logs_every_emit_with_component_task_and_stream(caplog):
    conf = Config()
    conf.set_debug(True)
    with caplog.at_level(logging.INFO, logger="squall.debug"):
        complete_topology(None, _topology(), {"words": [["a"], ["b"]]}, storm_conf=conf)
    lines = [r.getMessage() for r in caplog.records if r.name == "squall.debug"]
    assert any(line.startswith("Emitting: words task") and "stream default: ['a']" in line for line in lines)
    assert any(line.startswith("Emitting: upper task") and "stream loud: ['B']" in line for line in lines)


def test_debug_can_be_set_for_one_component(caplog):
    with caplog.at_level(logging.INFO, logger="squall.debug"):
        complete_topology(None, _topology(debug_component=True), {"words": [["a"]]})
    lines = [r.getMessage() for r in caplog.records if r.name == "squall.debug"]
    assert lines and all(line.startswith("Emitting: upper") for line in lines)


def test_no_debug_no_lines(caplog):
    with caplog.at_level(logging.INFO, logger="squall.debug"):
        complete_topology(None, _topology(), {"words": [["a"]]})
    assert not [r for r in caplog.records if r.name == "squall.debug"]
