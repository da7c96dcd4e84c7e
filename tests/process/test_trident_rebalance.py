"""An exactly-once Trident topology rebalanced while records arrive, on the process host
(``squall nimbus`` serving DRPC, 3 slots): a transactional partitioned spout over two Redis
streams, ``group_by(key).persistent_aggregate`` into a transactional and an opaque Redis map
state (two partitions each), and a DRPC stream querying the counts all along. ``squall
rebalance`` moves it from 2 workers to 3 with the spout's and the counting bolt's executors down
(the master batch coordinator's worker SIGKILLed during the wait), then to 1 worker with them
up, and once more at once after it.

What must hold (docs/trident.md, "Guarantees"; docs/cli.md, ``squall rebalance``):

- the stored counts and sums equal those of every record sent: none lost, none counted twice;
- each state partition commits its txids in order (a txid again only in a new worker, which the
  state ignores or recomputes), and the REST API's ``currentTxid`` passes the last one committed;
- every DRPC answer is a committed value: never above the final count, never below an earlier
  answer for the same key (every key only grows);
- ``-e records=2`` (the stream's name, not a component's) is the master's error, listing the
  components there are, and leaves the topology as it was.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import signal
import threading
import time
from typing import Any

import pytest

from squall import DRPCClient, Fields, StormTopology
from squall._config import cluster_conf
from squall.cluster.client import MasterClient
from squall.external.trident_redis import Options, RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout
from squall.testing import shared_state_dir
from squall.testing._registry import SharedLog
from squall.trident import TridentTopology
from squall.trident.builtin import Count, MapGet, Sum

from ..conftest import wait_until
from ..drpc.calls import guarded
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..ports import free_ports
from ..test_cli_cluster import Nimbus
from .nodes import placed
from .trident_records import Parse, Split

pytestmark = pytest.mark.timeout(300)

redis = pytest.importorskip("redis")

STREAMS = ["r0", "r1"]
KEYS = [f"k{i}" for i in range(6)]
SPOUT, COUNTS = "spout-records", "b-1"
"""The spout's bolt and the bolt of the counts' partitions (the planner's ids)."""


class _Recorded:
    """A map state that appends ``(partition, txid, pid)`` to ``log`` at each commit."""

    def __init__(self, state: Any, log: SharedLog, partition: int) -> None:
        self._state, self._log, self._partition = state, log, partition

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    def begin_commit(self, txid: int) -> None:
        self._state.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self._state.commit(txid)
        self._log.append((self._partition, txid, os.getpid()))


class Recorded:
    """``factory``'s states, each commit recorded (`_Recorded`)."""

    def __init__(self, factory: Any, log: SharedLog) -> None:
        self.factory, self.log = factory, log

    def make_state(self, conf: dict, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        return _Recorded(self.factory.make_state(conf, metrics, partition_index, num_partitions), self.log,
                         partition_index)


def records_topology(url: str, commits: SharedLog) -> StormTopology:
    topology = TridentTopology()
    grouped = (topology.new_stream("records", RedisStreamTridentSpout(url, STREAMS, max_batch_entries=10))
               .parallelism_hint(2)
               .each(Fields("value"), Parse(), Fields("key", "amount"))
               .group_by(Fields("key")))
    counts = grouped.persistent_aggregate(RedisMapState.transactional(url, Options(data_type="hash", hash_key="counts")),
                                          Count(), Fields("count")).parallelism_hint(2)
    grouped.persistent_aggregate(Recorded(RedisMapState.opaque(url, Options(data_type="hash", hash_key="sums")), commits),
                                 Fields("amount"), Sum(), Fields("sum")).parallelism_hint(2)
    (topology.new_drpc_stream("counts")
     .each(Fields("args"), Split(), Fields("key"))
     .group_by(Fields("key"))
     .state_query(counts, Fields("key"), MapGet(), Fields("count"))
     .project(Fields("key", "count")))
    return topology.build()


def test_a_trident_topology_rebalanced_while_records_arrive_counts_each_once(redis_server, tmp_path):  # noqa: F811
    drpc, invocations = free_ports(2)
    nimbus = Nimbus(tmp_path, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                               "drpc.request.timeout.secs": 10}, num_slots=3)
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    sent: collections.Counter[str] = collections.Counter()
    sums: collections.Counter[str] = collections.Counter()
    done = threading.Event()
    answers: list[tuple[str | None, Exception | None]] = []

    def feed() -> None:
        n = 0
        while not done.is_set():  # a record every 5 ms, the streams and keys in turn
            n += 1
            store.xadd(STREAMS[n % len(STREAMS)], {"value": f"{KEYS[n % len(KEYS)]},{n}"})
            sent[KEYS[n % len(KEYS)]] += 1
            sums[KEYS[n % len(KEYS)]] += n
            time.sleep(0.005)

    def ask() -> None:
        with DRPCClient(nimbus.conf) as client:
            while not done.is_set():
                answers.append(guarded(client.execute, "counts", " ".join(KEYS)))

    def stored(hash_key: str) -> dict[str, list]:
        return {k: json.loads(v) for k, v in store.hgetall(hash_key).items()}

    def counted() -> int:
        return sum(v[1] for v in stored("counts").values())

    def rebalance(*args: str) -> str:
        proc = nimbus.run("rebalance", "rb", *args)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    feeder, asker = threading.Thread(target=feed, daemon=True), threading.Thread(target=ask, daemon=True)
    try:
        with shared_state_dir(tmp_path / "shared"):
            commits = SharedLog()
            topology = records_topology(redis_server.url, commits)
        with MasterClient(cluster_conf(nimbus.conf)) as master:
            master.submit_topology("rb", {"topology.workers": 2, "topology.message.timeout.secs": 10,
                                          "topology.trident.batch.emit.interval.millis": 50}, topology)
            feeder.start()
            assert wait_until(lambda: counted() > 0, 120, 0.1), nimbus.info("rb")["errors"]
            asker.start()

            def moved(workers: int, executors: dict[str, int]) -> None:
                assert wait_until(lambda: placed(master, "rb", workers, executors), 120, 0.1), \
                    master.get_topology_info("rb")
                at = counted()  # and counting again
                assert wait_until(lambda: counted() > at + 20, 120, 0.1), nimbus.info("rb")["errors"]

            # the stream's name is no component: the master's error says which there are
            wrong = nimbus.run("rebalance", "rb", "-e", "records=2", "-w", "0")
            assert (wrong.returncode, wrong.stdout) == (1, ""), wrong
            assert wrong.stderr == (
                "squall: error: rebalance: topology 'rb' has no component [records] (its components: "
                "$mastercoord-bg0, $mastercoord-bg1, $spoutcoord-spout-drpc-counts, $spoutcoord-spout-records, "
                "b-0, b-1, b-2, b-3, b-4, b-5, drpc-return-counts, spout-drpc-counts, spout-records; "
                "a Trident stream's spout runs in spout-records)\n"), wrong.stderr

            info = master.get_topology_info("rb")
            ports = {s["worker"] for s in info["components"]["$mastercoord-bg0"]["task_stats"].values()}
            [coordinator] = [w["pid"] for w in info["workers"] if w["port"] in ports]
            rebalance("-n", "3", "-e", f"{SPOUT}=1", "-e", f"{COUNTS}=1", "-w", "1")
            os.kill(coordinator, signal.SIGKILL)  # during the wait
            moved(3, {SPOUT: 1, COUNTS: 1})

            rebalance("-n", "1", "-e", f"{SPOUT}=2", "-e", f"{COUNTS}=2", "-w", "0")
            second = nimbus.run("rebalance", "rb", "-n", "2", "-w", "0")  # at once after
            if second.returncode == 0:
                moved(2, {SPOUT: 2, COUNTS: 2})
            else:  # still in the first one's REBALANCING: Storm's refusal
                assert "No transition for event: rebalance, status: REBALANCING" in second.stderr, second.stderr
                moved(1, {SPOUT: 2, COUNTS: 2})
            asked = len(answers)
            assert wait_until(lambda: len(answers) > asked + 1, 60, 0.1)

            done.set()
            feeder.join()
            asker.join(60)
            assert wait_until(lambda: {k: v[1] for k, v in stored("counts").items()} == dict(sent), 120, 0.1), \
                (stored("counts"), dict(sent))
            assert {k: v[1] for k, v in stored("sums").items()} == dict(sums)
            last = max(txid for _, txid, _ in commits.items())

            def current_txid() -> int:
                [group] = [g for g in master.get_topology_page("rb")["trident"]["groups"]
                           if g["coordinator"] == "$mastercoord-bg0"]
                return group["currentTxid"]
            assert wait_until(lambda: current_txid() > last, 60, 0.1), (current_txid(), last)
            # the SIGKILL above aside, which is an error (a worker's death it did not ask for)
            errors = [e for e in master.get_topology_info("rb")["errors"] if "killed by SIGKILL" not in e["error"]]
            master.kill_topology("rb", wait_secs=0)
    finally:
        done.set()
        assert nimbus.stop() == 0
        nimbus.clean_up()

    assert not errors, errors
    by_partition: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for partition, txid, pid in commits.items():
        by_partition[partition].append((txid, pid))
    assert sorted(by_partition) == [0, 1]
    for partition, seq in by_partition.items():
        for (txid, pid), (then, then_pid) in itertools.pairwise(seq):
            assert then > txid or (then == txid and then_pid != pid), (partition, seq)
    final = dict(sent)
    shown: dict[str, int] = {}
    failed = 0
    for result, error in answers:
        if error is not None:  # the killed worker's requests: a clean DRPC failure
            assert type(error).__name__ == "DRPCExecutionException", repr(error)
            failed += 1
            continue
        for key, count in json.loads(result):
            assert shown.get(key, 0) <= (count or 0) <= final[key], (key, count, shown, final)
            shown[key] = count or 0
    print(f"{sum(final.values())} records, {len(commits.items())} commits of the sums' 2 partitions up to txid "
          f"{last}; {len(answers)} DRPC answers, {failed} failed")
