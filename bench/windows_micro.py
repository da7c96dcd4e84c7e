"""Memory and cost of windowed bolts (docs/windows.md).

1. Memory, with ``tracemalloc``, of the pure core (`squall.windowing.manager.WindowManager`)
   holding real `Tuple` s (one int value, a root and an edge id, as a tracked input is), acks
   and ``execute`` doing nothing: the traced memory still allocated at the end, and the peak,
   after N adds, for N = 10,000 / 100,000 / 1,000,000. Bounded means the same figure for every N.
   - a count window (``--count`` tuples, sliding ``--count // 10``);
   - a processing-time duration window (10 s, sliding 1 s) at ``--rate`` tuples per second of
     made-up time (a timer call every second, as the bolt's loop makes).
2. CPU per tuple of the core (add, expiry, the window handed to a no-op ``execute``), best of 5.
3. With ``--event-time``: CPU per tuple of the core in event time, as the bolt drives it (a
   `WatermarkGenerator` deciding late or in time, a watermark every second of made-up time):
   two sources at 1,000 tuples/s each, lag 10 s, the second source's event times 0, 8 s (out
   of order, in time) or 15 s (late) behind the first's; tumbling 5 s, sliding 10 s by 5 s and
   count 1000/100 windows.
4. With ``--cluster``: the complete latency a window adds, on a LocalCluster with acking on:
   spout -> windowed bolt (duration, ``--length-secs`` sliding ``--slide-secs``) for
   ``--secs`` seconds at about 200 tuples/s; the spout's mean complete latency (from
   `LocalCluster.get_topology_info`) against the same topology with a plain acking bolt.

    python -m bench.windows_micro [--count 1000] [--rate 10000] [--event-time] [--cluster]
"""

from __future__ import annotations

import argparse
import functools
import time
import timeit
import tracemalloc

from squall._fields import Fields
from squall._tuple import Source, Tuple
from squall.windowing import Count, Duration
from squall.windowing.manager import window_manager
from squall.windowing.watermark import WatermarkGenerator

SRC = Source("spout", "default", 1, Fields("v"))


class _Nothing:
    """A listener that acks and executes nothing (the core's own cost only)."""

    def on_expiry(self, events):
        pass

    def on_activation(self, events, new, expired, end_ts):
        pass


def feed_count(n: int, length: int) -> object:
    m = window_manager(_Nothing(), Count(length), Count(max(1, length // 10)))
    for i in range(n):
        m.add(Tuple([i], SRC, i + 1, i), i)
    return m


def feed_duration(n: int, rate: int) -> object:
    m = window_manager(_Nothing(), Duration.seconds(10), Duration.seconds(1))
    step = 1000 / rate  # ms between two tuples
    next_timer = 1000
    for i in range(n):
        ts = int(i * step)
        if ts >= next_timer:
            m.on_time(next_timer)
            next_timer += 1000
        m.add(Tuple([i], SRC, i + 1, i), ts)
    return m


def feed_event_time(n: int, skew_ms: int, length: Count | Duration, sliding: Count | Duration,
                    lag_ms: int = 10_000, rate: int = 1000) -> object:
    """``n`` tuples from each of two sources (one input stream), the second ``skew_ms`` behind."""
    m = window_manager(_Nothing(), length, sliding, event_time=True)
    gen = WatermarkGenerator(lag_ms, ["s"])
    step, start = 1000 / rate, 100_000
    next_watermark = start + 1000
    for i in range(n):
        t = start + int(i * step)
        for ts in (t, t - skew_ms):
            if gen.track("s", ts):
                m.add(Tuple([i], SRC, i + 1, i), ts)
        if t >= next_watermark:
            if (wm := gen.next_watermark()) is not None:
                m.add_watermark(wm)
            next_watermark += 1000
    return m


def traced(fn, *args) -> tuple[float, float, int]:
    """(MB still allocated with the manager alive, peak MB, events queued)."""
    tracemalloc.start()
    m = fn(*args)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / 1e6, peak / 1e6, len(m)


def cluster_latency(secs: float, length: float, slide: float) -> dict[str, float]:
    from squall import BaseWindowedBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder

    class Paced(Spout):
        def declare_output_fields(self, d):
            d.declare(Fields("v"))

        def open(self, conf, context, collector):
            super().open(conf, context, collector)
            self.i, self.due = 0, time.monotonic()

        def next_tuple(self):
            if time.monotonic() >= self.due:
                self.due += 0.005
                self.i += 1
                self.collector.emit([self.i], self.i)

    class Window(BaseWindowedBolt):
        def execute(self, window):
            pass

    class Plain(Bolt):
        def execute(self, tup):
            self.collector.ack(tup)

    out = {}
    for name, bolt in (("plain", Plain()), ("window", Window().with_window(Duration.seconds(length),
                                                                             Duration.seconds(slide)))):
        b = TopologyBuilder()
        b.set_spout("s", Paced())
        b.set_bolt("b", bolt).shuffle_grouping("s")
        with LocalCluster() as cluster:
            cluster.submit_topology(name, Config(), b.create_topology())
            time.sleep(secs)
            info = cluster.get_topology_info(name)
            cluster.kill_topology(name, wait_secs=0)
        out[name] = info["components"]["s"]["complete_latency_ms"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--event-time", action="store_true")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--secs", type=float, default=10.0)
    p.add_argument("--length-secs", type=float, default=2.0)
    p.add_argument("--slide-secs", type=float, default=1.0)
    a = p.parse_args()
    print("memory (tracemalloc; MB allocated at the end / peak / events queued)")
    for n in (10_000, 100_000, 1_000_000):
        cur, peak, q = traced(feed_count, n, a.count)
        print(f"  count window {a.count}/{a.count // 10}, {n:>9,} adds: {cur:7.2f} / {peak:7.2f} MB, {q} queued")
    for n in (10_000, 100_000, 1_000_000):
        cur, peak, q = traced(feed_duration, n, a.rate)
        print(f"  duration 10 s/1 s at {a.rate}/s, {n:>9,} adds: {cur:7.2f} / {peak:7.2f} MB, {q} queued")
    n = 100_000
    for label, fn, arg in (("count", feed_count, a.count), ("duration", feed_duration, a.rate)):
        best = min(timeit.repeat(functools.partial(fn, n, arg), number=1, repeat=5))
        print(f"cpu: {label} window, {1e6 * best / n:.2f} us per tuple (best of 5, {n:,} adds)")
    if a.event_time:
        for skew in (0, 8_000, 15_000):
            for label, length, sliding in (("tumbling 5 s", Duration(5000), Duration(5000)),
                                           ("sliding 10 s by 5 s", Duration(10_000), Duration(5000)),
                                           ("count 1000/100", Count(1000), Count(100))):
                best = min(timeit.repeat(functools.partial(feed_event_time, n, skew, length, sliding),
                                         number=1, repeat=5))
                print(f"cpu: event time, {label}, sources {skew / 1000:g} s apart: "
                      f"{1e6 * best / (2 * n):.2f} us per tuple (best of 5, {2 * n:,} tuples)")
    if a.cluster:
        lat = cluster_latency(a.secs, a.length_secs, a.slide_secs)
        print(f"complete latency (ms, mean): plain bolt {lat['plain']}, "
              f"window {a.length_secs:g} s sliding {a.slide_secs:g} s: {lat['window']}")


if __name__ == "__main__":
    main()
