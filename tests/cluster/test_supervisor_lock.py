"""A supervisor's pid file names it only while it holds its directory's lock: a master adopting
"the supervisor running for storm.local.dir" must not adopt, and later SIGTERM, a process that
got the pid of a supervisor killed since (another cluster's supervisor, say)."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
import yaml

from squall._errors import SquallError
from squall.cluster.process import running_supervisor
from squall.cluster.supervisor import hold_supervisor_lock, supervisor_lock_held

from tests.conftest import wait_until
from tests.ports import free_ports


def test_the_lock_is_one_supervisors_a_directory_and_is_free_once_it_is_gone(tmp_path):
    fd = hold_supervisor_lock(tmp_path)
    try:
        assert supervisor_lock_held(tmp_path)
        with pytest.raises(SquallError, match=f"another supervisor runs for {tmp_path.parent}"):
            hold_supervisor_lock(tmp_path)
    finally:
        os.close(fd)
    assert not supervisor_lock_held(tmp_path)


def test_a_pid_file_left_behind_does_not_adopt_another_clusters_supervisor(tmp_path):
    other = tmp_path / "cluster-b"
    (other / "supervisor").mkdir(parents=True, mode=0o700)
    master_port, slot = free_ports(2)  # no master there: the supervisor waits for one
    conf = other / "supervisor" / "launch.yaml"
    conf.write_text(yaml.safe_dump({"storm.local.dir": str(other), "nimbus.seeds": ["127.0.0.1"],
                                    "nimbus.thrift.port": master_port, "supervisor.slots.ports": [slot],
                                    "squall.secret": "b" * 40}))
    os.chmod(conf, 0o600)
    proc = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(conf),
                             "--log", str(other / "supervisor" / "supervisor.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # locked, and its pid written (or it ended: said below)
        wait_until(lambda: proc.poll() is not None or running_supervisor(other) == proc.pid, 60)
        assert running_supervisor(other) == proc.pid, "cluster B's supervisor did not start"
        mine = tmp_path / "cluster-a"
        (mine / "supervisor").mkdir(parents=True, mode=0o700)
        (mine / "supervisor" / "pid").write_text(str(proc.pid))  # cluster A's, left by a supervisor killed
        assert running_supervisor(mine) is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("spelling", [["squall.cli"], ["squall"]])
def test_a_supervisor_started_as_python_m_squall_cli_is_found_as_the_directorys_supervisor(tmp_path, spelling):
    """docs/cli.md: ``python -m squall`` and ``python -m squall.cli`` do what ``squall`` does. A
    supervisor started as ``python -m squall.cli supervisor`` was not recognised as the one that
    holds its directory's lock: ``squall nimbus`` on that storm.local.dir did not adopt it but
    started a supervisor of its own every 1 to 30 s, each dying at once on the lock (a crash loop
    for as long as the master ran), and a second ``squall supervisor`` did not name its pid."""
    master_port, slot = free_ports(2)
    conf = tmp_path / "squall.yaml"
    conf.write_text(yaml.safe_dump({"storm.local.dir": str(tmp_path / "local"), "nimbus.seeds": ["127.0.0.1"],
                                    "nimbus.thrift.port": master_port, "supervisor.slots.ports": [slot],
                                    "squall.secret": "c" * 40}))
    os.chmod(conf, 0o600)
    err = tmp_path / "supervisor.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", *spelling, "supervisor", "--config", str(conf)],
                                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or running_supervisor(tmp_path / "local") == proc.pid, 60)
        assert running_supervisor(tmp_path / "local") == proc.pid, \
            f"the supervisor was not found as running (exit status {proc.poll()}):\n{err.read_text()[-3000:]}"
        second = subprocess.run([sys.executable, "-m", "squall.cli", "supervisor", "--config", str(conf)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert second.stderr.strip() == (f"squall: error: a supervisor already runs for storm.local.dir "
                                         f"{tmp_path / 'local'} (pid {proc.pid})"), second.stderr
    finally:
        with contextlib.suppress(ProcessLookupError):  # it ended already (the assertion says why)
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
