"""W1 wordcount (BENCHMARKS.md): corpus spout -> split (shuffle) -> count (fields on word).

    sentences (CorpusSpout) --shuffle--> split (SplitSentence, BasicBolt)
        --fields("word")--> count (WordCount, BasicBolt; emits [word, count], no subscribers)

The spout reads the corpus files lazily. With acking on it emits each sentence with a message
id (its line number) under ``topology.max.spout.pending`` (default 1000); with acking off the
topology has no acker (``topology.acker.executors`` = 0) and emits without an id.

End of a run: the count bolt has executed 10 x N words and, with acking on, the spout has had N
replies (acked + failed); `harness.wait_until` polls ``get_topology_info`` for that. The
topology is then killed with ``wait_secs=0``, which stops the workers cleanly, so each count task
runs ``cleanup()`` and writes its counts as JSON into the directory named by the custom
component key ``bench.output.dir`` (a file, not an in-process registry, so the same topology
can be checked on hosts with worker processes). Correct means the merged counts equal
``reference_counts`` exactly and no tuple failed.

The baseline is `bench.corpus.baseline_wordcount` on the same files, in the same process run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

from . import harness
from .corpus import WORDS_PER_SENTENCE, baseline_wordcount, ensure_corpus, iter_sentences, reference_counts

DEFAULT_MAX_PENDING = 1000
OUTPUT_DIR_KEY = "bench.output.dir"


class CorpusSpout(Spout):
    """Emits every sentence of a corpus directory once, in order, read lazily.

    Args:
        directory: the corpus directory (from `ensure_corpus`).
        reliable: emit with a message id (the sentence's index) so the tuple is tracked.
    """

    def __init__(self, directory: str, reliable: bool) -> None:
        self.directory = str(directory)
        self.reliable = reliable

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("sentence"))

    def open(self, conf, context, collector) -> None:
        super().open(conf, context, collector)
        self._sentences = iter_sentences(self.directory)
        self._next_id = 0
        self._emit = collector.emit
        self.exhausted = False

    def next_tuple(self) -> None:
        sentence = next(self._sentences, None)
        if sentence is None:
            self.exhausted = True
            return  # nothing emitted: the executor's wait strategy backs off
        if self.reliable:
            self._emit([sentence], self._next_id)
            self._next_id += 1
        else:
            self._emit([sentence])

    def ack(self, msg_id) -> None:
        pass

    def fail(self, msg_id) -> None:
        # No replay: a replayed sentence would be counted twice (Storm's WordCount is
        # at-least-once too); a failure shows in the spout's "failed" count and makes the run
        # incorrect instead.
        pass


class SplitSentence(BasicBolt):
    """Splits a sentence on single spaces and emits each word."""

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup, collector) -> None:
        emit = collector.emit
        for word in tup.values[0].split(" "):
            emit([word])


class WordCount(BasicBolt):
    """Keeps a running count per word, emits [word, count], and writes its counts on cleanup."""

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("word", "count"))

    def prepare(self, conf, context) -> None:
        super().prepare(conf, context)
        self.counts: dict[str, int] = {}
        self.task = context.get_this_task_id()
        self.output_dir = conf.get(OUTPUT_DIR_KEY)

    def execute(self, tup, collector) -> None:
        word = tup.values[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])

    def cleanup(self) -> None:
        if self.output_dir:
            path = Path(self.output_dir) / f"count-{self.task}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.counts), encoding="utf-8")
            tmp.rename(path)  # a reader never sees half a file


def build(directory: str, acking: bool, output_dir: str, max_pending: int = DEFAULT_MAX_PENDING):
    """The W1 topology and its configuration."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", CorpusSpout(directory, acking))
    builder.set_bolt("split", SplitSentence()).shuffle_grouping("sentences")
    (builder.set_bolt("count", WordCount())
        .fields_grouping("split", Fields("word"))
        .add_configuration(OUTPUT_DIR_KEY, output_dir))
    conf = Config()
    conf.set_num_workers(1)
    if acking:
        conf.set_max_spout_pending(max_pending)
    else:
        conf.set_num_ackers(0)
    return builder.create_topology(), conf


def _read_counts(output_dir: Path, timeout: float = 10.0) -> dict[str, int] | None:
    """Merges the count files the count tasks wrote on cleanup (None if none appeared)."""
    deadline = time.perf_counter() + timeout
    while True:
        files = sorted(output_dir.glob("count-*.json"))
        if files or time.perf_counter() > deadline:
            break
        time.sleep(0.05)
    if not files:
        return None
    merged: dict[str, int] = {}
    for f in files:
        for word, c in json.loads(f.read_text(encoding="utf-8")).items():
            merged[word] = merged.get(word, 0) + c
    return merged


def run(n: int = 1_000_000, acking: bool = True, corpus_dir: str | Path | None = None,
        max_pending: int = DEFAULT_MAX_PENDING, timeout: float = 600.0) -> dict[str, Any]:
    """One W1 run on LocalCluster (1 worker), then the baseline on the same files.

    Args:
        n: sentences (N); the corpus is generated once per N (`ensure_corpus`).
        acking: acking on (one acker, max spout pending) or off (no acker, no message ids).
        corpus_dir: where the corpus lives (default bench/.data/w1-N).
        max_pending: ``topology.max.spout.pending`` when acking is on.
        timeout: give up after this many seconds.

    Returns:
        The run's record (see `harness.finish_record`), not yet printed.
    """
    directory = ensure_corpus(n, corpus_dir)
    reference = reference_counts(directory)
    words = n * WORDS_PER_SENTENCE
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1-"))
    try:
        topology, conf = build(str(directory), acking, str(output_dir), max_pending)
        name = f"w1-{'ack' if acking else 'noack'}"

        def progress(info: dict) -> float:
            comps = info["components"]
            done = comps["count"]["executed"] / words
            if acking:
                sp = comps["sentences"]
                done = min(done, (sp["acked"] + sp["failed"]) / n)
            return done

        with LocalCluster() as cluster:
            meter = harness.Meter().start()
            cluster.submit_topology(name, conf, topology)
            info = harness.wait_until(cluster, name, progress, timeout)
            meter.stop()
            cluster.kill_topology(name, wait_secs=0)  # clean stop: cleanup() writes the counts
        counts = _read_counts(output_dir)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)

    comps = info["components"]
    failed = comps["sentences"]["failed"]
    errors = info["errors"]
    correct = counts == reference and failed == 0
    base_wall, base_counts = harness.time_baseline(lambda: baseline_wordcount(directory))

    rate = n / meter.wall
    base_rate = n / base_wall
    record = harness.base_record(
        "W1", acking, n=n,
        max_spout_pending=max_pending if acking else None,
        wall_s=round(meter.wall, 3),
        sentences_per_s=round(rate, 1),
        words_per_s=round(words / meter.wall, 1),
        cpu_s=round(meter.cpu, 2),
        complete_latency_mean_ms=round(comps["sentences"]["complete_latency_ms"], 3) if acking else None,
        failed=failed,
        errors=len(errors),
        correct=correct,
        baseline_wall_s=round(base_wall, 3),
        baseline_rate=round(base_rate, 1),
        baseline_correct=base_counts == reference,
        ratio=round(rate / base_rate, 4),
    )
    return harness.finish_record(record, meter)
