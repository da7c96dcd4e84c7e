"""One lone master a storm.local.dir: a second one started there (on another port, as the
"address in use" error once advised) ran every topology the directory holds a second time."""

import os
import subprocess
import sys

import pytest

from squall._errors import SquallError
from squall.cluster.store import hold_master_lock

from tests.ports import free_ports


def test_a_second_lone_master_on_a_directory_is_refused_naming_the_first_and_what_to_do(tmp_path):
    conf = {"storm.local.dir": str(tmp_path)}
    fd = hold_master_lock(conf)
    assert fd is not None
    try:
        with pytest.raises(SquallError, match=rf"another master \(pid {os.getpid()}\) runs for storm.local.dir "
                                              rf"{tmp_path}: .* needs a storm.local.dir of its own"):
            hold_master_lock(conf)
    finally:
        os.close(fd)
    again = hold_master_lock(conf)  # free once the first is gone
    assert again is not None
    os.close(again)


def test_masters_under_nimbus_ha_take_no_lock(tmp_path):
    assert hold_master_lock({"storm.local.dir": str(tmp_path), "storm.zookeeper.servers": ["127.0.0.1"]}) is None


def test_squall_nimbus_on_a_directory_a_master_holds_stops_at_once_saying_so(tmp_path):
    conf = {"storm.local.dir": str(tmp_path)}
    fd = hold_master_lock(conf)
    [port] = free_ports(1)
    try:
        done = subprocess.run([sys.executable, "-m", "squall", "nimbus", "--no-supervisor",
                               "-c", f"storm.local.dir={tmp_path}", "-c", f"nimbus.thrift.port={port}",
                               "-c", "squall.secret=" + "s" * 40],
                              capture_output=True, text=True, timeout=120)
    finally:
        os.close(fd)
    assert done.returncode == 1, done.stderr
    assert f"squall: error: another master (pid {os.getpid()}) runs for storm.local.dir {tmp_path}" in done.stderr
