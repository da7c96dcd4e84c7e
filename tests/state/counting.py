"""A counting topology for the guarantee tests: `ReplayingSpout` of ids 0..n-1 (a failed id is
emitted again; acked ids are written under ``test.out.dir``; n None: until the test stops it,
`stop_and_wait`) -> `Pass` (2, shuffle) -> `CountIds` (2, fields on id), a stateful bolt
counting each id in its `KeyValueState`. After
every id is acked, each id's committed count must be at least 1 (nothing lost) and the counts
may exceed n only by updates applied twice: tuples replayed after their update was committed."""

from collections import Counter
from pathlib import Path

from squall import BaseStatefulBolt, BaseStatefulWindowedBolt, BasicBolt, Duration, Fields, TopologyBuilder
from squall.state import StateHome, get_state, state_key

from ..process.recovery_topology import DurableSpout, acked, stop_and_wait  # noqa: F401 - acked, stop_and_wait: for the tests


class ReplayingSpout(DurableSpout):
    """`DurableSpout` (a failed id is emitted again; an acked id is not, even by a restarted
    instance, which emits again what was in flight) that also writes every emit to
    ``emitted-<task>.txt``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.emits = open(Path(conf["test.out.dir"]) / f"emitted-{context.get_this_task_id()}.txt", "a")

    def next_tuple(self):
        i = self.next_id()
        if i is not None:
            self.emits.write(f"{i}\n")
            self.emits.flush()
            self.collector.emit([i], i)


class NotingReplayingSpout(ReplayingSpout):
    """`ReplayingSpout` that creates ``deactivated`` under ``test.out.dir`` when its worker
    learns that the topology is no longer active."""

    def deactivate(self):
        (self.dir / "deactivated").write_text("")


class Pass(BasicBolt):
    """Passes ids on, a little slowly (so a run lasts long enough to crash things under it);
    with ``crash_at``, the first time it sees that id (a flag file under ``test.out.dir``) it
    raises, which crashes its worker (Storm's fail-fast)."""

    def __init__(self, crash_at=None):
        self.crash_at = crash_at

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.flag = Path(conf["test.out.dir"]) / "crashed"

    def execute(self, tup, collector):
        for _ in range(2000):
            pass
        if tup[0] == self.crash_at and not self.flag.exists():
            self.flag.write_text("1")
            raise RuntimeError("crash on purpose")
        collector.emit([tup[0]])


class CountIds(BaseStatefulBolt):
    """Counts each id in its state."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        self.collector.ack(tup)


class HeldCount(CountIds):
    """`CountIds` whose first ``pre_prepare`` after ``hold`` exists under ``test.out.dir``
    creates ``held`` and blocks until ``release`` exists (at most 60 s): a test so keeps a
    PREPARE in flight while it acts on the topology."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])

    def pre_prepare(self, txid):
        import os
        import time
        if not (self.dir / "hold").exists():
            return
        try:
            os.close(os.open(self.dir / "held", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return   # one hold only
        deadline = time.monotonic() + 60
        while not (self.dir / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


class WindowCounts(BaseStatefulWindowedBolt):
    """A persistent windowed `CountIds`: counts each id of every window in its state."""

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        for t in window.get():
            self.state.put(t[0], self.state.get(t[0], 0) + 1)


def windowed_counting_topology(n, window_ms=300):
    """`counting_topology` with `WindowCounts` in tumbling persistent windows of ``window_ms``
    (processing time, so every id is eventually in a window) as ``count``."""
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(n), 1)
    b.set_bolt("work", Pass(), 2).shuffle_grouping("source")
    b.set_bolt("count", WindowCounts().with_tumbling_window(Duration.of(window_ms)).with_persistence(), 2) \
        .fields_grouping("work", ["id"])
    return b.create_topology()


def counting_topology(n, crash_at=None):
    """The topology of the module docstring."""
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(n), 1)
    b.set_bolt("work", Pass(crash_at), 2).shuffle_grouping("source")
    b.set_bolt("count", CountIds(), 2).fields_grouping("work", ["id"])
    return b.create_topology()


def emitted(out: Path) -> Counter:
    """How many times the spout emitted each id."""
    counts = Counter()
    for f in out.glob("emitted-*.txt"):
        counts.update(int(x) for x in f.read_text().split())
    return counts


def in_flight(out: Path) -> int:
    """How many ids the spout emitted that are not acked yet: tuples in flight.

    A test that kills a worker to make it lose tuples waits for some first. Started right after
    a commit showed in the store (the trigger it had), the kill could land when that commit
    had just acked every tuple in flight and, on a loaded machine, the spout had not emitted the
    next yet: nothing was lost, and nothing replayed (a CI run: "the kill hit no tuple in
    flight"). A stateful bolt acks only at a commit, every checkpoint interval: tuples emitted
    since the last are held until the next."""
    return len(set(emitted(out)) - acked(out))


def check_counts(counts: dict, n: int, out: Path) -> tuple[int, int]:
    """Assert the guarantee on the committed ``counts`` of ids 0..n-1: none below 1 (no update
    lost), none above the times its id was emitted (an update applies twice only when its tuple
    was replayed after its commit). Returns (updates over n, emits over n)."""
    emits = emitted(out)
    lost = [i for i in range(n) if counts.get(i, 0) < 1]
    assert not lost, f"updates lost for ids {lost[:20]}"
    over = [(i, c, emits[i]) for i, c in counts.items() if c > emits[i]]
    assert not over, f"(id, count, emits) counted more often than emitted: {over[:20]}"
    assert set(counts) == set(range(n))
    return sum(counts.values()) - n, sum(emits.values()) - n


class StateReader:
    """A context for reading states from a test, as a host lends them to its workers."""

    def __init__(self, home):
        self.state_home = home

    def get_this_component_id(self):
        return "(test)"

    def get_this_task_id(self):
        return -1


def committed_counts(state_root: Path, secret: bytes, name: str) -> dict:
    """The committed counts of all `CountIds` (or `WindowCounts`) tasks of topology ``name``,
    read from the file store under ``state_root`` (``<storm.local.dir>/state``) with the
    cluster's ``secret`` (a persistent window's own state, ``count-<task>-window``, left out)."""
    home = StateHome(directory=state_root, key=state_key(secret))
    counts = {}
    for d in (state_root / name).glob("ns-count-*"):
        if not d.name.endswith("-window"):
            counts.update(dict(get_state(d.name[3:], {"topology.name": name}, StateReader(home)).committed()))
    return counts
