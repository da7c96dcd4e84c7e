"""A persistent window's late-tuple stream when its inputs are another persistent window's
results, on LocalCluster: the late results it sends on are in no spout's tree, and nothing
replays them.

`IdResults` (a persistent window of one id; each result stamped now, every 10th far in the
past) -> `EventWindows` (a persistent event-time window on the stamps, with a late-tuple
stream) -> `LateSink` (takes that stream; writes each late result 0.3 s after it came, from a
thread of its own, and fails its first 3 writes, as a write to a server that is down fails).

The late-tuple stream was taken for one that carries no window's results (it is anchored to
the window's inputs, which are mostly in a spout's tree), so a checkpoint passed the sink
before it wrote them, and its failures failed no PREPARE: the commit recorded the first
window as fired, and the 3 failed results were lost (3 of 3, 2 runs). Now that stream is held
when its window takes results: the failure fails the PREPARE, the first window rolls back and
fires again, and every late result is written."""

import threading
import time
from pathlib import Path

from squall import BaseStatefulWindowedBolt, Bolt, Config, Count, Duration, Fields, LocalCluster, TopologyBuilder

from ..conftest import wait_until
from ..process.recovery_topology import DurableSpout, acked

LATE_EVERY = 10


class IdResults(BaseStatefulWindowedBolt):
    """A persistent window of one id: its result is the id stamped now, every `LATE_EVERY`-th
    one stamped far in the past (late at the event-time window after it)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        for t in window.get():
            i = t[0]
            self.collector.emit([i, 5 if i % LATE_EVERY == LATE_EVERY - 1 else int(time.time() * 1000)])


class EventWindows(BaseStatefulWindowedBolt):
    """A persistent event-time window on the results' stamps (its windows' contents unused)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("ids"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        pass


class LateSink(Bolt):
    """Writes each late result's id to ``written.txt`` 0.3 s after it came, from a thread of its
    own, and acks it; its first 3 it fails instead (their ids to ``failed.txt``)."""

    def prepare(self, conf, context, collector):
        self.collector, self.queue, self.lock, self.fail_first = collector, [], threading.Lock(), 3
        out = Path(conf["test.out.dir"])
        self.written = open(out / "written.txt", "a")  # noqa: SIM115
        self.failed = open(out / "failed.txt", "a")  # noqa: SIM115
        threading.Thread(target=self._write, daemon=True).start()

    def execute(self, tup):
        with self.lock:
            self.queue.append((time.monotonic(), tup))

    def _write(self):
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            with self.lock:
                due = [t for at, t in self.queue if now - at >= 0.3]
                self.queue = [(at, t) for at, t in self.queue if now - at < 0.3]
            for t in due:
                result_id = t[0][0]  # the late-tuple stream's one value: the late input
                if self.fail_first > 0:
                    self.fail_first -= 1
                    self.failed.write(f"{result_id}\n")
                    self.failed.flush()
                    self.collector.fail(t)
                else:
                    self.written.write(f"{result_id}\n")
                    self.written.flush()
                    self.collector.ack(t)


class PacedIds(DurableSpout):
    """`DurableSpout` at about 500 ids a second, so the event-time window's watermark moves
    between them."""

    def next_tuple(self):
        time.sleep(0.002)
        super().next_tuple()


def _ids(path: Path) -> set:
    return {int(x) for x in path.read_text().split()} if path.exists() else set()


def test_a_late_result_of_a_window_after_another_that_the_sink_failed_is_written_after_all(tmp_path):
    n = 600
    b = TopologyBuilder()
    b.set_spout("source", PacedIds(n))
    b.set_bolt("results", IdResults().with_tumbling_window(Count.of(1)).with_persistence()).shuffle_grouping("source")
    b.set_bolt("windows", EventWindows().with_tumbling_window(Duration.of(200)).with_timestamp_field("ts")
               .with_watermark_interval(Duration.of(100)).with_late_tuple_stream("late").with_persistence()) \
        .shuffle_grouping("results")
    b.set_bolt("sink", LateSink()).shuffle_grouping("windows", "late")
    conf = Config()
    conf["test.out.dir"] = str(tmp_path)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    conf.set_message_timeout_secs(10)
    conf.set_max_spout_pending(100)
    with LocalCluster() as cluster:
        cluster.submit_topology("late", conf, b.create_topology())
        assert wait_until(lambda: acked(tmp_path) >= set(range(n)), 30), f"{len(acked(tmp_path))} of {n} acked"
        failed = _ids(tmp_path / "failed.txt")
        complete = wait_until(lambda: _ids(tmp_path / "written.txt") >= failed, 10, interval=0.1)
    written = _ids(tmp_path / "written.txt")
    late = {i for i in range(n) if i % LATE_EVERY == LATE_EVERY - 1}
    print(f"{n} ids acked, {len(late)} results stamped late, {len(written)} late results written, "
          f"{len(failed)} failed at the sink, {len(failed - written)} of them never written")
    assert len(failed) == 3, f"the sink failed {len(failed)} late results, not 3: too few came late"
    assert written <= late, f"results written that were not late: {sorted(written - late)[:20]}"
    assert complete and not failed - written, \
        f"{len(failed - written)} of the {len(failed)} late results the sink failed never written (their window committed)"
