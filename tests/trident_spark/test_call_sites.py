"""squall.trident.spark.runner.quiet_call_sites (issue 36 item 6): squall builds its own
DataFrames without pyspark's Python call-site capture (py4j calls per Column method, and an
IPython import at the first), and the user's setting is back afterwards, also when blocks nest
or overlap on two threads. No Spark session needed."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("pyspark.sql.datasource")

from pyspark.errors import utils

from squall.trident.spark.runner import quiet_call_sites


@pytest.fixture
def capture_on():
    saved = utils._enable_debugging_cache
    utils._enable_debugging_cache = True
    yield
    utils._enable_debugging_cache = saved


def test_inside_a_block_no_call_site_is_captured_and_after_it_the_users_setting_is_back(capture_on):
    with quiet_call_sites():
        assert utils.is_debugging_enabled() is False
        with quiet_call_sites():
            assert utils.is_debugging_enabled() is False
        assert utils.is_debugging_enabled() is False
    assert utils.is_debugging_enabled() is True


def test_overlapping_blocks_on_two_threads_restore_the_setting_once_both_ended(capture_on):
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with quiet_call_sites():
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=other)
    with quiet_call_sites():
        thread.start()
        assert inside.wait(30)
    assert utils.is_debugging_enabled() is False  # the other thread's block still runs
    release.set()
    thread.join(30)
    assert utils.is_debugging_enabled() is True


def test_an_error_inside_a_block_restores_the_setting(capture_on):
    with pytest.raises(ZeroDivisionError), quiet_call_sites():
        1 / 0  # noqa: B018
    assert utils.is_debugging_enabled() is True
