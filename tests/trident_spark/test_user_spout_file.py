"""``squall trident FILE --host spark`` with the user's own `IBatchSpout` class in FILE, the
driver started from another directory: Spark's process that plans the source unpickles the spout
there, and its path lacked what ``squall trident`` ships (Spark names it a directory of its files
that is not there), so the query failed before its first batch with ``No module named
'<FILE>'``. Here the spout is FILE's, a value it holds is of a package next to FILE (shipped
zipped), and the operation and the state factory come from a module next to FILE: every record
the spout emits is stored once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import wait_until
from .conftest import FAST_SPARK, with_repo_on_pythonpath

pytestmark = pytest.mark.timeout(300)  # one cold driver on a loaded machine

FILE = """
    import os

    from squall import Fields
    from squall.trident import TridentTopology
    from squall.trident.spout import IBatchSpout

    from sparkfile_lib import Numbers
    from sparkfile_ops import Double, JsonFactory, Keep


    class NumberSpout(IBatchSpout):
        def __init__(self):
            self.numbers = Numbers(3, 4)

        def open(self, conf, context):
            pass

        def emit_batch(self, batch_id, collector):
            for n in self.numbers.of(batch_id):
                collector.emit([n])

        def ack(self, batch_id):
            pass

        def get_output_fields(self):
            return Fields(["n"])


    def build():
        topology = TridentTopology()
        topology.new_stream("numbers", NumberSpout()).each(Fields("n"), Double(), Fields("twice")) \\
            .partition_persist(JsonFactory(os.environ["SPARKFILE_OUT"]), Fields("twice"), Keep())
        return topology
"""

LIB = """
    class Numbers:
        def __init__(self, batches, size):
            self.batches, self.size = batches, size

        def of(self, txid):
            return [txid * 100 + i for i in range(self.size)] if txid <= self.batches else []
"""

OPS = """
    import json
    import os

    from squall.trident import BaseFunction
    from squall.trident.state import State, StateFactory
    from squall.trident.state.api import BaseStateUpdater


    class Double(BaseFunction):
        def execute(self, tuple_, collector):
            collector.emit([tuple_.get_value(0) * 2])


    class _JsonState(State):
        def __init__(self, directory):
            self.directory, self.values = directory, []

        def begin_commit(self, txid):
            self.values = []

        def commit(self, txid):
            part = os.path.join(self.directory, f".{txid}")
            with open(part, "w") as f:
                json.dump(self.values, f)
            os.replace(part, os.path.join(self.directory, f"txid-{txid}.json"))


    class JsonFactory(StateFactory):
        def __init__(self, directory):
            self.directory = directory

        def make_state(self, conf, metrics, partition_index, num_partitions):
            return _JsonState(self.directory)


    class Keep(BaseStateUpdater):
        def update_state(self, state, tuples, collector):
            state.values.extend(t.get_value(0) for t in tuples)
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_a_spout_class_of_the_topology_file_runs_from_another_directory(tmp_path):
    app, out, elsewhere = tmp_path / "app", tmp_path / "out", tmp_path / "elsewhere"
    _write(app / "sparkfile_topo.py", FILE)
    _write(app / "sparkfile_lib" / "__init__.py", LIB)
    _write(app / "sparkfile_ops.py", OPS)
    out.mkdir()
    elsewhere.mkdir()
    log_path = tmp_path / "driver.log"
    spark_conf = [arg for key, value in FAST_SPARK.items() for arg in ("-c", f"{key}={value}")]
    with log_path.open("wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "squall", "trident", str(app / "sparkfile_topo.py"), "--host", "spark",
             "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "1 second", "--spark-master", "local[2]",
             *spark_conf],
            cwd=elsewhere, env={**with_repo_on_pythonpath(), "SPARKFILE_OUT": str(out)},
            start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: (out / "txid-3.json").exists() or driver.poll() is not None, 240, 0.1), \
            log_path.read_text()[-3000:]
        assert driver.poll() is None, log_path.read_text()[-3000:]  # before: No module named 'sparkfile_topo'
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=120) == 0, log_path.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    stored = {p.name: json.loads(p.read_text()) for p in out.glob("txid-*.json")}
    assert set(stored) == {"txid-1.json", "txid-2.json", "txid-3.json"}  # the spout's 3 batches, nothing more
    assert sorted(v for values in stored.values() for v in values) == \
        sorted(2 * (txid * 100 + i) for txid in (1, 2, 3) for i in range(4))  # all 12 records, each once
