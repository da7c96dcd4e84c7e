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
peers read ``maxFilesPerTrigger`` files a batch). The default is W1's own size (BENCHMARKS.md:
1,000,000 sentences, 100 files) in 20 batches of 50,000 sentences (``--batch-size 500``), the
batch of every earlier measurement; ``--n 200000 --batch-size 2500``, the earlier runs' size, is
4 batches of 50,000. The Trident query's session runs Spark's Python processes
through ``squall.trident.spark.daemon`` and, unless ``--no-launcher``, with
``squall.trident.spark.launcher`` as their Python executable and squall's fork server started
with the session (as ``squall trident`` does: ``squall.trident.spark.forkserver``, which forks
those processes from one that imported pyspark, pyarrow and Trident while the JVM started); the
peers' are Spark's defaults. The Trident query's time is from ``start()`` to the end of ``processAllAvailable()``;
its batch latency is each micro-batch's ``triggerExecution`` (Spark's own progress: the mean,
and each batch's in ``batch_latency_ms``), ``first_batch_after_s`` the time before the first
batch started (the query's Python processes starting), and ``where`` splits the batches into
Spark's phases (``latestOffset``: the spout's planning emit on the
driver; ``addBatch``: the Trident batch, its jobs and the state commit; the WAL writes).
Correct means the driver's counts equal the corpus's reference counts.

The JVM (``--jvm``): a Spark way's time depends on how warm its JVM is (class loading, the JIT,
Spark's code generation, pyspark's first imports in the driver): the SQL split took 20.1 s in a
fresh JVM, then 6.8 s and 4.1 s in the same one (load 3.5). ``cold`` (the default) runs each of
the three Spark ways in a process of its own, so each pays its own JVM's warm-up inside its
clock, as the peers' docstring says their time does (``bench.peers.spark_w1``); ``warm`` runs
each in a process of its own after an untimed run of the same way over two corpus files (the
start and batches of a query in an application that has run Spark queries before); ``shared``
is the earlier layout, all three in this process in a row, the Trident query first: the peers
then ran in a JVM the Trident query had warmed. ``cpu_s`` is the CPU of each way's whole process
tree (the driver, the JVM, every Python process Spark started; SparkSession made and stopped
included), which the machine's other load changes less than the wall time.

``--repeat R`` runs each Spark way R times, the ways in turn and the order reversed each time
(trident, sql, udf, then udf, sql, trident, ...), and reports each way's median run and each
repeat's Trident-to-SQL ratio (``pair_ratios``): the machine's speed swings within minutes, and
one run of each way in a fixed order measures the swing as much as the ways.

    python -m bench.w1t_spark --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .corpus import LINES_PER_FILE, corpus_files, ensure_corpus, reference_counts

DEFAULT_N = 1_000_000  # W1's size (BENCHMARKS.md)
DEFAULT_BATCH_SIZE = 500  # lines of each corpus file a batch reads: 100 files of 10,000 sentences, 20 batches of 50,000
WARM_UP_N = 20_000  # the corpus of a --jvm warm run's untimed first run: two files
WAYS = ("trident", "sql", "udf")
JVMS = ("cold", "warm", "shared")


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system) of process ``root`` (default this one) and every process under
    it, live or ended and reaped (a live process's ``cutime``/``cstime``: the JVM reaps the Python
    processes Spark starts); 0 where there is no ``/proc``."""
    root = os.getpid() if root is None else root
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / tick


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


def run_way(way: str, n: int, batch_size: int = DEFAULT_BATCH_SIZE, launcher: bool = True) -> dict[str, Any]:
    """One Spark way (``trident``, ``sql`` or ``udf``) over the corpus of ``n`` sentences, in this
    process: its time, correctness and ``cpu_s`` (`tree_cpu_s` over the whole way)."""
    from .peers import spark_w1

    directory = ensure_corpus(n)
    reference = reference_counts(directory)
    cpu0 = tree_cpu_s()
    if way == "trident":
        trident = _trident_on_spark(directory, batch_size, launcher)
        out = {"sentences_per_s": round(n / trident["wall_s"], 1), **{k: v for k, v in trident.items() if k != "counts"},
               "correct": trident["counts"] == reference}
    else:
        # the peers' micro-batches as many and as large as the Trident query's, as far as whole
        # files allow: a Trident batch is batch_size lines of every file, a peer's batch whole files
        batches = -(-LINES_PER_FILE // batch_size)
        files = len(corpus_files(directory))
        wall, counts, version = spark_w1.measure(directory, way, files_per_batch=-(-files // batches))
        out = {"wall_s": round(wall, 3), "sentences_per_s": round(n / wall, 1), "correct": counts == reference,
               "pyspark": version}
    out["cpu_s"] = round(tree_cpu_s() - cpu0, 2)
    return out


def _way_in_process(way: str, n: int, batch_size: int, launcher: bool, warm: bool) -> dict[str, Any]:
    """`run_way` in a fresh Python process (so a fresh JVM); ``warm``: after an untimed run of
    the same way over `WARM_UP_N` sentences there."""
    repo = str(Path(__file__).resolve().parents[1])
    args = [sys.executable, "-m", "bench.w1t_spark", "--way", way, "--n", str(n), "--batch-size", str(batch_size)]
    args += ["--no-launcher"] if not launcher else []
    args += ["--warm-up"] if warm else []
    done = subprocess.run(args, cwd=repo, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def way_order(repeat: int) -> tuple[str, ...]:
    """The order the Spark ways run in repeat ``repeat`` (from 0): `WAYS`, then reversed, and so
    on, so that no way always runs first (on this machine the first of a pair of runs was the
    faster in 11 of 12 pairs, whichever code it ran) or always meets the load the others raised."""
    return WAYS if repeat % 2 == 0 else WAYS[::-1]


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Of one way's ``runs`` (each `run_way`'s result), the one of median wall time (of an even
    number, the slower of the middle two), with every run's wall and CPU beside it."""
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    chosen = dict(ordered[len(ordered) // 2])
    if len(runs) > 1:
        chosen["runs_wall_s"] = [r["wall_s"] for r in runs]
        chosen["runs_cpu_s"] = [r["cpu_s"] for r in runs]
        chosen["correct"] = all(r["correct"] for r in runs)
    return chosen


def run(n: int = DEFAULT_N, batch_size: int = DEFAULT_BATCH_SIZE, engine: bool = True,
        launcher: bool = True, jvm: str = "cold", repeat: int = 1) -> dict[str, Any]:
    """One record: sentences/s of each way, batch latency of the Trident ones, correctness;
    ``jvm``: where each Spark way runs (see the module docstring); ``repeat``: how many times each
    Spark way runs, in the alternating order of `way_order` (``cold`` and ``warm`` only), each
    way's figures then its median run's (`median_run`), and ``pair_ratios`` each repeat's ratio."""
    if jvm not in JVMS:
        raise ValueError(f"jvm {jvm!r}: expected one of {JVMS}")
    if repeat < 1 or (repeat > 1 and jvm == "shared"):
        raise ValueError(f"repeat {repeat}: expected 1 or more, and 1 with jvm 'shared' (its ways share one JVM)")
    record: dict[str, Any] = {"workload": "W1T-spark", "n": n, "batch_size": batch_size, "launcher": launcher,
                              "jvm": jvm, "batches": -(-LINES_PER_FILE // batch_size), "repeat": repeat}
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    for r in range(repeat):
        for way in way_order(r):
            if jvm == "shared":
                result = run_way(way, n, batch_size, launcher)
            else:
                result = _way_in_process(way, n, batch_size, launcher, warm=jvm == "warm")
            if "pyspark" in result:
                record["pyspark"] = result.pop("pyspark")
            runs[way].append(result)
    for way in WAYS:
        record["trident_spark" if way == "trident" else f"spark_{way}"] = median_run(runs[way])
    if repeat > 1:
        record["pair_ratios"] = [round(s["wall_s"] / t["wall_s"], 3) for t, s in zip(runs["trident"], runs["sql"])]
    if engine:
        from .w1t_trident import run_trident

        squall = run_trident(n, "local")  # its own batches: --batch-size sentences over all files
        record["trident_squall"] = {k: squall[k] for k in ("wall_s", "sentences_per_s", "batches",
                                                          "batch_latency_mean_ms", "correct")}
    record["ratio_to_spark_sql"] = round(record["trident_spark"]["sentences_per_s"]
                                         / record["spark_sql"]["sentences_per_s"], 3)
    # the same ratio in CPU: the SQL split's CPU over the Trident query's
    record["cpu_ratio_to_spark_sql"] = round(record["spark_sql"]["cpu_s"] / record["trident_spark"]["cpu_s"], 3)
    return record


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.w1t_spark [--n N] [--batch-size B] [--no-engine] [--no-launcher] [--jvm cold|warm|shared]
    [--repeat R] [--no-save]``: print the record as one JSON line and append it to ``bench/results/w1t_spark.jsonl``."""
    parser = argparse.ArgumentParser(prog="python -m bench.w1t_spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="sentences (default W1's 1,000,000)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help="lines of each corpus file one Trident batch reads (default 500: batches of 50,000 "
                             "sentences at the default --n)")
    parser.add_argument("--no-engine", action="store_true", help="skip the run on squall's engine")
    parser.add_argument("--no-launcher", action="store_true",
                        help="Spark's default Python executable for the Trident query, not squall's launcher")
    parser.add_argument("--jvm", choices=JVMS, default="cold",
                        help="each Spark way in a fresh process (cold, the default), the same after an untimed "
                             "run (warm), or all in this process, the Trident query first (shared)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each Spark way this many times, in alternating order, and report each "
                             "way's median run (default 1)")
    parser.add_argument("--no-save", action="store_true", help="print the record only")
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one way, its JSON on stdout: run()'s child
    parser.add_argument("--warm-up", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.way is not None:
        if args.warm_up:
            run_way(args.way, WARM_UP_N, args.batch_size, not args.no_launcher)
        print(json.dumps(run_way(args.way, args.n, args.batch_size, not args.no_launcher)), flush=True)
        return 0
    from . import harness

    before = round(os.getloadavg()[0], 2)
    record = harness.finish_record(run(args.n, args.batch_size, not args.no_engine, not args.no_launcher, args.jvm,
                                       args.repeat))
    record["loadavg_1m_before"] = before
    harness.emit_record(record, None if args.no_save else harness.RESULTS_DIR / "w1t_spark.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
