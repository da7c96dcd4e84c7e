"""How many tuples cross to a stalled bolt in another worker before backpressure stops its spout,
on the process host (2 workers, acking off, ``topology.executor.receive.buffer.size`` 200).

    python -m bench.backpressure_crossing [--runs 3]

A spout floods a bolt in the other worker that holds its first tuple until the run ends, so the
bolt's inbox only fills: once its worker is over the bound it tells the spout's worker, which
stops the spout. Every tuple the spout emitted is then in that inbox (one in the bolt's hands).
What is over the bound crossed while the "over" was on its way: it depends on the spout's rate
and on how soon the bolt's worker reads a batch its blocked loop cannot (the watchman, 5 ms) and
the spout's worker reads the "over", so it is a figure of the machine, measured here, not a
pass or fail (tests/process/test_recovery.py checks, whatever it is, that the spout stops for
good with every tuple it emitted in the inbox). Prints one line per run and the medians; nothing
is saved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from squall import BasicBolt, Config, Fields, Spout, TopologyBuilder

from .hosts import make_host

BOUND = 200
GATE = "open"  # the file under the run's directory that lets the bolt go (the run's end)
MARKS = "marks.txt"  # the spout's "<emitted> <monotonic time>" every `MARK_EVERY` tuples
MARK_EVERY = 128
STEADY_SECS = 2.5  # two heartbeats of each worker (worker.heartbeat.frequency.secs: 1)


class MarkedFlood(Spout):
    """Emits unanchored tuples as fast as it may; notes the time of every `MARK_EVERY`-th one."""

    def __init__(self, out: str) -> None:
        self.out = out

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = 0
        self.marks = open(Path(self.out) / MARKS, "a")  # noqa: SIM115 - for the spout's life

    def next_tuple(self):
        if self.sent % MARK_EVERY == 0:
            self.marks.write(f"{self.sent} {time.monotonic()}\n")
            self.marks.flush()
        self.collector.emit([self.sent])
        self.sent += 1


class Stalled(BasicBolt):
    """Holds its first tuple until the run's gate file exists."""

    def __init__(self, out: str) -> None:
        self.gate = Path(out) / GATE

    def execute(self, tup, collector):
        while not self.gate.exists():
            time.sleep(0.01)


class Crossing:
    """One run's figures: the tuples emitted before the spout stopped, and its rate before."""

    def __init__(self, emitted: int, marks: list[tuple[int, float]]) -> None:
        self.emitted = emitted
        self.crossed = emitted - BOUND
        # from the second mark: the first batch waits for the connection to the bolt's worker
        (n0, t0), (n1, t1) = marks[min(1, len(marks) - 1)], marks[-1]
        self.rate = (n1 - n0) / (t1 - t0) if t1 > t0 else float("nan")

    @property
    def crossing_ms(self) -> float:
        """The time the spout emitted what crossed, at its rate: the "over"'s way, in effect."""
        return 1000.0 * self.crossed / self.rate


def one_run(timeout: float = 120.0) -> Crossing:
    """Submits, waits until the spout stopped with everything in the bolt's inbox, measures."""
    out = Path(tempfile.mkdtemp(prefix="squall-bench-bpcross-"))
    try:
        return _measure(out, timeout)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _measure(out: Path, timeout: float) -> Crossing:
    b = TopologyBuilder()
    b.set_spout("flood", MarkedFlood(str(out)), 1)
    b.set_bolt("stalled", Stalled(str(out)), 1).shuffle_grouping("flood")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(0)
    conf["topology.executor.receive.buffer.size"] = BOUND
    with make_host("process", 2, None) as host:
        host.submit("bpcross", conf, b.create_topology())
        deadline = time.monotonic() + timeout
        seen, since = None, 0.0
        while True:
            c = host.info("bpcross")["components"]
            now = (c["flood"]["emitted"], c["stalled"]["backlog"])
            if now[1] >= BOUND and now[0] == now[1] + 1:  # all arrived, and for two heartbeats more:
                if now != seen:  # the spout stopped (not starved for a moment)
                    seen, since = now, time.monotonic()
                elif time.monotonic() - since >= STEADY_SECS:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the spout did not stop: emitted {now[0]}, backlog {now[1]}")
            time.sleep(0.1)
        emitted = seen[0]
        (out / GATE).write_text("")
        host.kill("bpcross", wait_secs=0)
        host.wait_no_workers()
    marks = [(int(n), float(t)) for n, t in (line.split() for line in (out / MARKS).read_text().splitlines())]
    return Crossing(emitted, marks)


def main(argv: list[str] | None = None) -> int:
    """Runs and prints them with the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.backpressure_crossing",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs")
    args = parser.parse_args(argv)
    runs = []
    for i in range(args.runs):
        r = one_run()
        runs.append(r)
        print(f"run {i + 1}: {r.crossed:7,d} tuples crossed over the bound of {BOUND} (spout at {r.rate:9,.0f}/s: "
              f"{r.crossing_ms:6.1f} ms)", flush=True)
    print(f"medians: {statistics.median(r.crossed for r in runs):,.0f} tuples, "
          f"{statistics.median(r.crossing_ms for r in runs):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
