"""What `squall supervisor` tells its operator: that it cannot reach a master (none at
nimbus.seeds, or one that refuses its secret) at once, that it registered its slots once it can,
and that it stops and stops its workers on SIGTERM. It once said nothing at all, however long no
master answered, nor when it started or stopped."""

import logging
import os
import signal
import subprocess
import sys

import yaml

from tests.conftest import wait_until
from tests.ports import free_ports

SECRET = "supervisor-says-secret-0123456789"


def _start(args, tmp_path, name, **conf):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"storm.local.dir": str(tmp_path / name), **conf}))
    os.chmod(path, 0o600)
    err = tmp_path / f"{name}.err"
    out = tmp_path / f"{name}.out"
    proc = subprocess.Popen([sys.executable, "-m", "squall.cli", *args, "--config", str(path)],
                            stdout=open(out, "wb"), stderr=open(err, "wb"), start_new_session=True)
    return proc, out, err


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def _says(path, text):
    return lambda: text in path.read_text(errors="replace")


def test_a_supervisor_says_when_no_master_answers_when_it_registers_and_when_it_stops(tmp_path):
    master_port, slot = free_ports(2)
    common = {"nimbus.seeds": [f"127.0.0.1:{master_port}"], "nimbus.thrift.port": master_port,
              "supervisor.slots.ports": [slot]}
    lonely, _, lonely_err = _start(["supervisor"], tmp_path, "lonely", **common, **{"squall.secret": SECRET})
    try:
        assert wait_until(_says(lonely_err, "cannot reach the master"), 60), lonely_err.read_text()
        text = lonely_err.read_text()
        assert f"127.0.0.1:{master_port}" in text and "Connection refused" in text, text
    finally:
        assert _stop(lonely) == 0
    assert "stopping: stopping its 0 workers" in lonely_err.read_text()
    assert lonely_err.read_text().rstrip().endswith("stopped"), lonely_err.read_text()

    master, master_out, master_err = _start(["nimbus", "--no-supervisor"], tmp_path, "master", **common,
                                            **{"squall.secret": SECRET})
    try:
        assert wait_until(_says(master_out, "squall nimbus ready at"), 60), master_err.read_text()
        stranger, _, stranger_err = _start(["supervisor"], tmp_path, "stranger", **common,
                                           **{"squall.secret": "another-clusters-secret-0123456789"})
        try:
            assert wait_until(_says(stranger_err, "cannot reach the master"), 60), stranger_err.read_text()
            assert "wrong or missing secret" in stranger_err.read_text(), stranger_err.read_text()
        finally:
            assert _stop(stranger) == 0
        member, _, member_err = _start(["supervisor"], tmp_path, "member", **common, **{"squall.secret": SECRET})
        try:
            assert wait_until(_says(member_err, f"registered slots {slot} on 127.0.0.1 with 127.0.0.1:{master_port}"),
                              60), member_err.read_text()
            assert "cannot reach" not in member_err.read_text()
        finally:
            assert _stop(member) == 0
        assert "stopped" in member_err.read_text()
    finally:
        _stop(master)


def test_a_supervisor_says_when_it_stops_a_worker_its_master_no_longer_assigns_here(tmp_path, caplog):
    """A machine cut off longer than nimbus.task.timeout.secs comes back to find its executors
    moved away: its supervisor stops the workers still running there. It did so without a word
    (its log went from `reached ... again` to nothing), so an operator could not tell why a
    worker ended, nor that the machine's zombie workers were gone."""
    from .test_held_slots import TOPO, _supervisor

    sup, launcher, master, _clock = _supervisor(tmp_path)
    sup.sync()
    master.slots = {2: 1}  # port 1's executors moved to another machine while this one was cut off
    with caplog.at_level(logging.INFO, logger="squall.supervisor"):
        sup.sync()
    assert set(launcher.running()) == {2}
    assert f"supervisor sup-1 stops worker h:1 of {TOPO} (launch 1): the master assigns this slot nothing now" \
        in caplog.text, caplog.text
    caplog.clear()
    master.slots = {1: 3, 2: 1}
    sup.sync()
    master.slots = {1: 4, 2: 1}  # a newer launch of the slot replaces the one running
    with caplog.at_level(logging.INFO, logger="squall.supervisor"):
        sup.sync()
    assert f"supervisor sup-1 stops worker h:1 of {TOPO} (launch 3): the master assigns this slot launch 4 of {TOPO}" \
        in caplog.text, caplog.text
    assert "worker h:2" not in caplog.text  # a worker kept is not mentioned
