"""A row that does not fit the sink's schema, delivered twice in one batch (a replay: its first
tuple's tree timed out while the sink held it for the batch, and the spout sent it again), is
one dead letter: one row on the sink's ``dead_letter`` stream, anchored to both tuples, counted
once in the sink's ``dead_lettered``, as a good row replayed within its batch is written once.
Before, each copy went on the stream and was counted: two dead letters for one record."""

from __future__ import annotations

from typing import ClassVar

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from squall import Bolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.external.parquet import ParquetSinkBolt

from ..conftest import wait_until

SCHEMA = pa.schema([("id", pa.int64(), False), ("n", pa.int64())])
# (msg id, row): record 7 does not fit (n is no int64) and comes twice, as a replay would
SENT = [(1, [1, 10]), (2, [7, "x"]), (3, [2, 20]), (4, [7, "x"]), (5, [3, 30])]


class Rows(Spout):
    """Emits `SENT` once, each row with its message id; notes what was acked and failed (on the
    class: the cluster runs a copy of the spout)."""

    acked: ClassVar[list[int]] = []
    failed: ClassVar[list[int]] = []

    def open(self, conf, context, collector):
        self.collector = collector
        self.left = list(SENT)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "n"))

    def next_tuple(self):
        if self.left:
            msg_id, row = self.left.pop(0)
            self.collector.emit(row, msg_id=msg_id)

    def ack(self, msg_id):
        Rows.acked.append(msg_id)

    def fail(self, msg_id):
        Rows.failed.append(msg_id)


class Keep(Bolt):
    """Keeps the id of each row of the sink's ``dead_letter`` stream and acks it."""

    kept: ClassVar[list] = []

    def execute(self, tup):
        Keep.kept.append(tup.values[0])
        self.collector.ack(tup)


def test_a_bad_row_replayed_within_its_batch_is_one_dead_letter(tmp_path):
    Keep.kept, Rows.acked, Rows.failed = [], [], []
    spout = Rows()
    b = TopologyBuilder()
    b.set_spout("rows", spout)
    # one batch: the five tuples come well before the size (100) or the tick (1 s) commits it
    b.set_bolt("sink", ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id", batch_size=100, tick_secs=1)) \
        .shuffle_grouping("rows")
    b.set_bolt("keep", Keep()).shuffle_grouping("sink", "dead_letter")
    with LocalCluster() as cluster:
        cluster.submit_topology("replays", {"topology.stats.sample.rate": 1.0}, b.create_topology())
        assert wait_until(lambda: sorted(spout.acked) == [1, 2, 3, 4, 5], 30), (spout.acked, spout.failed)
        assert spout.failed == []
        assert Keep.kept == [7]  # main: [7, 7]
        written = [r["id"] for f in sorted((tmp_path / "pq").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
        assert sorted(written) == [1, 2, 3]
        def sink_dead_lettered() -> int:
            return cluster.get_topology_info("replays")["components"]["sink"]["dead_lettered"]
        assert wait_until(lambda: sink_dead_lettered() == 1, 10), sink_dead_lettered()  # main: 2
        cluster.kill_topology("replays", wait_secs=0)
