"""Components for several topologies on one process-host cluster: every topology uses the same
component and stream names, and its sink writes down which topology and which worker process
each tuple reached (under the topology's own ``test.out.dir``)."""

import json
import os

from squall import BasicBolt, TopologyBuilder

from .semantics_topology import ListSpout, _out


class Sink(BasicBolt):
    """Writes ``{"topo", "x", "pid"}`` for each tuple to ``sink-<task>.jsonl``."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.name = conf["topology.name"]
        self.log = _out(conf, f"sink-{context.get_this_task_id()}.jsonl")

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        self.log.write(json.dumps({"topo": self.name, "x": tup[0], "pid": os.getpid()}) + "\n")
        self.log.flush()


def spout_to_sink(items):
    """``items`` (a `ListSpout`, 2 tasks, message ids) -> `Sink` (2 tasks, shuffle)."""
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(items), 2)
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("items")
    return b.create_topology()
