"""Storm's sampled statistics of one task (``clj/stats.clj``, ``*StatAndMetric``).

Storm does not time every tuple: with ``topology.stats.sample.rate`` r, one event in every block
of ``freq = int(1 / r)`` events is sampled (a random position per block: the even sampler), and
a sampled event adds ``freq`` to its counter and its measured latency to its average. So counts
are estimates, exact only at rate 1.0, and the cost per event is a countdown.

What is sampled, per task: at a spout, the trees acked and failed and their complete latency,
per stream of the root; at a bolt, the inputs executed (with their execute latency), acked (with
their process latency: from the start of ``execute`` to the ack) and failed, per input
``(source component, stream)``. Emitted and transferred are counted exactly by the routers,
which count every emit anyway; sampling them would only add noise.

The counters are cumulative since the task started; `squall.worker.stats_history` turns them
into Storm's time windows.
"""

from __future__ import annotations

import random
from typing import Any

# metric names of a task's counters (keys of `TaskStatistics.snapshot`)
EMITTED = "emitted"
TRANSFERRED = "transferred"
ACKED = "acked"
FAILED = "failed"
EXECUTED = "executed"
COMPLETE_LATENCY = "complete_latency"   # spouts, ms
PROCESS_LATENCY = "process_latency"     # bolts, ms
EXECUTE_LATENCY = "execute_latency"     # bolts, ms
LATENCIES = (COMPLETE_LATENCY, PROCESS_LATENCY, EXECUTE_LATENCY)
# a counter's key: (metric, source component or "" for a task's own streams, stream)
StatKey = tuple[str, str, str]

# a bolt that never acks what it sampled (it fails them, or they time out) must not grow
# its table of sampled inputs without bound: past this, the oldest sample is forgotten
MAX_OPEN_SAMPLES = 1024
# the countdown of a task whose statistics are off (``topology.stats.enabled: false``)
NEVER = 1 << 62


def sample_freq(conf: dict[str, Any]) -> int:
    """Storm's ``freq``: ``int(1 / topology.stats.sample.rate)`` (0.05 -> 20, 0.3 -> 3)."""
    rate = float(conf.get("topology.stats.sample.rate") or 0.05)
    return max(1, int(1 / rate))


class EvenSampler:
    """One sampled event at a random position in every block of ``freq`` events."""

    __slots__ = ("freq", "_rand", "_rest")

    def __init__(self, freq: int, rng: random.Random) -> None:
        self.freq = freq
        self._rand = rng.randrange
        self._rest = 0  # events left in the current block after its sampled one

    def gap(self) -> int:
        """Events until the next sampled one, counting it (>= 1)."""
        pos = self._rand(self.freq)
        gap = self._rest + pos + 1
        self._rest = self.freq - pos - 1
        return gap


class TaskStatistics:
    """The sampled counters and latencies of one task (see the module docstring).

    The executor counts down ``left`` per event and calls a ``sampled_*`` method when it reaches
    zero; that method records the event and resets ``left``.
    """

    __slots__ = ("freq", "sampler", "left", "counts", "latency", "open_samples")

    def __init__(self, freq: int, rng: random.Random) -> None:
        """``freq`` 0: statistics off, nothing is ever sampled."""
        self.freq = freq
        self.sampler = EvenSampler(freq, rng) if freq else None
        self.left = self.sampler.gap() if self.sampler else NEVER
        self.counts: dict[StatKey, int] = {}
        self.latency: dict[StatKey, list[float]] = {}  # key -> [sum ms, samples]
        # bolts: id(input) -> (start, source component, stream) of sampled inputs not yet acked
        self.open_samples: dict[int, tuple[float, str, str]] = {}

    def next_gap(self) -> int:
        """Reset the countdown after a sampled event."""
        self.left = gap = self.sampler.gap() if self.sampler else NEVER
        return gap

    def add(self, metric: str, component: str, stream: str) -> None:
        """A sampled event: ``freq`` more of ``metric``."""
        key = (metric, component, stream)
        self.counts[key] = self.counts.get(key, 0) + self.freq

    def add_latency(self, metric: str, component: str, stream: str, latency_secs: float) -> None:
        """A sampled event's latency (its weight in averages is the matching count)."""
        lk = (metric, component, stream)
        acc = self.latency.get(lk)
        if acc is None:
            self.latency[lk] = [1000.0 * latency_secs, 1]
        else:
            acc[0] += 1000.0 * latency_secs
            acc[1] += 1

    def open_sample(self, tup_id: int, start: float, component: str, stream: str) -> None:
        """A sampled bolt input whose ack (or fail) is still to come."""
        samples = self.open_samples
        if len(samples) >= MAX_OPEN_SAMPLES:
            try:
                del samples[next(iter(samples))]
            except (RuntimeError, StopIteration, KeyError):
                pass  # another thread's ack changed the table meanwhile: it has room now
        samples[tup_id] = (start, component, stream)

    def close_sample(self, tup_id: int, metric: str, now: float) -> None:
        """The ack or fail of a bolt input: counted if it was sampled (Storm's rule)."""
        sample = self.open_samples.pop(tup_id, None)
        if sample is None:
            return
        start, component, stream = sample
        self.add(metric, component, stream)
        if metric == ACKED:
            self.add_latency(PROCESS_LATENCY, component, stream, now - start)

    def snapshot(self, emitted: dict[str, int], transferred: dict[str, int]) -> dict[StatKey, float]:
        """Cumulative values: counts, and each latency as its two sums (``<metric>`` holds the
        ms sum and ``<metric>#n`` the samples) so windows can take differences of both."""
        out: dict[StatKey, float] = {(EMITTED, "", s): n for s, n in emitted.items()}
        out.update({(TRANSFERRED, "", s): n for s, n in transferred.items()})
        out.update(self.counts)
        for (metric, comp, stream), (total, n) in self.latency.items():
            out[(metric, comp, stream)] = total
            out[(metric + "#n", comp, stream)] = n
        return out

