"""Trident word counts on LocalCluster from real sources into real stores, with batches failed on
their first attempt, before the state (in an operation) and after the state wrote them (its
commit raises): files into Redis (transactional and opaque map states) and a Redis stream into a
Delta table. The stored counts equal the input exactly, and stay exact while more input comes
(replayed txids re-emit the same records, and the states apply each txid once). With a
non-transactional state the same run counts the batches failed after their write twice."""

from __future__ import annotations

import collections
import itertools
import json

import pytest

from squall import Config, Fields, LocalCluster
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import BaseAggregator, FailedException
from squall.trident.state import StateFactory

from ..conftest import wait_until
from ..trident.trident_ops import Split

redis = pytest.importorskip("redis")
pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from squall.external._trident_map import CommittingMapState  # noqa: E402
from squall.external.trident_delta import DeltaMapState  # noqa: E402
from squall.external.trident_files import FileTridentSpout  # noqa: E402
from squall.external.trident_redis import DefaultKeyFactory, Options, RedisMapState  # noqa: E402
from squall.external.trident_redis_streams import RedisStreamTridentSpout  # noqa: E402

_names = itertools.count()


class FailFirstAttempt(BaseAggregator):
    """Passes every tuple on, and fails the first attempt of every ``every``-th txid (in each
    task), so those batches are replayed with the same txid."""

    def __init__(self, every: int) -> None:
        self.every = every

    def init(self, batch_id, collector):
        if batch_id.txid % self.every == 0 and batch_id.attempt_id == 0:
            raise FailedException(f"induced failure of txid {batch_id.txid}")
        return None

    def aggregate(self, state, tuple, collector) -> None:  # noqa: A002
        collector.emit(list(tuple.values))

    def complete(self, state, collector) -> None:
        pass


class _FailFirstCommit:
    """Fails the first commit of every ``every``-th txid after the state wrote it."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.failed: set[int] = set()

    def begin_commit(self, txid) -> None:
        pass

    def commit(self, txid) -> None:
        if txid % self.every == 0 and txid not in self.failed:
            self.failed.add(txid)
            raise FailedException(f"induced failure after txid {txid} was written")


class FailingCommits(StateFactory):
    """``factory``'s states, whose commit of every ``every``-th txid fails the first time."""

    def __init__(self, factory, every: int) -> None:
        self.factory = factory
        self.every = every

    def make_state(self, conf, metrics, partition_index, num_partitions):
        state = self.factory.make_state(conf, metrics, partition_index, num_partitions)
        return CommittingMapState(lambda: state, _FailFirstCommit(self.every))


def word_count(topo, spout, text_field, factory):
    topo.new_stream(f"src{next(_names)}", spout).parallelism_hint(2) \
        .each(Fields(text_field), Split(), Fields("word")) \
        .partition_aggregate(Fields("word"), FailFirstAttempt(3), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(FailingCommits(factory, 4), Count(), Fields("count")) \
        .parallelism_hint(2)


def lines(start, n):
    return [f"w{i % 7} w{i % 3} common" for i in range(start, start + n)]


def counted(text):
    return collections.Counter(w for line in text for w in line.split(" "))


def conf():
    c = Config()
    c["topology.max.spout.pending"] = 3
    return c


@pytest.mark.parametrize("kind", ["transactional", "opaque", "non_transactional"])
def test_files_into_redis_counts_exactly_under_failed_batches(tmp_path, redis_server, kind):
    data = tmp_path / "in"
    data.mkdir()
    text = {name: lines(i * 100, 40) for i, name in enumerate(["a.txt", "b.txt", "c.txt"])}
    for name, ls in text.items():
        (data / name).write_text("".join(line + "\n" for line in ls))
    factory = getattr(RedisMapState, kind)(redis_server.url)
    topo = TridentTopology()
    word_count(topo, FileTridentSpout(data, max_batch_records=7), "line", factory)
    client = redis.Redis.from_url(redis_server.url)
    serializer = factory.serializer

    def stored():
        keys = sorted(k.decode() for k in client.keys("w*")) + ["common"]
        vals = [serializer.deserialize(v) if v else None for v in client.mget(keys)]
        plain = {"transactional": lambda v: v.val, "opaque": lambda v: v.curr, "non_transactional": lambda v: v}
        return {k: plain[kind](v) for k, v in zip(keys, vals) if v is not None}

    expected = counted(line for ls in text.values() for line in ls)
    with LocalCluster() as cluster:
        cluster.submit_topology("files-redis", conf(), topo.build())
        if kind == "non_transactional":
            # what the other two are tested against: a batch failed after its write counts twice
            total = sum(expected.values())
            assert wait_until(lambda: sum(stored().values()) > total, timeout=120), (stored(), expected)
            return
        assert wait_until(lambda: stored() == dict(expected), timeout=120), (stored(), expected)
        more = lines(1000, 25)
        with open(data / "b.txt", "a") as f:
            f.write("".join(line + "\n" for line in more))
        expected += counted(more)
        assert wait_until(lambda: stored() == dict(expected), timeout=120), (stored(), expected)
    # each partition kept the last txid it wrote, under the topology's name and the state's bolt,
    # beside its marker:
    # what refuses a stale copy of its task (tests/external/test_trident_redis_zombie.py), and
    # the replays above (failed batches, the same txid) were not refused
    records = {k.decode(): client.hgetall(k) for k in client.keys("$squall-redis-map-state/*/txids")}
    assert sorted(records) == [f"$squall-redis-map-state/{i}-of-2/txids" for i in range(2)], records
    # "<txid> <epoch> renumbered": the epoch, which numbering of the txids (this LocalCluster's),
    # kept in its transactional state; renumbered at the partition's first write, which found no
    # last txid (a value there would be another run's, with another parallelism)
    assert all(len(r) == 1 and next(iter(r)).startswith(b"files-redis/b-")
               and int(next(iter(r.values())).split()[0]) > 0
               and next(iter(r.values())).split()[2:] == [b"renumbered"] for r in records.values()), records


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_redis_state_counts_on_when_its_topology_runs_again_on_another_local_cluster(tmp_path, redis_server, kind):
    """A LocalCluster keeps Trident's txids in its process: the same topology run again on
    another one (a script run twice against one Redis) numbers its batches from 1 again. Its
    RedisMapState took those for the writes of a stale copy of the last run's task, whose
    partition had written a later txid: every batch refused, for good, nothing counted (Storm's,
    and squall's before the check, count on). Now each partition keeps which numbering its last
    txid belongs to (an epoch in the cluster's transactional state), and the second run's 30
    lines add to the first's 30, each record counted once. A key not written in every batch
    ("once", one record a run) kept the first run's txid: a transactional state took it for the
    second run's replay of that txid (counted 1, not 2), an opaque one stalled on the keys of the
    first run's later txids ("Current batch (1) is behind state's batch"); now the partition is
    renumbered at the second run's first write, and a value of a txid above what it wrote is read
    as of none."""
    client = redis.Redis.from_url(redis_server.url)
    factory = getattr(RedisMapState, kind)(redis_server.url)
    words = ["common", "once", "w0", "w1", "w2"]

    def stored():
        vals = [factory.serializer.deserialize(v) if v else None for v in client.mget(words)]
        return {k: v.val if kind == "transactional" else v.curr for k, v in zip(words, vals) if v}

    _run_twice(tmp_path, factory, "rerun", stored, ("stale copy", "behind"))


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_delta_state_counts_on_when_its_topology_runs_again_on_another_local_cluster(tmp_path, kind):
    """The same topology (its name, its table) run to completion on one LocalCluster, then on
    another with new input: its txids from 1 again (the first cluster's transactional state went
    with it). Before, each partition's write was refused as a stale copy's (the table's
    transaction_version of the partition was the first run's last txid): every batch of the
    second run, for good, nothing counted. Now the table keeps which numbering of the txids
    (an epoch in the topology's transactional state) wrote each partition's last txid, and the
    second run's 30 lines add to the first's, each record counted once; "once" (one record a
    run, its row's txid that of the first run's batch) is counted again, not taken for a replay."""
    uri = tmp_path / "counts"
    factory = getattr(DeltaMapState, kind)(uri, pa.schema([("word", pa.string())]), pa.int64(), value_field="count")

    def stored():
        if not deltalake.DeltaTable.is_deltatable(str(uri)):
            return {}
        rows = deltalake.DeltaTable(str(uri)).to_pyarrow_table().to_pylist()
        assert len(rows) == len({r["word"] for r in rows})  # one row per key
        return {r["word"]: r["count"] for r in rows}

    _run_twice(tmp_path, factory, "rerun-delta", stored, ("refused",))


def _run_twice(tmp_path, factory, name, stored, refusals):
    """Run topology ``name`` (30 lines of words into ``factory``'s state, 3 records a batch, 2
    partitions) to completion on a LocalCluster, then again with new input on another (its
    txids from 1 again): after each run, ``stored()`` holds every record of the runs so far,
    counted once, and no error of the topology says any of ``refusals``."""
    expected: collections.Counter = collections.Counter()
    for run in range(2):
        data = tmp_path / f"in{run}"
        data.mkdir()
        text = [f"w{i % 3} common" + (" once" if i == 7 else "") for i in range(30)]
        (data / "a.txt").write_text("".join(line + "\n" for line in text))
        expected += counted(text)
        topo = TridentTopology()
        topo.new_stream("rerun-src", FileTridentSpout(data, max_batch_records=3)) \
            .each(Fields("line"), Split(), Fields("word")) \
            .group_by(Fields("word")) \
            .persistent_aggregate(factory, Count(), Fields("count")).parallelism_hint(2)
        with LocalCluster() as cluster:
            cluster.submit_topology(name, conf(), topo.build())
            want = dict(expected)
            assert wait_until(lambda: stored() == want, timeout=60), (run, stored(), want)  # noqa: B023 - read now
            errors = [e["error"] for e in cluster.get_topology_info(name)["errors"]]
            assert not any(r in e for e in errors for r in refusals), errors
    assert sum(stored().values()) == 2 * (30 * 2 + 1)  # every record of both runs


def test_redis_stream_into_delta_counts_exactly_under_failed_batches(tmp_path, redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    text = lines(0, 60)
    for i, line in enumerate(text):
        client.xadd(f"s{i % 2}", {"text": line})
    uri = tmp_path / "counts"
    factory = DeltaMapState.transactional(uri, pa.schema([("word", pa.string())]), pa.int64(),
                                          value_field="count", local_cache_size=0)
    topo = TridentTopology()
    spout = RedisStreamTridentSpout(redis_server.url, ["s0", "s1"], ["text"], id_field=None, max_batch_entries=9)
    word_count(topo, spout, "text", factory)

    def stored():
        if not deltalake.DeltaTable.is_deltatable(str(uri)):
            return {}
        rows = deltalake.DeltaTable(str(uri)).to_pyarrow_table().to_pylist()
        assert len(rows) == len({r["word"] for r in rows})  # one row per key
        return {r["word"]: r["count"] for r in rows}

    expected = counted(text)
    with LocalCluster() as cluster:
        cluster.submit_topology("stream-delta", conf(), topo.build())
        assert wait_until(lambda: stored() == dict(expected), timeout=180), (stored(), expected)
        more = lines(500, 20)
        for line in more:
            client.xadd("s1", {"text": line})
        expected += counted(more)
        assert wait_until(lambda: stored() == dict(expected), timeout=180), (stored(), expected)


def test_keys_equal_in_python_are_one_key_in_every_map_state(redis_server):
    """``1``, ``1.0`` and ``True`` are one group of a ``group_by`` (a batch's groups are a dict;
    fields grouping hashes them alike), so each map state keeps them as one key, ``[1]``
    (`squall._equal_keys`). Before, a transactional `RedisMapState` stored 14 counts for
    these 7 records (its cache, keyed by the values, handed ``[1]``'s count to ``[1.0]`` and
    ``[true]``, which counted it again), an opaque one split 1's 4 records over three keys by
    the order they came in, and a `MemoryMapState` answered 1 for the key 2 of 3 records."""
    from squall.trident import FeederBatchSpout, LocalDRPC, MemoryMapState
    from squall.trident.builtin import MapGet
    from squall.trident.operation import BaseFunction

    class AsJson(BaseFunction):
        def execute(self, tuple, collector):
            collector.emit([json.loads(tuple[0])])

    client = redis.Redis.from_url(redis_server.url)
    batches = [[[1], [1]], [[1.0]], [[True]], [[2.0], [2]], [[2]]]
    sent = collections.Counter(v[0] for batch in batches for v in batch)  # Python's: {1: 4, 2: 3}
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        feeder = FeederBatchSpout(["key"])
        grouped = topo.new_stream("mixed", feeder).group_by(Fields("key"))
        for kind in ("transactional", "opaque"):
            grouped.persistent_aggregate(getattr(RedisMapState, kind)(redis_server.url, Options(
                data_type="hash", hash_key=kind)), Count(), Fields("count"))
        memory = grouped.persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
        (topo.new_drpc_stream("count", drpc).each(Fields("args"), AsJson(), Fields("key"))
         .group_by(Fields("key")).state_query(memory, Fields("key"), MapGet(), Fields("count"))
         .project(Fields("count")))
        cluster.submit_topology("mixed-keys", Config(), topo.build())
        for b in batches:
            feeder.feed(b)
        answers = {q: drpc.execute("count", q) for q in ("1", "1.0", "true", "2", "2.0")}
    stored = {kind: {k.decode(): json.loads(v)[1] for k, v in client.hgetall(kind).items()}
              for kind in ("transactional", "opaque")}
    assert sum(sent.values()) == 7
    assert stored == {kind: {"[1]": sent[1], "[2]": sent[2]} for kind in stored}, stored
    assert answers == {"1": "[[4]]", "1.0": "[[4]]", "true": "[[4]]", "2": "[[3]]", "2.0": "[[3]]"}, answers


def test_counts_an_earlier_squall_stored_under_their_old_json_go_on_after_the_upgrade(redis_server):
    from squall.trident import FeederBatchSpout

    """A user upgrades past the day 1, 1.0 and True became one key (2026-12-07) with counts in
    Redis that the old squall stored under each key's own JSON (keys from JSON came as 3.0,
    booleans as true): the counts go on from there, in each state type, both data types, and
    the old names are gone once their key is written. Before, every such key started again from
    nothing (22 records counted as 13 in each state: the 11 before the upgrade were not read)."""
    client = redis.Redis.from_url(redis_server.url)
    kinds = {"transactional": Options(), "opaque": Options(data_type="hash", hash_key="opaque"),
             "non_transactional": Options(data_type="hash", hash_key="nontx")}
    # what the old squall's run of 11 records left, at its txids 1-4 (a value of txid 4 was written by
    # its last batch): 3.0 x3, true x2, 0.0 x3, (1.0, 2) x1, and "w" and 7, whose names are the same today
    before = {"[3.0]": (4, 3), "[true]": (3, 2), "[0.0]": (4, 3), "[[1.0,2]]": (4, 1), "w": (1, 1), "[7]": (2, 1)}
    for kind, opts in kinds.items():
        for name, (txid, count) in before.items():
            value = {"transactional": [txid, count], "opaque": [txid, count, count - 1],
                     "non_transactional": count}[kind]
            data = json.dumps(value, separators=(",", ":"))
            if opts.data_type == "hash":
                client.hset(opts.hash_key, name, data)
            else:
                client.set(name, data)
    batches = [[[3.0], [True]], [[3], [1], [0]], [[False], ["w"], [7.0]], [[(1, 2.0)], [3.0], [-0.0]]]
    sent = collections.Counter({3: 3, 1: 2, 0: 3, (1, 2): 1, "w": 1, 7: 1})  # before the upgrade
    sent.update(r[0] for b in batches for r in b)  # Python's equality: {3: 6, 1: 4, 0: 6, ...}
    with LocalCluster() as cluster:
        topo = TridentTopology()
        feeder = FeederBatchSpout(["key"])
        grouped = topo.new_stream("upgraded", feeder).group_by(Fields("key"))
        for kind, opts in kinds.items():
            grouped.persistent_aggregate(getattr(RedisMapState, kind)(redis_server.url, opts), Count(),
                                         Fields("count"))
        cluster.submit_topology("upgraded", Config(), topo.build())
        for b in batches:
            feeder.feed(b)
    assert sum(sent.values()) == 11 + 11
    expected = {DefaultKeyFactory().build([k]): n for k, n in sent.items()}
    for kind, opts in kinds.items():
        if opts.data_type == "hash":
            raw = client.hgetall(opts.hash_key)
        else:
            raw = {k: client.get(k) for k in client.keys("*") if not k.startswith(b"$") and client.type(k) == b"string"}
        values = {k.decode(): json.loads(v) for k, v in raw.items()}
        counts = {k: v if kind == "non_transactional" else v[1] for k, v in values.items()}
        assert counts == expected, (kind, counts)
