"""Instructions per tuple: a measure of the engine's CPU work that this machine's noise cannot move.

This machine's speed swings 2x within minutes, so an interleaved timing needs many rounds to
show a change of a few percent. The number of machine instructions a run executes does not
swing: run under Valgrind's cachegrind (``--cache-sim=no``: it only counts), the same run
executes the same instructions to within a fraction of a percent. Two runs of ``n1`` and ``n2``
tuples cancel what does not grow with the tuples (start-up, imports, the topology's submission
and stop), so ``(Ir(n2) - Ir(n1)) / (n2 - n1)`` is what one more tuple costs::

    python -m bench instructions W1 [--acking on|off] [--n 4000,12000]
    python -m bench instructions W2 [--acking on|off] [--n 20000,60000]

W1 counts sentences (each one sentence and its 10 words), W2 tuples; both on LocalCluster (one
worker, in the process Valgrind runs). ``--baseline`` counts the workload's hand-written loop
(the one the timed ratio divides by: `bench.corpus.baseline_wordcount`, `bench.w2_const_null.baseline_w2`)
at the same two sizes, and prints the ratio of the two counts, the twin of a timed record's
``ratio``: the two together tell what part of the gap is the instructions squall executes,
and what part the machine running them more slowly (caches)::

    python -m bench instructions W1 --acking off --baseline

What instructions do not show: cache misses, the cost of
waking threads and of switching between them, and everything outside the process, which is
where a crossing between workers spends much of its time (docs/profiles/w1-scaling-model.md).
So this ranks changes of the per-tuple work; timings (``python -m bench run``) still say what a
change buys.

W1 on the process host counts the instructions of its worker processes only (not the master's,
the supervisor's or the benchmark's, nor the workers' interpreter teardown:
``bench/no_teardown/sitecustomize.py``), each run under Valgrind with its children traced::

    python -m bench instructions W1 --host process --workers 2 [--n 3000,15000]

so 1 worker against 2 is what a sentence's crossings cost, whatever the machine's speed.
``--crossing`` runs both, alternated, for ``--repeat`` rounds, and prints the scaling model's
terms from the medians (`crossing`): a crossing word against a local word, and the share of one
worker's rate per core that N workers keep::

    python -m bench instructions W1 --host process --crossing [--repeat 3] [--home]

``--home`` keeps every sentence in its spout's worker (the load-aware shuffle's bounds at 1.0),
so that the words the fields grouping sends across are the only crossings, as in the model.

``--cache`` simulates a core's caches as well (`CACHE_SIM`: this machine's 32 KB first-level
caches and 512 KB L2; its L3 is shared) and counts the workers' L2 misses a sentence beside the
instructions, in the same two-size difference::

    python -m bench instructions W1 --host process --crossing --home --cache [--repeat 3]

A miss costs tens of cycles where an instruction costs a fraction of one, so the misses are
what the instructions leave out of a crossing's native cost (on 2026-12-04 two workers missed
about 2.5x as often a sentence as one, for 1.15x the instructions). Unlike the instructions they
move with the spout's burst, the round's size (docs/profiles/w1-scaling-model.md).

Two caveats: a thread under Valgrind runs about 50 times slower, so batches need not hold what
they hold in a timed run, the flush interval being a time (counted on 2026-12-03: a worker
opened 160-300 messages for 15,000 sentences under Valgrind, 50-94 sentences a message, and
1,147-1,183 for 150,000 natively, about 129); and code without symbols (the "???" in a
``cg_annotate`` of a worker: OpenSSL's assembly) is counted as Valgrind's CPU runs it. Until
the envelope's version 3 that was OpenSSL's generic SHA-256 for every batch's HMAC, about 28
instructions a byte where the real CPU's SHA extensions spend about 3 cycles; Poly1305 counts
about 2.7 a byte either way. ``--crossing`` gives the terms with and without it (`WorkerCount`).

Needs ``valgrind`` (Debian's package, installed by scripts/install-system-deps.sh). A run is
about 50x slower than natively: W1 with the default sizes takes about half a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any, NamedTuple

from squall import Config, LocalCluster

from . import harness, hosts, w1_wordcount, w2_const_null
from .corpus import baseline_wordcount

_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")
DEFAULT_N = {"W1": (4000, 12000), "W2": (20000, 60000)}
# W1 on the process host: a run of the smaller size is about 40 s under Valgrind (the workers'
# start-up is most of it), one of the larger about 90 s
PROCESS_N = (3000, 15000)
# How long the process host may take to start its master and supervisor under Valgrind: on a
# loaded machine they did not answer within its usual 30 s (the workers are their children, so
# they cannot run natively while the workers are traced)
START_TIMEOUT_SECS = 600
# How often a run looks at its topology's progress: seldom, as each look costs instructions,
# and under Valgrind a second passes for every few thousand tuples
LOOK_SECS = 0.5
# A directory whose sitecustomize ends each worker of a counted run without its interpreter's teardown
NO_TEARDOWN = Path(__file__).resolve().parent / "no_teardown"


class _LimitedConstSpout(w2_const_null.ConstSpout):
    """W2's spout, emitting ``limit`` tuples and then nothing."""

    def __init__(self, reliable: bool, limit: int) -> None:
        super().__init__(reliable)
        self.limit = limit
        self.emitted = 0

    def next_tuple(self) -> None:
        if self.emitted < self.limit:
            self.emitted += 1
            super().next_tuple()


def _run_w1(n: int, acking: bool) -> None:
    directory = w1_wordcount.ensure_corpus(n)
    output_dir = tempfile.mkdtemp(prefix="squall-instructions-")
    try:
        topology, conf = w1_wordcount.build(str(directory), acking, output_dir)
        with LocalCluster() as cluster:
            cluster.submit_topology("w1", conf, topology)
            harness.wait_until(cluster, "w1", lambda info: w1_wordcount._progress(info, n, acking), 1800,
                               poll=LOOK_SECS)
            cluster.kill_topology("w1", wait_secs=0)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)


def _run_w2(n: int, acking: bool, timeout: float = 1800.0) -> dict:
    """W2 with a spout that stops after ``n`` tuples, until they are acked (or executed); the
    components' figures then."""
    topology, conf, last = w2_const_null.build("W2", acking, None, spout=_LimitedConstSpout(acking, n))

    def progress(info: dict) -> float:
        comps = info["components"]
        return (comps["spout"]["acked"] if acking else comps[last]["executed"]) / n

    with LocalCluster() as cluster:
        cluster.submit_topology("w2", conf, topology)
        info = harness.wait_until(cluster, "w2", progress, timeout, poll=LOOK_SECS)
        cluster.kill_topology("w2", wait_secs=0)
    return info["components"]


def count(workload: str, n: int, acking: bool, baseline: bool = False) -> int:
    """The instructions one run of ``workload`` with ``n`` tuples executes, under cachegrind; with
    ``baseline``, the instructions of its baseline loop over as many tuples instead (`_baseline`)."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed: run scripts/install-system-deps.sh (Debian's valgrind)")
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
           sys.executable, "-m", "bench.instructions", "--baseline" if baseline else "--inner", workload, str(n),
           "on" if acking else "off"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    found = _IREFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        what = f"{workload}'s baseline" if baseline else workload
        raise RuntimeError(f"{what} n={n} under valgrind failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


# The load-aware shuffle keeps every tuple in the emitting worker while the local targets' load
# is at most the higher bound, and a load is at most 1 unless an inbox holds more than its
# capacity (32,768 items; W1's max spout pending keeps a worker's words in flight near 10,000)
# the load-aware shuffle never leaves home: every sentence stays in its spout's worker, so that
# the fields grouping's words are the only crossings (the model's)
AT_HOME = {Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND: 1.0, Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND: 1.0}


def host_conf(home: bool = False) -> dict[str, Any]:
    """The process host's settings for a counted run: its workers' time to stop, and with
    ``home`` a load-aware shuffle that keeps every sentence in its spout's worker."""
    conf = dict(json.loads(os.environ.get(hosts.HOST_CONF_ENV) or "{}"))
    # a worker under Valgrind writes its cachegrind file only when it exits: let it take its
    # time to stop (Storm's supervisor.worker.shutdown.sleep.secs) instead of the 3 s after
    # which its supervisor SIGKILLs it and its instructions are lost
    conf.setdefault(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, START_TIMEOUT_SECS)
    if home:
        conf.update(AT_HOME)
    return conf


def with_no_teardown(pythonpath: str | None) -> str:
    """``pythonpath`` with `NO_TEARDOWN` first: what a counted run's processes get."""
    return os.pathsep.join(p for p in (str(NO_TEARDOWN), pythonpath) if p)


# A core of this machine (AMD EPYC, `lscpu`): 32 KB of first-level instruction and data cache
# and 512 KB of L2 of its own, the rest (L3) shared with the other cores and, in a VM, other
# guests. Cachegrind's last level is set to that L2: what misses it is what a worker fetches
# from beyond its own core.
CACHE_SIM = ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=524288,8,64"]


def count_workers_split(n: int, acking: bool, workers: int, home: bool = False, cache: bool = False) -> WorkerCount:
    """The instructions the worker processes of one W1 run on the process host with ``workers``
    workers execute, under cachegrind (its children traced, each into its own file), with the
    part in code without symbols (`WorkerCount`); ``home``: the shuffle keeps every sentence in
    its spout's worker (`host_conf`); ``cache``: a core's caches simulated too (`CACHE_SIM`),
    and their L2 misses counted (`WorkerCount.l2_misses`), at several times the run's time."""
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed: run scripts/install-system-deps.sh (Debian's valgrind)")
    with tempfile.TemporaryDirectory(prefix="squall-instructions-") as out:
        cmd = ["valgrind", "--tool=cachegrind", *(CACHE_SIM if cache else ["--cache-sim=no"]), "--trace-children=yes",
               f"--cachegrind-out-file={out}/cachegrind.%p", sys.executable, "-m", "bench", "run", "W1",
               "--acking", "on" if acking else "off", "--host", "process", "--workers", str(workers),
               "--n", str(n), "--no-save"]
        conf = host_conf(home)
        # each worker leaves at its last atexit hook, without the interpreter's teardown, whose
        # share of a count varied by thousands a sentence (bench/no_teardown/sitecustomize.py)
        path = with_no_teardown(os.environ.get("PYTHONPATH"))
        env = dict(os.environ, **{hosts.START_TIMEOUT_ENV: str(START_TIMEOUT_SECS),
                                  hosts.HOST_CONF_ENV: json.dumps(conf), "PYTHONPATH": path})
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], env=env)
        lines = done.stdout.strip().splitlines()
        record = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
        if not record.get("correct"):
            raise RuntimeError(f"W1 n={n} on {workers} workers under valgrind failed (exit {done.returncode}, "
                               f"correct: {record.get('correct')}):\n{done.stderr[-3000:]}")
        return worker_counts(Path(out), workers)


class WorkerCount(NamedTuple):
    """The instructions of a run's worker processes: all of them, and those in code Valgrind
    found no symbols for (``fn=???`` in cachegrind's files): OpenSSL's assembly, mostly the
    MAC of every batch (Poly1305, about 2.7 instructions a byte; before the envelope's version 3,
    a generic SHA-256 at about 28, as Valgrind's CPU hides the SHA extensions). ``l2_misses``:
    with the caches simulated, the reads of instructions and the reads and writes of data that
    missed the last level (``ILmr + DLmr + DLmw``), else None."""

    total: int
    unattributed: int
    l2_misses: int | None = None


# cachegrind's events for what missed the last level: instruction reads, data reads, data writes
_L2_MISSES = {"ILmr", "DLmr", "DLmw"}


def worker_instructions(directory: Path, expected: int | None = None) -> int:
    """The instructions counted in ``directory``'s cachegrind files of squall worker processes
    (their ``cmd:`` line runs ``squall.worker``): the master, the supervisor and the benchmark
    are left out. With ``expected``, fewer worker files than that is an error: a worker that
    the supervisor killed (after ``supervisor.worker.shutdown.sleep.secs``, which `count_workers_split`
    sets to 600 s) writes none, and its run would count one worker's instructions as two
    workers'."""
    return worker_counts(directory, expected).total


def worker_counts(directory: Path, expected: int | None = None) -> WorkerCount:
    """`worker_instructions`, with the part of them in code without symbols (`WorkerCount`)."""
    total = unattributed = workers = 0
    misses: int | None = None
    for path in directory.glob("cachegrind.*"):
        cmd = summary = None
        events = ["Ir"]
        unknown = 0
        in_unknown = False
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line[:1].isdigit():
                    if in_unknown:
                        unknown += int(line.split()[1])
                elif line.startswith("fn="):
                    in_unknown = line.strip() == "fn=???"
                elif line.startswith("cmd:"):
                    cmd = line
                elif line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("summary:"):
                    summary = dict(zip(events, (int(x) for x in line.split()[1:])))
        if cmd is not None and "squall.worker" in cmd and summary is not None and "Ir" in summary:
            total += summary["Ir"]
            unattributed += unknown
            workers += 1
            if _L2_MISSES <= summary.keys():
                misses = (misses or 0) + sum(summary[e] for e in _L2_MISSES)
    if not workers:
        raise RuntimeError(f"no worker process's cachegrind file in {directory}")
    if expected is not None and workers < expected:
        raise RuntimeError(f"{workers} of {expected} worker processes wrote their cachegrind file in {directory}: "
                           f"the others were killed before they exited (they did not stop within "
                           f"{Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS} of the host's configuration)")
    return WorkerCount(total, unattributed, misses)


def measure(workload: str, acking: bool = True, sizes: tuple[int, int] | None = None, host: str = "local",
            workers: int = 1, baseline: bool = False, cache: bool = False) -> dict[str, Any]:
    """Instructions per tuple of ``workload`` (``W1``: per sentence), from runs of two sizes: on
    LocalCluster (the whole process), or for W1 on the process host (its worker processes). With
    ``baseline`` (LocalCluster only), its baseline loop's too, and their ratio (`baseline_terms`).
    With ``cache`` (the process host only), the L2 misses per tuple too (`CACHE_SIM`)."""
    if workload not in DEFAULT_N:
        raise ValueError(f"instructions are measured for W1 and W2, not {workload!r}")
    if host not in ("local", "process") or (host == "process" and workload != "W1"):
        raise ValueError(f"instructions are measured on LocalCluster, and for W1 on the process host: "
                         f"not {workload} on {host!r}")
    if workers < 1 or (host == "local" and workers != 1):
        raise ValueError(f"--workers {workers}: LocalCluster is one worker; the process host takes 1 or more")
    if baseline and host != "local":
        raise ValueError("--baseline compares LocalCluster's run with the baseline loop, both in one process: "
                         "not the process host")
    if cache and host != "process":
        raise ValueError("--cache counts the workers' L2 misses on the process host: add --host process")
    n1, n2 = sizes or (PROCESS_N if host == "process" else DEFAULT_N[workload])
    if not 0 < n1 < n2:
        raise ValueError(f"--n needs two sizes, the first smaller: got {n1}, {n2}")
    if workload == "W1":  # made before, so that neither run pays for writing its corpus
        w1_wordcount.ensure_corpus(n1)
        w1_wordcount.ensure_corpus(n2)
    misses = None
    if host == "process":
        c1, c2 = (count_workers_split(n, acking, workers, cache=cache) for n in (n1, n2))
        ir1, ir2 = c1.total, c2.total
        if cache and c1.l2_misses is not None and c2.l2_misses is not None:
            misses = round((c2.l2_misses - c1.l2_misses) / (n2 - n1), 1)
    else:
        ir1, ir2 = count(workload, n1, acking), count(workload, n2, acking)
    per_tuple = (ir2 - ir1) / (n2 - n1)
    out = {"workload": workload, "acking": "on" if acking else "off", "host": host, "workers": workers,
           "n": [n1, n2], "instructions": [ir1, ir2], "instructions_per_tuple": round(per_tuple),
           "per": "sentence" if workload == "W1" else "tuple"}
    if cache:
        out["l2_misses_per_tuple"] = misses
    if baseline:
        b1, b2 = count(workload, n1, acking, baseline=True), count(workload, n2, acking, baseline=True)
        out["baseline_instructions"] = [b1, b2]
        out.update(baseline_terms(per_tuple, (b2 - b1) / (n2 - n1)))
    return out


def baseline_terms(per_tuple: float, baseline_per_tuple: float) -> dict[str, Any]:
    """The baseline loop's instructions a tuple and ``instruction_ratio``, baseline over squall:
    the count's twin of a timed record's ``ratio`` (squall's rate over the loop's), which would
    equal it if both ran their instructions at the same speed."""
    return {"baseline_instructions_per_tuple": round(baseline_per_tuple),
            "instruction_ratio": round(baseline_per_tuple / per_tuple, 3)}


# W1's sentence is 10 words; on 2 workers half of them go to the count task in the other worker
W1_WORDS = 10
W1_CROSSING_WORDS = 5


def _words(one: float, two: float) -> tuple[float, float]:
    """The model's local word (a tenth of one worker's sentence) and crossing word (what 2
    workers add a sentence, over its 5 crossing words), from a measure a sentence on 1 worker
    (``one``) and on 2 (``two``): instructions or misses alike."""
    return one / W1_WORDS, (two - one) / W1_CROSSING_WORDS


def crossing_terms(one: float, two: float, one_unattributed: float = 0.0, two_unattributed: float = 0.0) -> dict[str, Any]:
    """The scaling model's terms (docs/profiles/w1-scaling-model.md) from W1's instructions a
    sentence on 1 worker (``one``) and on 2 (``two``): a local word is a tenth of one worker's
    sentence, a crossing word what 2 workers add a sentence over its 5 crossing words, and their
    ratio r puts N workers at ``1 / (1 + r (N - 1) / N)`` of one worker's rate per core. The
    same again with the instructions in code without symbols left out of both (``*_unattributed``:
    mostly the MACs, `WorkerCount`)."""
    def terms(a: float, b: float) -> dict[str, Any]:
        local, crossing = _words(a, b)
        r = crossing / local
        return {"local_word": round(local), "crossing_word": round(crossing), "ratio": round(r, 3),
                "per_core_share": {n: round(1 / (1 + r * (n - 1) / n), 3) for n in (2, 3, 8, 16)}}
    return {"per_sentence": {"1": round(one), "2": round(two)},
            "unattributed_per_sentence": {"1": round(one_unattributed), "2": round(two_unattributed)},
            "all": terms(one, two),
            "without_unattributed": terms(one - one_unattributed, two - two_unattributed)}


def crossing(rounds: int = 3, sizes: tuple[int, int] = PROCESS_N, acking: bool = True,
             home: bool = False, cache: bool = False) -> dict[str, Any]:
    """W1 on the process host on 1 and on 2 workers, alternated (1, 2, then 2, 1, ...) for
    ``rounds`` rounds of two run sizes each, and the model's terms (`crossing_terms`) from each
    count's median. Without the workers' teardown (`NO_TEARDOWN`) one worker's count repeats
    within 0.3%, but two workers' still moves by about 4% from run to run: how the two
    processes' threads take turns decides how many sentences the load-aware shuffle sends to the
    other worker, and how many loop rounds and messages (each sealed, opened and handled by the
    transport's Python, whatever it holds) carry the crossing words: 211 to 419 more messages for
    12,000 more sentences in five runs of one commit. So one round is not enough to rank a change
    of 1-2%. ``home`` keeps every sentence in its spout's worker (`host_conf`): the crossings are
    then exactly the model's, five words a sentence, and the shuffle's moves leave the spread.
    ``cache``: each run with a core's caches simulated (`CACHE_SIM`), and the L2 misses a
    sentence on 1 and on 2 workers beside the instructions (`crossing_misses`)."""
    if rounds < 1:
        raise ValueError(f"--repeat {rounds}: at least one round")
    n1, n2 = sizes
    if not 0 < n1 < n2:
        raise ValueError(f"--n needs two sizes, the first smaller: got {n1}, {n2}")
    w1_wordcount.ensure_corpus(n1)
    w1_wordcount.ensure_corpus(n2)
    per: dict[int, list[float]] = {1: [], 2: []}
    unattributed: dict[int, list[float]] = {1: [], 2: []}
    misses: dict[int, list[float]] = {1: [], 2: []}
    for r in range(rounds):
        for workers in ((1, 2) if r % 2 == 0 else (2, 1)):
            a, b = (count_workers_split(n, acking, workers, home, cache) for n in (n1, n2))
            per[workers].append((b.total - a.total) / (n2 - n1))
            unattributed[workers].append((b.unattributed - a.unattributed) / (n2 - n1))
            if a.l2_misses is not None and b.l2_misses is not None:
                misses[workers].append((b.l2_misses - a.l2_misses) / (n2 - n1))
    out = crossing_terms(median(per[1]), median(per[2]), median(unattributed[1]), median(unattributed[2]))
    out.update({"workload": "W1", "acking": "on" if acking else "off", "host": "process", "n": [n1, n2],
                "shuffle": "home" if home else "load-aware",
                "rounds": {"1": [round(x) for x in per[1]], "2": [round(x) for x in per[2]]}})
    if cache and misses[1] and misses[2]:
        out["l2_misses"] = crossing_misses(median(misses[1]), median(misses[2]))
        out["l2_misses"]["rounds"] = {"1": [round(x, 1) for x in misses[1]], "2": [round(x, 1) for x in misses[2]]}
    return out


def crossing_misses(one: float, two: float) -> dict[str, Any]:
    """W1's L2 misses a sentence on 1 worker (``one``) and on 2 (``two``), in the model's terms:
    a local word's a tenth of one worker's, a crossing word's what 2 workers add over its 5
    crossing words. Instructions are not the whole of a word's cost: each miss waits for the
    shared L3 (tens of cycles), so a crossing that adds more misses than instructions costs more
    natively than its instructions say (docs/profiles/w1-scaling-model.md)."""
    local, crossing = _words(one, two)
    return {"per_sentence": {"1": round(one, 1), "2": round(two, 1)}, "local_word": round(local, 2),
            "crossing_word": round(crossing, 2), "ratio": round(crossing / local, 2) if local else None}


def _inner(workload: str, n: int, acking: bool) -> None:
    (_run_w1 if workload == "W1" else _run_w2)(n, acking)


def _baseline(workload: str, n: int, acking: bool) -> None:
    """The workload's baseline loop over ``n`` tuples: W1's over the corpus of ``n`` sentences
    (one loop, acking or not), W2's with or without its pending map."""
    if workload == "W1":
        baseline_wordcount(w1_wordcount.ensure_corpus(n))
    else:
        w2_const_null.baseline_w2(n, acking)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] in ("--inner", "--baseline"):
        (_inner if sys.argv[1] == "--inner" else _baseline)(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "on")
    else:
        print(json.dumps(measure(sys.argv[1])))
