"""DRPC on the Spark host: ``squall nimbus --host spark`` with drpc.servers naming this machine
serves DRPC beside the master in the Spark driver, and topologies submitted with ``squall jar``
answer DRPCClient from their Spark tasks: Storm's manual DRPC topology, and Storm's
TridentIntegrationTest word count (a FeederBatchSpout fed from the test) with exact answers
after each batch committed and a call whose batch fails raised at once."""

from __future__ import annotations

import sys

import pytest
import yaml

from squall import DRPCExecutionException
from squall.drpc import DRPCExceptionType

from ..conftest import wait_until
from ..drpc.calls import client_execute
from ..drpc.test_drpc_process_host import MANUAL_DRPC
from ..drpc.trident_words import WORDS_TOPOLOGY, FedWords, ask
from ..ports import free_ports
from ..test_cli import write
from .test_spark_cli import _Driver, _squall

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark_nimbus(tmp_path_factory):
    """(cluster conf, FedWords): ``squall nimbus --host spark`` on local[2] (two task slots)
    running the manual DRPC topology and the Trident word count, one worker each."""
    tmp = tmp_path_factory.mktemp("spark-drpc")
    port, drpc, invocations = free_ports(3)
    conf = {"storm.local.dir": str(tmp / "storm-local"), "nimbus.thrift.port": port, "drpc.servers": ["127.0.0.1"],
            "drpc.port": drpc, "drpc.invocations.port": invocations, "drpc.request.timeout.secs": 120}
    config = tmp / "squall.yaml"
    config.write_text(yaml.safe_dump(conf))
    driver = _Driver([sys.executable, "-m", "squall.cli", "nimbus", "--config", str(config), "--host", "spark",
                      "--spark-master", "local[2]"])
    try:
        assert wait_until(lambda: driver.saw("squall nimbus ready at") or driver.proc.poll() is not None, 90), \
            "".join(driver.lines)
        assert driver.proc.poll() is None, "".join(driver.lines)
        fed = FedWords(tmp)
        manual = write(tmp, "manual_drpc.py", MANUAL_DRPC.replace('"topology.workers": 2', '"topology.workers": 1'))
        words = write(tmp, "trident_words.py", WORDS_TOPOLOGY)
        for name, argv in (("manual-drpc", ["--name", "manual-drpc", str(manual)]),
                           ("trident-words", [str(words), "trident-words", str(fed.file), "1"])):
            submitted = _squall("jar", "--config", str(config), *argv)
            assert submitted.stdout == f"Submitted topology: {name}\n", submitted.stderr
        yield conf, fed
        for name in ("manual-drpc", "trident-words"):
            assert _squall("kill", "--config", str(config), name, "-w", "0").returncode == 0
        driver.proc.terminate()
        assert driver.proc.wait(60) == 0, "".join(driver.lines)
    finally:
        driver.stop()


def test_the_manual_drpc_topology_answers_from_a_spark_task(spark_nimbus):
    conf, _ = spark_nimbus
    assert client_execute(conf, "exclamation", "first") == ("first!", None)  # waits for the worker
    answers = [client_execute(conf, "exclamation", f"hello-{i}") for i in range(30)]
    assert answers == [(f"hello-{i}!", None) for i in range(30)]
    result, error = client_execute(conf, "exclamation", "fail this one")
    assert isinstance(error, DRPCExecutionException) and error.type is DRPCExceptionType.FAILED_REQUEST, error
    assert "failed in [exclaim]" in str(error)


def test_trident_word_count_answers_exactly_as_fed_batches_commit(spark_nimbus):
    conf, fed = spark_nimbus
    assert ask(conf, "the") == ("[[0]]", None)  # nothing fed yet (waits for the worker)
    fed.feed(["hello the man said", "the"])
    assert ask(conf, "the") == ("[[2]]", None)
    assert ask(conf, "hello") == ("[[1]]", None)
    fed.feed(["the man on the moon", "where are you"])
    assert ask(conf, "the") == ("[[4]]", None)
    assert ask(conf, "man") == ("[[2]]", None)
    assert ask(conf, "man where you the") == ("[[8]]", None)
    for i in range(3, 6):
        fed.feed([f"batch{i} the man", f"w{i} w{i - 1} the"])
        for args in ("the", f"w{i - 1}", f"batch{i} the w{i}", "nobody"):
            assert ask(conf, args) == (fed.answer(args), None), (i, args)


def test_a_trident_call_whose_batch_fails_raises_at_once(spark_nimbus):
    conf, fed = spark_nimbus
    fed.feed(["before the failure"])
    result, error = ask(conf, "boom the")
    assert result is None and isinstance(error, DRPCExecutionException), (result, error)
    assert error.type is DRPCExceptionType.FAILED_REQUEST, error
    assert ask(conf, "the failure before") == (fed.answer("the failure before"), None)
