"""What a Spark driver says when it cannot do what was asked: a second master on a taken port
(JVM-less: the master's thread alone)."""

import socket

import pytest

from squall._errors import SquallError


def test_a_master_whose_port_is_taken_says_a_second_master_needs_its_own_storm_local_dir(tmp_path):
    """Not "nimbus.thrift.port: 0 takes any free port": a second master on the first one's
    storm.local.dir, on another port, resumed and ran every topology a second time."""
    from squall.cluster.master import Master
    from squall.cluster.spark import _MasterThread
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    local_dir = tmp_path / "storm-local"
    try:
        with pytest.raises(SquallError) as e:
            _MasterThread(Master({"storm.local.dir": str(local_dir), "nimbus.host": "127.0.0.1",
                                  "nimbus.thrift.port": port}))
    finally:
        taken.close()
    said = str(e.value)
    assert f"cannot listen on 127.0.0.1:{port}" in said, said
    assert f"a master already running on storm.local.dir {local_dir}" in said, said
    assert "a second master needs its own storm.local.dir" in said, said
    assert "port: 0" not in said and "any free port" not in said, said
