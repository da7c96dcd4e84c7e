"""What stateful bolts cost (docs/state.md): the state's own operations, and a topology's latency.

1. ``put``+``get`` of an int counter (µs each, the serializer both ways), and a commit
   (prepare + commit) of a state of ``--keys`` sizes after changing 1% of it, per store: memory
   (LocalCluster's), the file store (rewrites the whole state, sealed), Redis (with a real
   ``redis-server`` if installed; writes only the changes).
2. On a LocalCluster: a spout of ids at a fixed rate -> a counting bolt, plain (`Bolt`, acks at
   once) and stateful (`BaseStatefulBolt`, acked at the next commit) at two checkpoint intervals:
   mean complete latency (ms) and the tuples a stateful task holds unacked at its commits.
3. A persistent window (``with_persistence()``) of ``--windows`` tuples, per store: adding a
   tuple (µs), a checkpoint (prepare + commit) after 1% of the window slid (new tuples in, as
   many out), and restoring the window at INITSTATE (a restarted task), with and without
   ``with_max_events_in_memory(1000)``. ``--only-windows`` runs just this part.

    python -m bench.state_costs [--keys 1000 10000 100000] [--secs 6] [--rate 2000] [--max-pending N]
                                [--windows 1000 10000] [--only-windows]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from squall import (BaseStatefulBolt, BaseStatefulWindowedBolt, Bolt, Config, Count, Fields, LocalCluster, Spout,
                    TopologyBuilder)
from squall._fields import GlobalStreamId
from squall._tuple import Source, Tuple
from squall.state import HostMemory, StateHome
from squall.state._bolt import StatefulBoltExecutor
from squall.state._kv import MemoryStore, StateCodec, TransactionalKeyValueState
from squall.state._windowed import PersistentWindowedBoltExecutor, StatefulWindowedBoltExecutor
from squall.state.checkpoint import COMMIT, INITSTATE, PREPARE
from squall.state.file import FileStore

KEY = b"k" * 32


def _best(fn, repeat=5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def store_costs(sizes: list[int]) -> None:
    stores = {"memory": lambda n: MemoryStore()}
    tmp = Path(tempfile.mkdtemp())
    stores["file"] = lambda n: FileStore(tmp / f"f{n}-{time.monotonic_ns()}", "bench", KEY)
    server = None
    try:
        from bench.redis_server import RedisServer, redis_server_binary
        binary = redis_server_binary()
        if binary:
            import redis  # noqa: F401
            from squall.state.redis import RedisStore
            server = RedisServer(binary, tmp)
            server.start()
            client = redis.Redis.from_url(server.url)
            stores["redis"] = lambda n: RedisStore(client, f"bench-{n}-{time.monotonic_ns()}", KEY, "bench")
    except ImportError:
        pass
    try:
        s = TransactionalKeyValueState(MemoryStore(), StateCodec({}, "bench"))
        n = 100_000
        t = _best(lambda: [s.put(i % 1000, s.get(i % 1000, 0) + 1) for i in range(n)], 3)
        print(f"put+get of a counter: {t / n * 1e6:.2f} µs")
        for name, make in stores.items():
            for size in sizes:
                state = TransactionalKeyValueState(make(size), StateCodec({}, "bench"))
                for i in range(size):
                    state.put(i, i)
                state.prepare_commit(0)
                state.commit(0)
                txid = [0]

                def one_commit() -> None:
                    for i in range(0, size, 100):
                        state.put(i, -i)
                    txid[0] += 1
                    state.prepare_commit(txid[0])
                    state.commit(txid[0])
                print(f"commit, {name:6} store, {size:>7} keys (1% changed): {_best(one_commit) * 1000:8.2f} ms")
    finally:
        if server is not None:
            server.stop()


class RateSpout(Spout):
    def __init__(self, rate):
        self.rate = rate

    def declare_output_fields(self, d):
        d.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0
        self.start = time.monotonic()

    def next_tuple(self):
        if self.i < (time.monotonic() - self.start) * self.rate:
            self.i += 1
            self.collector.emit([self.i % 1000], self.i)


class PlainCount(Bolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.counts = {}

    def execute(self, tup):
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1
        self.collector.ack(tup)


class StatefulCount(BaseStatefulBolt):
    held: list[int] = []  # in this process: LocalCluster

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        self.collector.ack(tup)

    def pre_prepare(self, txid):
        StatefulCount.held.append(len(self.collector.acked))


def topology_latency(secs: float, rate: int, max_pending: int | None) -> None:
    for label, bolt, interval in (("plain bolt", PlainCount(), None), ("stateful, 1000 ms", StatefulCount(), 1000),
                                  ("stateful, 100 ms", StatefulCount(), 100)):
        StatefulCount.held = []
        b = TopologyBuilder()
        b.set_spout("ids", RateSpout(rate))
        b.set_bolt("count", bolt).fields_grouping("ids", ["id"])
        conf = Config()
        conf.set_max_spout_pending(max_pending)
        if interval:
            conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = interval
        with LocalCluster() as cluster:
            cluster.submit_topology("lat", conf, b.create_topology())
            time.sleep(secs)
            info = cluster.get_topology_info("lat")["components"]["ids"]
        held = f", unacked at a prepare: median {statistics.median(StatefulCount.held):.0f}" if StatefulCount.held else ""
        print(f"{label:18}: {rate} tuples/s offered, max spout pending {max_pending or 'auto'}, complete latency {info['complete_latency_ms']:.1f} ms, "
              f"acked {info['acked']}{held}")


class _Ctx:
    """A task's context, as a host gives it, for a windowed bolt run by hand."""

    def __init__(self, home: StateHome) -> None:
        self.state_home = home

    def get_this_component_id(self) -> str:
        return "window"

    def get_this_task_id(self) -> int:
        return 1

    def get_this_sources(self) -> dict:
        return {GlobalStreamId("$checkpointspout", "$checkpoint"): None}

    def get_component_tasks(self, component: str) -> list[int]:
        return [9]


class _Sum(BaseStatefulWindowedBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, window):
        self.state.put("sum", sum(t[0] for t in window.get()))


class _Out:
    def emit(self, *a, **k):
        return []

    def ack(self, t):
        pass

    def fail(self, t):
        pass

    def report_error(self, e):
        raise RuntimeError(e)


def window_costs(sizes: list[int]) -> None:
    src = Source("values", "default", 1, Fields("v", "word", "ts"))
    ckpt = Source("$checkpointspout", "$checkpoint", 9, Fields("txid", "action"))
    tuples = [Tuple([i, f"word-{i % 1000}", 1_700_000_000_000 + i], src) for i in range(max(sizes) * 3)]
    for persistent in (False, True):  # a tuple into a window that does not fire: serializing it is the cost
        bolt = _Sum().with_window(Count(len(tuples) + 1), Count(len(tuples) + 1))
        cls = PersistentWindowedBoltExecutor if persistent else StatefulWindowedBoltExecutor
        ex = StatefulBoltExecutor(cls(bolt.with_persistence() if persistent else bolt))
        ex.prepare({**bolt.get_component_configuration(), "topology.name": "bench"},
                   _Ctx(StateHome(memory=HostMemory())), _Out())
        ex.execute(Tuple([-1, INITSTATE], ckpt))
        t = time.perf_counter()
        for tup in tuples:
            ex.execute(tup)
        print(f"window {'persistent' if persistent else 'not persistent'}: add a tuple (no evaluation) "
              f"{(time.perf_counter() - t) / len(tuples) * 1e6:5.1f} µs")
    for size in sizes:  # the same windows as below, not persistent
        bolt = _Sum().with_window(Count(size), Count(max(1, size // 100)))
        ex = StatefulBoltExecutor(StatefulWindowedBoltExecutor(bolt))
        ex.prepare({**bolt.get_component_configuration(), "topology.name": "bench"},
                   _Ctx(StateHome(memory=HostMemory())), _Out())
        ex.execute(Tuple([-1, INITSTATE], ckpt))
        t = time.perf_counter()
        for tup in tuples[:size * 2]:
            ex.execute(tup)
        print(f"window not persistent, {size:>6} tuples: add {(time.perf_counter() - t) / (size * 2) * 1e6:5.1f} "
              f"µs/tuple (with the window's evaluations, every {max(1, size // 100)} tuples)")
    tmp = Path(tempfile.mkdtemp())
    homes = {"memory": lambda: StateHome(memory=HostMemory()),
             "file": lambda: StateHome(directory=tmp / str(time.monotonic_ns()), key=KEY)}
    for name, make_home in homes.items():
        for size in sizes:
            for limit in (None, 1000):
                if limit is not None and limit >= size:
                    continue
                home = make_home()

                def executor():
                    bolt = _Sum().with_window(Count(size), Count(max(1, size // 100))).with_persistence()
                    if limit is not None:
                        bolt.with_max_events_in_memory(limit)
                    ex = StatefulBoltExecutor(PersistentWindowedBoltExecutor(bolt))
                    ex.prepare({**bolt.get_component_configuration(), "topology.name": "bench"}, _Ctx(home), _Out())
                    ex.execute(Tuple([-1, INITSTATE], ckpt))
                    return ex
                ex = executor()
                t = time.perf_counter()
                for tup in tuples[:size]:
                    ex.execute(tup)
                add_us = (time.perf_counter() - t) / size * 1e6
                step = max(1, size // 100)
                times = []
                for k in range(20):
                    for tup in tuples[size + k * step: size + (k + 1) * step]:
                        ex.execute(tup)
                    t = time.perf_counter()
                    ex.execute(Tuple([k, PREPARE], ckpt))
                    ex.execute(Tuple([k, COMMIT], ckpt))
                    times.append(time.perf_counter() - t)
                t = time.perf_counter()
                again = executor()
                restore = time.perf_counter() - t
                held = len(again.bolt.store.tuples) + again.bolt.store.loaded
                print(f"persistent window, {name:6} store, {size:>6} tuples, max in memory {limit or 'all':>5}: "
                      f"add {add_us:5.1f} µs/tuple (idem), checkpoint (1% slid) median {statistics.median(times[1:]) * 1000:7.2f} ms, "
                      f"first {times[0] * 1000:7.2f} ms, restore {restore * 1000:7.1f} ms ({len(again.bolt.manager)} "
                      f"tuples, {held} held in memory)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--secs", type=float, default=6.0)
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--max-pending", type=int, default=None, help="topology.max.spout.pending (default: auto)")
    p.add_argument("--windows", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--only-windows", action="store_true")
    a = p.parse_args()
    if not a.only_windows:
        store_costs(a.keys)
        topology_latency(a.secs, a.rate, a.max_pending)
    window_costs(a.windows)


if __name__ == "__main__":
    main()
