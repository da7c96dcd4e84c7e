"""Trident queried through DRPC on the process host, as Storm's TridentIntegrationTest does it
(``testMemoryMapState``): ``squall nimbus --host process`` with drpc.servers naming this machine,
a FeederBatchSpout's word count in two worker processes, submitted with ``squall jar``, and
DRPCClient's answers exact after each fed batch committed; a call whose batch fails raises at
once. And a Trident topology whose master coordinator's worker is SIGKILLed mid-batch resumes
at the txid it had not committed, its counts exact."""

from __future__ import annotations

import collections
import json
import os
import signal

import pytest

from squall import DRPCExecutionException
from squall.drpc import DRPCExceptionType

from squall.testing import shared_state_dir

from ..conftest import wait_until
from ..drpc.trident_words import WORDS_TOPOLOGY, FedWords, ask
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..test_cli import write
from ..ports import free_ports
from ..test_cli_cluster import Nimbus
from .trident_coordinator import HOLD_WORD, watched_word_count


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


def test_the_master_coordinators_worker_sigkilled_mid_batch_resumes_at_its_txid(cluster, redis_server,  # noqa: F811
                                                                                tmp_path):
    """2 workers; the worker running ``$mastercoord-bg0`` is SIGKILLed while batch 4 is held in
    Split (processed by no one, committed by no one). The restarted master coordinator reads
    its progress from the master's transactional state: its first question is for txid 4, not
    1; batch 4 is replayed under txid 4, and the counts in the transactional Redis map are
    exact, each batch's own word stored with its own txid."""
    redis = pytest.importorskip("redis")
    from squall.external.trident_redis import Options, RedisMapState
    hold = tmp_path / "hold"
    hold.mkdir()
    with shared_state_dir(tmp_path / "shared"):
        run = watched_word_count(RedisMapState.transactional(redis_server.url, Options(data_type="hash",
                                                                                       hash_key="counts")), hold)
    batches = [[f"the only{i} man", f"the w{i}"] for i in range(1, 6)]
    batches[3].append(f"{HOLD_WORD} the")
    with cluster.client() as m:
        m.submit_topology("coordinator-kill", {"topology.workers": 2,
                                               "topology.trident.batch.emit.interval.millis": 50}, run.topology)
        for batch in batches[:3]:
            run.feeder.feed([[s] for s in batch])
        first = run.resumed.items()
        assert [r.txid for r in first] == [1], first
        victim = first[0].pid
        assert victim in {w["pid"] for w in m.get_topology_info("coordinator-kill")["workers"]}
        fourth = run.feeder.feed_no_wait([[s] for s in batches[3]])
        assert wait_until(lambda: (hold / "held").exists(), 60), "batch 4 never reached Split"
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: len(run.resumed.items()) == 2, 60), run.resumed.items()
        restarted = run.resumed.items()[1]
        assert restarted.pid != victim and restarted.txid == 4, run.resumed.items()
        (hold / "release").write_text("")
        run.feeder.wait_committed(fourth)  # nothing fed since: the replay of txid 4 must not wait for a feed
        run.feeder.feed([[s] for s in batches[4]])
        m.kill_topology("coordinator-kill", wait_secs=0)
    client = redis.Redis.from_url(redis_server.url)
    stored = {k.decode(): json.loads(v) for k, v in client.hgetall("counts").items()}
    expected = collections.Counter(w for batch in batches for s in batch for w in s.split(" "))
    assert {w: count for w, (_, count) in stored.items()} == dict(expected)
    assert {w: txid for w, (txid, _) in stored.items() if w.startswith("only")} == \
        {f"only{i}": i for i in range(1, 6)}
    assert stored["the"] == [5, sum(len(b) for b in batches)]
