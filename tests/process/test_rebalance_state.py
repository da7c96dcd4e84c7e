"""Rebalances (`squall rebalance -n N -e comp=K`) of topologies whose state is open, on the process
host, every record counted. A component's tasks are fixed at submit (Storm's); a rebalance only
regroups them into other executors on other workers, so a task's keyed state (its namespace
``<component>-<task>``) stays the state of the same keys wherever the task goes."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from squall import TopologyBuilder
from squall.state import StateHome, get_state, state_key
from squall.testing import shared_state_dir
from squall.trident.processors import PartitionPersistProcessor
from squall.trident.windowing.processor import WindowTridentProcessor

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..state.counting import (
    CountIds,
    HeldCount,
    NotingReplayingSpout,
    Pass,
    ReplayingSpout,
    StateReader,
    acked,
    check_counts,
    emitted,
    stop_and_wait,
)
from ..trident.exactly_once import held_pid
from ..trident.windowing_ops import expected_windows
from .event_time_topology import TICK_MS, IdWindows, LateIds, TimedIds, rows
from .conftest import clear_topologies, module_cluster_of
from .nodes import log_tail, placed
from .semantics_topology import topology_conf
from .trident_windows_topology import REDIS_STATE, component_running, held_windows_topology, window_conf

redis = pytest.importorskip("redis")

SECRET = "squall-rebalance-secret-0123456789"


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    """One process-host cluster (a master, its supervisor, 2 slots) for the module's tests, each
    with its own topology name, output directory and Redis server. ``squall.secret``:
    `committed_counts` reads the tasks' states with the key it gives."""
    with module_cluster_of(tmp_path_factory, **{"squall.secret": SECRET}) as c:
        yield c


@pytest.fixture
def cluster(module_cluster):
    """The module's cluster for one test, cleared after it."""
    try:
        yield module_cluster
    finally:
        clear_topologies(module_cluster)


def _logs(cluster):
    """The tails of the master's and the workers' logs, for a failed assertion's message."""
    return "\n".join(f"--- {p}\n{log_tail(p)}" for p in [cluster.dir.parent / "master.log",
                                                         *sorted(cluster.dir.glob("logs/workers-artifacts/*/*/worker.log"))])



def committed_counts(server, topology: str) -> tuple[dict, list[str]]:
    """The committed counts of every ``count`` task's Redis state of ``topology`` (id -> count),
    and those states' namespaces; an id in two tasks' states is an error."""
    counts: dict = {}
    namespaces: list[str] = []
    conf = {"topology.name": topology, "topology.state.provider": REDIS_STATE,
            "topology.state.provider.config": {"url": server.url}}
    for key in server.client().keys(f"{topology}/count-*"):
        if "$" not in key:
            namespaces.append(key[len(topology) + 1:])
            for k, v in get_state(namespaces[-1], conf, StateReader(StateHome(key=state_key(SECRET.encode())))).committed():
                assert k not in counts, f"id {k} is in the states of two tasks"
                counts[k] = v
    return counts, namespaces


def test_stateful_counts_survive_rebalances_that_regroup_their_tasks(cluster, tmp_path, redis_server):  # noqa: F811
    """A stateful counter of 4 tasks over 2 executors on 2 workers is rebalanced to 4 executors
    on 1 worker (every task in an executor of its own), then to 1 executor on 2 workers (every
    task in one), while ids flow: each task's Redis state goes with the task, every id is
    counted, and none more often than the spout emitted it."""
    out = tmp_path / "out"
    out.mkdir()

    def why():
        return _logs(cluster)
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(None), 1)
    b.set_bolt("work", Pass(), 2).shuffle_grouping("source").set_num_tasks(4)
    b.set_bolt("count", CountIds(), 2).fields_grouping("work", ["id"]).set_num_tasks(4)
    conf = topology_conf(out, 2, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200,
                                    "topology.state.checkpoint.interval.ms": 300,
                                    "topology.state.provider": REDIS_STATE,
                                    "topology.state.provider.config": {"url": redis_server.url}})
    with cluster.client() as m:
        m.submit_topology("rebal", conf, b.create_topology())
        assert wait_until(lambda: len(acked(out)) > 300, 60), why()
        for workers, executors, wait in [(1, {"count": 4, "work": 1}, 1), (2, {"count": 1, "work": 4}, 0)]:
            m.rebalance("rebal", num_workers=workers, executors=executors, wait_secs=wait)
            assert wait_until(lambda w=workers, e=executors: placed(m, "rebal", w, e), 60), why()
            before = len(acked(out))
            assert wait_until(lambda b=before: len(acked(out)) > b + 300, 60), why()
        n = stop_and_wait(out, timeout=120, why=why)
        errors = m.get_topology_info("rebal")["errors"]
        m.kill_topology("rebal", wait_secs=0)
    counts, namespaces = committed_counts(redis_server, "rebal")
    assert len(namespaces) == 4, namespaces
    twice, replayed = check_counts(counts, n, out)
    assert not errors, errors
    print(f"{n} ids, 2 rebalances: {replayed} replayed, {twice} counted twice; emits per id "
          f"{sorted(set(emitted(out).values()))}")


def _counting_on_redis(out, spout, count, tasks: int, pending: int, server) -> tuple:
    """``spout`` -> a shuffled pass -> ``count`` (``tasks`` tasks, fields-grouped by id) on the
    Redis state at ``server``, one worker, checkpoints every 100 ms: the topology and its conf."""
    b = TopologyBuilder()
    b.set_spout("source", spout, 1)
    b.set_bolt("work", Pass(), 2).shuffle_grouping("source")
    b.set_bolt("count", count, 2).fields_grouping("work", ["id"]).set_num_tasks(tasks)
    conf = topology_conf(out, 1, **{"topology.message.timeout.secs": 30, "topology.max.spout.pending": pending,
                                    "topology.state.checkpoint.interval.ms": 100,
                                    "topology.state.provider": REDIS_STATE,
                                    "topology.state.provider.config": {"url": server.url}})
    return b.create_topology(), conf


def test_a_rebalance_with_a_wait_commits_the_checkpoint_it_caught_half_done(cluster, tmp_path, redis_server):  # noqa: F811
    """`squall rebalance -w` while a checkpoint's PREPARE is in flight (held in a stateful
    bolt's ``pre_prepare`` until the spouts are off): the prepare goes through during the wait,
    and the checkpoint spout, though deactivated, sends its COMMIT, so the tuples of that
    transaction are acked before the workers restart. Before, it saved COMMITTING and sent
    nothing while deactivated: the new workers committed that transaction again on recovery,
    and its tuples, never acked, were replayed and counted twice (a Kafka spout read them again:
    224 of 7,846 records counted twice after `rebalance -n 2 -w 3`). Every id is counted once."""
    out = tmp_path / "out"
    out.mkdir()

    def why():
        return _logs(cluster)
    topology, conf = _counting_on_redis(out, NotingReplayingSpout(None), HeldCount(), 2, 100, redis_server)
    with cluster.client() as m:
        m.submit_topology("held", conf, topology)
        assert wait_until(lambda: len(acked(out)) > 200, 60), why()
        (out / "hold").write_text("")
        assert wait_until(lambda: (out / "held").exists(), 30), why()
        m.rebalance("held", num_workers=2, wait_secs=4)
        assert wait_until(lambda: (out / "deactivated").exists(), 30), why()
        at_release = len(acked(out))
        (out / "release").write_text("")
        assert wait_until(lambda: placed(m, "held", 2, {}), 60), why()
        n = stop_and_wait(out, resume=200, timeout=60, why=why)
        errors = m.get_topology_info("held")["errors"]
        m.kill_topology("held", wait_secs=0)
    counts, _ = committed_counts(redis_server, "held")
    check_counts(counts, n, out)
    twice = sorted(i for i, c in counts.items() if c > 1)
    assert not twice, f"{len(twice)} of {n} ids counted twice, e.g. {twice[:20]} ({at_release} acked at the release)"
    assert not errors, errors
    print(f"{n} ids, each counted once; {sum(emitted(out).values()) - n} replayed")


def test_a_rebalance_with_a_wait_replays_nothing_of_a_stateful_bolt(cluster, tmp_path, redis_server):  # noqa: F811
    """`squall rebalance -w 3` of a stateful counter while ids flow, from 1 worker to 2 and
    back: during each wait the spouts are off but checkpoints go on, so the tuples the counter
    took before they stopped are committed and acked, and the workers restart with nothing in
    flight: no id is emitted again, and each is counted once. Before, the checkpoint spout
    stopped with the others: those tuples stayed unacked and were replayed (200 of about 2,000
    ids, a rebalance, in 3 of 4 runs; the fourth's checkpoint spout saw the deactivation after a
    last commit), and with a Kafka spout the records acked past a replayed one in their
    partition were read again and counted twice (6 to 12 records in 5 rebalances)."""
    out = tmp_path / "out"
    out.mkdir()

    def why():
        return _logs(cluster)
    topology, conf = _counting_on_redis(out, ReplayingSpout(None), CountIds(), 4, 200, redis_server)
    with cluster.client() as m:
        m.submit_topology("drained", conf, topology)
        assert wait_until(lambda: len(acked(out)) > 300, 60), why()
        for workers, executors in [(2, {"count": 4}), (1, {"count": 1})]:
            before = len(acked(out))
            m.rebalance("drained", num_workers=workers, executors=executors, wait_secs=3)
            assert wait_until(lambda w=workers, e=executors: placed(m, "drained", w, e), 60), why()
            assert wait_until(lambda b=before: len(acked(out)) > b + 300, 60), why()
        n = stop_and_wait(out, resume=200, timeout=60, why=why)
        errors = m.get_topology_info("drained")["errors"]
        m.kill_topology("drained", wait_secs=0)
    counts, _ = committed_counts(redis_server, "drained")
    check_counts(counts, n, out)
    again = sorted(i for i, e in emitted(out).items() if e > 1)
    assert not again, f"{len(again)} of {n} ids emitted again after the rebalance, e.g. {again[:20]}"
    assert all(c == 1 for c in counts.values())
    assert not errors, errors
    print(f"{n} ids, none replayed, each counted once")


TRIDENT_CONF = {"topology.workers": 2, "topology.max.spout.pending": 3, "topology.message.timeout.secs": 5,
                "topology.trident.batch.emit.interval.millis": 50}
N = 480
BATCH = 6   # 80 batches
WINDOW = 8  # txid 10 ends at tuple 59: tuples 56..59 wait in the open window then
HOLD_TXID = 10



@pytest.mark.parametrize(("kind", "provider"), [("tumbling", "file"), ("sliding", "redis")])
def test_trident_windows_open_through_rebalances_count_every_tuple_once(cluster, redis_server, tmp_path,  # noqa: F811
                                                                        kind, provider):
    """Trident count windows (their store: the topology's state provider) into a Redis
    `TransactionalMap` of 2 tasks. With txid 10's commit held (tuples wait in the open window), a
    rebalance without a wait moves the topology to 1 worker, the map's 2 tasks into 1 executor;
    later, a rebalance with a wait (spouts off while windows are open) moves it back to 2 workers
    and 2 executors. Every window is the one computed from the input: no tuple lost, none twice."""
    hold = tmp_path / "hold"
    hold.mkdir()
    conf = window_conf(TRIDENT_CONF, provider, redis_server.url)
    with shared_state_dir(tmp_path / "shared"):
        built = held_windows_topology(kind, redis_server.url, hold, N, BATCH, WINDOW, HOLD_TXID)
    window_bolt = component_running(built, WindowTridentProcessor)
    map_bolt = component_running(built, PartitionPersistProcessor)
    client = redis.Redis.from_url(redis_server.url)
    expected = expected_windows(N, WINDOW, WINDOW if kind == "tumbling" else WINDOW // 2)

    def stored() -> dict[tuple[int, int], int]:
        return {tuple(json.loads(k)): json.loads(v)[1] for k, v in client.hgetall("windows").items()}

    name = f"windows-{kind}-{provider}"  # one cluster for the module: a name of its own
    with cluster.client() as m:
        m.submit_topology(name, conf, built)
        assert wait_until(lambda: held_pid(hold) is not None, 60), stored()
        at_first = len(stored())
        m.rebalance(name, num_workers=1, executors={map_bolt: 1}, wait_secs=0)
        assert wait_until(lambda: placed(m, name, 1, {map_bolt: 1, window_bolt: 1}), 60), stored()
        assert held_pid(hold) not in {w["pid"] for w in m.get_topology_info(name)["workers"]}
        (hold / "release").write_text("")
        assert wait_until(lambda: len(stored()) >= len(expected) // 2, 120), stored()
        at_second = len(stored())
        m.rebalance(name, num_workers=2, executors={map_bolt: 2}, wait_secs=1)
        assert wait_until(lambda: placed(m, name, 2, {map_bolt: 2}), 60), stored()
        assert wait_until(lambda: len(stored()) >= len(expected), 120), (len(stored()), len(expected))
        errors = m.get_topology_info(name)["errors"]
        m.kill_topology(name, wait_secs=0)
    assert stored() == expected
    assert at_first < at_second < len(expected), (at_first, at_second)
    assert not [e for e in errors if e["component"] != "__master"], errors
    print(f"{kind} windows over the {provider} provider, rebalanced with {at_first} and {at_second} of "
          f"{len(expected)} windows stored: {N} tuples, {sum(stored().values())} in windows")



def test_event_time_windows_count_every_id_through_rebalances(cluster, tmp_path):
    """Event-time tumbling windows (`event_time_topology.IdWindows`: 50 ids a window, a
    watermark every 200 ms, late tuples on a stream of their own) in 4 tasks that each get every
    id (all grouping), over 2 executors on 2 workers; rebalanced to 1 worker with an executor
    per task (with a wait), then back to 2 workers and 1 executor (without one), while ids flow.
    A window's tuples are in its task's memory, acked as the watermark passes their window: the
    open windows are lost with the workers, and their ids time out and are replayed. Every task
    must have every id in a window or on its late stream (at least once), each window only the
    ids of its span."""
    out = tmp_path / "out"
    out.mkdir()
    b = TopologyBuilder()
    b.set_spout("ids", TimedIds(None), 1)
    b.set_bolt("window", IdWindows(), 2).all_grouping("ids").set_num_tasks(4)
    b.set_bolt("late", LateIds(), 1).shuffle_grouping("window", "late")
    conf = topology_conf(out, 2, **{"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200})

    def why():
        return _logs(cluster)
    with cluster.client() as m:
        m.submit_topology("event-time", conf, b.create_topology())
        assert wait_until(lambda: len(acked(out)) > 300, 60), why()
        for workers, executors, wait in [(1, {"window": 4}, 1), (2, {"window": 1}, 0)]:
            m.rebalance("event-time", num_workers=workers, executors=executors, wait_secs=wait)
            assert wait_until(lambda w=workers, e=executors: placed(m, "event-time", w, e), 60), why()
            before = len(acked(out))
            assert wait_until(lambda b=before: len(acked(out)) > b + 300, 60), why()
        n = stop_and_wait(out, timeout=120, why=why)
        tasks = m.get_topology_info("event-time")["components"]["window"]["tasks"]
        errors = m.get_topology_info("event-time")["errors"]
        m.kill_topology("event-time", wait_secs=0)
    windows, late = rows(out, "windows"), rows(out, "late")
    task_ids = sorted({w["task"] for w in windows})
    assert len(task_ids) == tasks == 4, task_ids
    for t in task_ids:
        seen = Counter(i for w in windows if w["task"] == t for i in w["ids"])
        seen.update(r["id"] for r in late if r["task"] == t)
        missing = [i for i in range(n) if not seen[i]]
        assert not missing, f"task {t}: ids in no window nor late: {missing[:20]} of {n}"
    for w in windows:
        assert all(w["start"] < i * TICK_MS <= w["start"] + 500 for i in w["ids"]), w  # (start, end], as Storm's
    assert not errors, errors
    emits = emitted(out)
    print(f"{n} ids in 4 tasks: {sum(emits.values()) - n} replayed, {len(late)} late, "
          f"{sum(len(w['ids']) for w in windows) - tasks * n} in a second window")
