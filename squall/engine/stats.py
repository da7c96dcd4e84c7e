"""Storm's sampled statistics of one task (``clj/stats.clj``, ``*StatAndMetric``).

Storm does not time every tuple: with ``topology.stats.sample.rate`` r, one event in every block
of ``freq = int(1 / r)`` events is sampled (a random position per block: the even sampler), and
a sampled event adds ``freq`` to its counter and its measured latency to its average. So those
counts are estimates, exact only at rate 1.0 (but see below for the ones squall keeps exact). The executors count down by runs (``left - 1`` plain
events in a plain loop, then the sampled one), so an event that is not sampled costs nothing.

What is sampled, per task: at a spout, the complete latency of the trees acked, per stream of
the root; at a bolt, the inputs executed (with their execute latency) and acked (with their
process latency: from the start of ``execute`` to the ack), per input ``(source component,
stream)``. Counted exactly, every one (beyond Storm, which samples them too): a spout's trees
acked and failed, per stream of the root, and a bolt's inputs failed, per input, so that a
failure never reads 0 and a spout's counts add up; one increment per spout tuple or per failure
(measured on W2: see docs/concepts.md). Emitted and transferred are counted exactly by the
routers, which count every emit anyway; sampling them would only add noise.

The counters are cumulative since the task started; `squall.worker.stats_history` turns them
into Storm's time windows.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from .._config import Config, conf_value
from .._failure import DEAD_LETTERED
from .._native import KeyStatsBase

# metric names of a task's counters (keys of `TaskStatistics.snapshot`)
EMITTED = "emitted"
TRANSFERRED = "transferred"
ACKED = "acked"
FAILED = "failed"
EXECUTED = "executed"
COMPLETE_LATENCY = "complete_latency"   # spouts, ms
PROCESS_LATENCY = "process_latency"     # bolts, ms
EXECUTE_LATENCY = "execute_latency"     # bolts, ms
LATENCIES: tuple[str, ...] = (COMPLETE_LATENCY, PROCESS_LATENCY, EXECUTE_LATENCY)
# spouts: the task's max spout pending now (fixed, automatic or tuned), not a count: a window
# shows its value now, and a component's is the sum of its tasks'
MAX_SPOUT_PENDING = "max_spout_pending"
# Trident's master batch coordinator, as a component reports them (`component_statistics`):
# the oldest uncommitted txid and the batches in flight now (gauges) with their limit, and
# the batches committed with their completion latency, from a txid's first $batch to its
# commit (a count, and a latency weighted by it)
TRIDENT_CURRENT_TXID = "trident_current_txid"
TRIDENT_BATCHES_IN_FLIGHT = "trident_batches_in_flight"
TRIDENT_MAX_BATCHES_IN_FLIGHT = "trident_max_batches_in_flight"
TRIDENT_BATCHES_COMMITTED = "trident_batches_committed"
TRIDENT_BATCH_LATENCY = "trident_batch_latency"     # ms
LATENCIES += (TRIDENT_BATCH_LATENCY,)
GAUGES = (MAX_SPOUT_PENDING, TRIDENT_CURRENT_TXID, TRIDENT_BATCHES_IN_FLIGHT, TRIDENT_MAX_BATCHES_IN_FLIGHT)
# figures of a task as a whole, of none of its streams; a spout's dead letters among them
# (`squall._failure.DeadLetterCounts`): keyed (DEAD_LETTERED, the component that failed the record
# last or "", the reason), counted per dead letter by the spout, never per tuple
TASK_FIGURES = (*GAUGES, TRIDENT_BATCHES_COMMITTED, TRIDENT_BATCH_LATENCY, DEAD_LETTERED)
# a counter's key: (metric, source component or "" for a task's own streams, stream)
StatKey = tuple[str, str, str]


def component_figures(component: Any) -> dict[StatKey, float]:
    """The figures a spout reports of itself beside its statistics (Trident's master batch
    coordinator: its txid, batches in flight, batches committed and their latency; a connector
    spout its dead letters), or a bolt (a Trident spout's emitter bolt: its dead letters), from its
    ``component_statistics()``: cumulative counts and latency sums (``<metric>#n`` their
    samples) and gauges, keyed ``(metric, "", "")`` with metrics of `TASK_FIGURES`. It is read
    on the worker's heartbeat thread, so it must return a value it does not change afterwards.
    Other components report nothing."""
    report = getattr(component, "component_statistics", None)
    return report() if report is not None else {}

# a bolt that never acks what it sampled (they time out in it) must not grow its table of
# sampled inputs without bound: its executor forgets a sample twice the message timeout after it
# opened (`BoltExecutor._sample_horizon`), and, with acking on and message timeouts off, past
# this the oldest sample is forgotten; a forgotten sample's ack is not counted. A bolt may hold
# many inputs on purpose (a batching writer, a count window): at rate 1.0 (exact counts) it may
# hold this many unacked at once before its acked count reads low
MAX_OPEN_SAMPLES = 16_384
# the countdown of a task whose statistics are off (``topology.stats.enabled: false``)
NEVER = 1 << 62


def sample_freq(conf: dict[str, Any]) -> int:
    """Storm's ``freq``: ``int(1 / topology.stats.sample.rate)`` (0.05 -> 20, 0.3 -> 3)."""
    rate = float(conf_value(conf, Config.TOPOLOGY_STATS_SAMPLE_RATE))
    return max(1, int(1 / rate))


class EvenSampler:
    """One sampled event at a random position in every block of ``freq`` events."""

    __slots__ = ("_random", "_rest", "freq")

    def __init__(self, freq: int, rng: random.Random) -> None:
        self.freq = freq
        self._random = rng.random
        self._rest = 0  # events left in the current block after its sampled one

    def gap(self) -> int:
        """Events until the next sampled one, counting it (>= 1)."""
        pos = int(self._random() * self.freq)
        gap = self._rest + pos + 1
        self._rest = self.freq - pos - 1
        return gap


# gaps drawn ahead, per task: the sampled path then takes the next one from a cycle (a few
# tens of ns) instead of drawing it (a random number and three method calls: measured 2% of W2)
GAP_TABLE = 4096


def _gaps(freq: int, rng: random.Random) -> Any:
    """An endless iterator of even-sampler gaps (NEVER when ``freq`` is 0: statistics off).

    The table holds whole blocks, so cycling it keeps exactly one sample per block."""
    if not freq:
        return itertools.repeat(NEVER)
    sampler = EvenSampler(freq, rng)
    table = [sampler.gap() for _ in range(GAP_TABLE)]
    first = table[0]
    # the first block of the table began with no rest before it; every later lap begins after
    # the table's last block, whose rest the lap's first gap must include
    table[0] = first + (freq - (sum(table) % freq)) % freq
    return itertools.chain((first,), itertools.islice(itertools.cycle(table), 1, None))


class KeyStats(KeyStatsBase):
    """The sampled figures of one key of a task: a spout's root stream, or a bolt's input
    ``(source component, stream)``. ``latency_ms``/``latency_n`` are the complete latency at a
    spout and the process latency at a bolt. Compiled, they are C numbers (`KeyStatsBase`) that
    the sampled path (`squall._native.drain_inbox`) adds to in place."""

    __slots__ = ()


class TaskStatistics:
    """The sampled counters and latencies of one task (see the module docstring).

    The executor counts down ``left`` events (by batch where it can: a run of ``left - 1``
    events needs no check each) and records the sampled one in its `KeyStats`.
    """

    __slots__ = ("by_handle", "freq", "gaps", "keys", "left", "open_samples", "spout")
    max_open = MAX_OPEN_SAMPLES

    def __init__(self, freq: int, rng: random.Random, spout: bool = False) -> None:
        """``freq`` 0: statistics off, nothing is ever sampled."""
        self.freq = freq
        self.spout = spout
        self.gaps = _gaps(freq, rng).__next__
        self.left = self.gaps()
        self.keys: dict[tuple[str, str], KeyStats] = {}
        # the same KeyStats by a cheaper handle: a tuple's shared Source, a spout's stream name
        self.by_handle: dict[Any, KeyStats] = {}
        # bolts: id(input) -> (input, start, its KeyStats) of sampled inputs not yet acked or
        # failed; the entry holds the input so that its id cannot be another tuple's meanwhile
        self.open_samples: dict[int, tuple[Any, float, KeyStats]] = {}

    def next_gap(self) -> int:
        """Reset the countdown after a sampled event."""
        self.left = gap = self.gaps()
        return gap

    def key(self, component: str, stream: str, handle: Any = None) -> KeyStats:
        """The figures of ``(component, stream)`` ("" for a spout's own streams), found by
        ``handle`` when given (any hashable that stands for that pair)."""
        if handle is not None:
            ks = self.by_handle.get(handle)
            if ks is not None:
                return ks
        ks = self.keys.get((component, stream))
        if ks is None:
            ks = self.keys[(component, stream)] = KeyStats()
        if handle is not None:
            self.by_handle[handle] = ks
        return ks

    def key_of(self, tup: Any) -> KeyStats:
        """The figures of a bolt input ``tup``'s source component and stream."""
        src = tup._src
        return self.key(src.component, src.stream, src)

    def open_sample(self, tup: Any, start: float, ks: KeyStats) -> None:
        """A sampled bolt input whose ack (or fail) is still to come."""
        samples = self.open_samples
        if len(samples) >= self.max_open:
            try:
                del samples[next(iter(samples))]
            except (RuntimeError, StopIteration, KeyError):
                pass  # another thread's ack changed the table meanwhile: it has room now
        samples[id(tup)] = (tup, start, ks)

    def expire_samples(self, before: float) -> int:
        """Forget the open samples opened before ``before`` (the clock's time), and the inputs
        they hold; return how many. The table is in the order the samples opened (one thread
        opens them, on a monotonic clock), so the walk stops at the first one still young: O(1)
        when none is old, plus a copy of the table when one is (an ack on another thread may
        close a sample meanwhile)."""
        samples = self.open_samples
        if not samples:
            return 0
        try:
            first = next(iter(samples.values()))
        except (RuntimeError, StopIteration):  # closed meanwhile by another thread's ack
            return 0
        if first[1] >= before:
            return 0
        old = []
        for key, (_tup, start, _ks) in list(samples.items()):
            if start >= before:
                break
            old.append(key)
        for key in old:
            samples.pop(key, None)
        return len(old)

    def close_sample(self, tup_id: int, acked: bool, now: float) -> None:
        """The ack or fail of a bolt input: an ack is counted if it was sampled (Storm's rule),
        with its process latency; a failure only closes the sample (the collector counts every
        failure itself: they are exact)."""
        sample = self.open_samples.pop(tup_id, None)
        if sample is None:
            return
        _tup, start, ks = sample
        if acked:
            ks.acked += self.freq
            ks.latency_ms += 1000.0 * (now - start)
            ks.latency_n += 1

    def snapshot(self, emitted: dict[str, int], transferred: dict[str, int]) -> dict[StatKey, float]:
        """Cumulative values: counts, and each latency as its two sums (``<metric>`` holds the
        ms sum and ``<metric>#n`` the samples) so windows can take differences of both."""
        out: dict[StatKey, float] = {(EMITTED, "", s): n for s, n in emitted.items()}
        out.update({(TRANSFERRED, "", s): n for s, n in transferred.items()})
        latency = COMPLETE_LATENCY if self.spout else PROCESS_LATENCY
        for (comp, stream), ks in list(self.keys.items()):
            for metric, value in ((ACKED, ks.acked), (FAILED, ks.failed), (EXECUTED, ks.executed)):
                if value:
                    out[(metric, comp, stream)] = value
            if ks.latency_n:
                out[(latency, comp, stream)] = ks.latency_ms
                out[(latency + "#n", comp, stream)] = ks.latency_n
            if ks.execute_n:
                out[(EXECUTE_LATENCY, comp, stream)] = ks.execute_ms
                out[(EXECUTE_LATENCY + "#n", comp, stream)] = ks.execute_n
        return out
