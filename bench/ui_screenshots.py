"""Screenshots of the web UI for docs/ui.md, taken in headless Chromium from a running topology.

    python -m bench.ui_screenshots [--out docs/images] [--secs 75]

Runs `demo_topology` on a `LocalCluster` with its UI, lets it run ``--secs`` seconds (so the
charts have some minutes... or at least some samples), and saves the cluster, topology and
component pages as ``ui-cluster.png``, ``ui-topology.png`` and ``ui-component.png``. Needs the
``ui`` and ``test`` extras and Debian's chromium (``scripts/install-system-deps.sh``); Playwright
drives that system browser (`launch_chromium`), never one of its own downloads.

`demo_topology` and `launch_chromium` are also what tests/ui/test_browser.py runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from squall import Bolt, Fields, LocalCluster, Spout, TopologyBuilder

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SECRET = "ui-demo-secret-0123456789"
NAME = "word-count"

_SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
              "four score and seven years ago", "snow white and the seven dwarfs",
              "i am at two with nature", "tuples in tuples out every tuple acked"]


class SentenceSpout(Spout):
    """Emits sentences with message ids at a bounded rate (``per_sec`` a second), so the demo
    shows real traffic without taking the machine's cores. It emits nothing (rather than
    sleeping) until the next one is due, so the executor's idle wait applies and acks are
    handled meanwhile."""

    def __init__(self, per_sec: float = 400.0) -> None:
        self.pause = 1.0 / per_sec

    def open(self, conf, context, collector):
        self.collector = collector
        self.n = context.get_this_task_index()
        self.due = time.monotonic()

    def next_tuple(self):
        now = time.monotonic()
        while self.due <= now:
            self.n += 1
            self.collector.emit([_SENTENCES[self.n % len(_SENTENCES)]], msg_id=self.n)
            self.due = max(self.due + self.pause, now - 1.0)  # after a stall, no burst of more than 1 s

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["sentence"]))


class SplitSentence(Bolt):
    """Splits a sentence into words; fails one sentence in ``fail_every`` (and reports every
    hundredth such failure as an error) so the failure chart and the errors table have content."""

    def __init__(self, fail_every: int = 250) -> None:
        self.fail_every = fail_every

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.seen = self.failed = 0

    def execute(self, tup):
        self.seen += 1
        if self.seen % self.fail_every == 0:
            self.failed += 1
            if self.failed % 100 == 1:
                self.collector.report_error(ValueError(f"demo: sentence {self.seen} dropped on purpose"))
            self.collector.fail(tup)
            return
        for word in tup.values[0].split():
            self.collector.emit([word], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word"]))


class WordCount(Bolt):
    """Counts words; acks every tuple."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts: dict[str, int] = {}

    def execute(self, tup):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.collector.emit([word, self.counts[word]], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word", "count"]))


def demo_topology(per_sec: float = 400.0):
    """sentences (2 tasks) --shuffle--> split (2) --fields(word)--> count (3)."""
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(per_sec), 2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount(), 3).fields_grouping("split", Fields(["word"]))
    return b.create_topology()


DEMO_CONF: dict[str, Any] = {"topology.workers": 2, "topology.max.spout.pending": 200}


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium, headless, through Playwright (never a browser Playwright downloads)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/install-system-deps.sh (as root) to install Debian's chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def take(out: Path, secs: float) -> list[Path]:
    """Run the demo for ``secs`` seconds and save the three pages under ``out``."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    conf = {"squall.secret": SECRET, "squall.ui.history.interval.secs": 2}
    with LocalCluster(conf, ui_port=0) as cluster:
        cluster.submit_topology(NAME, DEMO_CONF, demo_topology())
        storm_id = cluster.get_topology_info(NAME)["id"]
        time.sleep(secs)
        base = f"http://127.0.0.1:{cluster.ui_port}"
        saved = []
        with sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 640}, device_scale_factor=1)
                shots = [("ui-cluster.png", "/index.html", "#topologies a"),
                         ("ui-topology.png", f"/topology.html?id={storm_id}&window=600", "svg.topology-graph"),
                         ("ui-component.png", f"/component.html?id=split&topology_id={storm_id}&window=600",
                          "#executors tbody tr")]
                for file, path, ready in shots:
                    page.goto(base + path)
                    page.wait_for_selector(ready)
                    page.wait_for_timeout(500)
                    page.screenshot(path=str(out / file), full_page=True)
                    saved.append(out / file)
            finally:
                browser.close()
        cluster.kill_topology(NAME, wait_secs=0)
    return saved


def main(argv: list[str] | None = None) -> None:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m bench.ui_screenshots", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/images"), help="directory for the PNGs")
    ap.add_argument("--secs", type=float, default=75.0, help="seconds the demo runs before the screenshots")
    args = ap.parse_args(argv)
    for path in take(args.out, args.secs):
        print(path)


if __name__ == "__main__":
    main()
