"""``squall trident`` refuses, before any JVM starts, what cannot run on Spark's engine, and a
FILE without a TridentTopology, in one line naming it (issue 36 item 1; the run itself is
test_driver_kill's)."""

from __future__ import annotations

import pytest

from squall.cli import main

pytest.importorskip("pyspark.sql.datasource")

PLAIN = '''
from squall import Fields
from squall.trident import TridentTopology
from tests.trident_spark.ops import Split, plain_spout


def build():
    topology = TridentTopology()
    topology.new_stream("lines", plain_spout()).each(Fields("sentence"), Split(), Fields("word"))
    return topology
'''


def test_a_plain_spout_is_refused_in_one_line_naming_the_file_and_the_spout(tmp_path, capsys):
    path = tmp_path / "wc.py"
    path.write_text(PLAIN)
    assert main(["trident", str(path), "--host", "spark", "--checkpoint", str(tmp_path / "ckpt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("squall: error: wc.py: new_stream('lines', SentenceSpout): a plain Spout is at least once")
    assert not (tmp_path / "ckpt").exists()


def test_a_file_without_a_trident_topology_is_refused_naming_what_it_holds(tmp_path, capsys):
    path = tmp_path / "storm.py"
    path.write_text("topology = 42\n")
    assert main(["trident", str(path), "--checkpoint", str(tmp_path / "ckpt")]) == 1
    assert "squall: error: storm.py: topology is an int, expected a TridentTopology" in capsys.readouterr().err
