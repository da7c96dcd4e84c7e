"""squall.trident.spark.forkserver (issue 36 item 6): the launcher runs Spark's ``python -m
MODULE`` and ``python -c CODE`` as forks of a server that imported pyspark, pyarrow and Trident
while the JVM started; a fork is the process a fresh interpreter would have been (arguments,
directory, environment, path, stdio, exit status, signals), and a request whose environment or
path would import something else runs on its own. No Spark session needed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.trident.spark.launcher import FORKSERVER_SOCKET, start_forkserver, write_script

from ..conftest import wait_until

REPO = Path(__file__).resolve().parents[2]

SHOW = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "pid": os.getpid(), "cwd": os.getcwd(), "path": sys.path,
                  "mark": os.environ.get("MARK"), "forked": "pyarrow" in sys.modules}), flush=True)
if "sleep" in sys.argv:
    import time
    time.sleep(60)
sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
"""


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    """The launcher script with a running fork server, and the environment Spark would give it."""
    directory = tmp_path_factory.mktemp("launcher")
    (directory / "show_me.py").write_text(SHOW)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(directory)]), "PYTHONHASHSEED": "0"}
    socket_path = str(directory / FORKSERVER_SOCKET)
    server = start_forkserver(socket_path, env)
    script = write_script(str(directory), socket_path)
    # A launcher runs the interpreter itself (as it should: the server is a head start only)
    # when it comes before the server's socket exists, or when the server has not answered in
    # 60 s (its imports, at load 9). The tests' requests must reach the server: they start once
    # a request was forked, which a first one waits for (the server answers once it has
    # imported what it preloads). A first `-c pass` ran on its own once in the full suite at
    # load 9, and the test's request after it too.

    def forked() -> bool:
        done = subprocess.run([script, "-m", "show_me"], check=False, env=env, cwd=directory, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["forked"]

    assert wait_until(forked, 300, interval=0.5), "no request was forked by the fork server in 300 s"
    yield script, env, directory
    assert server.stdin is not None
    server.stdin.close()  # the driver's end: the server ends
    assert server.wait(60) == 0


def run(launcher, *args, **extra):
    script, env, directory = launcher
    return subprocess.run([script, *args], check=False, env={**env, **extra}, cwd=directory, capture_output=True, text=True,
                          timeout=120)


def test_a_module_runs_forked_with_its_arguments_directory_environment_and_exit_status(launcher):
    _, _, directory = launcher
    done = run(launcher, "-m", "show_me", "one", "7", MARK="m")
    shown = json.loads(done.stdout)
    assert done.returncode == 7
    assert shown["forked"]  # pyarrow already imported: the server's
    assert shown["argv"] == [str(directory / "show_me.py"), "one", "7"]
    assert shown["cwd"] == str(directory) and shown["mark"] == "m"
    fresh = subprocess.run([sys.executable, "-m", "show_me", "one", "7"], check=False, env=launcher[1],
                           cwd=directory, capture_output=True, text=True)
    assert json.loads(fresh.stdout)["path"] == shown["path"]  # the same path as a fresh interpreter's


def test_code_runs_forked_as_python_c_does_with_its_traceback_and_status(launcher):
    done = run(launcher, "-c", "import sys; print('%d.%d' % sys.version_info[:2], __name__, sys.argv[1:])", "a")
    assert done.returncode == 0 and done.stdout == f"{sys.version_info[0]}.{sys.version_info[1]} __main__ ['a']\n"
    failed = run(launcher, "-c", "raise ValueError('no')")
    assert failed.returncode == 1 and failed.stderr.rstrip().endswith("ValueError: no")


def test_a_request_that_would_import_otherwise_runs_on_its_own(launcher):
    # a variable read at import (squall's, the hash seed) or a path that finds squall elsewhere
    for extra in ({"SQUALL_PURE_PYTHON": "1"}, {"PYTHONHASHSEED": "1"}, {"PYTHONPATH": launcher[2].as_posix()}):
        done = run(launcher, "-m", "show_me", "0", **extra)
        assert done.returncode == 0 and not json.loads(done.stdout)["forked"], extra
    # Spark's own variables (no import reads them) do not count
    spark = run(launcher, "-m", "show_me", "0", PYTHON_WORKER_FACTORY_PORT="1", SPARK_REUSE_WORKER="1")
    assert json.loads(spark.stdout)["forked"]


def test_sigterm_to_the_launcher_ends_the_fork_and_the_launcher_exits_as_it_did(launcher):
    script, env, directory = launcher
    proc = subprocess.Popen([script, "-m", "show_me", "sleep"], env=env, cwd=directory, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    shown = json.loads(proc.stdout.readline())
    assert shown["forked"]
    proc.terminate()
    assert proc.wait(30) == -signal.SIGTERM
    assert not _alive(shown["pid"])


def test_a_fork_killed_by_sigkill_ends_its_launcher_by_sigkill_without_a_traceback(launcher):
    """Spark's Python source process SIGKILLed (a test's kill, the OOM killer): its launcher, the
    process Spark started, ended with status 1 and a traceback on Spark's stderr (``OSError:
    [Errno 22] Invalid argument`` from setting SIGKILL's handler) instead of as its fork did."""
    script, env, directory = launcher
    proc = subprocess.Popen([script, "-m", "show_me", "sleep"], env=env, cwd=directory, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    shown = json.loads(proc.stdout.readline())
    assert shown["forked"]
    os.kill(shown["pid"], signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    assert proc.stderr.read() == ""


def test_a_launcher_killed_by_sigkill_takes_its_fork_with_it(launcher):
    script, env, directory = launcher
    proc = subprocess.Popen([script, "-m", "show_me", "sleep"], env=env, cwd=directory, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    shown = json.loads(proc.stdout.readline())
    proc.kill()
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _alive(shown["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shown["pid"])


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("request_bytes", [b"\x00", b"\xff\xff\xff\xff" + b"{}", b"\x00\x00\x00\x02[]",
                                           b"\x00\x00\x00\x0bnot json!!"])
def test_a_request_that_is_not_a_launchers_is_not_served_and_the_server_serves_on(launcher, request_bytes):
    """Bytes on the server's socket are hostile until they read as a launcher's request: a short
    header, a size over the bound, JSON of the wrong shape and no JSON are each refused with the
    connection closed, and the next launcher is forked as before."""
    import socket

    _script, _env, directory = launcher
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(60)
        conn.connect(str(directory / FORKSERVER_SOCKET))
        conn.sendall(request_bytes)
        conn.shutdown(socket.SHUT_WR)
        assert conn.recv(64) == b""  # closed, no pid
    done = run(launcher, "-m", "show_me", "after")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["forked"]
