"""A sink's dead letters in every live view, on a LocalCluster: a `FileSpout` reads 60 good lines,
5 whose ``n`` does not fit the Parquet (or Delta) sink's int64 column and 3 its translator
refuses. The sink (``on_bad_row="dead_letter"``) writes the 60 good rows, puts the 5 on its
``dead_letter`` stream and acks them; the spout dead-letters the 3 as it reads them. Every line
is counted where it went (the table, the ``dead_letter`` stream's subscriber, the spout's
dead-letter file), and ``get_topology_info``, the REST API's topology and component pages,
Prometheus's ``/metrics`` and ``squall monitor -w dead-lettered``'s counts say 5 at ``sink``
(failed by ``sink``, reason ``bad-row``) and 3 at ``lines`` (``unreadable``). On main the sink's
rows were in no figure: the spout saw an ack."""

from __future__ import annotations

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("starlette")
parser = pytest.importorskip("prometheus_client.parser")

from starlette.testclient import TestClient

from squall import BaseStatefulBolt, Bolt, LocalCluster, TopologyBuilder
from squall.cli import _cluster as cli_cluster
from squall.external.files import FileSpout
from squall.external.parquet import ParquetSinkBolt
from squall.ui.server import local_app
from squall.worker.stats_history import WINDOW_NAMES

from ..conftest import wait_until
from ..ui.conftest import BASE
from .poison_file_fail_fast import lines, note

GOOD, BAD_ROWS, UNREADABLE = 60, 5, 3
SCHEMA = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])


def translate(record: bytes) -> list:
    """``[id, n]`` of an ``id,n`` line; a ``bad`` line is refused (dead-lettered as read)."""
    text = record.decode().rstrip("\n")
    if text.startswith("bad"):
        raise ValueError(f"unreadable test line {text!r}")
    key, n = text.split(",")
    return [int(key), int(n) if n.isdigit() else n]


class Keep(Bolt):
    """Notes each row of the sink's ``dead_letter`` stream (its id) and acks it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def execute(self, tup):
        note(self.path, str(tup.values[0]))
        self.collector.ack(tup)


def _input(src) -> None:
    rows = [f"{i},{i * 10}" for i in range(GOOD)]
    for k in range(BAD_ROWS):  # n = "x...": not an int64
        rows.insert((k + 1) * len(rows) // (BAD_ROWS + 1), f"{1000 + k},x{k}")
    for k in range(UNREADABLE):
        rows.insert((k + 1) * len(rows) // (UNREADABLE + 1), f"bad-{k}")
    tmp = src / ".a.txt"
    tmp.write_text("".join(f"{r}\n" for r in rows))
    tmp.rename(src / "a.txt")


def _stored(tmp_path, kind: str) -> list[int]:
    if kind == "parquet":
        return sorted(r["id"] for f in sorted((tmp_path / "pq").glob("part-*.parquet"))
                      for r in pq.read_table(f).to_pylist())
    import deltalake
    if not deltalake.DeltaTable.is_deltatable(str(tmp_path / "delta")):
        return []
    return sorted(r["id"] for r in deltalake.DeltaTable(str(tmp_path / "delta")).to_pyarrow_table().to_pylist())


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_sinks_dead_letter_rows_are_in_every_live_view(tmp_path, kind):
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    _input(src)
    if kind == "parquet":
        sink = ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id", batch_size=20, tick_secs=0.2)
    else:
        delta = pytest.importorskip("squall.external.delta", reason="needs deltalake")
        sink = delta.DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", batch_size=20, tick_secs=0.2)
    kept = str(tmp_path / "kept")
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["id", "n"], translator=translate, quiet_secs=0, commit_every=10, poll_secs=0.05,
                                   progress_dir=local))
    b.set_bolt("sink", sink).shuffle_grouping("lines")
    b.set_bolt("keep", Keep(kept)).shuffle_grouping("sink", "dead_letter")
    conf = {"topology.message.timeout.secs": 300, "topology.stats.sample.rate": 1.0}
    dead = {("lines", "", "unreadable"): UNREADABLE, ("sink", "sink", "bad-row"): BAD_ROWS}
    with LocalCluster({"storm.local.dir": str(local)}) as cluster, \
            TestClient(local_app(cluster), base_url=BASE) as api:
        cluster.submit_topology("sdl", conf, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists() and _stored(tmp_path, kind) == list(range(GOOD))
                          and len(lines(tmp_path / "kept")) == BAD_ROWS, 60), \
            (_stored(tmp_path, kind), lines(tmp_path / "kept"))
        # every line where it went, once: the good rows stored, the bad rows on the stream, the
        # unreadable lines in the spout's dead-letter file
        assert sorted(map(int, lines(tmp_path / "kept"))) == [1000 + k for k in range(BAD_ROWS)]
        letters = (local / "filespout" / "lines" / "dead-letter" / "a.txt.dead").read_text().splitlines()
        assert sorted(json.loads(x)["record"].rstrip("\n") for x in letters) == [f"bad-{k}" for k in range(UNREADABLE)]

        def figures() -> dict:
            info = cluster.get_topology_info("sdl")
            return {cid: c["dead_lettered"] for cid, c in info["components"].items()}
        assert wait_until(lambda: figures() == {"lines": UNREADABLE, "sink": BAD_ROWS, "keep": 0}, 30), figures()

        storm_id = cluster.get_topology_info("sdl")["id"]
        page = api.get(f"/api/v1/topology/{storm_id}").json()
        assert [s["deadLettered"] for s in page["topologyStats"]] == [BAD_ROWS + UNREADABLE] * len(WINDOW_NAMES)
        assert [(s["spoutId"], s["deadLettered"], s["acked"]) for s in page["spouts"]] == [("lines", UNREADABLE,
                                                                                          GOOD + BAD_ROWS)]
        assert {b["boltId"]: b["deadLettered"] for b in page["bolts"]} == {"sink": BAD_ROWS, "keep": 0}
        comp = api.get(f"/api/v1/topology/{storm_id}/component/sink").json()
        assert [s["deadLettered"] for s in comp["boltStats"]] == [BAD_ROWS] * len(WINDOW_NAMES)
        assert comp["deadLetterStats"] == [{"spout": "sink", "failedBy": "sink", "reason": "bad-row",
                                            "deadLettered": BAD_ROWS}]

        metrics = {f.name: f for f in parser.text_string_to_metric_families(api.get("/metrics").text)}
        samples = {(s.labels["component"], s.labels["source"], s.labels["stream"]): s.value
                   for s in metrics["squall_dead_lettered"].samples}
        assert samples == dead

        info = cluster.get_topology_info("sdl")
        reasons: set[str] = set()
        counted = cli_cluster._dead_letter_counts(info, "sink", None, reasons)
        assert (sum(c[-1].total for c in counted.values()), reasons) == (BAD_ROWS, {"bad-row"})
        cluster.kill_topology("sdl", wait_secs=0)
    assert os.path.exists(src / "a.txt.done")


class Counted(BaseStatefulBolt):
    """A stateful bolt: with it in the topology, every other bolt runs in a wrapper."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.collector.ack(tup)


def test_a_sinks_dead_letters_are_shown_in_a_topology_with_a_stateful_bolt(tmp_path):
    """In a topology with a stateful bolt, the engine runs every plain bolt inside a
    `CheckpointTupleForwarder`, and reads a task's dead letters off the object it runs: the
    wrapper, which did not pass the sink's figures on. On the process host and on Spark, a
    pipeline whose sinks put 2 rows each on their ``dead_letter`` stream showed ``pq`` and
    ``delta`` at 0 dead-lettered (the spout's own 5 were shown); without the stateful bolt, 2."""
    from squall._failure import BAD_ROW, DEAD_LETTERED
    from squall.engine.stats import component_figures
    from squall.state._bolt import CheckpointTupleForwarder
    from tests.external.test_delta import FakeCollector, FakeContext, tup

    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(tmp_path / "in", ["id", "n"], quiet_secs=0, progress_dir=tmp_path / "local"))
    b.set_bolt("count", Counted()).shuffle_grouping("lines")
    b.set_bolt("sink", ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id")).shuffle_grouping("lines")
    run = b.create_topology().components["sink"].obj  # what the engine runs, and asks for figures
    assert isinstance(run, CheckpointTupleForwarder)
    run.bolt.prepare({}, FakeContext(), FakeCollector())
    run.bolt.execute(tup([1, "x"], fields=("id", "n")))  # does not fit int64: the dead_letter stream
    run.bolt.flush()
    assert component_figures(run) == {(DEAD_LETTERED, "sink", BAD_ROW): 1}
