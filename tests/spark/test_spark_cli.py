"""Deployment on Spark from the command line: ``squall jar FILE --host spark --spark-master URL``
and ``spark-submit`` of squall's entry file, each a subprocess that becomes the Spark driver
and the master; ``squall list`` and ``squall kill`` reach that master like any other, and so
does ``squall jar`` of another client."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import wait_until
from .conftest import _descendants

pytest.importorskip("pyspark")

REPO = Path(__file__).resolve().parents[2]
POLL = 0.2
"""Seconds between two polls of the master. The polls are made in this process (`_info`): each
``squall info`` process polled before took ~0.5 s of CPU from the Spark driver the test waits
for, and a second or more at a time on a loaded machine; each verb still runs once as a
process, after the wait."""


def _config(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    path = tmp_path / "squall.yaml"
    path.write_text(yaml.safe_dump({"storm.local.dir": str(tmp_path / "storm-local"), "nimbus.thrift.port": port}))
    return str(path)


def _squall(*args):
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def _info(config, name):
    """What ``squall info NAME`` prints (`get_topology_info`, as JSON), read in this process;
    None while the master does not answer or runs no topology ``name``."""
    from squall import SquallError
    from squall._config import cluster_conf
    from squall.cluster.client import MasterClient
    try:
        with MasterClient(cluster_conf(None, config)) as master:
            return json.dumps(master.get_topology_info(name), indent=2, default=str)
    except (SquallError, OSError):
        return None


class _Driver:
    """A driver subprocess, its output gathered by a reader thread."""

    def __init__(self, argv, env=None):
        import threading
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=REPO, env=env)
        self.lines = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    def saw(self, text):
        return any(text in line for line in self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def _run_and_kill(driver, config, name, meanwhile=lambda: None):
    """``driver``'s topology ``name`` submitted, listed, emitting; ``meanwhile()``; then ``squall
    kill``: the driver ends with 0, and every process it started with it."""
    try:
        assert wait_until(lambda: driver.saw(f"Submitted topology: {name}") or driver.proc.poll() is not None, 90), \
            "".join(driver.lines)
        assert driver.proc.poll() is None, "".join(driver.lines)
        assert wait_until(lambda: _info(config, name) is not None, 30, POLL)
        assert name in _squall("list", "--config", config).stdout

        def emitting(out):
            return out is not None and '"emitted": 0' not in out and '"emitted"' in out
        assert wait_until(lambda: emitting(_info(config, name)), 60, POLL), _info(config, name)
        assert emitting(_squall("info", "--config", config, name).stdout)
        meanwhile()
        family = _descendants(driver.proc.pid)
        assert _squall("kill", "--config", config, name, "-w", "0").returncode == 0
        assert driver.proc.wait(60) == 0, "".join(driver.lines)
        assert wait_until(lambda: not [p for p in family if Path(f"/proc/{p}").exists()], 20), \
            "processes of the driver outlived it"
    finally:
        driver.stop()


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


def _state(config):
    """The topologies' records in the master's ``state.json``, as its file holds them."""
    local_dir = Path(yaml.safe_load(Path(config).read_text())["storm.local.dir"])
    return json.loads((local_dir / "nimbus" / "state.json").read_bytes())["topologies"]


def test_squall_jar_host_spark_runs_a_topology_until_it_is_killed_and_leaves_another_clients_topology(tmp_path):
    """``squall jar FILE --host spark``: the driver runs FILE's topology, which ``squall list``
    and ``squall info`` show, until ``squall kill`` kills it; the driver then ends with 0, and
    every process it started with it. It waits for and kills only the topologies its FILE
    submitted: one that another client submitted to its master meanwhile (``squall jar``
    without --host spark) stays in storm.local.dir. Before, it waited for every topology of its
    master, and killed them all as it ended. (One driver for both claims: a Spark driver's
    start and stop cost 15-40 s.) local[3]: word_count's 2 workers and the visitor's 1."""
    config = _config(tmp_path)
    driver = _Driver([sys.executable, "-m", "squall.cli", "jar", "--config", config, "examples/word_count.py",
                      "--host", "spark", "--spark-master", "local[3]"])

    def visit():
        visitor = subprocess.run([sys.executable, "-m", "squall.cli", "jar", "--config", config, "--name", "visitor",
                                  str(_user_package(tmp_path))], capture_output=True, text=True, timeout=60, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
        assert visitor.stdout.startswith("Submitted topology: visitor"), visitor.stderr
        assert set(_state(config)) == {"word_count", "visitor"}
    _run_and_kill(driver, config, "word_count", meanwhile=visit)
    said = "".join(driver.lines)
    assert "visitor (submitted to this master by another client) stays in storm.local.dir" in said, said
    assert list(_state(config)) == ["visitor"], "another client's topology was killed"


def test_spark_submit_of_the_squall_entry_file_runs_a_topology(tmp_path):
    import pyspark

    import squall.cli.spark_submit as entry
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"  # pip's pyspark has it, on PATH or not
    config = _config(tmp_path)
    # the driver runs PYSPARK_PYTHON (else python3 on PATH): ours, which has squall. local[3]:
    # exclamation.py asks for 3 workers
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    driver = _Driver([str(spark_submit), "--master", "local[3]", entry.__file__, "--config", config,
                      "examples/exclamation.py"], env=env)
    _run_and_kill(driver, config, "exclamation")


def test_nimbus_on_spark_serves_squall_jar_and_a_restarted_nimbus_resumes_its_topologies(tmp_path):
    """``squall nimbus --host spark``; ``squall jar`` submits to it as to any master. Stopping
    it stops the workers with the driver but keeps the topology: started again on the same
    storm.local.dir, the master brings its workers back."""
    config = _config(tmp_path)
    nimbus = ["squall.cli", "nimbus", "--config", config, "--host", "spark", "--spark-master", "local[2]"]
    first = _Driver([sys.executable, "-m", *nimbus])
    try:
        # the ready line, which scripts wait for
        assert wait_until(lambda: first.saw("squall nimbus ready at 127.0.0.1:"), 90), "".join(first.lines)
        assert first.saw("(Spark local[2], 2 task slots)"), "".join(first.lines)
        submitted = _squall("jar", "--config", config, "examples/word_count.py")
        assert submitted.stdout == "Submitted topology: word_count\n", submitted.stderr
        assert wait_until(lambda: _emitted(_info(config, "word_count")) > 0, 60, POLL)
        first.proc.terminate()
        assert first.proc.wait(60) == 0, "".join(first.lines)
    finally:
        first.stop()
    second = _Driver([sys.executable, "-m", *nimbus])
    try:
        assert wait_until(lambda: second.saw("squall nimbus ready at 127.0.0.1:"), 90), "".join(second.lines)
        assert wait_until(lambda: _emitted(_info(config, "word_count")) > 0, 60, POLL), \
            "the resumed topology does not run"
        assert _emitted(_squall("info", "--config", config, "word_count").stdout) > 0
        assert _squall("kill", "--config", config, "word_count", "-w", "0").returncode == 0
    finally:
        second.stop()
    assert second.proc.returncode == 0


def _emitted(info):
    """The sentences spout's emitted count in ``info`` (`squall info word_count`'s output; 0 if
    it is None or empty: the master did not answer)."""
    if not info:
        return 0
    return json.loads(info)["components"]["sentences"]["emitted"]
