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
