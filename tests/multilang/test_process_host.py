"""Shell components on the process host: their scripts travel as ``resources`` to worker
processes that run in another directory, and the pystorm spout is told every sentence's ack;
the configuration its handshake carries holds no cluster secret."""

from __future__ import annotations

import collections
import json
import shutil
import sys
from pathlib import Path

import pytest

from squall import Config, ShellSpout, StormSubmitter, TopologyBuilder

from ..conftest import wait_until
from ..process.conftest import Cluster
from .test_node import NodeSplitter

HERE = Path(__file__).parent
NODE = shutil.which("node")
SENTENCES = 50
SECRET = "the-clusters-secret-r37-0123456789"


@pytest.mark.skipif(NODE is None, reason="needs node (Node.js) on PATH")
def test_shell_components_run_on_worker_processes_with_their_resources(tmp_path):
    pytest.importorskip("pystorm")
    acks = tmp_path / "acks"
    b = TopologyBuilder()
    b.set_spout("sentences", ShellSpout([sys.executable, "sentences.py"], ["sentence"],
                                        resources=HERE / "with_pystorm"))
    # NodeSplitter registers the metric splitter.js reports (an unregistered one is a fault, as in Storm)
    b.set_bolt("split", NodeSplitter([NODE, "splitter.js"], ["word"], resources=HERE / "node"), 2) \
        .shuffle_grouping("sentences")
    conf = Config()
    conf.set_num_workers(2)
    conf["test.sentences"] = SENTENCES
    conf["test.acks.file"] = str(acks)
    conf["test.conf.file"] = str(tmp_path / "handshake-conf.json")
    cluster = Cluster(tmp_path, **{Config.SQUALL_SECRET: SECRET})
    try:
        with StormSubmitter.using_conf(cluster.conf):
            StormSubmitter.submit_topology("shell", conf, b.create_topology())
        done = lambda: acks.exists() and len(set(acks.read_text().split())) == SENTENCES
        assert wait_until(done, 40), acks.read_text() if acks.exists() else "no acks"
        with cluster.client() as master:
            assert master.get_topology_info("shell")["errors"] == []
            master.kill_topology("shell", 0)
    finally:
        cluster.stop()

    assert collections.Counter(acks.read_text().split()) == collections.Counter(str(i) for i in range(SENTENCES))
    # the handshake gives the topology's configuration, never the cluster's secret
    handshake = (tmp_path / "handshake-conf.json").read_text()
    assert json.loads(handshake)["test.sentences"] == SENTENCES
    assert SECRET not in handshake and Config.SQUALL_SECRET not in handshake
