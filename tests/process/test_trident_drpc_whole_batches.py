"""A Trident topology as a new user builds it from docs/trident.md, on the process host (``squall
nimbus`` serving DRPC, two worker processes): records from a Redis stream, parsed (malformed ones
counted under a key of their own), grouped, counted and summed into transactional Redis map
states in one partition, and a DRPC function querying the counts while the records flow. The
worker holding the states is SIGKILLed mid-run and Redis is restarted once.

What must hold (docs/trident.md, "Guarantees" and "Malformed records"; docs/drpc.md):

- the stored counts and sums equal those computed from every record sent, the malformed ones
  included: nothing lost, nothing counted twice;
- every answer is a whole number of rounds (batches), never part of one, and never fewer rounds
  than an answer before it: a state in one partition is read between two of its commits;
- a call while a worker is dead or Redis is down answers right, or fails with a
  `DRPCExecutionException` (FAILED_REQUEST, or SERVER_TIMEOUT for a request a killed spout had
  taken) by its ``drpc.request.timeout.secs``: never hangs, never a wrong count.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import threading

import pytest

from squall import DRPCClient, DRPCExecutionException
from squall._config import cluster_conf
from squall.cluster.client import MasterClient
from squall.drpc import DRPCExceptionType

from ..conftest import wait_until
from ..drpc.calls import guarded
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..ports import free_ports
from ..test_cli_cluster import Nimbus
from .trident_records import KEYS, MALFORMED, STREAM, records_topology

pytestmark = pytest.mark.timeout(420)  # a master, two workers and a restart of one on 2 loaded cores


REQUEST_TIMEOUT = 10
"""drpc.request.timeout.secs of the test's server. A call the killed worker's DRPC spout had
taken gets SERVER_TIMEOUT only after it, and the one caller waits on it meanwhile: at 30 s that
wait was 25 of a 40 s run whenever the spout ran on the killed worker (about half the runs). A
call made while the topology answers takes a batch or two, far below it (as
tests/drpc/test_linear_drpc_process_host.py's 5 s)."""


def _committer_port(topology, info: dict) -> int:
    """The port of a worker holding the queried state: the bolt that commits ``bg0``'s batches
    and answers ``bg1``'s (the DRPC stream's) queries."""
    bolt = next(cid for cid, b in topology.bolts.items()
                if ("$mastercoord-bg0", "$commit") in {(s.component_id, s.stream_id) for s in b.inputs}
                and any(s.stream_id == "$coord-bg1" for s in b.inputs))
    return min(s["worker"] for s in info["components"][bolt]["task_stats"].values())


def test_answers_are_whole_batches_and_counts_exact_through_a_worker_kill_and_a_redis_restart(redis_server,  # noqa: F811
                                                                                                tmp_path):
    import redis
    drpc, invocations = free_ports(2)
    nimbus = Nimbus(tmp_path, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                               "drpc.request.timeout.secs": REQUEST_TIMEOUT})
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    sent: collections.Counter[str] = collections.Counter()
    sums: collections.Counter[str] = collections.Counter()
    rounds = 0

    def send(n: int) -> None:
        """``n`` rounds, each one MULTI: a record per key and a malformed one."""
        nonlocal rounds
        for _ in range(n):
            rounds += 1
            pipe = store.pipeline(transaction=True)
            for key in KEYS:
                pipe.xadd(STREAM, {"value": f"{key},{rounds}"})
                sent[key] += 1
                sums[key] += rounds
            pipe.xadd(STREAM, {"value": f"not a record {rounds}"})
            sent[MALFORMED] += 1
            pipe.execute()

    def stored(hash_key: str) -> dict[str, int] | None:
        try:
            return {k: json.loads(v)[1] for k, v in store.hgetall(hash_key).items()}
        except redis.ConnectionError:
            return None  # restarting

    def committed() -> bool:
        return stored("counts") == dict(sent)

    answers: list[tuple[str | None, Exception | None]] = []
    done = threading.Event()

    def ask() -> None:
        with DRPCClient(nimbus.conf) as client:  # one client, as a caller keeps one
            while not done.is_set():
                answers.append(guarded(client.execute, "counts", " ".join(KEYS)))

    asker = threading.Thread(target=ask, daemon=True)
    try:
        topology = records_topology(redis_server.url, partitions=1)
        with MasterClient(cluster_conf(nimbus.conf)) as master:
            master.submit_topology("records", {"topology.workers": 2, "topology.message.timeout.secs": 20,
                                               "topology.trident.batch.emit.interval.millis": 50}, topology)
            send(1)
            assert wait_until(committed, 120, 0.1), (stored("counts"), dict(sent))
            asker.start()
            send(10)
            assert wait_until(committed, 120, 0.1), (stored("counts"), dict(sent))

            info = master.get_topology_info("records")
            port = _committer_port(topology, info)
            [victim] = [w["pid"] for w in info["workers"] if w["port"] == port]
            seen = len(answers)
            os.kill(victim, signal.SIGKILL)
            send(10)  # read while the state's worker is dead
            assert wait_until(committed, 180, 0.1), (stored("counts"), dict(sent), nimbus.info("records")["errors"])
            restarted = {w["port"]: w["pid"] for w in master.get_topology_info("records")["workers"]}
            assert restarted[port] not in (None, victim), restarted

            redis_server.stop()  # SHUTDOWN SAVE: the data survives, as a restarted server's does
            redis_server.start()
            send(10)
            assert wait_until(committed, 180, 0.1), (stored("counts"), dict(sent), nimbus.info("records")["errors"])
            # calls made after every round committed: the last of them shows them all
            after = len(answers)
            assert wait_until(lambda: len(answers) > after + 1, 120, 0.1)
            done.set()
            asker.join(200)
            assert stored("sums") == {**dict(sums), MALFORMED: 0}
            master.kill_topology("records", wait_secs=0)
    finally:
        done.set()
        assert nimbus.stop() == 0
        nimbus.clean_up()

    assert sent[MALFORMED] == rounds == 31 and all(sent[k] == rounds for k in KEYS)
    shown = 0  # rounds the answers before showed
    failures = []
    for result, error in answers:
        if error is not None:
            assert isinstance(error, DRPCExecutionException), repr(error)
            assert error.type in (DRPCExceptionType.FAILED_REQUEST, DRPCExceptionType.SERVER_TIMEOUT), repr(error)
            failures.append(str(error))
            continue
        counts = {key: count for key, count in json.loads(result)}
        assert set(counts) == set(KEYS), result
        whole = {count or 0 for count in counts.values()}
        assert len(whole) == 1, f"a torn answer: {result}"
        [now] = whole
        assert shown <= now <= rounds, (shown, result)
        shown = now
    assert shown == rounds, (shown, rounds, answers[-3:])
    assert len(answers) - len(failures) > seen, "no answer after the kill"
