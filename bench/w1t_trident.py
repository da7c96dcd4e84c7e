"""W1T: W1 as a Trident word count persisted into a map state, beside core W1 in the same run.

    new_stream("w1t", CorpusBatchSpout)          batches of --batch-size sentences (default 2,500)
      .each(sentence, Split -> word)             fused with the partial count before the repartition
      .group_by(word)
      .persistent_aggregate(MemoryMapState, Count -> count)   one commit per batch, txid order
      .new_values_stream().each(word, count, LastCounts)      the counts the state now holds

Each run times core W1 with acking on (`bench.w1_wordcount`) and then W1T on the same corpus,
host and workers, so the two are interleaved across ``--repeat`` runs and compared in one record
(``ratio_to_w1``; BENCHMARKS.md's target: at least 1.0).

The spout (an `IBatchSpout`; one task per worker, each reading the corpus files it claims as
W1's spouts do) emits up to ``batch_size`` sentences per txid and keeps each batch until its
``ack`` (the batch's ``$success``), so a replay emits the same sentences. It times the run
itself, on ``time.perf_counter``: from its ``open`` to the ``ack`` of its last non-empty batch,
and each batch from its first ``emit_batch`` to its ``ack`` (the batch latency: processing,
commit in txid order and the ``$success`` back). At that last ack a task writes its figures
into ``done-<task>.json``, which the run waits for. ``LastCounts`` keeps the last count of
each word it saw and writes them on cleanup: correct means they equal W1's reference counts
and every sentence was acked in a batch.

The workers' CPU seconds are measured too: W1T's from each spout task's ``open`` to its last
``ack`` (its worker process's CPU; on LocalCluster the whole process), core W1's as its record
has them (``cpu_s``). ``cpu_ratio_to_w1`` is core W1's CPU per sentence over W1T's: on this
shared machine, whose speed swings 2x within minutes, it moves less than the ratio of rates.

``topology.max.spout.pending`` is the batches in flight (``--max-pending``, default 3) and
``topology.trident.batch.emit.interval.millis`` is 0 here: Storm's 500 ms pause between batches
would cap a 1,000-sentence batch at 2,000 sentences/s whatever the engine does.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from squall import Config, Fields, LocalCluster
from squall.trident import BaseFilter, BaseFunction, MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spout import IBatchSpout

from . import harness, w1_wordcount
from .corpus import WORDS_PER_SENTENCE, claim_sentences, ensure_corpus, reference_counts
from .w1_wordcount import OUTPUT_DIR_KEY, _merge_counts, _process_cpu, _write_json

DEFAULT_BATCH_SIZE = 2500
"""Sentences a spout task puts in a batch: a Storm user sizes batches for throughput, and 2,500
is where W1T passed core W1 on both hosts with a batch p50 under a second (1,000 and 5,000
measured beside it: docs/profiles/w1t.md)."""
DEFAULT_MAX_BATCHES = 3


class CorpusBatchSpout(IBatchSpout):
    """The W1 corpus in batches of up to ``batch_size`` sentences (see the module docstring)."""

    def __init__(self, directory: str, batch_size: int, output_dir: str) -> None:
        self.directory = directory
        self.batch_size = batch_size
        self.output_dir = output_dir

    def open(self, conf: dict, context: Any) -> None:
        self._t_open = time.perf_counter()
        self._cpu_open = _process_cpu()
        self._task = context.get_this_task_id()
        self._sentences = claim_sentences(self.directory, Path(self.output_dir) / "claims")
        self._batches: dict[int, list[str]] = {}
        self._started: dict[int, float] = {}
        self._latencies: list[float] = []
        self._exhausted = False
        self._acked = 0
        self._t_last_ack: float | None = None
        self._cpu_last_ack = self._cpu_open
        self._done = False

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        batch = self._batches.get(batch_id)
        if batch is None:  # a new txid (a replay finds its batch kept)
            batch = [] if self._exhausted else list(itertools.islice(self._sentences, self.batch_size))
            self._exhausted = len(batch) < self.batch_size
            self._batches[batch_id] = batch
            self._started[batch_id] = time.perf_counter()
            self._check_done()  # a task whose files the others claimed is done at once
        emit = collector.emit
        for sentence in batch:
            emit([sentence])

    def ack(self, batch_id: int) -> None:
        batch = self._batches.pop(batch_id, None)
        started = self._started.pop(batch_id, None)
        if not batch:
            return
        now = time.perf_counter()
        self._latencies.append(now - started)
        self._acked += len(batch)
        self._t_last_ack = now
        self._cpu_last_ack = _process_cpu()
        self._check_done()

    def _check_done(self) -> None:
        if self._exhausted and not self._done and not any(self._batches.values()):
            self._done = True
            _write_json(Path(self.output_dir) / f"done-{self._task}.json", {
                "task": self._task, "t_open": self._t_open, "cpu_open": self._cpu_open,
                "t_last_ack": self._t_last_ack, "acked": self._acked,
                "cpu_last_ack": self._cpu_last_ack, "latencies_s": self._latencies})

    def get_output_fields(self) -> Fields:
        return Fields("sentence")

    def get_component_configuration(self) -> dict | None:
        return None  # one task per worker: no limit of its own


class Split(BaseFunction):
    """Splits a sentence on single spaces, as W1's split does."""

    def execute(self, tuple, collector) -> None:  # noqa: A002 - Trident's parameter name
        emit = collector.emit
        for word in tuple[0].split(" "):
            emit([word])


class LastCounts(BaseFilter):
    """Keeps the last count of each word it sees (the state's new values) and writes them on
    cleanup, as W1's count task does; passes nothing on."""

    def prepare(self, conf: dict, context: Any) -> None:
        self.counts: dict[str, int] = {}
        self.task = context.get_this_task_id()
        self.output_dir = conf.get(OUTPUT_DIR_KEY)

    def is_keep(self, tuple) -> bool:  # noqa: A002
        self.counts[tuple[0]] = tuple[1]
        return False

    def cleanup(self) -> None:
        _write_json(Path(self.output_dir) / f"count-{self.task}.json", {"task": self.task, "counts": self.counts})


def build(directory: str, output_dir: str, batch_size: int = DEFAULT_BATCH_SIZE,
          max_batches: int = DEFAULT_MAX_BATCHES, workers: int = 1, parallelism: int = 1) -> tuple[Any, Config]:
    """The W1T topology and its configuration: ``parallelism`` tasks of each bolt, the spout's
    included (one per worker: each reads the files it claims)."""
    topology = TridentTopology()
    counts = (topology.new_stream("w1t", CorpusBatchSpout(directory, batch_size, output_dir)).name("split")
              .each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(parallelism)
              .group_by(Fields("word")).name("count")
              .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count")).parallelism_hint(parallelism))
    counts.new_values_stream().each(Fields("word", "count"), LastCounts())
    conf = Config()
    conf.set_num_workers(workers)
    conf.set_max_spout_pending(max_batches)
    conf["topology.trident.batch.emit.interval.millis"] = 0
    conf[OUTPUT_DIR_KEY] = output_dir
    return topology.build(), conf


def _cpu_us(cpu_s: float | None, n: int) -> float | None:
    return None if cpu_s is None else round(1e6 * cpu_s / n, 2)


def run_trident(n: int, host: str = "local", workers: int = 1, parallelism: int | None = None,
                batch_size: int = DEFAULT_BATCH_SIZE, max_batches: int = DEFAULT_MAX_BATCHES,
                corpus_dir: str | Path | None = None, timeout: float = 600.0,
                spark_master: str | None = None) -> dict[str, Any]:
    """One W1T run (no baseline): its figures and whether its counts are W1's reference."""
    parallelism = parallelism or workers
    directory = ensure_corpus(n, corpus_dir)
    reference = reference_counts(directory)
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1t-"))
    name = "w1t"
    try:
        topology, conf = build(str(directory), str(output_dir), batch_size, max_batches, workers, parallelism)
        if host == "local":
            if workers != 1:
                raise ValueError(f"LocalCluster runs 1 worker, not {workers}")
            with LocalCluster() as cluster:
                cluster.submit_topology(name, conf, topology)
                done = harness.wait_files(output_dir, "done-*.json", parallelism, timeout)
                info = cluster.get_topology_info(name)
                cluster.kill_topology(name, wait_secs=0)  # clean stop: cleanup() writes the counts
                count_files = harness.wait_files(output_dir, "count-*.json", parallelism, 30.0)
            stopped = True
        else:
            from .hosts import make_host
            with make_host(host, workers, spark_master) as cluster:
                cluster.submit(name, conf, topology)
                done = harness.wait_files(output_dir, "done-*.json", parallelism, timeout)
                info = cluster.get_topology_info(name)
                cluster.kill(name, wait_secs=0)
                count_files = harness.wait_files(output_dir, "count-*.json", parallelism, 30.0)
                stopped = cluster.wait_no_workers()
        counts, _metas = _merge_counts(count_files)
        spouts = [json.loads(f.read_text(encoding="utf-8")) for f in done]
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    if len(done) < parallelism:
        raise RuntimeError(f"W1T on {host}: {len(done)} of {parallelism} spout tasks had all their batches "
                           f"acked within {timeout} s")
    if len(count_files) < parallelism:
        raise RuntimeError(f"W1T on {host}: {len(count_files)} of {parallelism} count files appeared after the kill")
    wall = max(s["t_last_ack"] or 0.0 for s in spouts) - min(s["t_open"] for s in spouts)
    latencies = sorted(1000.0 * x for s in spouts for x in s["latencies_s"])
    acked = sum(s["acked"] for s in spouts)
    cpu = sum(s["cpu_last_ack"] - s["cpu_open"] for s in spouts)
    return {"wall_s": round(wall, 3), "sentences_per_s": round(n / wall, 1),
            "cpu_s": round(cpu, 3), "cpu_us_per_sentence": _cpu_us(cpu, n),
            "words_per_s": round(n * WORDS_PER_SENTENCE / wall, 1),
            "batches": len(latencies), "batch_latency_mean_ms": round(sum(latencies) / len(latencies), 3),
            "batch_latency_p50_ms": round(harness.percentile(latencies, 50), 3),
            "batch_latency_p99_ms": round(harness.percentile(latencies, 99), 3),
            "acked": acked, "errors": len(info["errors"]), "workers_stopped": stopped,
            "correct": counts == reference and acked == n and stopped and not info["errors"]}


def run(n: int = 1_000_000, host: str = "local", workers: int = 1, parallelism: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE, max_pending: int | str = DEFAULT_MAX_BATCHES,
        spark_master: str | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """Core W1 with acking on, then W1T, on the same corpus and host: one record with both.

    ``max_pending`` is W1T's batches in flight; core W1 keeps its own default (1,000 tuples).
    """
    if isinstance(max_pending, str):
        raise ValueError(f"W1T's --max-pending is a number of batches in flight, not {max_pending!r}")
    core = w1_wordcount.run(n=n, acking=True, host=host, workers=workers, parallelism=parallelism,
                            spark_master=spark_master, timeout=timeout)
    meter = harness.Meter().start()
    trident = run_trident(n, host, workers, parallelism, batch_size, max_pending, timeout=timeout,
                          spark_master=spark_master)
    meter.stop()
    record = harness.base_record(
        "W1T", True, host=host, workers=workers, parallelism=parallelism or workers, n=n,
        batch_size=batch_size, max_batches_in_flight=max_pending,
        **trident,
        w1_sentences_per_s=core["sentences_per_s"], w1_correct=core["correct"],
        w1_complete_latency_mean_ms=core["complete_latency_mean_ms"],
        ratio_to_w1=round(trident["sentences_per_s"] / core["sentences_per_s"], 4),
        w1_cpu_us_per_sentence=_cpu_us(core.get("cpu_s"), n),
        cpu_ratio_to_w1=(round(core["cpu_s"] / trident["cpu_s"], 4)
                         if core.get("cpu_s") and trident["cpu_s"] else None),
    )
    record["correct"] = trident["correct"] and core["correct"]
    return harness.finish_record(record, meter)
