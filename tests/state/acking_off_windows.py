"""A windowed topology with acking off (``topology.acker.executors`` 0), for LocalCluster and the
process host: a spout of N records ``(id, ts)`` -> a `BasicBolt` of 2 tasks (shuffle) -> a
windowed bolt of one task, persistent or not, in event or processing time. The window records
each window's ids under ``test.out.dir`` (the process host's workers are other processes), so a
test counts every record in every window against what Storm's windows give.

Behind a bolt of several tasks, a persistent window gets each checkpoint from each of them; with
acking off the checkpoint spout sends INITSTATE, PREPARE and COMMIT at once, so one task may pass
all three on before the other passed INITSTATE."""

import json
import time
from pathlib import Path

from squall import BaseWindowedBolt, BasicBolt, Bolt, Config, Duration, Fields, Spout, TopologyBuilder
from squall.state import BaseStatefulWindowedBolt
from tests.written import finished_lines

LAG_MS = 500
STEP_MS = 10  # between two records' timestamps
START_MS = 1_000_000
LENGTH_MS, SLIDE_MS = 1000, 500  # event-time windows: tumbling 1 s, or sliding 1 s by 0.5 s
PROCESSING_MS = 300  # processing-time windows: tumbling 0.3 s
CLOSE = "close"  # the stream of the records that move every source's watermark past the data


def timestamps(n: int) -> list[int]:
    """Ascending by `STEP_MS`, but for one pair in 7 swapped: out of order by 10 ms, within the lag."""
    ts = [START_MS + i * STEP_MS for i in range(n)]
    for i in range(0, n - 1, 7):
        ts[i], ts[i + 1] = ts[i + 1], ts[i]
    return ts


def close_ts(n: int) -> int:
    """The closing records' timestamp: far enough past the last record that the watermark it
    gives (minus the lag) is past the end of every window that holds a record."""
    return START_MS + n * STEP_MS + 5 * LENGTH_MS


def event_windows(n: int, sliding: bool) -> dict[int, list[int]]:
    """Storm's event-time windows of the n records: window end -> the ids it holds (every one
    fires: the closing records move the watermark past them all)."""
    slide = SLIDE_MS if sliding else LENGTH_MS
    ends: dict[int, list[int]] = {}
    for i, t in enumerate(timestamps(n)):
        end = -(-t // slide) * slide  # the first end at or after t: a window holds end - length < ts <= end
        while end - LENGTH_MS < t:
            ends.setdefault(end, []).append(i)
            end += slide
    return {e: sorted(ids) for e, ids in ends.items()}


class Records(Spout):
    """Emits ids 0..n-1 with `timestamps`, 20 a call, the even ids with a message id and the odd
    ones without; then 4 records (ids n..n+3) at `close_ts` on the `CLOSE` stream."""

    def __init__(self, n: int) -> None:
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))
        declarer.declare_stream(CLOSE, Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.ts = timestamps(self.n)
        self.next = 0

    def next_tuple(self):
        for _ in range(20):
            i = self.next
            if i < self.n:
                self.collector.emit([i, self.ts[i]], msg_id=i if i % 2 == 0 else None)
            elif i < self.n + 4:
                self.collector.emit([i, close_ts(self.n)], stream=CLOSE)
            else:
                return
            self.next += 1


def back(out: Path) -> list[str]:
    """The bolts (component names) that were prepared again after the flag ``crashed`` was made
    under ``out`` (their worker restarted)."""
    return sorted(f.name.split("-")[1] for f in out.glob("back-*"))


class PacedRecords(Records):
    """`Records` at ``per_sec`` records a second, so that a worker can restart while they flow.
    Once ``crashed`` exists under ``test.out.dir`` it holds its records until ``resume_after``
    bolts came back (`back`), then writes the first id it emits then to ``resumed``: with acking
    off, what it sent meanwhile is lost, by design."""

    def __init__(self, n: int, per_sec: int, resume_after: int = 0) -> None:
        super().__init__(n)
        self.per_sec = per_sec
        self.resume_after = resume_after

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.out = Path(conf["test.out.dir"])
        self.started: float | None = None
        self.held = 0.0  # seconds held, which the pace does not count
        self.holding_since: float | None = None

    def next_tuple(self):
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if self.resume_after and not (self.out / "resumed").exists() and (self.out / "crashed").exists():
            if len(back(self.out)) < self.resume_after:
                self.holding_since = self.holding_since or now
                return
            self.held = now - (self.holding_since or now)
            (self.out / "resumed").write_text(str(self.next))
        due = min(self.n + 4, int((now - self.started - self.held) * self.per_sec))
        while self.next < due:
            i = self.next
            if i < self.n:
                self.collector.emit([i, self.ts[i]], msg_id=i if i % 2 == 0 else None)
            else:
                self.collector.emit([i, close_ts(self.n)], stream=CLOSE)
            self.next += 1


class ParseNeverAcks(Bolt):
    """`Parse` written for acking off: it anchors what it emits (a stateful topology asks for
    that) and acks nothing, since nothing is tracked."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def execute(self, tup):
        self.collector.emit([tup[0], tup[1]], tup)


def _mark_back(conf, context) -> None:
    """Note under ``test.out.dir`` that this task was prepared after the crash (`back`)."""
    out = Path(conf["test.out.dir"])
    if (out / "crashed").exists():
        (out / f"back-{context.get_this_component_id()}-{context.get_this_task_id()}").write_text("1")


class Parse(BasicBolt):
    """Passes each record on (a new user's parse step), the closing ones on the default stream too."""

    def prepare(self, conf, context):
        _mark_back(conf, context)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def execute(self, tup, collector):
        collector.emit([tup[0], tup[1]])


class _Records:
    """Writes each window's end and ids to ``windows-<task>.jsonl`` under ``test.out.dir``."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = Path(conf["test.out.dir"]) / f"windows-{context.get_this_task_id()}.jsonl"
        _mark_back(conf, context)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("end", "n"))

    def execute(self, window):
        ids = [t[0] for t in window.get()]
        with open(self.log, "a") as f:
            f.write(json.dumps({"end": window.get_end_timestamp(), "ids": ids}) + "\n")
        self.collector.emit([window.get_end_timestamp(), len(ids)])


class PlainWindow(_Records, BaseWindowedBolt):
    """A window (not stateful) that records its windows."""


class PersistentWindow(_Records, BaseStatefulWindowedBolt):
    """A persistent window (Storm's ``withPersistence``) that records its windows."""

    def init_state(self, state):
        self.state = state


def window(persistent: bool, time: str, cls: type | None = None) -> BaseWindowedBolt:
    """The window: ``time`` "event-tumbling", "event-sliding" or "processing" (tumbling); an
    instance of ``cls`` (a subclass of `PersistentWindow` or `PlainWindow`) if given."""
    bolt = (cls or (PersistentWindow if persistent else PlainWindow))()
    if time == "processing":
        bolt.with_tumbling_window(Duration.of(PROCESSING_MS))
    else:
        if time == "event-sliding":
            bolt.with_window(Duration.of(LENGTH_MS), Duration.of(SLIDE_MS))
        else:
            bolt.with_tumbling_window(Duration.of(LENGTH_MS))
        bolt.with_timestamp_field("ts").with_lag(Duration.of(LAG_MS)).with_watermark_interval(Duration.of(100))
    if persistent:
        bolt.with_persistence()
    return bolt


def topology(n: int, persistent: bool, time: str, spout: Spout | None = None, bolt: BaseWindowedBolt | None = None,
             parse: Bolt | BasicBolt | None = None):
    """records -> parse (2 tasks) -> window (1 task); ``spout``, ``bolt`` and ``parse`` instead
    of `Records`, `window` and `Parse`."""
    b = TopologyBuilder()
    b.set_spout("records", spout or Records(n))
    b.set_bolt("parse", parse or Parse(), 2).shuffle_grouping("records").all_grouping("records", CLOSE)
    b.set_bolt("window", bolt or window(persistent, time)).global_grouping("parse")
    return b.create_topology()


def acking_off_conf(out: Path, workers: int = 1) -> Config:
    conf = Config()
    conf.set_num_workers(workers)
    conf[Config.TOPOLOGY_ACKER_EXECUTORS] = 0
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf["test.out.dir"] = str(out)
    return conf


def windows_fired(out: Path) -> list[dict]:
    """Every window the window tasks recorded under ``out``."""
    rows: list[dict] = []
    for f in out.glob("windows-*.jsonl"):
        rows += [json.loads(line) for line in finished_lines(f)]
    return rows


def as_expected(out: Path, n: int, time: str) -> bool:
    """Whether the windows fired so far are all the windows Storm fires for the n records: in
    event time each window end with exactly its ids, in processing time every id once (the
    closing records too are in processing-time windows; they close nothing there)."""
    fired = windows_fired(out)
    if time == "processing":
        return sorted(i for w in fired for i in w["ids"] if i < n) == list(range(n))
    return {w["end"]: sorted(w["ids"]) for w in fired} == event_windows(n, time == "event-sliding")


def describe(out: Path, n: int, time: str) -> str:
    """What was counted, for an assertion's message."""
    fired = windows_fired(out)
    ids = [i for w in fired for i in w["ids"]]
    expected = ("every id once" if time == "processing" else
                f"{len(event_windows(n, time == 'event-sliding'))} windows, "
                f"{sum(map(len, event_windows(n, time == 'event-sliding').values()))} ids in them")
    return (f"sent {n}; {len(fired)} windows fired holding {len(ids)} ids ({len(set(ids))} distinct, "
            f"{len([i for i in ids if i >= n])} closing); Storm's windows: {expected}")
