"""`python -m bench instructions`: its arguments, and the W2 spout that stops (without Valgrind)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import instructions  # noqa: E402
from bench.__main__ import main  # noqa: E402


def test_only_w1_and_w2_with_two_growing_sizes_are_measured():
    with pytest.raises(ValueError, match="W1 and W2"):
        instructions.measure("W3")
    with pytest.raises(ValueError, match="first smaller"):
        instructions.measure("W2", sizes=(60000, 20000))
    with pytest.raises(SystemExit, match="two sizes"):
        main(["instructions", "W2", "--n", "20000"])
    with pytest.raises(SystemExit, match="two sizes"):
        main(["instructions", "W2", "--n", "a,b"])
    with pytest.raises(SystemExit, match="W1 on the process host"):
        main(["instructions", "W2", "--host", "process", "--workers", "2"])
    with pytest.raises(ValueError, match="LocalCluster is one worker"):
        instructions.measure("W1", host="local", workers=2)


def test_only_the_worker_processes_instructions_are_summed(tmp_path):
    """The process host's count reads one cachegrind file per traced process and keeps the
    workers' (the master, the supervisor and the benchmark itself are not the engine's work)."""
    def cachegrind(pid, cmd, summary):
        (tmp_path / f"cachegrind.{pid}").write_text(
            f"version: 2\ncreator: cachegrind\npid: {pid}\ncmd: {cmd}\nevents: Ir\nfl=a.c\nfn=f\n1 {summary}\n"
            f"summary: {summary}\n")
    cachegrind(10, "python -m bench run W1 --host process", 900)
    cachegrind(11, "python -c from squall.cluster.process import run_nimbus", 800)
    cachegrind(12, "python -m squall.cluster.supervisor --conf x", 700)
    cachegrind(13, "python -m squall.worker --master 127.0.0.1:1 --slot 127.0.0.1:2", 1_000)
    cachegrind(14, "python -m squall.worker --master 127.0.0.1:1 --slot 127.0.0.1:3", 2_000)
    assert instructions.worker_instructions(tmp_path) == 3_000
    assert instructions.worker_instructions(tmp_path, expected=2) == 3_000
    # a worker killed before it exited wrote no file: one worker's count is not two workers'
    (tmp_path / "cachegrind.14").unlink()
    with pytest.raises(RuntimeError, match="1 of 2 worker processes wrote their cachegrind file"):
        instructions.worker_instructions(tmp_path, expected=2)
    for f in tmp_path.glob("cachegrind.1[34]"):
        f.unlink()
    with pytest.raises(RuntimeError, match="no worker process"):
        instructions.worker_instructions(tmp_path)


def test_the_part_in_code_without_symbols_is_counted_apart(tmp_path):
    """Each worker's instructions in functions Valgrind has no symbol for (``fn=???``), the
    software SHA-256 under it, are summed beside the total (`--crossing` reports both)."""
    (tmp_path / "cachegrind.13").write_text(
        "version: 2\ncreator: cachegrind\ncmd: python -m squall.worker --master a --slot b\nevents: Ir\n"
        "fl=a.c\nfn=f\n1 100\n2 50\nfl=???\nfn=???\n0 300\n0 7\nfl=b.c\nfn=g\n3 43\nsummary: 500\n")
    (tmp_path / "cachegrind.14").write_text(
        "version: 2\ncreator: cachegrind\ncmd: python -m squall.worker --master a --slot c\nevents: Ir\n"
        "fl=???\nfn=???\n0 20\nsummary: 20\n")
    (tmp_path / "cachegrind.15").write_text(
        "version: 2\ncreator: cachegrind\ncmd: python -m squall.cluster.supervisor\nevents: Ir\n"
        "fl=???\nfn=???\n0 999\nsummary: 999\n")
    assert instructions.worker_counts(tmp_path, expected=2) == instructions.WorkerCount(520, 327)


def test_with_the_caches_simulated_the_workers_l2_misses_are_summed_beside_their_instructions(tmp_path):
    """``--cache``: each worker's instruction-read, data-read and data-write misses of the last
    level (``ILmr``, ``DLmr``, ``DLmw`` in its summary, in its ``events`` order) are added up; the
    first-level misses and the other processes' are not. Without the cache events, None."""
    events = "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw"
    (tmp_path / "cachegrind.13").write_text(
        f"version: 2\ncreator: cachegrind\ncmd: python -m squall.worker --master a --slot b\nevents: {events}\n"
        "fl=a.c\nfn=f\n1 100 9 1 40 8 2 20 6 3\nsummary: 100 9 1 40 8 2 20 6 3\n")
    (tmp_path / "cachegrind.14").write_text(
        f"version: 2\ncreator: cachegrind\ncmd: python -m squall.worker --master a --slot c\nevents: {events}\n"
        "fl=a.c\nfn=f\n1 50 9 10 40 8 20 20 6 30\nsummary: 50 9 10 40 8 20 20 6 30\n")
    (tmp_path / "cachegrind.15").write_text(
        f"version: 2\ncreator: cachegrind\ncmd: python -m squall.cluster.supervisor\nevents: {events}\n"
        "summary: 999 1 1000 1 1 1000 1 1 1000\n")
    assert instructions.worker_counts(tmp_path, expected=2) == instructions.WorkerCount(150, 0, 66)
    for f in tmp_path.glob("cachegrind.*"):
        f.unlink()
    (tmp_path / "cachegrind.13").write_text(
        "version: 2\ncreator: cachegrind\ncmd: python -m squall.worker --master a --slot b\nevents: Ir\n"
        "fl=a.c\nfn=f\n1 100\nsummary: 100\n")
    assert instructions.worker_counts(tmp_path).l2_misses is None


def test_the_crossing_s_misses_are_put_in_the_model_s_terms_and_asked_of_the_process_host_only():
    """1 worker 80 L2 misses a sentence (a local word 8), 2 workers 200: a crossing word's five
    of a sentence add 24 each, 3x a local word's; ``--cache`` is refused off the process host."""
    m = instructions.crossing_misses(80.0, 200.0)
    assert m["local_word"] == 8 and m["crossing_word"] == 24 and m["ratio"] == 3
    assert m["per_sentence"] == {"1": 80.0, "2": 200.0}
    with pytest.raises(SystemExit, match="--cache counts the workers' L2 misses on the process host"):
        main(["instructions", "W1", "--cache"])


def test_the_crossing_s_terms_are_the_scaling_model_s():
    """1 worker 50,000 instructions a sentence (a local word 5,000), 2 workers 60,000: a
    crossing word (its 5 of a sentence) 2,000, 0.4 of a local word, and N workers keep
    1 / (1 + 0.4 (N - 1) / N) of one worker's rate per core; without 5,000 and 9,000 a sentence
    in code without symbols, 4,500 and 1,200: 0.267."""
    t = instructions.crossing_terms(50_000, 60_000, 5_000, 9_000)
    assert t["all"]["local_word"] == 5_000 and t["all"]["crossing_word"] == 2_000
    assert t["all"]["ratio"] == 0.4
    assert t["all"]["per_core_share"][2] == round(1 / 1.2, 3)
    assert t["all"]["per_core_share"][8] == round(1 / (1 + 0.4 * 7 / 8), 3)
    assert t["without_unattributed"]["local_word"] == 4_500
    assert t["without_unattributed"]["crossing_word"] == 1_200
    assert t["without_unattributed"]["ratio"] == round(1_200 / 4_500, 3)


def test_the_crossing_is_measured_for_w1_on_the_process_host_only():
    with pytest.raises(SystemExit, match="--crossing measures W1 on the process host"):
        main(["instructions", "W1", "--crossing"])
    with pytest.raises(SystemExit, match="--crossing measures W1 on the process host"):
        main(["instructions", "W2", "--host", "process", "--crossing"])
    with pytest.raises(ValueError, match="at least one round"):
        instructions.crossing(rounds=0)


def test_the_w2_run_stops_after_its_tuples_and_all_are_acked():
    """The run Valgrind counts, here without it: n tuples, every one acked, then the end."""
    comps = instructions._run_w2(500, True, timeout=60)
    assert comps["spout"]["acked"] == 500 and comps["spout"]["failed"] == 0
    spout = instructions._LimitedConstSpout(True, 3)
    emitted = []
    spout._emit = lambda values, msg_id=None: emitted.append(msg_id)
    spout._next_id, spout._samples = 0, None
    for _ in range(10):
        spout.next_tuple()
    assert emitted == [0, 1, 2]


def _with_no_teardown(args: list[str]) -> subprocess.CompletedProcess:
    repo = str(Path(instructions.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=instructions.with_no_teardown(
        os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_counted_worker_leaves_with_its_own_exit_status():
    """The hook that spares a counted worker its interpreter's teardown keeps what the worker
    says: ``python -m squall.worker`` without its arguments exits 2 with argparse's usage on
    stderr (flushed before the process leaves), as it does without the hook."""
    done = _with_no_teardown(["-m", "squall.worker"])
    assert done.returncode == 2
    assert "usage: squall-worker" in done.stderr and "--master" in done.stderr


def test_other_processes_of_a_counted_run_are_left_as_they_are():
    """The benchmark, master and supervisor of a counted run end as usual: their own atexit
    hooks run and their exit status is theirs."""
    done = _with_no_teardown(["-c", "import atexit; atexit.register(print, 'bye'); raise SystemExit(3)"])
    assert done.returncode == 3
    assert done.stdout == "bye\n"


def test_home_keeps_every_sentence_in_its_spout_s_worker(monkeypatch):
    """``--home``: the load-aware shuffle's bounds at 1.0 (a load is at most 1, so the local split
    task always takes the sentence), beside the workers' time to stop; without it the shuffle's
    own bounds, and settings given in the environment are kept either way; ``--home`` is only
    for ``--crossing``."""
    from squall import Config

    monkeypatch.setenv("SQUALL_BENCH_HOST_CONF", '{"squall.encryption": true}')
    home = instructions.host_conf(home=True)
    assert home[Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND] == home[Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND] == 1.0
    assert home[Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS] == instructions.START_TIMEOUT_SECS
    assert home["squall.encryption"] is True
    away = instructions.host_conf()
    assert Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND not in away and away["squall.encryption"] is True
    with pytest.raises(SystemExit, match="--home is for --crossing"):
        main(["instructions", "W1", "--host", "process", "--home"])


def test_the_baseline_is_counted_beside_localcluster_s_run_only():
    """``--baseline``: the loop's instructions a tuple over squall's are the count's twin of the
    timed ratio (15,000 against 45,000: 0.333); the process host's workers have no loop beside
    them in one process, so it is refused there."""
    assert instructions.baseline_terms(45_000, 15_000) == {"baseline_instructions_per_tuple": 15_000,
                                                           "instruction_ratio": 0.333}
    with pytest.raises(ValueError, match="--baseline compares LocalCluster"):
        instructions.measure("W1", host="process", baseline=True)
    with pytest.raises(SystemExit, match="--baseline compares LocalCluster"):
        main(["instructions", "W1", "--host", "process", "--baseline"])


def test_the_counted_baseline_run_is_the_workload_s_loop(monkeypatch):
    """What Valgrind runs for ``--baseline``: W1's loop over the corpus of n sentences, W2's loop
    over n tuples with acking as asked; ``python -m bench.instructions --baseline W2 n on`` runs
    it and exits 0 (the count is then read from Valgrind's summary)."""
    ran = []
    monkeypatch.setattr(instructions.w1_wordcount, "ensure_corpus", lambda n: f"corpus-{n}")
    monkeypatch.setattr(instructions, "baseline_wordcount", lambda d: ran.append(("W1", d)))
    monkeypatch.setattr(instructions.w2_const_null, "baseline_w2", lambda n, acking: ran.append(("W2", n, acking)))
    instructions._baseline("W1", 4000, True)
    instructions._baseline("W2", 20000, False)
    assert ran == [("W1", "corpus-4000"), ("W2", 20000, False)]
    repo = str(Path(instructions.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-m", "bench.instructions", "--baseline", "W2", "1000", "on"],
                          capture_output=True, text=True, cwd=repo, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
