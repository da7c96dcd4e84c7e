"""Storm's RollingTopWords: the top words of a sliding window, ranked continuously.

    word (WordSpout) --fields("word")--> counter (RollingCountBolt)
        --fields("obj")--> intermediateRanker (IntermediateRankingsBolt)
        --global--> finalRanker (TotalRankingsBolt)

``counter`` counts each word over the last ``window_length_secs`` in slots, one slot per tick:
on each tick it emits ``[obj, count, actualWindowLengthInSeconds]`` for every word it holds and
advances the window. ``intermediateRanker`` keeps the top N of the words its task sees and
emits them on its ticks; ``finalRanker`` (one task, global grouping) merges those rankings into
the overall top N and emits it on its ticks.

The helpers (`SlotBasedCounter`, `SlidingWindowCounter`, `NthLastModifiedTimeTracker`,
`Rankable`, `RankableObjectWithFields`, `Rankings`) are plain Python objects, as in Storm's
``storm-starter``, and live in this file so that it is self-contained.

Run it for ten seconds on a local cluster::

    python examples/rolling_top_words.py

or through the command line (``squall local examples/rolling_top_words.py``), which uses
`build` and `conf`.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
import time
from collections import deque
from collections.abc import Hashable, Iterable
from typing import Any, TextIO

from squall import (BasicBolt, Bolt, Config, Fields, LocalCluster, Spout, StormTopology,
                    TopologyBuilder, is_tick_tuple)

log = logging.getLogger(__name__)

TOP_N = 5
"""How many words the rankers keep, as in Storm's example."""

WORDS = ("storm", "stream", "tuple", "spout", "bolt", "topology", "nimbus", "supervisor",
         "worker", "executor", "task", "acker", "grouping", "field", "tick", "window")
"""The words `WordSpout` picks from; earlier words are picked more often."""


# --- counting ---------------------------------------------------------------------------------

class SlotBasedCounter:
    """Counts of objects in a fixed number of slots (Storm's ``SlotBasedCounter``).

    >>> c = SlotBasedCounter(3)
    >>> c.increment_count("a", 0); c.increment_count("a", 2)
    >>> c.get_count("a", 2), c.get_counts()
    (1, {'a': 2})
    """

    def __init__(self, num_slots: int) -> None:
        if num_slots <= 0:
            raise ValueError(f"Number of slots must be greater than zero (you requested {num_slots})")
        self.num_slots = num_slots
        self._counts: dict[Hashable, list[int]] = {}

    def increment_count(self, obj: Hashable, slot: int) -> None:
        """Add one to ``obj``'s count in ``slot``."""
        slots = self._counts.get(obj)
        if slots is None:
            slots = self._counts[obj] = [0] * self.num_slots
        slots[slot] += 1

    def get_count(self, obj: Hashable, slot: int) -> int:
        """``obj``'s count in ``slot`` (0 if unknown)."""
        slots = self._counts.get(obj)
        return slots[slot] if slots is not None else 0

    def get_counts(self) -> dict[Hashable, int]:
        """Every known object's count summed over all slots (zeros included)."""
        return {obj: sum(slots) for obj, slots in self._counts.items()}

    def wipe_slot(self, slot: int) -> None:
        """Reset every object's count in ``slot`` to 0."""
        for slots in self._counts.values():
            slots[slot] = 0

    def wipe_zeros(self) -> None:
        """Forget the objects whose total count is 0, so the counter does not grow forever."""
        for obj in [o for o, slots in self._counts.items() if not any(slots)]:
            del self._counts[obj]


class SlidingWindowCounter:
    """Counts of objects over a window of ``window_length_in_slots`` slots (Storm's
    ``SlidingWindowCounter``).

    Increments go to the head slot. `get_counts_then_advance_window` returns the counts over the
    whole window, then wipes the oldest slot and makes it the new head, so a count is reported
    by exactly ``window_length_in_slots`` advances before it slides out.

    >>> w = SlidingWindowCounter(2)
    >>> w.increment_count("a")
    >>> [w.get_counts_then_advance_window() for _ in range(3)]
    [{'a': 1}, {'a': 1}, {'a': 0}]
    """

    def __init__(self, window_length_in_slots: int) -> None:
        if window_length_in_slots < 2:
            raise ValueError(f"Window length in slots must be at least two (you requested "
                             f"{window_length_in_slots})")
        self.window_length_in_slots = window_length_in_slots
        self._counter = SlotBasedCounter(window_length_in_slots)
        self._head = 0
        self._tail = self._slot_after(self._head)

    def increment_count(self, obj: Hashable) -> None:
        """Count one ``obj`` in the current (head) slot."""
        self._counter.increment_count(obj, self._head)

    def get_counts_then_advance_window(self) -> dict[Hashable, int]:
        """The counts over the window; then the oldest slot is wiped and becomes the head.

        An object whose count fell to 0 is reported once with 0, so downstream rankings
        learn that it left the window, and then forgotten.
        """
        counts = self._counter.get_counts()
        self._counter.wipe_zeros()
        self._counter.wipe_slot(self._tail)
        self._head = self._tail
        self._tail = self._slot_after(self._tail)
        return counts

    def _slot_after(self, slot: int) -> int:
        return (slot + 1) % self.window_length_in_slots


class NthLastModifiedTimeTracker:
    """Remembers the last N modification times (Storm's ``NthLastModifiedTimeTracker``).

    `RollingCountBolt` marks a modification per tick, so the age of the oldest of the last N
    marks is the time its window really covers; it is shorter than asked for while the
    topology starts, and longer if ticks are late.
    """

    def __init__(self, num_times_to_track: int, clock=time.monotonic) -> None:
        if num_times_to_track < 1:
            raise ValueError(f"num_times_to_track must be greater than zero (you requested "
                             f"{num_times_to_track})")
        self._clock = clock
        now = clock()
        self._times = deque([now] * num_times_to_track, maxlen=num_times_to_track)

    def seconds_since_oldest_modification(self) -> float:
        """Seconds since the oldest of the tracked modifications."""
        return self._clock() - self._times[0]

    def mark_as_modified(self) -> None:
        """Record a modification now; the oldest one is dropped."""
        self._times.append(self._clock())


# --- ranking ----------------------------------------------------------------------------------

class Rankable:
    """Something with an object and a count that `Rankings` can rank (Storm's ``Rankable``).

    Rankables are equal when their objects are equal, whatever their counts: a ranking holds
    each object once, and a new count for it replaces the old one.
    """

    def get_object(self) -> Any:
        """The ranked object."""
        raise NotImplementedError

    def get_count(self) -> int:
        """Its count, by which it is ranked."""
        raise NotImplementedError

    def copy(self) -> Rankable:
        """An independent copy."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rankable) and self.get_object() == other.get_object()

    def __hash__(self) -> int:
        return hash(self.get_object())

    def __lt__(self, other: Rankable) -> bool:
        return self.get_count() < other.get_count()


class RankableObjectWithFields(Rankable):
    """An object, its count and any other fields of the tuple it came from.

    Args:
        obj: the ranked object (hashable).
        count: its count (not negative).
        *other_fields: kept alongside, e.g. the counter's actual window length.
    """

    def __init__(self, obj: Hashable, count: int, *other_fields: Any) -> None:
        if obj is None:
            raise ValueError("The object must not be None")
        if count < 0:
            raise ValueError(f"The count must be >= 0 (got {count})")
        self.obj = obj
        self.count = count
        self.fields = list(other_fields)

    @classmethod
    def from_values(cls, values: Iterable[Any]) -> RankableObjectWithFields:
        """From ``[obj, count, *other_fields]``, the values a `RollingCountBolt` emits."""
        obj, count, *rest = values
        return cls(obj, count, *rest)

    @classmethod
    def from_tuple(cls, tup) -> RankableObjectWithFields:
        """From a tuple whose values are ``[obj, count, *other_fields]``."""
        return cls.from_values(tup.values)

    def get_object(self) -> Hashable:
        """The ranked object."""
        return self.obj

    def get_count(self) -> int:
        """Its count."""
        return self.count

    def get_fields(self) -> list:
        """The other fields, in order."""
        return list(self.fields)

    def copy(self) -> RankableObjectWithFields:
        """An independent copy."""
        return RankableObjectWithFields(self.obj, self.count, *self.fields)

    def __repr__(self) -> str:
        return "[" + "|".join(str(v) for v in (self.obj, self.count, *self.fields)) + "]"


class Rankings:
    """The top ``max_size`` rankables by count, highest first (Storm's ``Rankings``).

    Ties keep the order in which the objects were first ranked.

    >>> r = Rankings(2)
    >>> for word, count in [("a", 1), ("b", 3), ("c", 2), ("a", 5)]:
    ...     r.update_with(RankableObjectWithFields(word, count))
    >>> r
    [[a|5], [b|3]]
    """

    def __init__(self, max_size: int = 10) -> None:
        if max_size < 1:
            raise ValueError(f"topN must be >= 1 (got {max_size})")
        self.max_size = max_size
        self._items: list[Rankable] = []

    def size(self) -> int:
        """Number of rankables held (at most ``max_size``)."""
        return len(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get_rankings(self) -> list[Rankable]:
        """Copies of the rankables, highest count first."""
        return [r.copy() for r in self._items]

    def update_with(self, other: Rankable | Rankings) -> None:
        """Rank a rankable (replacing the same object's), or every rankable of other rankings."""
        if isinstance(other, Rankings):
            for r in other._items:
                self._add_or_replace(r.copy())
        else:
            self._add_or_replace(other)
        self._items.sort(key=lambda r: -r.get_count())
        del self._items[self.max_size:]

    def _add_or_replace(self, r: Rankable) -> None:
        for i, mine in enumerate(self._items):
            if mine == r:
                self._items[i] = r
                return
        self._items.append(r)

    def prune_zero_counts(self) -> None:
        """Drop the rankables whose count is 0 (objects that slid out of the window)."""
        self._items = [r for r in self._items if r.get_count() > 0]

    def copy(self) -> Rankings:
        """An independent copy, safe to emit while this one keeps changing."""
        c = Rankings(self.max_size)
        c._items = self.get_rankings()
        return c

    def as_pairs(self) -> list[tuple[Any, int]]:
        """``[(object, count), ...]``, highest count first."""
        return [(r.get_object(), r.get_count()) for r in self._items]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Rankings) and self.max_size == other.max_size
                and self.as_pairs() == other.as_pairs())

    def __repr__(self) -> str:
        return repr(self._items)


# --- components -------------------------------------------------------------------------------

class WordSpout(Spout):
    """Emits random words from `WORDS`, skewed so that some are clearly on top.

    The ``k``-th word is picked with weight ``1 / (k + 1)`` (Zipf's law, as word frequencies
    roughly follow). ``next_tuple`` emits at most one word per ``interval_secs`` and checks
    the clock rather than sleeping, so it never blocks.

    Args:
        interval_secs: least time between two words of one task.
        seed: seed of the word choice (default: random).
    """

    def __init__(self, interval_secs: float = 0.001, seed: int | None = None) -> None:
        self.interval_secs = interval_secs
        self.seed = seed

    def declare_output_fields(self, declarer) -> None:
        """One field, ``word``."""
        declarer.declare(Fields("word"))

    def open(self, conf, context, collector) -> None:
        """Seed this task's choice; the first word goes out at once."""
        super().open(conf, context, collector)
        # Tasks of one seeded spout would otherwise emit the same sequence.
        self._rand = random.Random(None if self.seed is None else f"{self.seed}/{context.get_this_task_id()}")
        self._weights = [1.0 / (k + 1) for k in range(len(WORDS))]
        self._ids = itertools.count()
        self._next_emit = time.monotonic()

    def next_tuple(self) -> None:
        """Emit one word if ``interval_secs`` passed since the last one; else return at once."""
        now = time.monotonic()
        if now < self._next_emit:
            return
        self._next_emit = now + self.interval_secs
        word = self._rand.choices(WORDS, self._weights)[0]
        self.collector.emit([word], next(self._ids))


class RollingCountBolt(Bolt):
    """Counts objects over a sliding window; on each tick emits every count and slides.

    The window of ``window_length_secs`` is cut into ``window_length_secs / emit_frequency_secs``
    slots (at least two). Each tick emits ``[obj, count, actualWindowLengthInSeconds]`` for
    every object in the window (unanchored: a windowed count is no one input's product), with
    an object that just left the window once at 0. Inputs are acked once counted.

    Args:
        window_length_secs: the window's length.
        emit_frequency_secs: seconds between ticks, hence between emissions.
    """

    def __init__(self, window_length_secs: float = 9, emit_frequency_secs: float = 3) -> None:
        slots = window_length_secs / emit_frequency_secs
        if abs(slots - round(slots)) > 1e-9 or round(slots) < 2:
            raise ValueError(f"window_length_secs ({window_length_secs}) must be a multiple of at least 2 "
                             f"of emit_frequency_secs ({emit_frequency_secs})")
        self.window_length_secs = window_length_secs
        self.emit_frequency_secs = emit_frequency_secs
        self.num_slots = round(slots)

    def get_component_configuration(self) -> dict[str, Any]:
        """Ask for a tick every ``emit_frequency_secs``."""
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.emit_frequency_secs}

    def declare_output_fields(self, declarer) -> None:
        """Fields ``obj``, ``count``, ``actualWindowLengthInSeconds``."""
        declarer.declare(Fields("obj", "count", "actualWindowLengthInSeconds"))

    def prepare(self, conf, context, collector) -> None:
        """Start with an empty window."""
        super().prepare(conf, context, collector)
        self.counter = SlidingWindowCounter(self.num_slots)
        self.last_modified = NthLastModifiedTimeTracker(self.num_slots)
        self._warned = False

    def execute(self, tup) -> None:
        """Count the input's object, or on a tick emit the window's counts and slide it."""
        if is_tick_tuple(tup):
            self._emit_current_window_counts()
        else:
            self.counter.increment_count(tup.get_value(0))
        self.collector.ack(tup)

    def _emit_current_window_counts(self) -> None:
        counts = self.counter.get_counts_then_advance_window()
        actual = round(self.last_modified.seconds_since_oldest_modification(), 3)
        self.last_modified.mark_as_modified()
        # The window fills up during the first num_slots ticks: say so once, not on every tick.
        if not self._warned and abs(actual - self.window_length_secs) > self.emit_frequency_secs / 2:
            log.info("Actual window length is %.3f seconds when it should be %s seconds (expected "
                     "while the topology starts)", actual, self.window_length_secs)
            self._warned = True
        for obj, count in counts.items():
            self.collector.emit([obj, count, actual])


class AbstractRankerBolt(BasicBolt):
    """Keeps `Rankings` of its inputs and emits a copy of them on each tick.

    Subclasses say how an input updates the rankings (`update_rankings_with_tuple`).

    Args:
        top_n: how many objects to rank.
        emit_frequency_secs: seconds between ticks, hence between emissions.
    """

    def __init__(self, top_n: int = 10, emit_frequency_secs: float = 2) -> None:
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1 (you requested {top_n})")
        if emit_frequency_secs <= 0:
            raise ValueError(f"The emit frequency must be > 0 seconds (you requested {emit_frequency_secs})")
        self.top_n = top_n
        self.emit_frequency_secs = emit_frequency_secs

    def get_component_configuration(self) -> dict[str, Any]:
        """Ask for a tick every ``emit_frequency_secs``."""
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.emit_frequency_secs}

    def declare_output_fields(self, declarer) -> None:
        """One field, ``rankings`` (a `Rankings`)."""
        declarer.declare(Fields("rankings"))

    def prepare(self, conf, context) -> None:
        """Start with empty rankings."""
        super().prepare(conf, context)
        self.rankings = Rankings(self.top_n)

    def execute(self, tup, collector) -> None:
        """Update the rankings with the input, or on a tick emit a copy of them."""
        if is_tick_tuple(tup):
            collector.emit([self.rankings.copy()])
            log.debug("Rankings: %s", self.rankings)
        else:
            self.update_rankings_with_tuple(tup)

    def update_rankings_with_tuple(self, tup) -> None:
        """Fold one input into ``self.rankings``."""
        raise NotImplementedError


class IntermediateRankingsBolt(AbstractRankerBolt):
    """Ranks the ``[obj, count, ...]`` tuples of the objects its task sees (fields grouping on
    ``obj`` gives each task a share of the objects)."""

    def update_rankings_with_tuple(self, tup) -> None:
        """Rank the input's object with its latest count."""
        self.rankings.update_with(RankableObjectWithFields.from_tuple(tup))


class TotalRankingsBolt(AbstractRankerBolt):
    """Merges the intermediate rankers' `Rankings` into the overall top N.

    Objects whose count fell to 0 are pruned, so a word that left the window leaves the
    ranking too.
    """

    def update_rankings_with_tuple(self, tup) -> None:
        """Merge the input's rankings."""
        self.rankings.update_with(tup.get_value(0))
        self.rankings.prune_zero_counts()


# --- the topology -----------------------------------------------------------------------------

def make_builder(spout: Spout | None = None, *, top_n: int = TOP_N, window_length_secs: float = 9,
                 emit_frequency_secs: float = 3, ranker_emit_frequency_secs: float = 2) -> TopologyBuilder:
    """The rolling top words topology's builder, so a test can add components before creating it.

    Args:
        spout: the ``word`` spout (default: a `WordSpout`); it must declare a ``word`` field.
        top_n: how many words the rankers keep.
        window_length_secs: the counter's window.
        emit_frequency_secs: the counter's tick frequency (a divisor of the window).
        ranker_emit_frequency_secs: the rankers' tick frequency.
    """
    builder = TopologyBuilder()
    builder.set_spout("word", spout if spout is not None else WordSpout(), 5)
    builder.set_bolt("counter", RollingCountBolt(window_length_secs, emit_frequency_secs), 4) \
        .fields_grouping("word", Fields("word"))
    builder.set_bolt("intermediateRanker", IntermediateRankingsBolt(top_n, ranker_emit_frequency_secs), 4) \
        .fields_grouping("counter", Fields("obj"))
    builder.set_bolt("finalRanker", TotalRankingsBolt(top_n, ranker_emit_frequency_secs)) \
        .global_grouping("intermediateRanker")
    return builder


def build(spout: Spout | None = None, **kwargs: Any) -> StormTopology:
    """The rolling top words topology (see `make_builder` for the arguments)."""
    return make_builder(spout, **kwargs).create_topology()


conf = Config()
"""The topology's configuration: 2 workers, and a bound on words in flight per spout task."""
conf.set_num_workers(2)
conf.set_max_spout_pending(1000)


def print_counts(info: dict[str, Any], out: TextIO | None = None) -> None:
    """Print the per-component counts of a `LocalCluster.get_topology_info` dict to ``out``
    (default: the current ``sys.stdout``)."""
    out = out if out is not None else sys.stdout
    cols = ("type", "executors", "tasks", "emitted", "transferred", "acked", "failed", "executed")
    print(f"topology {info['name']} ({info['status']}, up {info['uptime_secs']:.1f}s)", file=out)
    print(f"{'component':<20}" + "".join(f"{c:>12}" for c in cols), file=out)
    for cid, comp in sorted(info["components"].items()):
        print(f"{cid:<20}" + "".join(f"{comp[c]!s:>12}" for c in cols), file=out)
    for err in info.get("errors", []):
        print(f"error in {err['component']}: {err['error']}", file=out)


def main(run_secs: float = 10.0) -> None:
    """Run the topology on a `LocalCluster` for ``run_secs`` seconds and print its counts."""
    with LocalCluster() as cluster:
        cluster.submit_topology("rolling-top-words", conf, build())
        time.sleep(run_secs)
        print_counts(cluster.get_topology_info("rolling-top-words"))
        cluster.kill_topology("rolling-top-words", wait_secs=0)


if __name__ == "__main__":
    main()
