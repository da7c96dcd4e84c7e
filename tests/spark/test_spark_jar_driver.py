"""``squall jar FILE --host spark`` as a driver process: what it leaves behind when its JVM
dies, and which topologies it owns (those FILE submits) in a storm.local.dir that another
master used (one another client submits to it meanwhile: test_spark_cli's
test_squall_jar_host_spark_runs_a_topology_until_it_is_killed_and_leaves_another_clients_topology)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import wait_until
from .conftest import _descendants, cmdline
from .test_spark_cli import REPO, _config, _Driver, _state, _user_package

pytest.importorskip("pyspark")

def test_a_driver_whose_jvm_dies_ends_with_70_and_removes_the_users_zipped_package(tmp_path):
    """docs/spark.md: the driver ends with status 70 when its JVM dies, and Spark's
    --supervise (or YARN) starts it again: each such end left a squall-ship-* directory."""
    tmp = tmp_path / "tmp"  # the driver's temporary directory: only its own files are there
    tmp.mkdir()
    driver = _Driver([sys.executable, "-m", "squall.cli", "jar", "--config", _config(tmp_path),
                      str(_user_package(tmp_path)), "--host", "spark", "--spark-master", "local[1]"],
                     env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)})
    try:
        assert wait_until(lambda: driver.saw("Submitted topology: idle") or driver.proc.poll() is not None, 90), \
            "".join(driver.lines)
        shipped = list(tmp.glob("squall-ship-*/mypkg.zip"))
        assert shipped, f"the package was not zipped in {tmp}: {list(tmp.iterdir())}"
        jvm = next(p for p in _descendants(driver.proc.pid) if "java" in cmdline(p).split(" ")[0])
        os.kill(jvm, signal.SIGKILL)
        assert driver.proc.wait(60) == 70, "".join(driver.lines)
    finally:
        driver.stop()
    assert not list(tmp.glob("squall-ship-*")), f"left behind: {list(tmp.glob('squall-ship-*/*'))}"


_ANOTHER_MASTERS = '''
import sys
from squall._config import cluster_conf
from squall.cluster.master import Master
from tests.process.semantics_topology import topology_conf, word_count

local_dir, out = sys.argv[1:]
master = Master(cluster_conf({"storm.local.dir": local_dir}))
outcome = master.submit("theirs", topology_conf(out, workers=1), word_count(["a b", "c d"] * 50))
master.store.apply(outcome.changes)
'''


def test_a_jar_driver_refuses_to_start_on_another_masters_topologies_and_leaves_them_as_they_were(tmp_path):
    """``squall nimbus --host spark`` stopped (its topology kept in storm.local.dir, as
    documented), then ``squall jar --host spark FILE`` of another topology in the same
    directory: the driver took the nimbus's topology over, ran it, and killed it for good at
    its Ctrl-C. It must neither run it nor kill it: it refuses to start, naming it."""
    import yaml
    config = _config(tmp_path)
    local_dir = yaml.safe_load(Path(config).read_text())["storm.local.dir"]
    out = tmp_path / "theirs-out"
    out.mkdir()
    made = subprocess.run([sys.executable, "-c", _ANOTHER_MASTERS, local_dir, str(out)], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert made.returncode == 0, made.stderr
    before = _state(config)
    assert list(before) == ["theirs"]
    driver = _Driver([sys.executable, "-m", "squall.cli", "jar", "--config", config, "--name", "mine",
                      str(_user_package(tmp_path)), "--host", "spark", "--spark-master", "local[2]"],
                     env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert wait_until(lambda: driver.proc.poll() is not None or driver.saw("Submitted topology"), 90), \
            "".join(driver.lines)
        assert driver.proc.wait(30) == 1, "".join(driver.lines)
    finally:
        driver.stop()
    said = "".join(driver.lines)
    assert "squall: error: storm.local.dir" in said and "holds topology theirs, which idle.py does not submit" in said, \
        said
    assert "its own storm.local.dir" in said and "squall nimbus --host spark" in said, said
    assert "Submitted topology" not in said and "Resumed topology" not in said, said
    assert _state(config) == before, "the other master's topology was changed"
    assert not list(out.iterdir()), f"the other master's topology ran: {list(out.iterdir())}"
