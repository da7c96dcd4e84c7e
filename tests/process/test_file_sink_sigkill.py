"""FileSinkBolt on the process host: a worker SIGKILLed while its sink task writes a file. The
committed output (the files renamed into place) holds no torn line, and after recovery every
record of the input is there at least once: the killed task's hidden file is never renamed in
(its tuples were not acked, so they replay), and its next run removes it."""

import json
import os
import signal
from collections import Counter

from squall import TopologyBuilder
from squall.external.files import FileSinkBolt, FileSpout

from ..conftest import wait_until
from .semantics_topology import topology_conf

FILES, LINES = 4, 1000


def committed(sink) -> tuple[Counter, int]:
    """The records of the sink's committed files, by sequence number, and how many lines of
    them are torn (not a whole JSON record with its newline)."""
    got, torn = Counter(), 0
    for p in sink.glob("part-*"):
        data = p.read_bytes()
        torn += not data.endswith(b"\n")
        for line in data.split(b"\n")[:-1]:
            try:
                got[json.loads(line)["seq"]] += 1
            except ValueError:
                torn += 1
    return got, torn


def test_a_sink_worker_killed_mid_file_commits_no_torn_line_and_loses_no_record(cluster, tmp_path):
    src, sink, local, out = tmp_path / "in", tmp_path / "sink", tmp_path / "spout-state", tmp_path / "out"
    for d in (src, sink, out):
        d.mkdir()
    for f in range(FILES):
        (src / f"part-{f}.jsonl").write_text(
            "".join(json.dumps({"seq": f * LINES + i, "pad": "x" * 30}) + "\n" for i in range(LINES)))
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, quiet_secs=0, poll_secs=0.1, commit_every=50, progress_dir=local), 2)
    b.set_bolt("sink", FileSinkBolt(sink, formatter=lambda t: t[0] + "\n", max_records=400, tick_secs=1,
                                    suffix=".jsonl"), 2).shuffle_grouping("lines")
    with cluster.client() as m:
        m.submit_topology("sink", topology_conf(out, 2, **{"topology.message.timeout.secs": 4,
                                                           "topology.max.spout.pending": 200}), b.create_topology())
        # a sink task has part of a file written and not yet renamed in
        assert wait_until(lambda: len(cluster.workers()) == 2 and any(
            p.stat().st_size for p in sink.glob(".*.inprogress")), 60), (cluster.workers(), os.listdir(sink))
        os.kill(min(cluster.workers()), signal.SIGKILL)
        assert wait_until(lambda: set(committed(sink)[0]) == set(range(FILES * LINES)), 90), \
            f"{len(committed(sink)[0])} of {FILES * LINES} records committed; {sorted(os.listdir(sink))}"
        m.kill_topology("sink", wait_secs=0)
        assert wait_until(lambda: not cluster.workers(), 30)
    got, torn = committed(sink)
    assert torn == 0 and sum(got.values()) >= FILES * LINES
    assert sorted(os.listdir(src)) == [f"part-{f}.jsonl.done" for f in range(FILES)]
