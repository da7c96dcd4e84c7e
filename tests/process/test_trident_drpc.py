"""Trident queried through DRPC on the process host, as Storm's TridentIntegrationTest does it
(``testMemoryMapState``): ``squall nimbus --host process`` with drpc.servers naming this machine,
a FeederBatchSpout's word count in two worker processes, submitted with ``squall jar``, and
DRPCClient's answers exact after each fed batch committed; a call whose batch fails raises at
once."""

from __future__ import annotations

import pytest

from squall import DRPCExecutionException
from squall.drpc import DRPCExceptionType

from ..drpc.trident_words import WORDS_TOPOLOGY, FedWords, ask
from ..test_cli import write
from ..test_cli_cluster import Nimbus, free_ports


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    """(the Nimbus, the FedWords) of the ``words`` topology running in 2 workers."""
    tmp = tmp_path_factory.mktemp("trident-drpc")
    drpc, invocations = free_ports(2)
    # drpc.request.timeout.secs is long: a call failing is the topology's answer, never a timeout
    n = Nimbus(tmp, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                     "drpc.request.timeout.secs": 120})
    try:
        fed = FedWords(tmp)
        path = write(tmp, "trident_words.py", WORDS_TOPOLOGY)
        assert n.ok("jar", path, "trident-words", str(fed.file), "2") == "Submitted topology: trident-words\n"
        yield n, fed
        assert n.stop() == 0
    finally:
        n.clean_up()


def test_answers_are_exact_and_grow_as_fed_batches_commit(words):
    nimbus, fed = words
    assert ask(nimbus.conf, "the") == ("[[0]]", None)  # nothing fed yet (waits for the workers)
    fed.feed(["hello the man said", "the"])
    assert ask(nimbus.conf, "the") == ("[[2]]", None)
    assert ask(nimbus.conf, "hello") == ("[[1]]", None)
    fed.feed(["the man on the moon", "where are you"])
    assert ask(nimbus.conf, "the") == ("[[4]]", None)
    assert ask(nimbus.conf, "man") == ("[[2]]", None)
    assert ask(nimbus.conf, "man where you the") == ("[[8]]", None)
    for i in range(3, 8):  # more batches, each answer checked against everything fed so far
        fed.feed([f"batch{i} the man", f"w{i} w{i - 1} the"])
        for args in ("the", "man", f"w{i - 1}", f"batch{i} the w{i}", "nobody"):
            assert ask(nimbus.conf, args) == (fed.answer(args), None), (i, args)
    assert fed.answer("the") == "[[14]]"


def test_a_call_whose_batch_fails_raises_at_once(words):
    """FailOnBoom raises FailedException in the DRPC stream: the batch fails, the master
    coordinator replays its txid, and the DRPC spout fails the call then, not at
    drpc.request.timeout.secs (120 s: SERVER_TIMEOUT) nor at the topology's message timeout
    (300 s, past the time a test may take). The calls after it, and the word count, are unharmed."""
    nimbus, fed = words
    fed.feed(["before the failure"])
    result, error = ask(nimbus.conf, "boom the")
    assert result is None and isinstance(error, DRPCExecutionException), (result, error)
    assert error.type is DRPCExceptionType.FAILED_REQUEST, error
    assert ask(nimbus.conf, "the failure") == (fed.answer("the failure"), None)
    fed.feed(["after the failure"])
    assert ask(nimbus.conf, "the failure after before") == (fed.answer("the failure after before"), None)
