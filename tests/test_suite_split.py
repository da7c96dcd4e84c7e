"""scripts/test's split of the suite (tests/conftest.py's `starts_spark`): the tests that start
Spark (the ``spark`` mark, run one at a time) and the rest (run on two xdist workers)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from .conftest import starts_spark


def _item(nodeid: str, *fixtures: str, cluster: str | None = None) -> SimpleNamespace:
    callspec = SimpleNamespace(params={"cluster": cluster}) if cluster else None
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures), callspec=callspec)


@pytest.mark.parametrize("item", [
    _item("tests/spark/test_spark_ui.py::test_the_driver_serves_the_rest_api_until_shutdown"),
    _item("tests/trident_spark/test_standalone.py::test_a_driver_killed_at_the_commit"),
    _item("tests/external/test_follow.py::test_the_parquet_files_a_spark_job_writes", "tmp_path", "spark"),
    _item("tests/process/test_other.py::test_x", "spark_cluster"),
    _item("tests/bench/test_peers.py::test_spark_sql_and_udf_splits_are_correct", "tmp_path"),
    _item("tests/acceptance/test_acking.py::test_acks[spark]", "cluster", cluster="spark"),
], ids=lambda item: item.nodeid.split("::")[-1])
def test_a_test_that_starts_spark_is_in_the_spark_part(item):
    assert starts_spark(item)


@pytest.mark.parametrize("item", [
    _item("tests/external/test_follow.py::test_a_file_is_emitted_once", "tmp_path"),
    _item("tests/bench/test_peers.py::test_bytewax_is_correct", "tmp_path"),
    _item("tests/acceptance/test_acking.py::test_acks[process]", "cluster", cluster="process"),
    _item("tests/acceptance/test_acking.py::test_acks[local]", "cluster", cluster="local"),
    _item("tests/test_spark_standalone_submit.py::test_the_driver_command", "tmp_path"),  # no JVM
], ids=lambda item: item.nodeid.split("::")[-1])
def test_a_test_that_starts_no_spark_is_in_the_parallel_part(item):
    assert not starts_spark(item)
