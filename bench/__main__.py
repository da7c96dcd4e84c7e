"""Command line of the benchmarks.

    python -m bench run W1 --acking on|off [--n 1000000] [--repeat 3] [--max-pending 1000|auto]
    python -m bench run W1T [--n 1000000] [--batch-size 2500] [--max-pending 3] [--repeat 3]
        [--host local|process] [--workers 2]
    python -m bench run W2 --acking on|off [--secs 30] [--warmup 10] [--repeat 1]
    python -m bench run W3 --acking on|off [--secs 30] [--warmup 10] [--repeat 1]
    python -m bench run W4 [--rate 1000|half-peak] [--secs 30] [--warmup 10] [--probe-secs 3]
        [--max-pending 1000|auto] [--repeat 1]
        [--host local|process|spark] [--workers N] [--parallelism P] [--spark-master URL]
        [--conf KEY=VALUE ...]
    python -m bench run MEM [--pending 100000] [--ks 1,20] [--idle-secs 5] [--repeat 1]
    python -m bench run MEM --host process|spark [--workers N] [--idle-secs 5]
    python -m bench run RECOVERY --host process|spark [--workers 2] [--rate 1000] [--warmup 10]
        [--observe 100] [--message-timeout 30] [--max-pending 1000]
    python -m bench run W5 --host process|spark [--workers 4] [--rate 1000] [--kill-every 20] [--kills 3]
        [--message-timeout 30] [--max-pending 1000] [--plot FILE.png]
    python -m bench peers [--n 1000000] [--rounds 3] [--no-save]
    python -m bench instructions W1|W2 [--acking on|off] [--n N1,N2] [--baseline]
    python -m bench instructions W1 --host process [--workers 2] [--n N1,N2] [--cache]
    python -m bench instructions W1 --host process --crossing [--repeat 3] [--home] [--cache]
    python -m bench profile W1 [--n 1000000] [--rounds 2] [--home] [--top 40]
    python -m bench tuner [--host process] [--workers 2] [--n 1000000] [--w4-rate half-peak] [--rounds 3]
        [--settings 100,1000,10000,auto] [--no-save]
    python -m bench report [--results bench/results/results.jsonl] [--latest]
    python -m bench report --docs docs/benchmarks.md [--all-commits]

``--host local`` (default) runs LocalCluster (1 worker, in this process); ``--host process``
starts a throwaway master + supervisor with ``--workers`` worker processes, and ``--host spark``
a throwaway SparkCluster (a new SparkSession on ``--spark-master``, default ``local[N]`` with
N = ``--workers``; the master in this process, each worker a Spark task) (`bench.hosts`). Both
run each component with ``--parallelism`` executors (default: the number of workers; W1's
spout always has one). ``--conf KEY=VALUE`` (repeatable; VALUE is YAML) adds a cluster setting
for those hosts, e.g. ``--conf squall.encryption=true``; the record says so in ``host_conf``.

W1T (`bench.w1t_trident`; acking on) is W1 as a Trident word count persisted into a
``MemoryMapState``, run in each repetition right after core W1 with acking on on the same corpus
and host, so that the two are interleaved: the record has W1T's sentences/s, words/s and batch
latency (mean, p50, p99: a batch's first emit to its ``$success`` back at the spout), core W1's
sentences/s beside them and ``ratio_to_w1`` (the target is at least 1.0). ``--max-pending``
is W1T's batches in flight (default 3; core W1 keeps its 1,000 tuples) and ``--batch-size`` the
sentences a spout task puts in a batch (default 2,500, chosen from measurements of 1,000, 2,500
and 5,000: docs/profiles/w1t.md); the batch emit interval is 0 (Storm's 500 ms would cap
a batch of 1,000 at 2,000 sentences/s). Correct means its counts equal W1's reference and core
W1's run was correct too.

W4 (`bench.w4_latency`) is always acking on (``--acking`` may be left out): a spout paced at
``--rate`` tuples/s (all its tasks together; default 1,000) into W3's shape, figures over
``--secs`` after ``--warmup`` seconds of the spout's own schedule; ``--rate half-peak`` first
measures W3's peak acked rate on the same host (``--probe-secs`` window after a short warm-up)
and runs at half of it. Its baseline is the same three stages as Python threads and queues at
the same rate.

MEM (`bench.memory`; acking on, no baseline): on LocalCluster, this process's RSS before and
after an idle topology and its CPU over ``--idle-secs``, then the acker's and the spout's bytes
per pending tuple with ``--pending`` spout tuples in flight, and the acker's by tree fan-out k
for each k of ``--ks``. On ``--host process`` or ``spark``, an idle worker's settled RSS and the
workers' CPU over ``--idle-secs``.

RECOVERY (`bench.recovery`; acking on, no baseline): a reliable topology at a steady ``--rate``
on ``--host process`` or ``spark``; one worker (not the spout's) is SIGKILLed after ``--warmup``
seconds, and the record says how long the acked rate took to be back to 80% of before
(``recovery_s``) and how many tuples failed and were replayed, watching for at most
``--observe`` seconds.

W5 (`bench.w5_resilience`; acking on, no baseline): the paper's resilience run. Its own
redis-server, a feeder of client events at ``--rate`` events/s into a Redis stream,
RedisStreamSpout -> Distributor -> UserCount -> Aggregator -> the idempotent Redis sink on
``--workers`` (default 4) workers; a worker SIGKILLed every ``--kill-every`` seconds, ``--kills``
times. Prints the per-second acked tuples/s and mean complete latency, each kill's recovery, and
the exactly-once proof (``--plot``: also draws them as a PNG, the kills marked).

Each run prints one JSON line and appends it to the results file (``--no-save``: print only);
with ``--repeat`` > 1 each run is a fresh interpreter (``--in-process`` to keep one), and a last
line (``"kind": "median"``, not saved) gives the medians.
``tuner`` (`bench.tuner`) runs W1 and W4 with ``--max-pending`` 100, 1,000, 10,000 and ``auto``
(the max spout pending tuner), interleaved, and prints the table of docs/benchmarks.md's section
on the tuner.
``report`` prints a markdown table of medians (min-max) per configuration and squall commit
(``--latest``: only each configuration's most recent commit). ``report --docs FILE`` writes the
benchmarks page instead (`bench.report`: tables per workload, the newest ``peers`` run from ``peers.jsonl`` beside the
results file, the newest ``tuner`` run from ``tuner.jsonl`` beside it, targets, memory, W4 and its
chart ``benchmarks-w4-latency.png`` beside FILE, profiles from ``profiles/*.md`` beside FILE).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from . import harness
from .hosts import HOST_CONF_ENV


def _run_isolated(args: argparse.Namespace) -> list[dict]:
    """Each repetition in a fresh interpreter: its own peak RSS, GC state and threads."""
    argv = [sys.executable, "-m", "bench", "run", args.workload, "--n", str(args.n),
            "--secs", str(args.secs), "--warmup", str(args.warmup), "--repeat", "1", "--results", args.results,
            "--rate", str(args.rate), "--probe-secs", str(args.probe_secs), "--pending", str(args.pending),
            "--ks", args.ks, "--idle-secs", str(args.idle_secs), "--observe", str(args.observe),
            "--message-timeout", str(args.message_timeout), "--kill-every", str(args.kill_every),
            "--kills", str(args.kills), "--batch-size", str(args.batch_size)]
    if args.acking is not None:
        argv += ["--acking", args.acking]
    if args.max_pending is not None:
        argv += ["--max-pending", str(args.max_pending)]
    argv += ["--host", args.host, "--workers", str(args.workers)]
    if args.spark_master is not None:
        argv += ["--spark-master", args.spark_master]
    if args.parallelism is not None:
        argv += ["--parallelism", str(args.parallelism)]
    if args.spouts is not None:
        argv += ["--spouts", str(args.spouts)]
    if args.no_save:
        argv.append("--no-save")
    if args.stats != "on":
        argv += ["--stats", args.stats]
    for setting in args.conf:
        argv += ["--conf", setting]
    records = []
    for _ in range(args.repeat):
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,  # stderr passes through
                                 cwd=Path(__file__).resolve().parent.parent)
        try:
            out, _ = child.communicate()
        except BaseException:
            # stopped (SIGINT/SIGTERM): let the run stop its cluster (it handles SIGTERM), then go
            child.terminate()
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
        sys.stdout.write(out)
        sys.stdout.flush()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines:
            raise SystemExit(f"run {len(records) + 1} of {args.repeat} printed no record (exit {child.returncode})")
        records.append(json.loads(lines[-1]))
    return records


def _run(args: argparse.Namespace) -> int:
    if args.repeat > 1 and not args.in_process:
        records = _run_isolated(args)
        harness.emit_record(harness.median_record(records), None)
        return 0 if all(r.get("correct") for r in records) else 1
    acking = args.acking != "off"  # W4 and MEM: always on
    results = None if args.no_save else Path(args.results)
    records = []
    for _ in range(args.repeat):
        kwargs = {} if args.max_pending is None else {"max_pending": args.max_pending}
        kwargs.update(host=args.host, workers=args.workers, parallelism=args.parallelism)
        host_conf = _host_conf(args.conf)
        if host_conf:  # read by bench.hosts.make_host
            os.environ[HOST_CONF_ENV] = json.dumps(host_conf)
        if args.spark_master is not None:
            kwargs["spark_master"] = args.spark_master
        if args.workload == "W1":
            from . import w1_wordcount
            record = w1_wordcount.run(n=args.n, acking=acking, spouts=args.spouts, no_crossing=args.no_crossing,
                                      **kwargs)
        elif args.workload == "W1T":
            from . import w1t_trident
            record = w1t_trident.run(n=args.n, batch_size=args.batch_size, **kwargs)
        elif args.workload == "W4":
            from . import w4_latency
            record = w4_latency.run(rate=args.rate, secs=args.secs, warmup=args.warmup,
                                    probe_secs=args.probe_secs, **kwargs)
        elif args.workload == "RECOVERY":
            from . import recovery
            record = recovery.run(host=args.host, workers=args.workers, rate=float(args.rate),
                                  warmup=args.warmup, observe=args.observe, timeout=args.message_timeout,
                                  spark_master=args.spark_master, **({} if args.max_pending is None
                                                                     else {"max_pending": args.max_pending}))
        elif args.workload == "W5":
            from . import w5_resilience
            record = w5_resilience.run(host=args.host, workers=args.workers, parallelism=args.parallelism,
                                       rate=float(args.rate), kill_every=args.kill_every, kills=args.kills,
                                       timeout=args.message_timeout, spark_master=args.spark_master,
                                       plot_path=None if args.plot is None else Path(args.plot),
                                       **({} if args.max_pending is None else {"max_pending": args.max_pending}))
        elif args.workload == "MEM":
            from . import memory
            record = memory.run(host=args.host, workers=args.workers, pending=args.pending,
                                ks=_ks(args.ks), idle_secs=args.idle_secs, spark_master=args.spark_master)
        else:
            from . import w2_const_null
            record = w2_const_null.run(args.workload, acking=acking, secs=args.secs, warmup=args.warmup,
                                       stats=args.stats != "off", **kwargs)
        if host_conf:
            record["host_conf"] = host_conf
        harness.emit_record(record, results)
        records.append(record)
    if len(records) > 1:
        harness.emit_record(harness.median_record(records), None)
    return 0 if all(r.get("correct") for r in records) else 1


def _host_conf(settings: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` settings (VALUE read as YAML) as a dict."""
    out: dict[str, Any] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            raise SystemExit(f"--conf {setting!r}: expected KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def _max_pending(text: str) -> int | str:
    """``--max-pending``: a positive number of tuples per spout task, or ``auto`` (the tuner)."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")
    return n


def _ks(text: str) -> tuple[int, ...]:
    return tuple(int(k) for k in text.split(",") if k.strip())


def _report(args: argparse.Namespace) -> int:
    records = harness.load_results(Path(args.results))
    if args.docs is None:
        print(harness.report(records, latest=args.latest))
        return 0
    from . import report  # imports matplotlib only if there is a W4 chart to draw

    results_name = Path(args.results)
    try:
        results_name = results_name.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    peer_lines = harness.load_results(Path(args.results).parent / "peers.jsonl")
    tuner_lines = harness.load_results(Path(args.results).parent / "tuner.jsonl")
    for path in report.write_docs(records, Path(args.docs), all_commits=args.all_commits,
                                  results_name=results_name.as_posix(), peer_lines=peer_lines,
                                  tuner_lines=tuner_lines):
        print(f"wrote {path}")
    return 0


def _peers(args: argparse.Namespace) -> int:
    from . import peers

    if args.n < 1 or args.rounds < 1:
        raise SystemExit("--n and --rounds must be at least 1")
    return peers.main(args.n, args.rounds, args.no_save)


def _instructions(args: argparse.Namespace) -> int:
    from . import instructions

    try:
        sizes = tuple(int(x) for x in args.n.split(",")) if args.n else None
    except ValueError:
        raise SystemExit(f"--n takes two sizes, e.g. 4000,12000: got {args.n!r}") from None
    if sizes is not None and len(sizes) != 2:
        raise SystemExit(f"--n takes two sizes, e.g. 4000,12000: got {args.n!r}")
    try:
        if args.crossing:
            if args.workload != "W1" or args.host != "process":
                raise ValueError("--crossing measures W1 on the process host: add --host process")
            measured = instructions.crossing(args.repeat, sizes or instructions.PROCESS_N, args.acking == "on",
                                             args.home, args.cache)
        elif args.home:
            raise ValueError("--home is for --crossing (W1 on the process host)")
        else:
            measured = instructions.measure(args.workload, args.acking == "on", sizes, args.host, args.workers,
                                            args.baseline, args.cache)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    print(json.dumps(measured))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from . import native_profile

    if args.n < 10_000 or args.rounds < 1 or args.top < 1:
        raise SystemExit("--n takes at least 10000 sentences, --rounds and --top at least 1")
    try:
        result = native_profile.run(args.rounds, args.n, args.home, args.top)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    print(json.dumps(result) if args.json else native_profile.format_table(result))
    return 0


def _tuner(args: argparse.Namespace) -> int:
    from . import tuner

    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    for s in settings:
        try:
            _max_pending(s)
        except argparse.ArgumentTypeError as e:
            raise SystemExit(f"--settings: {e}") from None
    if args.w4_rate != "half-peak":
        try:
            float(args.w4_rate)
        except ValueError:
            raise SystemExit(f"--w4-rate: tuples/s or half-peak, got {args.w4_rate!r}") from None
    if args.rounds < 1 or args.n < 1 or not settings:
        raise SystemExit("--rounds and --n must be at least 1, and --settings not empty")
    return tuner.main(args.host, args.workers, args.n, args.w4_rate, args.secs, args.warmup, args.rounds,
                      settings, args.no_save)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (and SIGINT, which a shell's background job ignores) unwind like Ctrl-C, so a run
    # on the process host stops the master, supervisor and workers it started
    if __name__ == "__main__":
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one workload (LocalCluster, the process or the Spark host) and its baseline")
    run.add_argument("workload", choices=["W1", "W1T", "W2", "W3", "W4", "W5", "MEM", "RECOVERY"], type=str.upper)
    run.add_argument("--acking", choices=["on", "off"], default=None,
                     help="W1-W3: required; W4 and MEM: always on")
    run.add_argument("--n", type=int, default=1_000_000, help="W1, W1T: sentences (default 1,000,000)")
    run.add_argument("--batch-size", type=int, default=2500,
                     help="W1T: sentences per Trident batch and spout task (default 2,500)")
    run.add_argument("--secs", type=float, default=30.0, help="W2/W3/W4: measured window (default 30)")
    run.add_argument("--stats", choices=["on", "off"], default="on",
                     help="W2/W3 on LocalCluster: Storm's statistics on (default) or off "
                          "(topology.stats.enabled), to measure what they cost")
    run.add_argument("--warmup", type=float, default=10.0, help="W2/W3/W4: warm-up before it (default 10)")
    run.add_argument("--rate", default="1000",
                     help="W4: tuples/s the spout emits (all its tasks; default 1000), or half-peak: half of "
                          "W3's acked tuples/s, measured first on the same host")
    run.add_argument("--probe-secs", type=float, default=3.0,
                     help="W4 --rate half-peak: the W3 probe's measured window (default 3)")
    run.add_argument("--pending", type=int, default=100_000,
                     help="MEM: spout tuples in flight when the pending maps are measured (default 100000)")
    run.add_argument("--ks", default="1,20",
                     help="MEM: tree fan-outs k (children per spout tuple) to measure the acker with (default 1,20)")
    run.add_argument("--idle-secs", type=float, default=5.0,
                     help="MEM: window over which the idle topology's CPU is measured (default 5)")
    run.add_argument("--observe", type=float, default=100.0,
                     help="RECOVERY: watch at most this long after the kill (default 100)")
    run.add_argument("--message-timeout", type=int, default=30,
                     help="RECOVERY: topology.message.timeout.secs (default 30, Storm's)")
    run.add_argument("--kill-every", type=float, default=20.0,
                     help="W5: seconds between worker kills, and before the first and after the last (default 20)")
    run.add_argument("--kills", type=int, default=3, help="W5: workers SIGKILLed (default 3)")
    run.add_argument("--plot", default=None, metavar="FILE.png",
                     help="W5: draw the per-second acked rate and latency with the kills marked")
    run.add_argument("--repeat", type=int, default=1, help="runs; a median line follows if > 1")
    run.add_argument("--max-pending", type=_max_pending, default=None,
                     help="topology.max.spout.pending with acking on (default 1000), or auto: the tuner")
    run.add_argument("--host", choices=["local", "process", "spark"], default="local",
                     help="local: LocalCluster, 1 worker (default); process: a throwaway master + "
                          "supervisor with --workers worker processes; spark: a throwaway SparkCluster "
                          "with --workers workers as Spark tasks")
    run.add_argument("--workers", type=int, default=None,
                     help="worker processes (--host process|spark; default 1, W5: 4)")
    run.add_argument("--parallelism", type=int, default=None,
                     help="executors per component on the process or Spark host (default: --workers)")
    run.add_argument("--spouts", type=int, default=None,
                     help="W1 on the process or Spark host: spout tasks, each reading its own corpus files "
                          "(default: --workers, one per worker)")
    run.add_argument("--spark-master", default=None,
                     help="--host spark: the Spark master URL (default: local[N], N = --workers)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                     help="--host process|spark: a cluster setting (VALUE is YAML; repeatable), "
                          "e.g. squall.encryption=true")
    run.add_argument("--no-crossing", action="store_true",
                     help="W1 on the process or Spark host: the control, count on a local-or-shuffle "
                          "grouping so that no word leaves its worker (merged counts still checked): "
                          "what the workers give W1 without the fields grouping's crossings")
    run.add_argument("--results", default=str(harness.RESULTS_FILE), help="results file to append to")
    run.add_argument("--no-save", action="store_true", help="print only; do not append to the results file")
    run.add_argument("--in-process", action="store_true",
                     help="with --repeat, run the repetitions in this process (default: one fresh "
                          "interpreter each, so each has its own peak RSS)")
    run.set_defaults(func=_run)

    peers = sub.add_parser("peers", help="W1 with the baseline loop, squall, Bytewax and Spark Structured "
                                         "Streaming on the same bytes, interleaved round by round (bench.peers)")
    peers.add_argument("--n", type=int, default=1_000_000, help="sentences (default 1,000,000)")
    peers.add_argument("--rounds", type=int, default=3, help="rounds; each runs every system once (default 3)")
    peers.add_argument("--no-save", action="store_true",
                       help="print only; do not append to bench/results/peers.jsonl")
    peers.set_defaults(func=_peers)

    ins = sub.add_parser("instructions", help="instructions per tuple under Valgrind: the engine's work, "
                                              "unmoved by this machine's speed (bench.instructions)")
    ins.add_argument("workload", choices=["W1", "W2"])
    ins.add_argument("--acking", choices=["on", "off"], default="on")
    ins.add_argument("--n", default=None, help="the two run sizes, e.g. 4000,12000 (default: W1 4000,12000; "
                                               "W2 20000,60000; W1 on the process host 3000,15000)")
    ins.add_argument("--host", choices=["local", "process"], default="local",
                     help="LocalCluster (the default), or the process host (W1 only: its workers' instructions)")
    ins.add_argument("--workers", type=int, default=1, help="worker processes on the process host (default 1)")
    ins.add_argument("--crossing", action="store_true",
                     help="W1 on the process host on 1 and 2 workers, alternated: a crossing word against a "
                          "local word, and what the scaling model predicts from them")
    ins.add_argument("--repeat", type=int, default=3, help="--crossing: rounds, each count's median kept (default 3)")
    ins.add_argument("--home", action="store_true",
                     help="--crossing: the shuffle keeps every sentence in its spout's worker, so that only "
                          "the fields grouping's words cross (the model's crossings)")
    ins.add_argument("--baseline", action="store_true",
                     help="LocalCluster: count the workload's baseline loop too, and print the ratio of the counts "
                          "(the instructions' twin of the timed ratio)")
    ins.add_argument("--cache", action="store_true",
                     help="the process host: simulate a core's caches too (32 KB L1, 512 KB L2) and count the "
                          "workers' L2 misses a sentence beside the instructions (runs several times slower)")
    ins.set_defaults(func=_instructions)

    prof = sub.add_parser("profile", help="W1 on the process host on 1 and 2 workers under perf, alternated: "
                                          "the workers' CPU a sentence per symbol, in time (bench.native_profile)")
    prof.add_argument("workload", choices=["W1"])
    prof.add_argument("--n", type=int, default=1_000_000, help="sentences a run (default 1,000,000)")
    prof.add_argument("--rounds", type=int, default=2, help="alternated pairs of runs, medians kept (default 2)")
    prof.add_argument("--home", action="store_true",
                      help="the shuffle keeps every sentence in its spout's worker: only the fields grouping's "
                           "words cross (the model's crossings)")
    prof.add_argument("--top", type=int, default=40, help="symbols listed each way (default 40)")
    prof.add_argument("--json", action="store_true", help="the comparison as JSON instead of tables")
    prof.set_defaults(func=_profile)

    tun = sub.add_parser("tuner", help="W1 and W4 with max spout pending 100, 1000, 10000 and auto (the tuner), "
                                       "interleaved; prints the table for docs/benchmarks.md (bench.tuner)")
    tun.add_argument("--host", choices=["local", "process", "spark"], default="process",
                     help="where to run (default process)")
    tun.add_argument("--workers", type=int, default=2, help="worker processes, --host process|spark (default 2)")
    tun.add_argument("--n", type=int, default=1_000_000, help="W1 sentences (default 1,000,000)")
    tun.add_argument("--w4-rate", default="half-peak",
                     help="W4 tuples/s for every setting, or half-peak (default): half of W3's peak, measured once")
    tun.add_argument("--secs", type=float, default=20.0, help="W4 measured window (default 20)")
    tun.add_argument("--warmup", type=float, default=10.0, help="W4 warm-up before it (default 10)")
    tun.add_argument("--rounds", type=int, default=3, help="rounds; each runs every setting once (default 3)")
    tun.add_argument("--settings", default="100,1000,10000,auto",
                     help="comma-separated max spout pending values (default 100,1000,10000,auto)")
    tun.add_argument("--no-save", action="store_true", help="print only; do not append to bench/results/tuner.jsonl")
    tun.set_defaults(func=_tuner)

    rep = sub.add_parser("report", help="markdown table of medians from the results file, or (--docs) the "
                                        "benchmarks page")
    rep.add_argument("--results", default=str(harness.RESULTS_FILE))
    rep.add_argument("--latest", action="store_true",
                     help="per configuration, only the squall commit of its most recent run")
    rep.add_argument("--docs", default=None, metavar="FILE",
                     help="write the benchmarks page (e.g. docs/benchmarks.md) and the W4 chart beside it")
    rep.add_argument("--all-commits", action="store_true",
                     help="--docs: a row per squall commit, not only each configuration's most recent")
    rep.set_defaults(func=_report)

    args = parser.parse_args(argv)
    if getattr(args, "repeat", 1) < 1:
        parser.error("--repeat must be at least 1")
    if args.command == "run":
        if args.workers is None:
            args.workers = 4 if args.workload == "W5" and args.host != "local" else 1
        if args.workers < 1:
            parser.error("--workers must be at least 1")
        if args.workload in ("W1", "W2", "W3") and args.acking is None:
            parser.error(f"{args.workload} needs --acking on|off")
        if args.no_crossing and (args.workload != "W1" or args.host == "local" or args.workers < 2):
            parser.error("--no-crossing is W1's control for 2 or more workers: it needs --host process|spark "
                         "and --workers 2 or more")
        if args.workload == "RECOVERY":
            if args.host == "local" or args.workers < 2:
                parser.error("RECOVERY kills a worker process: it needs --host process|spark and --workers 2 or more")
            try:
                float(args.rate)
            except ValueError:
                parser.error(f"--rate: RECOVERY takes tuples/s, got {args.rate!r}")
        if args.workload == "W5":
            if args.host == "local":
                parser.error("W5 kills worker processes: it needs --host process|spark")
            if args.kills < 0 or args.kill_every <= 0:
                parser.error("W5 needs --kills 0 or more and --kill-every above 0")
            try:
                float(args.rate)
            except ValueError:
                parser.error(f"--rate: W5 takes events/s, got {args.rate!r}")
        if args.workload in ("W4", "MEM", "RECOVERY", "W5") and args.acking == "off":
            parser.error(f"{args.workload} runs with acking on only")
        if args.workload == "W4":
            from .w4_latency import parse_rate
            try:
                parse_rate(args.rate)
            except ValueError as e:
                parser.error(f"--rate: {e}")
        if args.workload == "MEM":
            if args.parallelism is not None:
                parser.error("MEM takes no --parallelism (one executor per component per worker)")
            try:
                ks = _ks(args.ks)
            except ValueError:
                parser.error(f"--ks: a comma-separated list of integers, got {args.ks!r}")
            if not ks or min(ks) < 1 or args.pending < 1:
                parser.error("--ks needs at least one k >= 1, and --pending at least 1")
        if args.host == "local" and (args.workers != 1 or args.parallelism is not None):
            parser.error("--host local runs LocalCluster: one worker, parallelism 1 "
                         "(use --host process or spark for --workers/--parallelism)")
        if args.spark_master is not None and args.host != "spark":
            parser.error("--spark-master is for --host spark")
        if args.conf and args.host == "local":
            parser.error("--conf is for --host process|spark (LocalCluster reads no cluster settings)")
        if args.parallelism is not None and args.parallelism < 1:
            parser.error("--parallelism must be at least 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
