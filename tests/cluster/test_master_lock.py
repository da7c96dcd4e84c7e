"""One master a storm.local.dir: a second lone master started there (on another port, as the
"address in use" error once advised) ran every topology the directory holds a second time; a
second master under Nimbus HA shared it silently, where its code sync removes the plan another
master has written and not yet published to ZooKeeper."""

import os
import subprocess
import sys

import pytest

from squall._errors import SquallError
from squall.cluster.store import hold_master_lock, name_master_lock

from tests.ports import free_ports


def test_a_second_lone_master_on_a_directory_is_refused_naming_the_first_and_what_to_do(tmp_path):
    conf = {"storm.local.dir": str(tmp_path)}
    fd = hold_master_lock(conf)
    assert fd is not None
    try:
        with pytest.raises(SquallError, match=rf"another master \(pid {os.getpid()}, nimbus 127.0.0.1:6627\) runs for "
                                              rf"storm.local.dir "
                                              rf"{tmp_path}: .* needs a storm.local.dir of its own"):
            hold_master_lock(conf)
    finally:
        os.close(fd)
    again = hold_master_lock(conf)  # free once the first is gone
    assert again is not None
    os.close(again)


def test_a_second_master_under_nimbus_ha_on_a_directory_is_refused_naming_the_first(tmp_path):
    """Storm gives each nimbus its own blob directory, and squall's HA masters keep their copies
    of the code in storm.local.dir the same way: a standby's code sync drops every plan file
    ZooKeeper does not list, the leader's just written and not yet published included. So a
    second HA master there is refused, naming the directory and the master that holds it."""
    first = {"storm.local.dir": str(tmp_path), "storm.zookeeper.servers": ["127.0.0.1"],
             "nimbus.host": "nimbus1", "nimbus.thrift.port": 6700}
    fd = hold_master_lock(first)
    try:
        with pytest.raises(SquallError, match=rf"another master \(pid {os.getpid()}, nimbus nimbus1:6700\) runs for "
                                              rf"storm.local.dir {tmp_path}: under Nimbus HA each master keeps its own "
                                              r"copies of the topologies' code .* needs a storm.local.dir of its own"):
            hold_master_lock({**first, "nimbus.thrift.port": 6701})
        with pytest.raises(SquallError, match=r"runs for storm.local.dir .*: a lone master"):  # nor a lone one
            hold_master_lock({"storm.local.dir": str(tmp_path)})
    finally:
        os.close(fd)
    again = hold_master_lock({**first, "nimbus.thrift.port": 6701})  # free once the first is gone
    os.close(again)


def test_the_lock_names_the_port_a_master_took_once_it_listens(tmp_path):
    """nimbus.thrift.port 0: the lock names the pid alone until the master names the port it took."""
    conf = {"storm.local.dir": str(tmp_path), "storm.zookeeper.servers": ["127.0.0.1"], "nimbus.thrift.port": 0}
    fd = hold_master_lock(conf)
    try:
        with pytest.raises(SquallError, match=rf"another master \(pid {os.getpid()}\) runs"):
            hold_master_lock(conf)
        name_master_lock(fd, "127.0.0.1", 41234)
        with pytest.raises(SquallError, match=rf"another master \(pid {os.getpid()}, nimbus 127.0.0.1:41234\) runs"):
            hold_master_lock(conf)
    finally:
        os.close(fd)


@pytest.mark.parametrize("ha", [False, True], ids=["lone", "nimbus-ha"])
def test_squall_nimbus_on_a_directory_a_master_holds_stops_at_once_saying_so(tmp_path, ha):
    """Under Nimbus HA too, before it reaches ZooKeeper (none listens at the port given: the
    error is the lock's, not the connection's)."""
    [port, zk_port] = free_ports(2)
    ha_conf = {"storm.zookeeper.servers": [f"127.0.0.1:{zk_port}"]} if ha else {}
    fd = hold_master_lock({"storm.local.dir": str(tmp_path), **ha_conf})
    try:
        done = subprocess.run([sys.executable, "-m", "squall", "nimbus", "--no-supervisor",
                               "-c", f"storm.local.dir={tmp_path}", "-c", f"nimbus.thrift.port={port}",
                               "-c", "squall.secret=" + "s" * 40,
                               *(["-c", f'storm.zookeeper.servers=["127.0.0.1:{zk_port}"]'] if ha else [])],
                              capture_output=True, text=True, timeout=120)
    finally:
        os.close(fd)
    assert done.returncode == 1, done.stderr
    assert (f"squall: error: another master (pid {os.getpid()}, nimbus 127.0.0.1:6627) runs for storm.local.dir "
            f"{tmp_path}: " + ("under Nimbus HA each master keeps its own" if ha else "a lone master")) in done.stderr


def test_a_master_lock_that_is_a_symbolic_link_is_refused_naming_it_and_its_target_is_untouched(tmp_path):
    """``nimbus/master.lock`` pointed at another file (a stray link, or one planted to have the
    master write its pid into a file of the attacker's choosing) stopped the master with a bare
    ``OSError: [Errno 40] Too many levels of symbolic links`` and a traceback. The link is still
    never followed; now the error says which file it is and what to do."""
    conf = {"storm.local.dir": str(tmp_path)}
    os.close(hold_master_lock(conf))  # makes nimbus/ as the master does
    decoy = tmp_path / "decoy"
    decoy.write_text("root:x:0:0\n")
    lock = tmp_path / "nimbus" / "master.lock"
    lock.unlink()
    lock.symlink_to(decoy)
    with pytest.raises(SquallError, match=rf"cannot take the lock file {lock}: it is a symbolic link, .* remove it"):
        hold_master_lock(conf)
    assert decoy.read_text() == "root:x:0:0\n"
