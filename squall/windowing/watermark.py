"""Watermarks for event-time windows, as a plain object: the owner calls
`WatermarkGenerator.next_watermark` every watermark interval.

The watermark is the minimum, over the input streams, of the minimum over each stream's source
TASKS of the newest timestamp that task delivered, minus the lag, as Flink's minimum over its
input channels and Kafka Streams' per-partition time. Storm's ``WaterMarkEventGenerator`` keeps
one newest timestamp per input stream instead: with several spout tasks on a stream, each going
at its own pace (a Kafka backlog read by 2 or 4 tasks), the watermark followed the fastest, and
the others' tuples came late with nothing failing (53 and 159 of 1,200 records, measured).

It waits until every source task of every input stream has delivered, except for a task that
has delivered nothing for the idle timeout (a Kafka spout task with no partition, a grouping
that never routes a task's tuples here, a task whose worker is dead): it no longer holds the
watermark back, and holds it again as soon as it delivers. A task never heard of counts as
silent from the first call. A stream none of whose tasks has delivered is waited for, as in
Storm (a join's side that sends nothing: the stalled-watermark warning names it); a stream all
of whose tasks are idle is where its newest task got, as in Storm. So an idle timeout of 0 is
exactly Storm's rule: per stream, the newest timestamp of any of its tasks.

Behind a bolt that mixes several spout tasks' tuples, a stream's tuples are followed by the bolt
task they came from AND the spout task their roots name, when the topology's roots carry them
(`follow_origins`; `squall.engine.origins`): each such pair is a channel that delivers its spout
task's tuples in that task's order. The bolt's tasks alone would each run as far as the fastest
spout task; the spout tasks alone as far as the fastest bolt task that passes their tuples on (a
bolt task with a queue behind its siblings' had its share of a spout task's tuples made late).
The stream waits for each of its bolt tasks and each of those spout tasks to deliver, as for the
tasks of any stream, and then for the oldest of its pairs.

It only moves forward, and never to 0 or below (`FIRST_WATERMARK`). A tuple before the last
watermark is late, as in Storm, and so is one before 0, at every moment: Storm's watermark starts
at 0 and only a greater one is emitted. Before, the first watermark here was the newest timestamp
less the lag whatever it was, negative while event time was below the lag (-29,800 for a newest
200 ms and a 30 s lag), and a tuple at -800 ms was late before that first tick and in the window
(-5000, 0] after it: the same record late in some runs and counted in others. One at the
watermark is late only if a window ending there
was evaluated (the owner asks its trigger: Storm counts such a tuple in time, though that
window, which held it, had fired: it then expired with the next window without being in any,
issue 33); a watermark between two window ends leaves the window that holds it open.

Time (seconds, the engine's clock: simulated in tests) is passed in, as the executor does for
its other timers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Stream = tuple[str, str]
"""An input stream: (component, stream id)."""
FIRST_WATERMARK = 0
"""Where the watermark is before its first move, and below which it never goes: Storm's
``WaterMarkEventGenerator`` starts ``lastWaterMarkTs`` at 0 and emits only a greater one, and
``track`` takes a timestamp below it as late. So a timestamp before 0 is late at every moment,
not only until the first watermark."""

Source = tuple[str, str, int] | tuple[str, str, int, int]
"""A source task of an input stream: (component, stream id, task id); for a stream followed by
its spout tasks (`WatermarkGenerator.follow_origins`), (component, stream id, the bolt task,
the spout task its tuple's root names)."""


class WatermarkGenerator:
    """Tracks the newest timestamp per source task of each input stream; see the module
    docstring. ``sources``: the task ids of each input stream's component (a stream given with
    none: any task it comes from counts once it delivers); ``idle_timeout_ms``: 0 for Storm's
    per-stream watermark."""

    def __init__(self, lag_ms: int, sources: Mapping[Stream, Iterable[int]], idle_timeout_ms: int) -> None:
        self.lag_ms = lag_ms
        self.idle_secs = idle_timeout_ms / 1000
        self.input_streams = frozenset(sources)
        self.tasks: dict[Stream, frozenset[int]] = {s: frozenset(t) for s, t in sources.items()}
        # a stream followed by its spout tasks: those spout tasks (`follow_origins`)
        self.origins: dict[Stream, frozenset[int]] = {}
        self.latest: dict[Source, int] = {}
        self.seen_at: dict[Source, float] = {}  # engine clock (s) of the task's last tuple
        self.started: float | None = None  # engine clock of the first call: a silent task's wait starts there
        self.last_watermark: int | None = None  # None: no watermark yet

    def track(self, source: Source, ts: int, now: float) -> bool:
        """Note ``ts`` arrived from ``source`` at ``now``; False if the tuple may be late (at or
        before the last watermark, or before `FIRST_WATERMARK`, whether or not a watermark came
        yet: a negative timestamp was in no window, and its tuple expired without a word)."""
        if self.started is None:
            self.started = now
        if ts > self.latest.get(source, ts - 1):
            self.latest[source] = ts
        self.seen_at[source] = now
        last = self.last_watermark
        return ts >= FIRST_WATERMARK and (last is None or ts > last)

    def follow_origins(self, stream: Stream, spout_tasks: Iterable[int]) -> None:
        """From now on ``stream`` (a bolt's) is followed by the spout tasks its tuples' trees
        started at (`squall.engine.origins`) as well as by the bolt's tasks: its tuples are
        tracked as ``(component, stream, bolt task, spout task)``, each of ``spout_tasks`` is
        waited for as the bolt's tasks are, and the stream is at the oldest of its pairs. The
        owner calls it at the stream's first tuple that names its spout task; an untracked
        tuple still counts for its bolt task alone."""
        self.origins[stream] = frozenset(spout_tasks)

    def follows_origins(self, stream: Stream) -> bool:
        """Whether ``stream`` was followed by its spout tasks when the state restored was saved
        (it holds a pair of a bolt task and a spout task of the stream)."""
        return any(len(k) == 4 and k[0] == stream[0] and k[1] == stream[1] for k in self.latest)

    def _stream_time(self, stream: Stream, now: float) -> tuple[int | None, list[Source], list[Source]]:
        """What ``stream`` allows the watermark (before the lag; None: it must wait), with the
        tasks it waits for that have delivered nothing, and those whose newest timestamp it is.

        Until one of its tasks delivers, the stream is waited for, as in Storm (a join's side
        that sends nothing: the stalled-watermark warning names it). Then each task that
        delivered within the idle timeout, or that has not yet been silent that long since the
        first call, holds it: the oldest of their newest timestamps, none if one of them has
        delivered nothing. A stream followed by its spout tasks waits so for each of its bolt
        tasks and each of those spout tasks, and its pairs (bolt task, spout task) are what
        holds it, each while it delivers within the idle timeout. If every task is idle, the
        stream is where its newest task got, as Storm's per-stream watermark (an idle timeout
        of 0 gives exactly that)."""
        assert self.started is not None  # set by the first call
        c, s = stream
        delivered = {k: ts for k, ts in self.latest.items() if k[0] == c and k[1] == s}
        expected = self.tasks.get(stream, frozenset()) | self.origins.get(stream, frozenset())
        if not delivered:
            return None, [(c, s, t) for t in sorted(expected)] or [(c, s, -1)], []
        heard = {t for k in delivered for t in k[2:]}  # a pair's tuple is its bolt task's and its spout task's
        silent: list[Source] = [(c, s, t) for t in sorted(expected - heard)
                                if now - self.started < self.idle_secs]  # not idle yet: waited for
        if silent:
            return None, silent, []
        active: dict[Source, int] = {k: ts for k, ts in delivered.items()
                                     if now - self.seen_at.get(k, self.started) < self.idle_secs}
        if not active:
            newest = max(delivered.values())
            return newest, [], [k for k, ts in delivered.items() if ts == newest]
        oldest = min(active.values())
        return oldest, [], [k for k, ts in active.items() if ts == oldest]

    def _candidate(self, now: float) -> int | None:
        """The watermark the tasks allow now (before the lag), or None if it must wait."""
        lowest = None
        for stream in self.input_streams | {k[:2] for k in self.latest}:  # (a stream not declared: as main did)
            ts, _silent, _slowest = self._stream_time(stream, now)
            if ts is None:
                return None
            lowest = ts if lowest is None else min(lowest, ts)
        return lowest

    def next_watermark(self, now: float) -> int | None:
        """The new watermark at ``now`` (engine clock, s), or None if it did not move: it only
        moves forward, and only above `FIRST_WATERMARK` (while the sources' time less the lag is
        0 or below, there is none yet, as in Storm)."""
        if self.started is None:
            self.started = now
        ts = self._candidate(now)
        if ts is None:
            return None
        ts -= self.lag_ms
        last = self.last_watermark
        if ts <= (FIRST_WATERMARK if last is None else max(last, FIRST_WATERMARK)):
            return None
        self.last_watermark = ts
        return ts

    def newest(self) -> int | None:
        """The newest timestamp seen from any source task (None: nothing yet)."""
        return max(self.latest.values(), default=None)

    def held_back_by(self, now: float) -> tuple[list[Source], list[Source]]:
        """What keeps the watermark where it is: the source tasks it waits for that have
        delivered nothing (a stream none of whose tasks is known: (component, stream, -1)), and
        the tasks whose newest timestamp is the oldest of those it follows."""
        if self.started is None:
            self.started = now
        silent: list[Source] = []
        times: dict[Source, int] = {}
        for stream in sorted(self.input_streams | {k[:2] for k in self.latest}):
            ts, waiting, slowest = self._stream_time(stream, now)
            silent += waiting
            if ts is not None:
                times.update((k, ts) for k in slowest)
        oldest = min(times.values(), default=None)
        return sorted(silent), sorted(k for k, ts in times.items() if ts == oldest) if not silent else []

    def get_state(self) -> tuple[list, int | None]:
        """The newest timestamp per source task and the last watermark, as plain values (a task
        as a [component, stream, task id] list), for a persistent window."""
        return [[list(s), ts] for s, ts in self.latest.items()], self.last_watermark

    def restore_state(self, state: list) -> None:
        """Resume from what `get_state` returned. A state saved before the watermark was kept
        per task (its entries [[component, stream], ts], a stream's newest of any task) gives
        back the last watermark only: taken for each of the stream's tasks, that newest would
        let the watermark pass a slower task's position, the lateness this class prevents; the
        tasks are waited for until they deliver again. A last watermark at or below
        `FIRST_WATERMARK` (saved before the watermark was kept above it) is none: kept, a
        negative timestamp above it would be in time again after the restore."""
        latest, last = state
        self.last_watermark = last if last is not None and last > FIRST_WATERMARK else None
        self.latest = {(k[0], k[1], *map(int, k[2:])): ts for k, ts in latest if len(k) in (3, 4)}
        self.seen_at = {}  # restored: each task holds as if it had delivered at the first call since
