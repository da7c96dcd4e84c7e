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

Behind a bolt that mixes several spout tasks' tuples, a stream's source tasks are the spout
tasks its tuples' roots name, when the topology's roots carry them (`follow_origins`;
`squall.engine.origins`): the bolt's tasks would each run as far as the fastest spout task.

It only moves forward. A tuple before the last watermark is late, as in Storm, and so is one
before 0 (Storm's first watermark). One at the watermark is late only if a window ending there
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
Source = tuple[str, str, int]
"""A source task of an input stream: (component, stream id, task id)."""


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
        self.latest: dict[Source, int] = {}
        self.seen_at: dict[Source, float] = {}  # engine clock (s) of the task's last tuple
        self.started: float | None = None  # engine clock of the first call: a silent task's wait starts there
        self.last_watermark: int | None = None  # None: no watermark yet

    def track(self, source: Source, ts: int, now: float) -> bool:
        """Note ``ts`` arrived from ``source`` at ``now``; False if the tuple may be late (at or
        before the last watermark, or before 0, Storm's first: a negative timestamp was in no
        window, and its tuple expired without a word)."""
        if self.started is None:
            self.started = now
        if ts > self.latest.get(source, ts - 1):
            self.latest[source] = ts
        self.seen_at[source] = now
        return ts >= 0 if self.last_watermark is None else ts > self.last_watermark

    def follow_origins(self, stream: Stream, spout_tasks: Iterable[int]) -> None:
        """From now on ``stream`` (a bolt's) is followed by the spout tasks its tuples' trees
        started at (`squall.engine.origins`), not by the bolt's tasks: each of ``spout_tasks`` is
        waited for as a source task of the stream. The owner calls it at the stream's first
        tuple that names its spout task, before which no watermark could pass the stream's
        tasks (none had delivered); an untracked tuple still counts for its bolt task."""
        self.tasks[stream] = frozenset(spout_tasks)

    def follows_origins(self, stream: Stream, spout_tasks: Iterable[int]) -> bool:
        """Whether any of ``spout_tasks`` is known as a source task of ``stream`` (restored from
        a state saved while it was followed by its spout tasks)."""
        return any((stream[0], stream[1], t) in self.latest for t in spout_tasks)

    def _stream_time(self, stream: Stream, now: float) -> tuple[int | None, list[Source], list[Source]]:
        """What ``stream`` allows the watermark (before the lag; None: it must wait), with the
        tasks it waits for that have delivered nothing, and those whose newest timestamp it is.

        Until one of its tasks delivers, the stream is waited for, as in Storm (a join's side
        that sends nothing: the stalled-watermark warning names it). Then each task that
        delivered within the idle timeout, or that has not yet been silent that long since the
        first call, holds it: the oldest of their newest timestamps, none if one of them has
        delivered nothing. If every task is idle, the stream is where its newest task got, as
        Storm's per-stream watermark (an idle timeout of 0 gives exactly that)."""
        assert self.started is not None  # set by the first call
        c, s = stream
        delivered = {k: ts for k, ts in self.latest.items() if k[0] == c and k[1] == s}
        if not delivered:
            return None, [(c, s, t) for t in sorted(self.tasks.get(stream, ()))] or [(c, s, -1)], []
        silent: list[Source] = []
        active: dict[Source, int] = {}
        for task in sorted(self.tasks.get(stream, frozenset()) | {k[2] for k in delivered}):
            source = (c, s, task)
            if now - self.seen_at.get(source, self.started) >= self.idle_secs:
                continue  # idle: not waited for until it delivers again
            if source in delivered:
                active[source] = delivered[source]
            else:
                silent.append(source)
        if silent:
            return None, silent, []
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
        """The new watermark at ``now`` (engine clock, s), or None if it did not move."""
        if self.started is None:
            self.started = now
        ts = self._candidate(now)
        if ts is None:
            return None
        ts -= self.lag_ms
        if self.last_watermark is not None and ts <= self.last_watermark:
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
        tasks are waited for until they deliver again."""
        latest, self.last_watermark = state
        self.latest = {(k[0], k[1], int(k[2])): ts for k, ts in latest if len(k) == 3}
        self.seen_at = {}  # restored: each task holds as if it had delivered at the first call since
