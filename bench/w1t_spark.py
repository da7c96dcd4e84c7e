"""W1T on Spark's engine (issue 36 item 6): W1 as a Trident word count compiled to one
Structured Streaming query (`squall.trident.spark.start`), beside, in the same run and on the
same corpus, hand-written Structured Streaming (``bench.peers.spark_w1``: the SQL split and the
Python UDF split) and the same Trident topology on squall's engine (``bench.w1t_trident`` on
LocalCluster).

    new_stream("w1t", FileTridentSpout(corpus, max_batch_records=--batch-size))   the line: a STRING column
      .each(sentence, Split -> word)                          mapInArrow, fused with the partial count
      .group_by(word)                                         the partials summed in SQL: groupBy(key).agg(sum)
      .persistent_aggregate(MemoryMapState, Count -> count)   the driver, in foreachBatch

All Spark runs use ``local[1]`` (the peers' setting) with the SparkSession made before the clock
starts, and the same number of micro-batches of the same size where whole files allow it (the
peers read ``maxFilesPerTrigger`` files a batch: ``--n 200000 --batch-size 2500`` is 4 batches
of 50,000 sentences for all three). The Trident query's session runs Spark's Python processes
through ``squall.trident.spark.daemon`` and, unless ``--no-launcher``, with
``squall.trident.spark.launcher`` as their Python executable (as ``squall trident`` does); the
peers' are Spark's defaults. The Trident query's time is from ``start()`` to the end of ``processAllAvailable()``;
its batch latency is each micro-batch's ``triggerExecution`` (Spark's own progress: the mean,
and each batch's in ``batch_latency_ms``), ``first_batch_after_s`` the time before the first
batch started (the query's Python processes starting), and ``where`` splits the batches into
Spark's phases (``latestOffset``: the spout's planning emit on the
driver; ``addBatch``: the Trident batch, its jobs and the state commit; the WAL writes).
Correct means the driver's counts equal the corpus's reference counts.

    python -m bench.w1t_spark --n 200000 --batch-size 2500
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .corpus import LINES_PER_FILE, corpus_files, ensure_corpus, reference_counts

DEFAULT_BATCH_SIZE = 2_500  # lines of each corpus file a batch reads: 10 files of 10,000 sentences, 4 batches


def _trident_on_spark(directory: Path, batch_size: int, launcher: bool = True) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from squall import Fields
    from squall.external.trident_files import FileTridentSpout
    from squall.trident import MemoryMapState, TridentTopology
    from squall.trident.builtin import Count
    from squall.trident.spark import start

    from .w1t_trident import Split

    # the spout reads every file of its directory: the corpus's text files only, linked
    lines_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w1t-spark-in-"))
    checkpoint = tempfile.mkdtemp(prefix="squall-bench-w1t-spark-ckpt-")
    for f in corpus_files(directory):
        os.symlink(f, lines_dir / f.name)
    # Spark's Python workers unpickle the bench's Split by reference: they need the repository
    repo = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    user_python = os.environ.get("PYSPARK_PYTHON")
    if launcher:  # as squall trident does: Spark's own Python processes import the installed pyspark
        from squall.trident.spark.launcher import use_installed_pyspark

        use_installed_pyspark(master="local[1]")
    spark = (SparkSession.builder.master("local[1]").appName("squall-bench-w1t-spark")
             .config("spark.sql.shuffle.partitions", "1").config("spark.ui.enabled", "false")
             .config("spark.python.daemon.module", "squall.trident.spark.daemon").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        factory = MemoryMapState.factory()
        topology = TridentTopology()
        topology.new_stream("w1t", FileTridentSpout(str(lines_dir), ["sentence"], max_batch_records=batch_size)) \
            .each(Fields("sentence"), Split(), Fields("word")) \
            .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
        t0 = time.perf_counter()
        query = start(topology, spark, checkpoint, query_name="w1t_spark")
        query.processAllAvailable()
        wall = time.perf_counter() - t0
        progress = [p for p in query.recentProgress if p.get("numInputRows")]
        query.stop()
        counts = {word: count for word, count in factory.make_state({}, None, 0, 1).get_tuples()}
    finally:
        spark.stop()
        # the peers' sessions are Spark's defaults
        if user_python is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = user_python
        shutil.rmtree(lines_dir, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
    latencies = [p["durationMs"]["triggerExecution"] for p in progress]
    phases: dict[str, float] = {}
    for p in progress:
        for phase, ms in p["durationMs"].items():
            phases[phase] = phases.get(phase, 0.0) + ms
    return {"wall_s": round(wall, 3), "batches": len(progress),
            "batch_latency_mean_ms": round(sum(latencies) / len(latencies), 1) if latencies else None,
            "batch_latency_ms": latencies,
            "first_batch_after_s": round(wall - sum(latencies) / 1000, 3),
            "where_ms": {k: round(v) for k, v in sorted(phases.items())}, "counts": counts}


def run(n: int = 100_000, batch_size: int = DEFAULT_BATCH_SIZE, engine: bool = True,
        launcher: bool = True) -> dict[str, Any]:
    """One record: sentences/s of each way, batch latency of the Trident ones, correctness."""
    from .peers import spark_w1

    directory = ensure_corpus(n)
    reference = reference_counts(directory)
    record: dict[str, Any] = {"workload": "W1T-spark", "n": n, "batch_size": batch_size, "launcher": launcher}
    trident = _trident_on_spark(directory, batch_size, launcher)
    record["trident_spark"] = {"sentences_per_s": round(n / trident["wall_s"], 1),
                               **{k: v for k, v in trident.items() if k != "counts"},
                               "correct": trident["counts"] == reference}
    # the peers' micro-batches as many and as large as the Trident query's, as far as whole files
    # allow: a Trident batch is batch_size lines of every file, a peer's batch whole files
    batches = -(-LINES_PER_FILE // batch_size)
    files = len(corpus_files(directory))
    record["batches"] = batches
    for split in ("sql", "udf"):
        wall, counts, version = spark_w1.measure(directory, split, files_per_batch=-(-files // batches))
        record[f"spark_{split}"] = {"wall_s": round(wall, 3), "sentences_per_s": round(n / wall, 1),
                                    "correct": counts == reference}
        record["pyspark"] = version
    if engine:
        from .w1t_trident import run_trident

        squall = run_trident(n, "local")  # its own batches: --batch-size sentences over all files
        record["trident_squall"] = {k: squall[k] for k in ("wall_s", "sentences_per_s", "batches",
                                                          "batch_latency_mean_ms", "correct")}
    record["ratio_to_spark_sql"] = round(record["trident_spark"]["sentences_per_s"]
                                         / record["spark_sql"]["sentences_per_s"], 3)
    return record


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.w1t_spark [--n N] [--batch-size B] [--no-engine] [--no-launcher]``: print the record as one JSON
    line and append it to ``bench/results/w1t_spark.jsonl``."""
    parser = argparse.ArgumentParser(prog="python -m bench.w1t_spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="sentences (default 100,000)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="lines of each corpus file one Trident batch reads (default 2,500)")
    parser.add_argument("--no-engine", action="store_true", help="skip the run on squall's engine")
    parser.add_argument("--no-launcher", action="store_true",
                        help="Spark's default Python executable for the Trident query, not squall's launcher")
    args = parser.parse_args(argv)
    from . import harness

    before = round(os.getloadavg()[0], 2)
    record = harness.finish_record(run(args.n, args.batch_size, not args.no_engine, not args.no_launcher))
    record["loadavg_1m_before"] = before
    harness.emit_record(record, harness.RESULTS_DIR / "w1t_spark.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
