"""W1 written as a streamparse topology, on squall: in squall's workers (`squall.sparse`), and
over Storm's multilang protocol (``streamparse_run`` subprocesses, `squall.multilang`), beside
W1 in squall's own API (`bench.w1_wordcount`), interleaved on the same corpus and LocalCluster.

    python -m bench.w1_sparse [--n 100000] [--acking on|off] [--repeat 3]
        [--modes native,sparse,multilang] [--no-save]

The streamparse W1 is the same shape as `bench.w1_wordcount`'s: a spout emits each sentence of
the corpus (with its index as the tuple id when acking is on), ``split`` (shuffle) emits its
words, ``count`` (fields on word) keeps a running count and emits ``[word, count]``; one task
each. The count task writes its counts to ``bench.output.dir`` once it has counted every word
(pystorm's components have no cleanup), and a run is correct when they equal the reference and
no tuple failed. Each record (workload ``W1-sparse``, ``mode``: ``native``, ``sparse`` or
``multilang``) goes to bench/results/sparse.jsonl; the table at the end is the medians, each
mode's rate beside native's in the same repetition (``ratio_to_native``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from streamparse import Bolt, Grouping, Spout, Topology

from squall import LocalCluster

from . import harness
from .corpus import WORDS_PER_SENTENCE, ensure_corpus, iter_sentences, reference_counts

OUTPUT_DIR_KEY = "bench.output.dir"
WORDS_KEY = "bench.w1.words"
CORPUS_KEY = "bench.w1.corpus"
RELIABLE_KEY = "bench.w1.reliable"
RESULTS = harness.RESULTS_DIR / "sparse.jsonl"


class SentenceSpout(Spout):
    """Every sentence of the corpus once (streamparse's Spout)."""

    outputs = ["sentence"]

    def initialize(self, conf, context):
        self.sentences = iter_sentences(conf[CORPUS_KEY])
        self.reliable = conf[RELIABLE_KEY]
        self.next_id = 0

    def next_tuple(self):
        sentence = next(self.sentences, None)
        if sentence is None:
            return
        if self.reliable:
            self.emit([sentence], tup_id=self.next_id)
            self.next_id += 1
        else:
            self.emit([sentence])


class SplitBolt(Bolt):
    """Its sentence's words (auto_anchor, auto_ack)."""

    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split(" "):
            self.emit([word])


class CountBolt(Bolt):
    """A running count per word, emitted as Storm's WordCount does; the counts are written out
    once every word of the corpus was counted."""

    outputs = ["word", "count"]

    def initialize(self, conf, context):
        self.counts = {}
        self.left = conf[WORDS_KEY]
        self.output = Path(conf[OUTPUT_DIR_KEY]) / f"count-{context['taskid']}.json"

    def process(self, tup):
        word = tup.values[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        self.emit([word, count])
        self.left -= 1
        if self.left == 0:
            self.output.write_text(json.dumps(self.counts), encoding="utf-8")


class WordCount(Topology):
    """W1 in streamparse's DSL."""

    sentences = SentenceSpout.spec()
    split = SplitBolt.spec(inputs=[sentences])
    count = CountBolt.spec(inputs={split: Grouping.fields("word")})


def run_sparse(n: int, acking: bool, multilang: bool, directory: Path, timeout: float) -> dict[str, Any]:
    """One W1 run of the streamparse topology on LocalCluster; its record."""
    from squall.sparse import translate

    reference = reference_counts(directory)
    words = n * WORDS_PER_SENTENCE
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1-sparse-"))
    try:
        translation = translate(WordCount, multilang=multilang)  # subprocesses start in this directory
        conf = {**translation.conf, CORPUS_KEY: str(directory), RELIABLE_KEY: acking, WORDS_KEY: words,
                OUTPUT_DIR_KEY: str(output_dir)}
        conf.update({"topology.max.spout.pending": 1000} if acking else {"topology.acker.executors": 0})
        name = f"w1-sparse-{'multilang' if multilang else 'inprocess'}"

        def progress(info: dict) -> float:
            comps = info["components"]
            done = comps["count"]["executed"] / words
            if acking:
                done = min(done, (comps["sentences"]["acked"] + comps["sentences"]["failed"]) / n)
            return done

        with LocalCluster() as cluster:
            meter = harness.Meter().start()
            cluster.submit_topology(name, conf, translation.topology)
            info = harness.wait_until(cluster, name, progress, timeout)
            meter.stop()
            cluster.kill_topology(name, wait_secs=0)
        files = harness.wait_files(output_dir, "count-*.json", 1, 10.0)
        counts = json.loads(files[0].read_text(encoding="utf-8")) if files else None
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    failed = info["components"]["sentences"]["failed"]
    record = harness.base_record(
        "W1-sparse", acking, mode="multilang" if multilang else "sparse", n=n,
        wall_s=round(meter.wall, 3), sentences_per_s=round(n / meter.wall, 1),
        words_per_s=round(words / meter.wall, 1), cpu_s=round(meter.cpu, 2), failed=failed,
        errors=len(info["errors"]), correct=counts == reference and failed == 0)
    return harness.finish_record(record, meter)


def run_native(n: int, acking: bool, directory: Path, timeout: float) -> dict[str, Any]:
    """W1 in squall's own API (`bench.w1_wordcount.run`) on the same corpus; as a W1-sparse record."""
    from .w1_wordcount import run
    rec = run(n, acking, directory, timeout=timeout)
    return harness.base_record(
        "W1-sparse", acking, mode="native", n=n, wall_s=rec["wall_s"], sentences_per_s=rec["sentences_per_s"],
        words_per_s=rec["words_per_s"], cpu_s=rec["cpu_s"], failed=rec["failed"], errors=rec["errors"],
        correct=rec["correct"]) | {k: rec[k] for k in ("peak_rss_mb", "squall_version", "squall_commit",
                                                         "python_version", "loadavg_1m", "timestamp")}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.w1_sparse``: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m bench.w1_sparse", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="sentences (default 100,000)")
    p.add_argument("--acking", choices=("on", "off"), default="on")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--modes", default="native,sparse,multilang")
    p.add_argument("--timeout", type=float, default=1200.0)
    p.add_argument("--no-save", action="store_true", help="print the records only")
    args = p.parse_args(argv)
    acking = args.acking == "on"
    modes = args.modes.split(",")
    directory = ensure_corpus(args.n)
    records: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(args.repeat):
        for mode in modes:
            if mode == "native":
                rec = run_native(args.n, acking, directory, args.timeout)
            else:
                rec = run_sparse(args.n, acking, mode == "multilang", directory, args.timeout)
            if mode != "native" and records.get("native"):
                rec["ratio_to_native"] = round(rec["sentences_per_s"] / records["native"][-1]["sentences_per_s"], 4)
            records[mode].append(rec)
            harness.emit_record(rec, None if args.no_save else RESULTS)
    print(f"\nW1 as a streamparse topology, N = {args.n:,}, acking {args.acking}, LocalCluster, "
          f"median of {args.repeat}:")
    print(f"{'mode':<10} {'sentences/s':>12} {'words/s':>12} {'x native':>9} {'correct':>8}")
    for mode, recs in records.items():
        rate = statistics.median(r["sentences_per_s"] for r in recs)
        ratios = [r["ratio_to_native"] for r in recs if "ratio_to_native" in r]
        ratio = f"{statistics.median(ratios):.3f}" if ratios else "-"
        print(f"{mode:<10} {rate:>12,.0f} {rate * WORDS_PER_SENTENCE:>12,.0f} {ratio:>9} "
              f"{all(r['correct'] for r in recs)!s:>8}")
    return 0


if __name__ == "__main__":
    from bench import w1_sparse  # the classes by their importable name: multilang subprocesses import them

    raise SystemExit(w1_sparse.main())
