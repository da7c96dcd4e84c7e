"""``squall jar FILE --host spark`` as a driver process: what it leaves behind when its JVM
dies, and which topologies it owns (those FILE submits) in a storm.local.dir that another
master used."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import wait_until
from .conftest import _descendants, cmdline
from .test_spark_cli import REPO, _config, _Driver

pytest.importorskip("pyspark")

_PACKAGE = '''
from squall import Fields, Spout, TopologyBuilder


class Idle(Spout):
    def declare_output_fields(self, d):
        d.declare(Fields("x"))

    def next_tuple(self):
        pass


def build():
    b = TopologyBuilder()
    b.set_spout("idle", Idle(), 1)
    return b.create_topology()
'''


def _user_package(tmp_path):
    """A topology FILE whose spout lives in the user's own package ``mypkg`` (zipped and
    shipped to the executors with addPyFile, from a ``squall-ship-*`` directory)."""
    (tmp_path / "app" / "mypkg").mkdir(parents=True)
    (tmp_path / "app" / "mypkg" / "__init__.py").write_text(_PACKAGE)
    (tmp_path / "app" / "idle.py").write_text("from mypkg import build  # noqa: F401\n")
    return tmp_path / "app" / "idle.py"


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


def _state(config):
    """The topologies' records in the master's ``state.json``, as its file holds them."""
    import json

    import yaml
    local_dir = Path(yaml.safe_load(Path(config).read_text())["storm.local.dir"])
    return json.loads((local_dir / "nimbus" / "state.json").read_bytes())["topologies"]


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


def test_a_jar_driver_ends_when_its_topology_is_killed_and_leaves_another_clients_topology(tmp_path):
    """It waited for every topology of its master, and killed them all as it ended, among them
    one that another client had submitted to it (``squall jar`` without --host spark): it waits
    for and kills only those its FILE submitted."""
    config = _config(tmp_path)
    file = _user_package(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    driver = _Driver([sys.executable, "-m", "squall.cli", "jar", "--config", config, str(file), "--host", "spark",
                      "--spark-master", "local[2]"], env=env)
    try:
        assert wait_until(lambda: driver.saw("running until idle is killed") or driver.proc.poll() is not None,
                          90), "".join(driver.lines)
        visitor = subprocess.run([sys.executable, "-m", "squall.cli", "jar", "--config", config, "--name", "visitor",
                                  str(file)], capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
        assert visitor.stdout.startswith("Submitted topology: visitor"), visitor.stderr
        assert set(_state(config)) == {"idle", "visitor"}
        killed = subprocess.run([sys.executable, "-m", "squall.cli", "kill", "--config", config, "idle", "-w", "0"],
                                capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
        assert killed.returncode == 0, killed.stderr
        assert wait_until(lambda: driver.proc.poll() is not None, 60), "the driver did not end with its topology"
        assert driver.proc.wait() == 0, "".join(driver.lines)
    finally:
        driver.stop()
    said = "".join(driver.lines)
    assert "visitor (submitted to this master by another client) stays in storm.local.dir" in said, said
    assert list(_state(config)) == ["visitor"], "another client's topology was killed"
