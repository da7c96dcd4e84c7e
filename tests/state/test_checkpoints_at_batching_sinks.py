"""A checkpoint that waits at a batching sink for a persistent window's results has the sink
write its batch at once (``squall_flush_for_checkpoint``), so the stateful bolts commit at the
checkpoint interval, not at the sink's own batch size or tick.

A persistent window's results are emitted unanchored, and a checkpoint waits at the bolts after
it until they have acked the results given before it (`squall.state._in_flight`). A sink that
acks only once its batch is durable held each PREPARE until the batch filled or ticked, and the
checkpoint spout takes the next step only once this one is through: 3,000 records a second, a
100 ms interval, 0.1 to 0.3 commits a second through a `FileSinkBolt` (10 s tick), 2 to 4 through
a `ParquetSinkBolt` (1,000 rows or a 1 s tick); one whose batch never filled committed nothing
(this test before the fix: 2 or 3 commits in 10 to 11 s of stream, the spout paced by its unacked
records).
"""

import glob
import threading
import time

import pytest

from squall import BaseStatefulWindowedBolt, Config, Count, Fields, LocalCluster, Spout, TopologyBuilder
from squall._tuple import Tuple
from squall.external.files import FileSinkBolt
from squall.state._bolt import CheckpointTupleForwarder
from squall.state.checkpoint import COMMIT, PREPARE
from squall.state.memory import HostMemory

from ..conftest import wait_until
from .test_core import DATA, BoltCtx, Recorder, WritesLater, cp, passed_on

N = 6000          # records, 60 windows of 100
RATE = 2000       # records a second: a 3 s stream
INTERVAL_MS = 100


class _Run:
    """What the components of one run saw (LocalCluster: threads of this process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: set[int] = set()
        self.failed: list[int] = []
        self.commits: list[float] = []
        self.first_emit = self.last_emit = None


RUNS: dict[str, _Run] = {}


class SteadyIds(Spout):
    """Emits ids 0 .. N-1 at `RATE` a second, each with its id as message id; replays a failed one."""

    def __init__(self, run: str) -> None:
        self.run = run

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next_id = 0
        self.start = time.monotonic()

    def next_tuple(self):
        due = min(N, int((time.monotonic() - self.start) * RATE), self.next_id + 50)
        run = RUNS[self.run]
        while self.next_id < due:
            self.collector.emit([self.next_id], self.next_id)
            now = time.monotonic()
            run.first_emit = run.first_emit or now
            run.last_emit = now
            self.next_id += 1

    def ack(self, msg_id):
        with RUNS[self.run].lock:
            RUNS[self.run].acked.add(msg_id)

    def fail(self, msg_id):
        RUNS[self.run].failed.append(msg_id)
        self.collector.emit([msg_id], msg_id)


class EachId(BaseStatefulWindowedBolt):
    """A persistent tumbling window that emits the ids new in it, and notes each commit."""

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run = run

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, window):
        for t in window.get_new():
            self.collector.emit([t[0]])

    def pre_commit(self, txid):
        RUNS[self.run].commits.append(time.monotonic())


def _file_sink(out):
    return FileSinkBolt(out, formatter=lambda t: f"{t[0]}\n")   # rotates at 10,000 lines or a 10 s tick


def _file_ids(out):
    return [int(line) for f in glob.glob(f"{out}/part-*") for line in open(f)]


def _parquet_sink(out):
    pytest.importorskip("pyarrow")  # squall[delta]'s
    from squall.external.parquet import ParquetSinkBolt
    return ParquetSinkBolt(out, [("id", "int64")], "id", batch_size=1_000_000, tick_secs=None)  # never fills


def _parquet_ids(out):
    import pyarrow.parquet as pq
    return [i for f in glob.glob(f"{out}/**/*.parquet", recursive=True) for i in pq.read_table(f).column("id").to_pylist()]


SINKS = {"file sink, its own rotation a 10 s tick": (_file_sink, _file_ids),
         "parquet sink whose batch never fills": (_parquet_sink, _parquet_ids)}


@pytest.mark.parametrize("sink", sorted(SINKS))
def test_a_persistent_window_before_a_batching_sink_commits_at_the_checkpoint_interval(tmp_path, sink):
    make_sink, written = SINKS[sink]
    out = str(tmp_path / "out")
    run = RUNS[sink] = _Run()
    b = TopologyBuilder()
    b.set_spout("ids", SteadyIds(sink))
    b.set_bolt("window", EachId(sink).with_tumbling_window(Count(100)).with_persistence()).shuffle_grouping("ids")
    b.set_bolt("sink", make_sink(out)).shuffle_grouping("window")
    conf = {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: INTERVAL_MS, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}
    with LocalCluster() as cluster:
        cluster.submit_topology("commits", conf, b.create_topology())
        # every record acked (at the commit after it entered its window) and written (its window's
        # results, before the checkpoint after them passed the sink)
        done = wait_until(lambda: len(run.acked) == N and len(written(out)) >= N, 15, interval=0.1)
        ids = sorted(written(out))
    assert run.first_emit is not None and run.last_emit is not None
    streaming = run.last_emit - run.first_emit
    during = [t for t in run.commits if run.first_emit <= t <= run.last_emit]
    # the interval allows 10 a second; a fifth of that leaves room for a loaded machine, where the
    # sink's own batch let at most one through in the stream (none where it never fills)
    assert len(during) >= streaming * 1000 / INTERVAL_MS / 5, \
        f"{len(during)} commits in {streaming:.1f} s of stream at a {INTERVAL_MS} ms checkpoint interval"
    assert done, f"acked {len(run.acked)} of {N}, written {len(ids)}, {len(run.commits)} commits"
    assert ids == list(range(N)) and not run.failed   # every record written once, none replayed


class Batches(WritesLater):
    """A sink that writes its batch when it fills (never, here) or when a checkpoint waits for it."""

    def squall_flush_for_checkpoint(self):
        self.write()


class FlushRaises(WritesLater):
    def squall_flush_for_checkpoint(self):
        raise OSError("the batch's directory is gone")


def _forwarder(sink):
    ex, rec = CheckpointTupleForwarder(sink), Recorder()
    ex.prepare({}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    return ex, rec


def test_a_checkpoint_held_behind_a_batch_has_the_sink_write_it_and_passes_at_once():
    sink = Batches()
    ex, rec = _forwarder(sink)
    before = [Tuple([f"w{i}"], DATA) for i in range(3)]   # a persistent window's results: in no spout's tree
    for t in before:
        ex.execute(t)
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    assert rec.acked == [*before, prepare] and passed_on(rec) == [[0, PREPARE]]
    after = Tuple(["w3"], DATA)
    ex.execute(after)
    ex.execute(cp(0, COMMIT))   # the result after the PREPARE is written for the COMMIT
    assert after in rec.acked and passed_on(rec) == [[0, PREPARE], [0, COMMIT]]
    ex.execute(cp(1, PREPARE))   # nothing held: passed on, nothing written
    assert passed_on(rec)[-1] == [1, PREPARE] and not sink.queued and not rec.errors


def test_a_flush_hook_that_raises_is_reported_and_the_checkpoint_waits_for_the_bolts_own_write():
    sink = FlushRaises()
    ex, rec = _forwarder(sink)
    ex.execute(Tuple(["w1"], DATA))
    ex.execute(cp(0, PREPARE))
    assert passed_on(rec) == [] and len(rec.errors) == 1
    said = str(rec.errors[0])
    assert "squall_flush_for_checkpoint raised at checkpoint PREPARE txid 0" in said
    assert "OSError: the batch's directory is gone" in said and "task" in said
    sink.write()   # its own batch, later: the checkpoint passes then
    assert passed_on(rec) == [[0, PREPARE]]
