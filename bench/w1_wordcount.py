"""W1 wordcount (BENCHMARKS.md): corpus spout -> split (shuffle) -> count (fields on word).

    sentences (CorpusSpout) --shuffle--> split (SplitSentence, BasicBolt)
        --fields("word")--> count (WordCount, BasicBolt; emits [word, count], no subscribers)

The spout reads the corpus files lazily. With acking on it emits each sentence with a message
id (its line number) under ``topology.max.spout.pending`` (default 1000); with acking off the
topology has no acker (``topology.acker.executors`` = 0) and emits without an id. Several spout
tasks (one per worker on the process and Spark hosts) read disjoint files, each claiming the next
unread file as storm-hdfs's ``HdfsSpout`` does (`bench.corpus.claim_sentences`, lock files in
the directory named by ``bench.w1.claims.dir``), not a fixed share: the count task that gets
the vocabulary's most frequent words has 54.5% of the words on two workers, and with fixed
shares the other worker's spout ran out 13-17% of the run before it, leaving that worker idle
(docs/profiles/w1-scaling-model.md).

End of a run: the count bolt has executed 10 x N words and, with acking on, the spout has had N
replies (acked + failed); `harness.wait_until` polls ``get_topology_info`` for that. The
topology is then killed with ``wait_secs=0``, which stops the workers cleanly, so each count task
runs ``cleanup()`` and writes its counts as JSON into the directory named by the custom
component key ``bench.output.dir`` (a file, not an in-process registry, so the same topology
can be checked on hosts with worker processes). Correct means the merged counts equal
``reference_counts`` exactly and no tuple failed.

On the process host (``host="process"``) and the Spark host (``host="spark"``; both `run_process`,
on a `bench.hosts` host) the master's counters are heartbeated (~1 s late), so the components
time the run themselves, on ``time.perf_counter`` (CLOCK_MONOTONIC: one clock for every process
of the machine), and write it into ``bench.output.dir`` when they are stopped: the spout the
moment its ``open`` ran (the start), its first ``next_tuple`` (once the topology was activated:
after every worker's first heartbeat; reported as ``first_emit_after_open_s``) and, with acking
on, the moment its last ack arrived (the end); with acking off, each count task the moment its
last ``execute`` returned (the end is the latest; this costs the count bolt one ``perf_counter()``
call per word, ~50 ns, and is only switched on there). Polling ``get_topology_info`` only
decides when to stop the topology. CPU seconds are per worker process, from when its first
component opened (read by the component itself) to when the end was seen (``/proc``).

The baseline is `bench.corpus.baseline_wordcount` on the same files, in the same process run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

from . import harness
from .corpus import (
    WORDS_PER_SENTENCE,
    baseline_wordcount,
    claim_sentences,
    ensure_corpus,
    iter_sentences,
    reference_counts,
)

DEFAULT_MAX_PENDING = 1000
OUTPUT_DIR_KEY = "bench.output.dir"
CLAIMS_DIR_KEY = "bench.w1.claims.dir"  # where several spout tasks claim their files (claim_sentences)
TIME_LAST_EXECUTE_KEY = "bench.time.last.execute"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.rename(path)  # a reader never sees half a file


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system


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
        self._t_open = time.perf_counter()
        self._cpu_open = _process_cpu()
        # each task reads its own files: claimed one at a time when the run gave a directory for
        # the claims, else a fixed share (a task's index modulo the tasks)
        claims = conf.get(CLAIMS_DIR_KEY)
        self._sentences = (claim_sentences(self.directory, claims) if claims else
                           iter_sentences(self.directory, context.get_this_task_index(),
                                          len(context.get_component_tasks(context.get_this_component_id()))))
        self._next_id = 0
        self._emit = collector.emit
        self.exhausted = False
        self._t_exhausted = None
        self._t_last_ack = None
        self._acked = 0
        self._task = context.get_this_task_id()
        self._output_dir = conf.get(OUTPUT_DIR_KEY)
        self._t_first_next = None
        if self._output_dir:
            self.next_tuple = self._next_tuple_first  # looked up on the instance per burst
        if self._output_dir and self.reliable:
            self._clock = time.perf_counter
            self.ack = self._ack_timed  # the executor looks ack up on the instance per call

    def next_tuple(self) -> None:
        sentence = next(self._sentences, None)
        if sentence is None:
            if not self.exhausted:
                self.exhausted = True
                self._t_exhausted = time.perf_counter()
            return  # nothing emitted: the executor's wait strategy backs off
        if self.reliable:
            self._emit([sentence], self._next_id)
            self._next_id += 1
        else:
            self._emit([sentence])

    def _next_tuple_first(self) -> None:
        # notes when the topology became active, then gets out of the way: deleting the
        # instance attribute uncovers the class's next_tuple for the next burst
        if self._t_first_next is None:
            self._t_first_next = time.perf_counter()
            del self.next_tuple
        CorpusSpout.next_tuple(self)

    def ack(self, msg_id) -> None:
        pass

    def _ack_timed(self, msg_id) -> None:
        self._t_last_ack = self._clock()
        self._acked += 1

    def fail(self, msg_id) -> None:
        # No replay: a replayed sentence would be counted twice (Storm's WordCount is
        # at-least-once too); a failure shows in the spout's "failed" count and makes the run
        # incorrect instead.
        pass

    def close(self) -> None:
        if self._output_dir:
            _write_json(Path(self._output_dir) / f"spout-{self._task}.json", {
                "task": self._task, "pid": os.getpid(), "t_open": self._t_open, "cpu_open": self._cpu_open,
                "t_first_next": self._t_first_next, "t_exhausted": self._t_exhausted,
                "t_last_ack": self._t_last_ack, "acked": self._acked, "emitted_ids": self._next_id})


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
        self.t_prepare = time.perf_counter()
        self.cpu_prepare = _process_cpu()
        self.counts: dict[str, int] = {}
        self.task = context.get_this_task_id()
        self.output_dir = conf.get(OUTPUT_DIR_KEY)
        self.t_last = None
        if conf.get(TIME_LAST_EXECUTE_KEY):
            self._clock = time.perf_counter
            self.execute = self._execute_timed  # BasicBolt's execute is looked up after prepare

    def execute(self, tup, collector) -> None:
        word = tup.values[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])

    def _execute_timed(self, tup, collector) -> None:
        word = tup.values[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])
        self.t_last = self._clock()

    def cleanup(self) -> None:
        if self.output_dir:
            _write_json(Path(self.output_dir) / f"count-{self.task}.json", {
                "task": self.task, "pid": os.getpid(), "t_prepare": self.t_prepare,
                "cpu_prepare": self.cpu_prepare, "t_last": self.t_last, "counts": self.counts})


def build(directory: str, acking: bool, output_dir: str, max_pending: int | str = DEFAULT_MAX_PENDING,
          workers: int = 1, parallelism: int = 1, time_spout: bool = False, time_last_execute: bool = False,
          spouts: int = 1, no_crossing: bool = False):
    """The W1 topology and its configuration.

    ``spouts`` spout tasks, each reading its own corpus files (several claim them one at a time,
    in ``output_dir``'s ``claims``: `bench.corpus.claim_sentences`); ``parallelism``
    executors of split and of count; ``workers`` workers and, with acking on, Storm's default of
    one acker per worker. ``time_spout``: the spout tasks write their times into ``output_dir``
    on close; ``time_last_execute``: so do the count tasks, with the time of their last execute.
    ``no_crossing``: the control, count on a local-or-shuffle grouping instead of the fields
    grouping, so that no word leaves its worker (each count task then counts some of every
    word; the merged counts are checked the same).
    """
    builder = TopologyBuilder()
    spout = builder.set_spout("sentences", CorpusSpout(directory, acking), spouts)
    if spouts > 1:
        spout.add_configuration(CLAIMS_DIR_KEY, str(Path(output_dir) / "claims"))
    if time_spout:
        spout.add_configuration(OUTPUT_DIR_KEY, output_dir)
    builder.set_bolt("split", SplitSentence(), parallelism).shuffle_grouping("sentences")
    count = builder.set_bolt("count", WordCount(), parallelism)
    if no_crossing:
        count.local_or_shuffle_grouping("split")
    else:
        count.fields_grouping("split", Fields("word"))
    count.add_configuration(OUTPUT_DIR_KEY, output_dir)
    if time_last_execute:
        count.add_configuration(TIME_LAST_EXECUTE_KEY, True)
    conf = Config()
    conf.set_num_workers(workers)
    if acking:
        conf.set_max_spout_pending(max_pending)
    else:
        conf.set_num_ackers(0)
    return builder.create_topology(), conf


def _progress(info: dict, n: int, acking: bool) -> float:
    """How far a W1 run is, 0 to 1: words counted and, with acking on, sentences completed."""
    comps = info["components"]
    done = comps["count"]["executed"] / (n * WORDS_PER_SENTENCE)
    if acking:
        sp = comps["sentences"]
        done = min(done, (sp["acked"] + sp["failed"]) / n)
    return done


def _merge_counts(files: list[Path]) -> tuple[dict[str, int] | None, list[dict]]:
    """Merged counts of the count tasks' files (None if there are none), and each file's other
    fields (task, pid, times)."""
    if not files:
        return None, []
    merged: dict[str, int] = {}
    metas = []
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for word, c in data.pop("counts").items():
            merged[word] = merged.get(word, 0) + c
        metas.append(data)
    return merged, metas


def _read_counts(output_dir: Path, timeout: float = 10.0, tasks: int = 1) -> dict[str, int] | None:
    """Merges the count files the count tasks wrote on cleanup (None if none appeared)."""
    return _merge_counts(harness.wait_files(output_dir, "count-*.json", tasks, timeout))[0]


def run(n: int = 1_000_000, acking: bool = True, corpus_dir: str | Path | None = None,
        max_pending: int | str = DEFAULT_MAX_PENDING, timeout: float = 600.0, host: str = "local",
        workers: int = 1, parallelism: int | None = None, spark_master: str | None = None,
        spouts: int | None = None, no_crossing: bool = False) -> dict[str, Any]:
    """One W1 run, then the baseline on the same files.

    Args:
        n: sentences (N); the corpus is generated once per N (`ensure_corpus`).
        acking: acking on (one acker per worker, max spout pending) or off (no acker, no ids).
        corpus_dir: where the corpus lives (default bench/.data/w1-N).
        max_pending: ``topology.max.spout.pending`` when acking is on (``"auto"``: the tuner; the
            record then says where it left each spout executor, ``max_spout_pending_final``).
        timeout: give up after this many seconds.
        host: ``"local"`` (LocalCluster, 1 worker), ``"process"`` or ``"spark"`` (`run_process`).
        workers: worker processes on the process or Spark host.
        parallelism: executors of split and of count there (default ``workers``).
        spark_master: the Spark host's master URL (default ``local[workers]``).
        spouts: spout tasks on the process or Spark host (default ``workers``: one per worker,
            each reading the files it claims, as storm-hdfs's HdfsSpout does); 1 on LocalCluster.
        no_crossing: the process or Spark host only: the control in which no word leaves its
            worker (`build`); the record says ``"control": "no-crossing"``, and the report
            leaves it out of W1's tables.

    Returns:
        The run's record (see `harness.finish_record`), not yet printed.
    """
    if host in ("process", "spark"):
        return run_process(n, acking, corpus_dir, max_pending, timeout, workers, parallelism or workers,
                           host, spark_master, spouts or workers, no_crossing)
    if no_crossing:
        raise ValueError("the no-crossing control needs workers to cross between: the process or Spark host")
    if host != "local" or workers != 1:
        raise ValueError(f"host {host!r} with {workers} workers: LocalCluster runs 1 worker")
    directory = ensure_corpus(n, corpus_dir)
    reference = reference_counts(directory)
    words = n * WORDS_PER_SENTENCE
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1-"))
    try:
        topology, conf = build(str(directory), acking, str(output_dir), max_pending)
        name = f"w1-{'ack' if acking else 'noack'}"

        def progress(info: dict) -> float:
            return _progress(info, n, acking)

        with LocalCluster() as cluster:
            meter = harness.Meter().start()
            cluster.submit_topology(name, conf, topology)
            info = harness.wait_until(cluster, name, progress, timeout)
            meter.stop()
            limits = harness.spout_limits(cluster, name, "sentences") if acking else None
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
        max_spout_pending_final=limits,
        wall_s=round(meter.wall, 3),
        sentences_per_s=round(rate, 1),
        words_per_s=round(words / meter.wall, 1),
        cpu_s=round(meter.cpu, 2),
        other_cpu_s=meter.other_cpu,
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


def run_process(n: int, acking: bool, corpus_dir: str | Path | None, max_pending: int | str, timeout: float,
                workers: int, parallelism: int, host_name: str = "process",
                spark_master: str | None = None, spouts: int = 1, no_crossing: bool = False) -> dict[str, Any]:
    """One W1 run on a throwaway host of ``workers`` worker processes, ``host_name`` "process"
    or "spark" (`bench.hosts.make_host`; see the module docstring), then the baseline on the
    same files."""
    from .hosts import make_host, usage_between

    directory = ensure_corpus(n, corpus_dir)
    reference = reference_counts(directory)
    words = n * WORDS_PER_SENTENCE
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1-"))
    try:
        topology, conf = build(str(directory), acking, str(output_dir), max_pending, workers, parallelism,
                               time_spout=True, time_last_execute=not acking, spouts=spouts,
                               no_crossing=no_crossing)
        name = f"w1-{'ack' if acking else 'noack'}"

        def progress(info: dict) -> float:
            return _progress(info, n, acking)

        with make_host(host_name, workers, spark_master) as host:
            host_fields = host.fields()
            start = host.samples()
            t_submit = time.perf_counter()
            host.submit(name, conf, topology)
            info = harness.wait_until(host, name, progress, timeout)  # heartbeated: ~1 s late
            t_seen = time.perf_counter()
            limits = harness.spout_limits(host, name, "sentences") if acking else None
            end = host.samples()
            host.kill(name, wait_secs=0)  # workers stop cleanly: close()/cleanup() write the files
            count_files = harness.wait_files(output_dir, "count-*.json", parallelism, 30.0)
            spout_files = harness.wait_files(output_dir, "spout-*.json", spouts, 30.0)
            stopped = host.wait_no_workers()
        counts, metas = _merge_counts(count_files)
        spout_metas = [json.loads(f.read_text(encoding="utf-8")) for f in spout_files]
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    if len(spout_metas) < spouts or len(metas) < parallelism:
        raise RuntimeError(f"W1 on the {host_name} host: {len(spout_metas)} of {spouts} spout and {len(metas)} "
                           f"of {parallelism} count files appeared after the kill")

    # the run spans from the first spout task's open to the last ack (or last count) of all
    t_start = min(sp["t_open"] for sp in spout_metas)
    t_end = (max(sp["t_last_ack"] or 0.0 for sp in spout_metas) if acking
             else max(m["t_last"] or 0.0 for m in metas))
    firsts = [sp["t_first_next"] for sp in spout_metas if sp["t_first_next"]]
    exhausted = [sp["t_exhausted"] for sp in spout_metas if sp["t_exhausted"]]
    wall = t_end - t_start
    cpu0: dict[int, float] = {}
    for pid, cpu in ([(sp["pid"], sp["cpu_open"]) for sp in spout_metas]
                     + [(m["pid"], m["cpu_prepare"]) for m in metas]):
        cpu0[pid] = min(cpu, cpu0.get(pid, cpu))
    usage = usage_between(start, end, cpu0)
    usage["cpu_wall_s"] = round(t_seen - t_start, 3)
    prepared = [m["t_prepare"] for m in metas]

    comps = info["components"]
    failed = comps["sentences"]["failed"]
    errors = info["errors"]
    correct = (counts == reference and failed == 0 and stopped
               and (not acking or sum(sp["acked"] for sp in spout_metas) == n))
    base_wall, base_counts = harness.time_baseline(lambda: baseline_wordcount(directory))
    parallel = (harness.machine_parallelism(lambda: baseline_wordcount(directory), workers, base_wall)
                if workers > 1 else None)

    rate = n / wall
    base_rate = n / base_wall
    record = harness.base_record(
        "W1", acking, **host_fields, workers=workers, parallelism=parallelism, spouts=spouts,
        ackers=workers if acking else 0, n=n,
        max_spout_pending=max_pending if acking else None,
        max_spout_pending_final=limits,
        wall_s=round(wall, 3),
        wall_from="spout open -> " + ("spout's last ack" if acking else "count tasks' last execute"),
        sentences_per_s=round(rate, 1),
        words_per_s=round(words / wall, 1),
        submit_to_open_s=round(t_start - t_submit, 3),
        first_emit_after_open_s=round(min(firsts) - t_start, 3) if firsts else None,
        end_seen_after_s=round(t_seen - t_end, 3),
        exhausted_at_s=round(max(exhausted) - t_start, 3) if len(exhausted) == spouts else None,
        count_prepare_skew_s=round(max(prepared) - min(prepared), 3),
        # the timed span on CLOCK_MONOTONIC (``time.perf_counter`` here), and whose: for a
        # profiler that keeps the workers' samples in it (`bench.native_profile`)
        timed_window=[round(t_start, 6), round(t_end, 6)],
        worker_pids=sorted(end["workers"]),
        **usage,
        complete_latency_mean_ms=round(comps["sentences"]["complete_latency_ms"], 3) if acking else None,
        failed=failed,
        errors=len(errors),
        workers_stopped=stopped,
        correct=correct,
        baseline_wall_s=round(base_wall, 3),
        baseline_rate=round(base_rate, 1),
        baseline_correct=base_counts == reference,
        ratio=round(rate / base_rate, 4),
        machine_parallelism=None if parallel is None else round(parallel, 3),
    )
    if no_crossing:
        record["control"] = "no-crossing"
    return harness.finish_record(record, None)
