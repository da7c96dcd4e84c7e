"""Exactly once across a SIGKILLed Spark driver (issue 36 item 5a, local[2]), the driver being
``squall trident FILE --host spark --checkpoint DIR`` (item 1). The driver is killed after its
Delta state committed txid 2 and before Spark's commit log recorded batch 1; started again from
the checkpoint (here in this process's session: a second cold driver would add half a minute to
the same claim; test_standalone restarts a ``squall trident`` driver and stops it with SIGTERM),
Spark re-runs batch 1 with the same offsets, the transactional map skips what txid 2 already
wrote, and the stored counts equal the input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from ..conftest import wait_until
from .conftest import FAST_SPARK, REPO, delta_counts, expected_counts, sentences, with_repo_on_pythonpath, write_lines

pytestmark = pytest.mark.timeout(480)  # a cold driver on a loaded machine


@dataclass
class KilledRun:
    """A word count whose first driver was SIGKILLed at txid 2's commit: where its files are."""

    root: Path
    lines: list[str]
    log: IO[bytes]

    @property
    def data(self) -> Path:
        return self.root / "in"

    @property
    def table(self) -> Path:
        return self.root / "counts"

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def gate(self) -> Path:
        return self.root / "gate"

    def tail(self) -> str:
        """The end of the drivers' log, for a failed assertion."""
        self.log.flush()
        return (self.root / "driver.log").read_text()[-3000:]


def driver(run: KilledRun, master: str, env: dict[str, str] | None,
           conf: dict[str, str] | None = None) -> subprocess.Popen:
    """``squall trident wc_topology.py`` on ``master``, in its own process group (``conf``: Spark
    settings besides `FAST_SPARK`)."""
    env = {**with_repo_on_pythonpath(env), "WC_DATA": str(run.data), "WC_TABLE": str(run.table),
           "WC_GATE": str(run.gate)}
    spark_conf = [arg for key, value in {**FAST_SPARK, **(conf or {})}.items() for arg in ("-c", f"{key}={value}")]
    return subprocess.Popen([sys.executable, "-m", "squall", "trident", str(REPO / "tests/trident_spark/wc_topology.py"),
                             "--host", "spark", "--checkpoint", str(run.checkpoint), "--spark-master", master,
                             *spark_conf],
                            cwd=run.root, env=env, start_new_session=True, stdout=run.log, stderr=subprocess.STDOUT)


def driver_killed_at_the_commit(root: Path, master: str, env: dict[str, str] | None = None,
                                meanwhile: Callable[[], object] = lambda: None,
                                conf: dict[str, str] | None = None) -> KilledRun:
    """Run the word count's first driver on ``master`` until its state committed txid 2 and
    SIGKILL it there (``env``: the driver's environment, default this process's; ``meanwhile``:
    called once the driver is starting, what the caller can do while it runs; ``conf``: see
    `driver`). The gate is then open: a driver started again does not hold."""
    run = KilledRun(root, sentences(16, seed=5), (root / "driver.log").open("ab"))
    run.data.mkdir()
    run.gate.mkdir()
    write_lines(run.data / "a.txt", run.lines[:8])
    write_lines(run.data / "b.txt", run.lines[8:])  # 4 lines a file a batch: 2 batches
    first = driver(run, master, env, conf)
    try:
        meanwhile()
        assert wait_until(lambda: (run.gate / "committed").exists() or first.poll() is not None, 300, 0.1)
        assert first.poll() is None, run.tail()
        # the state has txid 2; Spark planned batch 1 and has not committed it
        assert (run.checkpoint / "offsets" / "1").exists() and not (run.checkpoint / "commits" / "1").exists()
        assert delta_counts(run.table) == expected_counts(run.lines)  # both batches are in the state
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver's process group: Python, its JVM, its workers
        first.wait()
    (run.gate / "go").write_text("go")
    return run


def assert_counted_once(run: KilledRun) -> None:
    """Batch 1 re-ran and committed, its words counted once, and nothing more was read."""
    assert (run.checkpoint / "commits" / "1").exists(), run.tail()
    run.log.close()
    assert delta_counts(run.table) == expected_counts(run.lines), "the re-run batch counted other than once"
    assert not (run.checkpoint / "offsets" / "2").exists()  # nothing more was read: no batch of nothing


def test_a_driver_killed_between_the_state_commit_and_sparks_commit_counts_every_word_once(request, tmp_path):
    from squall.trident.spark import start

    from .ops import gated_word_count

    # this process's session (cold when this test runs first) starts while the driver runs
    sessions = []
    run = driver_killed_at_the_commit(tmp_path, "local[2]", meanwhile=lambda: sessions.append(request.getfixturevalue("spark")))
    [spark] = sessions
    query = start(gated_word_count(str(run.data), str(run.table), str(run.gate)), spark, str(run.checkpoint))
    try:
        query.processAllAvailable()  # Spark re-runs batch 1 (txid 2) from the checkpoint's offsets
        assert query.exception() is None
    finally:
        query.stop()
    assert_counted_once(run)
