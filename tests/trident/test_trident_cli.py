"""A Trident word count on the process host seen through the CLI (issue 34, item 6): ``squall
list`` notes its batches (txid, in flight, committed, latency) below Storm's table, and ``squall
monitor`` shows its components under the planner's readable ids, counting each one's data
streams (``s<N>``), not Trident's batch counts (``$coord-bg0``)."""

from __future__ import annotations

import re

from ..conftest import wait_until
from ..test_cli import write
from ..test_cli_cluster import nimbus  # noqa: F401 - its fixture: squall nimbus --host process

WORD_COUNT = '''
import sys

from squall import Config, Fields, StormSubmitter
from squall.trident import BaseFunction, MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spout import FixedBatchSpout


class Split(BaseFunction):
    def execute(self, tuple, collector):
        for word in tuple[0].split():
            collector.emit([word])


if __name__ == "__main__":
    spout = FixedBatchSpout(Fields("sentence"), 2, ["the cow jumped"], ["over the moon"], ["to be or not"])
    spout.set_cycle(True)
    topology = TridentTopology()
    (topology.new_stream("sentences", spout).name("split")
     .each(Fields("sentence"), Split(), Fields("word"))
     .group_by(Fields("word")).name("count")
     .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count")).parallelism_hint(2))
    conf = Config()
    conf.set_num_workers(2)
    conf["topology.max.spout.pending"] = 2
    StormSubmitter.submit_topology(sys.argv[1], conf, topology.build())
'''

COMPONENTS = ["$mastercoord-bg0", "$spoutcoord-spout-sentences", "b-0-split-count", "b-1-count", "spout-sentences"]


def test_list_notes_the_batches_and_monitor_counts_the_named_bolts_data_streams(nimbus, tmp_path,  # noqa: F811
                                                                                capsys):
    path = write(tmp_path, "trident_wc.py", WORD_COUNT)
    assert nimbus.ok("jar", path, "twc") == "Submitted topology: twc\n"

    def committed(listed: str) -> int:
        notes = listed.split("\n\n")[1:]
        found = re.search(r"^twc: Trident txid (\d+), (\d+) batch(?:es)? in flight \(at most 2\), (\d+) committed, "
                          r"batch latency (\d+\.\d{3}) ms$", "".join(notes), re.M)
        if not found:
            return 0
        txid, in_flight, done, latency = found.groups()
        assert int(txid) == int(done) + 1 and 0 <= int(in_flight) <= 2
        assert int(done) == 0 or float(latency) > 0
        return int(done)
    # polled with list run in this process (`Nimbus.verb`: a process per poll took a second of
    # CPU from the workers), then once as a process
    assert wait_until(lambda: committed(nimbus.verb(capsys, "list").stdout) >= 3, 60, 0.5), nimbus.ok("list")
    assert committed(nimbus.ok("list")) >= 3

    lines = nimbus.ok("monitor", "twc", "-i", "1", "--count", "3", timeout=30).splitlines()
    assert lines[0] == "topology\tcomponent\tparallelism\tstream\ttime-diff ms\temitted\tthroughput (Kt/s)"
    rows = [ln.split("\t") for ln in lines[1:]]
    assert [r[1] for r in rows] == sorted(COMPONENTS, key=lambda c: c != "$mastercoord-bg0") * 3
    streams = {r[1]: r[3] for r in rows}
    assert streams["$mastercoord-bg0"] == "$batch,$commit,$success"
    assert streams["$spoutcoord-spout-sentences"] == "$batch"
    assert re.fullmatch(r"s\d+", streams["spout-sentences"]) and re.fullmatch(r"s\d+", streams["b-0-split-count"])
    assert streams["b-1-count"] == "default"  # it persists: no data stream leaves it
    # the data flows: the spout's and the split's rows count tuples in some interval
    for component in ("spout-sentences", "b-0-split-count"):
        assert any(int(r[5]) > 0 for r in rows if r[1] == component), lines
    # -s still counts one stream alone (its rows' stream, so every 0.2 s, in this process)
    one = nimbus.verb(capsys, "monitor", "twc", "-m", "b-1-count", "-s", "$coord-bg0", "-i", "0.2", "--count", "2")
    assert one.returncode == 0, one.stderr
    assert [ln.split("\t")[3] for ln in one.stdout.splitlines()[1:]] == ["$coord-bg0"] * 2
    assert nimbus.verb(capsys, "kill", "twc", "-w", "0").stdout == "Killed topology: twc\n"


def test_list_names_each_batch_groups_txid_of_a_topology_of_several_parts():
    """A topology of several connected parts has a coordinator, and txids, per part: ``list``
    names each group's current txid, never one txid made of their sum."""
    from squall.cli._cluster import _trident_note

    def group(n: str, txid: int, done: int) -> dict:
        return {"coordinator": f"$mastercoord-bg{n}", "currentTxid": txid, "batchesInFlight": 1,
                "maxBatchesInFlight": 1, "batchesCommitted": done, "batchLatency": "1.000"}

    class Master:
        def get_topology_page(self, name: str) -> dict:
            groups = [group("0", 1, 0), group("1", 4, 3)]
            return {"trident": {"coordinators": ["$mastercoord-bg0", "$mastercoord-bg1"], "currentTxid": None,
                                "batchesInFlight": 2, "maxBatchesInFlight": 2, "batchesCommitted": 3,
                                "batchLatency": "1.000", "groups": groups}}
    assert _trident_note(Master(), {"name": "two"}) == (
        "two: Trident txids 1 ($mastercoord-bg0), 4 ($mastercoord-bg1), 2 batches in flight (at most 2), "
        "3 committed, batch latency 1.000 ms")
