"""What a worker process and the ``squall`` command load as they start. Each starts in a fresh
interpreter (the process host starts a worker for every launch and every relaunch after a crash
or a kill; a user or a script runs ``squall list``, ``squall kill`` ...), so a module one imports
and never uses is paid at every start: measured on a 2-core machine, ``squall list --help`` took
0.21 s when the CLI imported the master, the process host and DRPC for every verb, 0.08 s
without. These read the ``sys.modules`` of a real worker, running a topology on the process
host, and of a real ``squall list`` against its master; none times anything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.written import finished_lines

from ..conftest import wait_until

N = 100

TOPOLOGY = '''
import json
import sys
from pathlib import Path

import yaml

from squall import Bolt, Config, Fields, Spout, StormSubmitter, TopologyBuilder

N = int(sys.argv[3])


class Numbers(Spout):
    """Emits 0..N-1 once each with message ids; at the last ack, writes its worker's sys.modules."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo, self.out = list(range(N)), Path(conf["test.out.dir"])

    def next_tuple(self):
        if self.todo:
            n = self.todo.pop(0)
            self.collector.emit([n], n)

    def ack(self, msg_id):
        with open(self.out / "acked.txt", "a") as f:
            f.write(f"{msg_id}\\n")
        if msg_id == N - 1:  # the worker has run the whole topology by now (one worker: the last ack is last)
            (self.out / "worker-modules.json").write_text(json.dumps(sorted(sys.modules)))


class Seen(Bolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.path = Path(conf["test.out.dir"]) / "seen.txt"

    def execute(self, tup):
        with open(self.path, "a") as f:
            f.write(f"{tup.get_value(0)}\\n")
        self.collector.ack(tup)


b = TopologyBuilder()
b.set_spout("numbers", Numbers())
b.set_bolt("seen", Seen(), 2).shuffle_grouping("numbers")
conf = Config()
conf.set_num_workers(1)
conf["test.out.dir"] = sys.argv[1]
with StormSubmitter.using_conf(yaml.safe_load(open(sys.argv[2]))):
    StormSubmitter.submit_topology("imports", conf, b.create_topology())
'''

# What a worker whose data port is not encrypted (TcpTransport: the default between workers on
# one machine, squall.encryption auto) never uses, by why it was loaded before
WORKER_NEEDS_NONE_OF = {
    "zmq": "pyzmq, ZmqTransport's: squall.worker.process imported it for every worker",
    "squall.worker.transport": "ZmqTransport's module, imported for every worker",
    "asyncio": "a server's event loop (squall._wire, squall._connlimit, pyzmq's monitor imported it)",
    "squall.drpc.linear": "LinearDRPCTopologyBuilder: squall.drpc's __init__ loaded all of DRPC",
    "squall.drpc.local": "LocalDRPC: as squall.drpc.linear",
}

# What ``squall list`` never uses: the verbs of the master, the supervisor, DRPC, ``local`` and
# ``jar`` load them (squall.cli imported every verb's module, and squall.cluster's __init__ the
# engine's features, for every verb)
LIST_NEEDS_NONE_OF = {
    "squall.cluster.master": "the master (squall nimbus)",
    "squall.cluster.process": "the process host (squall nimbus)",
    "squall.cluster.supervisor": "the supervisor (squall supervisor)",
    "squall.drpc.server": "DRPC's server (squall drpc, squall nimbus)",
    "squall.cluster.local": "LocalCluster (squall local)",
    "squall.sparse": "streamparse's projects (squall sparse, squall jar)",
    "squall.engine.loop": "the engine, via squall.cluster's features",
    "squall.metric": "a feature the hosts register (squall.cluster.features)",
    "squall.state": "a feature the hosts register (squall.cluster.features)",
    "squall.windowing": "a feature the hosts register (squall.cluster.features)",
    "asyncio": "a server's event loop (squall._wire's server side)",
    "cloudpickle": "a submission's pickling (squall.cluster.shipping)",
}

# ``python -m squall ARGS``, then this process's modules on stderr's last line
_SQUALL_THEN_MODULES = ("import json, sys\n"
                        "from squall.cli import main\n"
                        "status = main(sys.argv[1:])\n"
                        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
                        "sys.exit(status)")


def lines(path):
    return finished_lines(path)


def loaded(modules: list[str], heavy: dict[str, str]) -> dict[str, str]:
    """The ``heavy`` modules (or their submodules) among ``modules``, with why they were loaded."""
    return {name: why for name, why in heavy.items() if any(m == name or m.startswith(name + ".") for m in modules)}


@pytest.fixture(scope="module")
def ran(shared_cluster, tmp_path_factory):
    """The topology run to its end on one worker of the process host: its output directory."""
    tmp = tmp_path_factory.mktemp("imports")
    (tmp / "imports_topology.py").write_text(TOPOLOGY)
    out = tmp / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, str(tmp / "imports_topology.py"), str(out), str(shared_cluster.file), str(N)],
                         cwd=tmp, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    log = shared_cluster.dir.parent / "master.log"
    try:
        assert wait_until(lambda: len(lines(out / "acked.txt")) >= N, 60), \
            (len(lines(out / "acked.txt")), log.read_text()[-3000:])
        # every record: each number emitted once, seen once by the bolts and acked once
        assert sorted(map(int, lines(out / "seen.txt"))) == list(range(N))
        assert sorted(map(int, lines(out / "acked.txt"))) == list(range(N))
        assert wait_until((out / "worker-modules.json").exists, 10)
        yield out
    finally:
        with shared_cluster.client() as m:
            m.kill_topology("imports", wait_secs=0)


def test_a_worker_on_an_unencrypted_port_loads_neither_zeromq_asyncio_nor_the_drpc_builder(ran):
    modules = json.loads((ran / "worker-modules.json").read_text())

    assert "squall.worker.tcp" in modules  # the transport it runs (the check sees the real worker)
    assert loaded(modules, WORKER_NEEDS_NONE_OF) == {}


def test_squall_list_loads_neither_the_master_the_hosts_nor_the_engine(shared_cluster, ran):
    run = subprocess.run([sys.executable, "-c", _SQUALL_THEN_MODULES, "list", "--config", str(shared_cluster.file)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.split("\n\n")[0].splitlines()[2:]]
    assert [row[0] for row in rows] == ["imports"]  # the one topology, listed as `squall list` lists it
    modules = json.loads(run.stderr.splitlines()[-1])
    assert "squall.cluster.client" in modules  # what list uses
    assert loaded(modules, LIST_NEEDS_NONE_OF) == {}
