"""Windowed, stateful and metrics bolts attach through the builder's and the engine's extension
points (docs/architecture.md), which each feature's package fills when it is imported. This
shows that every process of the process host has them: a user's topology file, run in a fresh
interpreter that imports only ``squall`` and ``squall.windowing`` / ``squall.state`` (as a
user's file does), submits a windowed bolt, a stateful bolt and a metric with a consumer; its
classes travel by value (cloudpickle: they live in the file's ``__main__``), to workers started
as ``python -m squall.worker`` that never imported the file. Each registry is needed somewhere:
the bolt kinds and the checkpoint wiring in the submitting process, the consumer bolts in the
master's plan, the metric timers in the spout's worker, the data point records on the wire
between the two workers."""

import json
import subprocess
import sys

from tests.written import finished_lines

from ..conftest import wait_until

TOPOLOGY = '''
import json
import sys
from pathlib import Path

from squall import Config, CountMetric, Fields, Spout, StormSubmitter, TopologyBuilder
from squall.state import BaseStatefulBolt
from squall.windowing import BaseWindowedBolt, Count

N = 6


class Numbers(Spout):
    """Emits 0..N-1 once each, with message ids, counting them in the metric "emitted"."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(range(N))
        self.emitted = context.register_metric("emitted", CountMetric(), 1)

    def next_tuple(self):
        if self.todo:
            n = self.todo.pop(0)
            self.collector.emit([n], n)
            self.emitted.incr()


class Windows(BaseWindowedBolt):
    """Tumbling windows of 3 tuples, each written as the list of its values."""

    def __init__(self):
        super().__init__()
        self.with_tumbling_window(Count.of(3))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.path = Path(conf["test.out.dir"]) / "windows.jsonl"

    def execute(self, window):
        with open(self.path, "a") as f:
            f.write(json.dumps([t.get_value(0) for t in window.get()]) + "\\n")


class Total(BaseStatefulBolt):
    """The running sum of its input in its KeyValueState, written after each tuple."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        total = self.state.get("total", 0) + tup.get_value(0)
        self.state.put("total", total)
        with open(Path(self.conf["test.out.dir"]) / "totals.txt", "a") as f:
            f.write(f"{total}\\n")
        self.collector.ack(tup)


b = TopologyBuilder()
b.set_spout("numbers", Numbers())
b.set_bolt("windows", Windows()).shuffle_grouping("numbers")
b.set_bolt("total", Total()).shuffle_grouping("numbers")
conf = Config()
conf.set_num_workers(2)
conf["test.out.dir"] = sys.argv[1]
conf["topology.metrics.consumer.register"] = [{"class": "tests.process.features_consumer:DataPointsToFile"}]
with StormSubmitter.using_conf(__import__("yaml").safe_load(open(sys.argv[2]))):
    StormSubmitter.submit_topology("features", conf, b.create_topology())
'''


def lines(path):
    return finished_lines(path)


def emitted_counted(points):
    """The spout's "emitted" counts the consumer received, summed over the buckets."""
    return sum(p["value"] for p in map(json.loads, lines(points)) if p["name"] == "emitted")


def test_a_fresh_topology_file_runs_windowed_stateful_and_metrics_bolts_on_worker_processes(shared_cluster, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "features.py").write_text(TOPOLOGY)
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, str(src / "features.py"), str(out), str(shared_cluster.file)],
                         cwd=src, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    log = shared_cluster.dir.parent / "master.log"
    try:
        totals = out / "totals.txt"
        assert wait_until(lambda: "15" in lines(totals), 60), (lines(totals), log.read_text()[-3000:])
        windows = out / "windows.jsonl"
        assert wait_until(lambda: len(lines(windows)) == 2, 60), (lines(windows), log.read_text()[-3000:])
        assert [json.loads(w) for w in lines(windows)] == [[0, 1, 2], [3, 4, 5]]
        assert wait_until(lambda: emitted_counted(out / "points.jsonl") == 6, 60), lines(out / "points.jsonl")
    finally:
        with shared_cluster.client() as m:
            m.kill_topology("features", wait_secs=0)
