"""A streamparse project's ``src/`` is importable in the process host's workers, as Storm's
``streamparse_run`` runs in the jar's ``resources/``: a module a component imports inside
``initialize`` (a client library, say) is found there, not only those its class's module
imports at the top."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli_cluster import Nimbus

REPO = Path(__file__).resolve().parents[2]
N = 30

FILES = {
    "config.json": json.dumps({"serializer": "json", "topology_specs": "topologies/",
                               "envs": {"prod": {"options": {}}}}),
    "topologies/lazy.py": """\
from streamparse import Topology

from bolts.sink import SinkBolt
from spouts.ids import IdSpout


class Lazy(Topology):
    ids = IdSpout.spec()
    sink = SinkBolt.spec(inputs=[ids], par=2)
""",
    "src/spouts/__init__.py": "",
    "src/spouts/ids.py": """\
import os

from streamparse import ReliableSpout


class IdSpout(ReliableSpout):
    outputs = ["n"]

    def initialize(self, storm_conf, context):
        self.out = storm_conf["out.dir"]
        self.i = 0

    def next_tuple(self):
        if self.i < int(self.storm_conf["ids.total"]):
            self.emit([self.i], tup_id=self.i)
            self.i += 1

    def ack(self, tup_id):
        super().ack(tup_id)
        with open(os.path.join(self.out, "acked"), "a") as f:
            f.write(f"{tup_id}\\n")
""",
    "src/bolts/__init__.py": "",
    "src/bolts/sink.py": """\
import os

from streamparse import Bolt


class SinkBolt(Bolt):
    def initialize(self, storm_conf, context):
        from helpers.fmt import tag  # imported when the task starts, not with this module
        self.tag = tag
        self.f = open(os.path.join(storm_conf["out.dir"], f"sink.{context['taskid']}"), "a", buffering=1)

    def process(self, tup):
        self.f.write(self.tag(tup.values.n) + "\\n")
""",
    "src/helpers/__init__.py": "",
    "src/helpers/fmt.py": "def tag(n):\n    return f'n={n}'\n",
}


def _lines(paths: list[Path]) -> list[str]:
    return [line for p in paths if p.exists() for line in p.read_text().split()]


def test_a_src_module_imported_in_initialize_is_found_by_process_workers(tmp_path: Path) -> None:
    # before the fix the sink's workers failed "No module named 'helpers'" until they gave up
    project, out = tmp_path / "lazy", tmp_path / "out"
    for rel, text in FILES.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    out.mkdir()
    nimbus = Nimbus(tmp_path)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-m", "squall", "sparse", "submit", "--config", str(nimbus.config),
                               "-w", "2", "-o", f"out.dir={out}", "-o", f"ids.total={N}"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        acked = wait_until(lambda: len(set(_lines([out / "acked"]))) >= N, 60, 0.2)
        with MasterClient(nimbus.conf) as master:
            errors = [e["error"].splitlines()[-1] for e in master.get_topology_info("lazy")["errors"]]
            master.kill_topology("lazy", wait_secs=0)
        assert acked and errors == [], errors[:3]
        assert sorted(_lines([out / "acked"]), key=int) == [str(i) for i in range(N)]  # every id, once
        assert sorted(_lines(list(out.glob("sink.*")))) == sorted(f"n={i}" for i in range(N))
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()


SIGKILLED_WORKER = """
import os, signal, sys
from squall.multilang.resources import pack
from squall.sparse.component import importable
importable(pack(sys.argv[1], "the project's src/"))
print([p for p in sys.path if "squall-sparse-src-" in p][0], flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the worker dies without its atexit functions
"""


def test_a_sigkilled_workers_copy_of_src_is_removed_by_its_restarter(tmp_path):
    """A worker's copy of the project's ``src/`` was removed only at its exit: a SIGKILLed (or
    OOM-killed) worker left it in the temporary directory for good, one more at every
    restart. It is made under the worker's shell home now, which its restarter empties
    (`squall._children.end_shell_tasks`)."""
    src, tmp, home = tmp_path / "src", tmp_path / "tmp", tmp_path / "shell-6700"
    (src / "bolts").mkdir(parents=True)
    (src / "bolts" / "sink.py").write_text("X = 1\n")
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "SQUALL_WORKER_SHELL_DIR": str(home), "PYTHONPATH": str(REPO)}
    worker = subprocess.run([sys.executable, "-c", SIGKILLED_WORKER, str(src)], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert worker.returncode == -9, worker.stderr
    copy = Path(worker.stdout.strip())
    assert (copy / "bolts" / "sink.py").read_text() == "X = 1\n"  # what the worker imported from
    assert list(tmp.iterdir()) == []  # main: the copy, in the temporary directory, which no one cleans

    from squall._children import SHELL_HOME_ENV, end_shell_tasks
    assert SHELL_HOME_ENV == "SQUALL_WORKER_SHELL_DIR"
    end_shell_tasks(home)  # its restarter, once it is dead
    assert not copy.exists() and list(home.iterdir()) == []
