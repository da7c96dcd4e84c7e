"""examples/events_to_delta.py: the rows PySpark reads back from the Delta table are exactly the
events written as files, and its main runs with one command."""

from __future__ import annotations

import pytest

from .conftest import load_example


@pytest.fixture(scope="module")
def ex():
    pytest.importorskip("deltalake")
    pytest.importorskip("pyspark")
    return load_example("events_to_delta")


def test_spark_reads_back_exactly_the_events(ex, tmp_path):
    rows = ex.run(str(tmp_path), 250)
    assert sorted(rows, key=lambda r: r["event_id"]) == ex.make_events(250)


def test_main_prints_what_spark_read(ex, capsys):
    ex.main(["--events", "30"])
    assert "Spark read 30 rows from the Delta table" in capsys.readouterr().out
