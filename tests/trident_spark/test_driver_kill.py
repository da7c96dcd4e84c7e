"""Exactly once across a SIGKILLed Spark driver (issue 36 item 5a, local[2]), the driver being
``squall trident FILE --host spark --checkpoint DIR`` (item 1). The driver is killed after its
Delta state committed txid 2 and before Spark's commit log recorded batch 1; started again from
the checkpoint, Spark re-runs batch 1 with the same offsets, the transactional map skips what
txid 2 already wrote, and the stored counts equal the input. SIGTERM then stops the driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ..conftest import wait_until
from .conftest import REPO, delta_counts, expected_counts, sentences, write_lines

pytestmark = pytest.mark.timeout(480)  # two cold drivers on a loaded machine


def _driver(tmp_path, log, master, env):
    env = {**(env or os.environ),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
           "WC_DATA": str(tmp_path / "in"), "WC_TABLE": str(tmp_path / "counts"), "WC_GATE": str(tmp_path / "gate")}
    return subprocess.Popen([sys.executable, "-m", "squall", "trident", str(REPO / "tests/trident_spark/wc_topology.py"),
                             "--host", "spark", "--checkpoint", str(tmp_path / "checkpoint"), "--spark-master", master,
                             "-c", "spark.ui.enabled=false", "-c", "spark.sql.adaptive.enabled=false"],
                            cwd=tmp_path, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)


def test_a_driver_killed_between_the_state_commit_and_sparks_commit_counts_every_word_once(tmp_path):
    driver_killed_at_the_commit(tmp_path, "local[2]")


def driver_killed_at_the_commit(tmp_path, master, env=None):
    """The test above on ``master`` (``env``: the driver's environment, default this process's)."""
    data, table, checkpoint, gate = tmp_path / "in", tmp_path / "counts", tmp_path / "checkpoint", tmp_path / "gate"
    data.mkdir()
    gate.mkdir()
    lines = sentences(16, seed=5)
    write_lines(data / "a.txt", lines[:8])
    write_lines(data / "b.txt", lines[8:])  # 4 lines a file a batch: 2 batches
    log_path = tmp_path / "driver.log"
    log = log_path.open("ab")

    first = _driver(tmp_path, log, master, env)
    try:
        assert wait_until(lambda: (gate / "committed").exists() or first.poll() is not None, 300, 0.1)
        assert first.poll() is None, log_path.read_text()[-3000:]
        # the state has txid 2; Spark planned batch 1 and has not committed it
        assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
        assert delta_counts(table) == expected_counts(lines)  # both batches are in the state
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver's process group: Python, its JVM, its workers
        first.wait()

    (gate / "go").write_text("go")
    second = _driver(tmp_path, log, master, env)
    total = sum(expected_counts(lines).values())
    try:
        # Spark re-runs batch 1 (txid 2) and commits it: the state must not count it again
        assert wait_until(lambda: (checkpoint / "commits" / "1").exists() or second.poll() is not None, 300, 0.1), \
            log_path.read_text()[-3000:]
        assert sum(delta_counts(table).values()) == total
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=120) == 0, log_path.read_text()[-3000:]
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
    assert delta_counts(table) == expected_counts(lines)
    assert not (checkpoint / "offsets" / "2").exists()  # nothing more was read: no batch of nothing
