"""Trident map states over real stores: `RedisMapState` against a real redis-server and
`DeltaMapState` against a real Delta table (deltalake, read back by deltalake and by PySpark).

Each state type keeps Storm's rules across a fresh state (so what is checked is what the store
holds, not a task's cache): transactional ignores a replayed txid, opaque recomputes it from
``prev``, non-transactional applies it again."""

from __future__ import annotations

import threading
import time

import pytest

from squall import FailedException, ReportedFailedException
from squall._transactional import MemoryBackend
from squall.trident.state import OpaqueValue, TransactionalValue
from squall.trident.txstate import MemoryTransactionalState

redis = pytest.importorskip("redis")
pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")

from squall.external.trident_delta import (  # noqa: E402
    EPOCH_APP, KEYS_META, RENUMBERED_APP, DeltaMapState, DeltaMapStateError)
from squall.external.trident_redis import (  # noqa: E402
    DefaultKeyFactory, Options, RedisMapState, RedisMapStateError, marker_key, written_key)
from squall.external.trident_redis_streams import RedisStreamTridentSpout  # noqa: E402

from .test_trident_redis_zombie import Add, AddWhileFrozen  # noqa: E402 - the same updaters on both stores


def batch(factory, txid, counts, partition=0):
    """One batch's commit on a state the factory makes afresh (a new task, an empty cache)."""
    state = factory.make_state({}, None, partition, 1)
    state.begin_commit(txid)
    keys = [[k] for k in counts]
    out = state.multi_update(keys, [Add(n) for n in counts.values()])
    state.commit(txid)
    return dict(zip(counts, out))


def read(factory, *keys):
    state = factory.make_state({}, None, 0, 1)
    return state.multi_get([[k] for k in keys])


# -- Redis ----------------------------------------------------------------------------------------

FACTORIES = {"transactional": RedisMapState.transactional, "opaque": RedisMapState.opaque,
             "non_transactional": RedisMapState.non_transactional}


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_redis_replayed_txid_follows_the_state_type(redis_server, kind):
    f = FACTORIES[kind](redis_server.url)
    batch(f, 1, {"a": 1, "b": 2})
    batch(f, 2, {"a": 10})
    # txid 2 replayed; for an opaque spout it may hold other records (here a = 4, not 10)
    batch(f, 2, {"a": 10 if kind == "transactional" else 4})
    expected = {"transactional": 11, "opaque": 5, "non_transactional": 15}[kind]
    assert read(f, "a", "b", "c") == [expected, 2, None]
    raw = redis.Redis.from_url(redis_server.url).get("a")
    # Storm's JSON serializers, so a Storm topology reads the same keys
    assert raw == {"transactional": b"[2,11]", "opaque": b"[2,5,1]", "non_transactional": b"15"}[kind]


def test_redis_transactional_applies_a_txid_once_even_after_a_crash_between_keys(redis_server):
    f = RedisMapState.transactional(redis_server.url)
    batch(f, 1, {"a": 1, "b": 1})
    # a batch whose commit wrote "a" and then died before "b": the replay applies only "b"
    redis.Redis.from_url(redis_server.url).set("a", b"[2,2]")
    batch(f, 2, {"a": 1, "b": 1})
    assert read(f, "a", "b") == [2, 2]


def test_redis_global_key_and_hash_data_type(redis_server):
    opts = Options(data_type="hash", hash_key="counts", global_key="total")
    f = RedisMapState.opaque(redis_server.url, opts)
    state = f.make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_update([["x"], [7], ["x", 1]], [Add(1), Add(2), Add(3)])
    assert state.update(Add(5)) == 5
    state.commit(1)
    fresh = f.make_state({}, None, 0, 1)
    assert fresh.get() == 5
    assert fresh.multi_get([["x"], [7], ["x", 1]]) == [1, 2, 3]
    stored = redis.Redis.from_url(redis_server.url).hgetall("counts")
    assert stored == {b"x": b"[1,1,null]", b"[7]": b"[1,2,null]", b'["x",1]': b"[1,3,null]",
                      b"total": b"[1,5,null]"}


def test_default_key_factory_is_one_to_one():
    k = DefaultKeyFactory()
    keys = [["word"], [7], ["7"], ["[7]"], ["a", 1], [["a", 1]], [None], [True], [1.5]]
    built = [k.build(key) for key in keys]
    assert built[0] == "word" and built[2] == "7"
    assert len(set(built)) == len(keys)
    assert k.build(["a", 1]) == k.build(("a", 1))
    # keys equal in Python, one group of a group_by, are one Redis key
    assert k.build([1]) == k.build([1.0]) == k.build([True]) == "[1]"
    assert k.build([(0, "a")]) == k.build([(-0.0, "a")]) == k.build([(False, "a")]) == '[[0,"a"]]'
    assert k.build([1.5]) == "[1.5]" and k.build(["1"]) == "1"
    with pytest.raises(RedisMapStateError, match="key factory"):
        k.build([object()])


def test_default_key_factory_names_the_keys_an_earlier_squall_stored_apart():
    """Before 1, 1.0 and True were one key (2026-12-07) each was stored under its own JSON."""
    k = DefaultKeyFactory()
    assert k.old_names([3]) == k.old_names([3.0]) == ["[3.0]"]
    assert k.old_names([True]) == k.old_names([1]) == ["[1.0]", "[true]"]
    assert k.old_names([0]) == ["[0.0]", "[-0.0]", "[false]"]
    assert k.old_names([(1, "a")]) == ['[[1.0,"a"]]', '[[true,"a"]]']
    assert k.old_names(["w", 2]) == ['["w",2.0]']
    assert k.old_names([2**53 + 1]) == []  # no float equals it
    assert k.old_names(["word"]) == k.old_names([1.5]) == k.old_names(["[7]"]) == k.old_names([None]) == []
    assert len(k.old_names([5] * 6)) == 2**6 - 1
    assert k.old_names([5] * 7) is None  # past EQUAL_FORMS_LIMIT: read under its own name only


def _store_as_an_old_squall(client, options, stored):
    """``stored`` (name -> bytes) written as a squall from before 2026-12-07 left it."""
    for name, data in stored.items():
        if options.data_type == "hash":
            client.hset(options.hash_key, name, data)
        else:
            client.set(name, data)


@pytest.mark.parametrize("data_type", ["string", "hash"])
@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_redis_a_key_stored_under_its_old_json_is_read_and_moved_by_its_next_write(redis_server, kind, data_type):
    """A squall from before 1, 1.0 and True were one key named a key by its own JSON: counts of
    records whose key came as 3.0 or true are at ``[3.0]`` and ``[true]``, and the state of
    today names them ``[3]`` and ``[1]``. It reads them at the old name where the new one holds
    nothing (one MGET/HMGET of both), applies a replay of the txid they carry as its state type
    says (the opaque write's prev checked against the old name's value), and the key's next
    write stores the new name and removes the old one in the same script. Before, the counts
    started again from nothing: [None, None] read, and 1 and 3 counted from the replay on."""
    client = redis.Redis.from_url(redis_server.url)
    options = Options(data_type="hash", hash_key="counts") if data_type == "hash" else Options()
    # txid 2 brought 3.0's count to 7 (from 3) and true's to 4 (from 1)
    old = {"transactional": {"[3.0]": b"[2,7]", "[true]": b"[2,4]"},
           "opaque": {"[3.0]": b"[2,7,3]", "[true]": b"[2,4,1]"},
           "non_transactional": {"[3.0]": b"7", "[true]": b"4"}}[kind]
    _store_as_an_old_squall(client, options, old)
    f = FACTORIES[kind](redis_server.url, options)
    assert read(f, 3, 1, 3.0, True) == [7, 4, 7, 4]
    # txid 2 replayed (an opaque spout's with other records): ignored, recomputed from prev, applied again
    batch(f, 2, {3.0: 4, True: 3})
    batch(f, 3, {3: 1, 1.0: 1})
    expected = {"transactional": [8, 5], "opaque": [3 + 4 + 1, 1 + 3 + 1], "non_transactional": [12, 8]}[kind]
    assert read(f, 3, 1) == expected
    if data_type == "hash":
        assert sorted(client.hkeys("counts")) == [b"[1]", b"[3]"]
    else:
        assert client.exists("[3.0]", "[true]") == 0 and client.exists("[3]", "[1]") == 2
    raw = client.hget("counts", "[3]") if data_type == "hash" else client.get("[3]")
    assert raw == {"transactional": b"[3,8]", "opaque": b"[3,8,7]", "non_transactional": b"12"}[kind]


def test_redis_a_key_stored_under_several_names_answers_its_own_and_names_the_others(redis_server, caplog):
    """An old squall that got 1, 1.0 and True kept three counts apart: the one at the key's own
    name (``[1]``) is read, a warning names every stored value (for whoever merges them), and
    the key's next write removes the others; where only old names hold values, the first of
    them (`DefaultKeyFactory.old_names` order) is read."""
    client = redis.Redis.from_url(redis_server.url)
    _store_as_an_old_squall(client, Options(), {"[1]": b"[4,10]", "[1.0]": b"[3,2]", "[true]": b"[1,5]",
                                                "[0.0]": b"[2,6]", "[false]": b"[2,1]"})
    f = RedisMapState.transactional(redis_server.url)
    with caplog.at_level("WARNING", logger="squall.external.trident_redis"):
        assert read(f, True, 0) == [10, 6]
    said = caplog.text
    assert "'[1]' ([4,10]) is read" in said and "'[1.0]' ([3,2]), '[true]' ([1,5])" in said, said
    assert "'[0.0]' ([2,6]) is read" in said and "removes '[false]' ([2,1])" in said, said
    batch(f, 5, {1: 1, 0: 1})
    assert read(f, 1, 0) == [11, 7]
    assert client.exists("[1.0]", "[true]", "[0.0]", "[false]") == 0
    # a key of 7 ints has 127 old names: asked under its own name only, and said so
    many = (5,) * 7
    with caplog.at_level("WARNING", logger="squall.external.trident_redis"):
        batch(f, 6, {many: 2})
    assert read(f, many) == [2] and "more than 64 names" in caplog.text


@pytest.mark.parametrize("kind,raw", [
    ("transactional", b"not json"), ("transactional", b"[1]"), ("transactional", b'["x", 1]'),
    ("opaque", b"[1, 2]"), ("opaque", b"\xff\xfe"), ("non_transactional", b"{oops"),
    # another client's value nested deeper than json's parser recurses
    pytest.param("non_transactional", b"[" * 100_000, id="non_transactional-nested-too-deep"),
])
def test_redis_value_that_is_not_the_state_type_is_refused_naming_the_key(redis_server, kind, raw):
    redis.Redis.from_url(redis_server.url).set("bad-key", raw)
    f = FACTORIES[kind](redis_server.url)
    with pytest.raises(RedisMapStateError, match="'bad-key'.*not what this state stores"):
        read(f, "bad-key")


def test_redis_password_never_shows_and_an_outage_fails_the_batch(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("requirepass", "s3cret-pw")
    url = redis_server.url.replace("redis://", "redis://:s3cret-pw@")
    f = RedisMapState.transactional(url)
    assert "s3cret-pw" not in repr(f)
    batch(f, 1, {"a": 1})
    assert read(f, "a") == [1]
    authed = redis.Redis.from_url(url)
    authed.set("a", b"garbage")
    with pytest.raises(RedisMapStateError) as bad:
        read(f, "a")
    assert "s3cret-pw" not in str(bad.value) and "127.0.0.1" in str(bad.value)
    state = f.make_state({}, None, 0, 1)
    redis_server.stop()
    state.begin_commit(2)
    with pytest.raises(FailedException) as down:
        state.multi_update([["b"]], [Add(1)])
    assert "s3cret-pw" not in str(down.value)


def test_redis_expiry_and_bad_options(redis_server):
    f = RedisMapState.non_transactional(redis_server.url, Options(expire_interval_secs=100))
    batch(f, 1, {"a": 1})
    assert 0 < redis.Redis.from_url(redis_server.url).ttl("a") <= 100
    with pytest.raises(ValueError, match="hash_key"):
        Options(data_type="hash")
    with pytest.raises(ValueError, match="'list'"):
        Options(data_type="list")
    with pytest.raises(ValueError, match="redis://"):
        RedisMapState.opaque("localhost:6379")



@pytest.mark.parametrize("make, says", [
    (lambda: RedisMapState.opaque("redis://127.0.0.1:6379", {"data_type": "hash", "hash_key": "counts"}),
     r"RedisMapState: options must be an Options \(squall.external.trident_redis.Options, .*got dict "
     r"\{'data_type': 'hash', 'hash_key': 'counts'\}"),
    (lambda: RedisMapState.transactional("redis://127.0.0.1:6379", {}), r"options must be an Options .*got dict \{\}"),
    (lambda: Options(expire_interval_secs="60"), r"Options.expire_interval_secs must be an int, got str '60'"),
    (lambda: Options(local_cache_size=10.5), r"Options.local_cache_size must be an int, got float 10.5"),
    (lambda: Options(data_type="hash", hash_key=7), r"Options.hash_key must be a string, got int 7"),
    (lambda: Options(serializer="json"), r"Options.serializer must be None or have serialize\(\) and "
                                         r"deserialize\(\), got str 'json'"),
    (lambda: RedisMapState.opaque("http://127.0.0.1:6379"), r"RedisMapState: bad Redis URL http://127.0.0.1:6379: "
                                                            r"Redis URL must specify one of the following schemes"),
    (lambda: RedisMapState.opaque("redis://:hunter2pw@127.0.0.1:63790x"),
     r"RedisMapState: bad Redis URL redis://:\*\*\*@127.0.0.1:63790x: Port could not be cast"),
    (lambda: RedisStreamTridentSpout("rediss//127.0.0.1:6379", ["events"]),
     r"RedisStreamTridentSpout: the Redis URL must be a string like redis://host:port/db, not 'rediss//"),
    (lambda: RedisStreamTridentSpout("redis://127.0.0.1:six", ["events"]),
     r"RedisStreamTridentSpout: bad Redis URL redis://127.0.0.1:six: Port could not be cast"),
])
def test_a_misconfigured_redis_state_or_stream_spout_is_refused_where_it_is_made(make, says):
    """Where the user writes it, naming what is wrong. On main: options given as a dict raised
    `AttributeError: 'dict' object has no attribute 'serializer'` (and an empty one was taken
    for the defaults), an option of the wrong type a `TypeError` from inside a comparison or
    nothing until a task used it, and a URL Redis cannot parse passed, to fail in every task of
    the topology once it ran (in a worker, on the process host)."""
    with pytest.raises((TypeError, ValueError), match=says) as refused:
        make()
    assert "hunter2pw" not in str(refused.value)

# -- Delta ----------------------------------------------------------------------------------------

KEYS = pa.schema([("word", pa.string())])
DELTA = {"transactional": DeltaMapState.transactional, "opaque": DeltaMapState.opaque,
         "non_transactional": DeltaMapState.non_transactional}


def rows(uri):
    return sorted(deltalake.DeltaTable(str(uri)).to_pyarrow_table().to_pylist(), key=lambda r: r["word"])


@pytest.mark.parametrize("kind", sorted(DELTA))
def test_delta_replayed_txid_follows_the_state_type_one_row_per_key(tmp_path, kind):
    uri = tmp_path / "counts"
    f = DELTA[kind](uri, KEYS, pa.int64(), value_field="count", app_id="wc")
    batch(f, 1, {"a": 1, "b": 2})
    batch(f, 2, {"a": 10})
    batch(f, 2, {"a": 10 if kind == "transactional" else 4})
    expected = {"transactional": 11, "opaque": 5, "non_transactional": 15}[kind]
    assert read(f, "a", "b", "c") == [expected, 2, None]
    got = rows(uri)
    if kind == "transactional":
        assert got == [{"word": "a", "count": 11, "txid": 2}, {"word": "b", "count": 2, "txid": 1}]
    elif kind == "opaque":
        assert got == [{"word": "a", "count": 5, "txid": 2, "prev": 1},
                       {"word": "b", "count": 2, "txid": 1, "prev": None}]
    else:
        assert got == [{"word": "a", "count": 15}, {"word": "b", "count": 2}]
    table = deltalake.DeltaTable(str(uri))
    # one commit for the table's creation, then one MERGE per batch that wrote something (the
    # transactional replay wrote nothing: its key was already at txid 2)
    merges = [c for c in table.history() if c.get("operation") == "MERGE"]
    assert len(merges) == (2 if kind == "transactional" else 3)
    assert table.transaction_version("wc-0") == 2


def test_delta_state_is_read_by_spark(tmp_path, spark):
    uri = tmp_path / "counts"
    f = DeltaMapState.opaque(uri, pa.schema([("word", pa.string()), ("day", pa.int32())]), pa.int64())
    for txid in range(1, 6):
        state = f.make_state({}, None, 0, 1)
        state.begin_commit(txid)
        state.multi_update([["a", 1], ["b", txid]], [Add(txid), Add(1)])
        state.commit(txid)
    table = deltalake.DeltaTable(str(uri))
    got = sorted((r.word, r.day, r.value) for r in spark.read.parquet(*table.file_uris()).collect())
    assert got == [("a", 1, 15), ("b", 1, 1), ("b", 2, 1), ("b", 3, 1), ("b", 4, 1), ("b", 5, 1)]


def test_delta_bad_keys_values_and_tables_are_named(tmp_path):
    f = DeltaMapState.transactional(tmp_path / "t", KEYS, pa.int64())
    state = f.make_state({}, None, 0, 1)
    state.begin_commit(1)
    with pytest.raises(DeltaMapStateError, match=r"key has 2 values .*\['word'\]"):
        state.multi_get([["a", "b"]])
    state.begin_commit(1)  # the replay (the rest of a batch in which a call failed is refused)
    state.multi_put([["a"]], ["not a number"])
    with pytest.raises(DeltaMapStateError, match="'value'"):
        state.commit(1)  # where a transactional map writes
    # the same table for a state of another type has the wrong columns
    with pytest.raises(DeltaMapStateError, match="columns"):
        DeltaMapState.opaque(tmp_path / "t", KEYS, pa.int64()).make_state({}, None, 0, 1)
    with pytest.raises(DeltaMapStateError, match="repeat"):
        DeltaMapState.opaque(tmp_path / "u", pa.schema([("txid", pa.int64())]), pa.int64())


def test_delta_a_value_whose_fraction_an_integer_column_would_cut_off_is_refused(tmp_path):
    """A Sum of decimals into an int64 value column: pyarrow wrote 2.5 as 2, without a word."""
    f = DeltaMapState.non_transactional(tmp_path / "t", KEYS, pa.int64())
    state = f.make_state({}, None, 0, 1)
    state.begin_commit(1)
    with pytest.raises(DeltaMapStateError, match=r"'value' \(int64\): 2.5 has a fraction.*key \('b',\)"):
        state.multi_put([["a"], ["b"]], [2.0, 2.5])
    assert read(f, "a", "b") == [None, None]  # nothing written


class Metrics:
    """The part of a task's context (Storm's IMetricsContext) a state registers its metrics with."""

    def __init__(self):
        self.registered = {}

    def register_metric(self, name, metric, bucket_secs):
        self.registered[name] = metric
        return metric

    def get_registered_metric_by_name(self, name):
        return self.registered.get(name)


def test_delta_a_write_the_store_refuses_fails_the_batch_saying_whether_a_replay_can_pass(tmp_path, monkeypatch):
    """A store's failure (deltalake raises a read-only or full disk, an object store that does
    not answer, as a DeltaError) fails the batch, which Trident replays with its txid. It was a
    quiet FailedException: a path made read-only replayed the batch forever with nothing in the
    log, the UI or a metric. It is now reported (ReportedFailedException) naming the table, the
    partition and the txid, says whether a replay can pass, and is counted in the task's
    DeltaMapState-failures metric."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from squall import ReportedFailedException

    metrics = Metrics()
    state = DeltaMapState.transactional(tmp_path / "t", KEYS, pa.int64()).make_state({}, metrics, 0, 1)
    failures = metrics.registered["DeltaMapState-failures"]

    def commit(txid):
        state.begin_commit(txid)
        out = state.multi_update([["a"]], [Add(1)])
        state.commit(txid)
        return out

    assert commit(1) == [1]
    for error, kind in [("Generic LocalFileSystem error: Unable to open file: Read-only file system (os error 30)",
                         "a permanent failure: every replay of txid 2 fails the same way"),
                        ("Generic S3 error: connection reset by peer", "a transient failure: txid 2 is replayed")]:
        def refused(*args, error=error, **kwargs):
            raise DeltaError(error)
        with monkeypatch.context() as m:
            m.setattr(DeltaTable, "merge", refused)
            with pytest.raises(ReportedFailedException) as e:
                commit(2)
        assert f"DeltaMapState {tmp_path / 't'} (partition squall-trident-0): MERGE of txid 2 failed: " \
               f"DeltaError: {error} ({kind}" in str(e.value)
    assert failures.get_value_and_reset() == {"permanent": 1, "transient": 1}
    assert commit(2) == [2]  # the replay, once the store takes writes again
    assert not any(failures.get_value_and_reset().values())


@pytest.mark.parametrize("change", ["drop txid", "value to string", "add a column"])
def test_delta_a_table_changed_under_a_running_state_is_a_permanent_reported_failure(tmp_path, change):
    """The table's schema changed under a running topology (overwritten with its txid column
    dropped, its value column of another type, a column added). A MERGE from the task's cache
    wrote into it without a word (dropping the txid that keeps a replay exact; the count turned
    into the string '2'), and a read failed as a quiet FailedException the batch replayed
    forever. Both are now a reported permanent failure naming the column, and nothing is written."""
    from deltalake import write_deltalake

    from squall import ReportedFailedException

    uri = tmp_path / "t"
    metrics = Metrics()
    state = DeltaMapState.transactional(uri, KEYS, pa.int64()).make_state({}, metrics, 0, 1)
    state.begin_commit(1)
    assert state.multi_update([["a"]], [Add(1)]) == [1]
    state.commit(1)
    table = deltalake.DeltaTable(str(uri)).to_pyarrow_table()
    table, says = {"drop txid": (table.drop(["txid"]), r"columns are now \['word', 'value'\]"),
                   "value to string": (table.set_column(1, "value", pa.array(["one"])),
                                       "column 'value' is now string; this state needs int64"),
                   "add a column": (table.append_column("extra", pa.array(["x"])), "'extra'")}[change]
    write_deltalake(str(uri), table, mode="overwrite", schema_mode="overwrite")
    before = rows(uri)
    state.begin_commit(2)
    assert state.multi_update([["a"]], [Add(1)]) == [2]  # from the task's cache
    with pytest.raises(ReportedFailedException, match=f"MERGE of txid 2 failed: .*{says}.*a permanent failure"):
        state.commit(2)
    state.begin_commit(2)  # the replay, its cache dropped: read
    with pytest.raises(ReportedFailedException, match=f"reading of txid 2 failed: .*{says}.*a permanent failure"):
        state.multi_update([["a"]], [Add(1)])
    assert rows(uri) == before
    assert metrics.registered["DeltaMapState-failures"].get_value_and_reset() == {"permanent": 2}


def test_delta_partitions_merge_into_one_table(tmp_path):
    uri = tmp_path / "t"
    f = DeltaMapState.transactional(uri, KEYS, pa.int64())
    for txid in (1, 2):
        for p, word in enumerate(["a", "b", "c"]):
            batch(f, txid, {word: p + 1}, partition=p)
    assert [(r["word"], r["value"]) for r in rows(uri)] == [("a", 2), ("b", 4), ("c", 6)]
    assert deltalake.DeltaTable(str(uri)).transaction_version("squall-trident-2") == 2
    assert OpaqueValue(1, 2).curr == 2 and TransactionalValue(1, 2).val == 2


def test_delta_a_second_topology_on_the_table_starts_its_txids_at_1_without_being_refused(tmp_path):
    """Topology "one" counted through txid 3; topology "two" (another name, its coordinator's
    txids from 1) writes the same transactional table with the default app id, as it may in
    Storm's `TransactionalMap`. Before, both had the app id ``squall-trident``: two's txid 1 was
    refused as a zombie's below txid 3, every batch again, a stall for good. The default app id
    is per topology now. (An opaque value written by a later txid than the batch's is refused by
    its row, as Storm's `OpaqueValue` refuses it.)"""
    uri = tmp_path / "counts"
    f = DeltaMapState.transactional(uri, KEYS, pa.int64(), local_cache_size=0)

    def batch_of(topology, txid, n):
        state = f.make_state({"topology.name": topology}, None, 0, 1)
        state.begin_commit(txid)
        out = state.multi_update([["a"]], [Add(n)])
        state.commit(txid)
        return out

    for txid in (1, 2, 3):
        batch_of("one", txid, 1)
    assert batch_of("two", 1, 10) == [13]
    assert batch_of("two", 1, 10) == [13]  # two's replay of txid 1, not counted again
    assert batch_of("one", 4, 100) == [113]
    table = deltalake.DeltaTable(str(uri))
    assert table.transaction_version("squall-trident-one-0") == 4
    assert table.transaction_version("squall-trident-two-0") == 1


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_delta_a_zombie_tasks_stale_batch_does_not_undo_later_batches(tmp_path, kind):
    """A task's batch txid 2 read "a" = 1; its machine hung, the task was replaced, txid 2
    replayed and committed there, and txid 3 too; then the zombie resumed and wrote its txid 2.
    Before, the transactional table went back to 11 at txid 2 (txid 3's 100 lost for good);
    now the stale write is refused and the count stays 111."""
    uri = tmp_path / "counts"
    f = DELTA[kind](uri, KEYS, pa.int64(), value_field="count", local_cache_size=0)
    batch(f, 1, {"a": 1})
    zombie = f.make_state({}, None, 0, 1)
    zombie.begin_commit(2)

    def replaced():
        batch(f, 2, {"a": 10})
        batch(f, 3, {"a": 100})

    with pytest.raises(ReportedFailedException, match="txid 3 already") as refused:
        zombie.multi_update([["a"]], [AddWhileFrozen(10, replaced)])  # an opaque map writes here
        zombie.commit(2)  # a transactional one here
    # worded as RedisMapState's: the state, what was wrong, its causes, what to do; and reported
    # (a plain FailedException failed the batch without a word in the topology's errors)
    message = str(refused.value)
    assert f"DeltaMapState {uri} (partition squall-trident-0)" in message
    assert "this write of txid 2 is refused: it comes from a stale copy of the task" in message
    assert "on Spark's engine, from a query whose checkpoint is behind this table" in message
    assert "the batch fails, and its replay reads the table again" in message
    assert "numbering its batches from 1 again" in message and "app_id=" in message
    assert "app id None" not in message  # the default app id was shown as None
    assert read(f, "a") == [111]
    assert batch(f, 4, {"a": 1000}) == {"a": 1111}


class OnCluster:
    """A task's context on a cluster whose transactional state (where Trident numbers the
    topology's batches) is ``backend``: a LocalCluster's, which goes with it."""

    def __init__(self):
        self.transactional_home = MemoryBackend()

    def get_this_component_id(self):
        return "b-0"

    def transactional_state(self, name):
        return MemoryTransactionalState(self.transactional_home, "wc", name)


def batch_on(cluster, factory, txid, counts, partition=(0, 1)):
    """`batch` by a task of topology "wc" on ``cluster``, of ``partition`` (index, of how many)."""
    state = factory.make_state({"topology.name": "wc"}, cluster, *partition)
    state.begin_commit(txid)
    out = state.multi_update([[k] for k in counts], [Add(n) for n in counts.values()])
    state.commit(txid)
    return dict(zip(counts, out))


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_delta_a_topology_run_again_on_another_cluster_counts_on_and_a_stale_copy_is_still_refused(tmp_path, kind):
    """Run 1 on one cluster wrote txids 1-3 ("once" at txid 2); run 2 on another numbers from
    1 again. Before, its txid 1 was refused as a stale copy's (below txid 3), for good. Now it
    counts on, and a row of run 1's txid 2 is not run 2's txid 2: "once" is counted again (a
    transactional state took it for its own replay, an opaque one built on its prev), while run
    2's own replay of txid 2 is one (transactional: not counted again; opaque: from prev). A stale
    copy of run 2's task (same epoch) is refused as before."""
    uri = tmp_path / "counts"
    f = DELTA[kind](uri, KEYS, pa.int64(), value_field="count", local_cache_size=0)
    run1, run2 = OnCluster(), OnCluster()
    for txid, counts in enumerate([{"a": 1, "b": 1}, {"a": 1, "once": 1}, {"a": 1}], 1):
        batch_on(run1, f, txid, counts)
    assert batch_on(run2, f, 1, {"a": 10}) == {"a": 13}
    assert batch_on(run2, f, 2, {"a": 10, "once": 10}) == {"a": 23, "once": 11}
    replay = {"a": 10, "once": 10} if kind == "transactional" else {"a": 20, "once": 20}  # an opaque replay may differ
    assert batch_on(run2, f, 2, replay) == ({"a": 23, "once": 11} if kind == "transactional" else {"a": 33, "once": 21})
    zombie = f.make_state({"topology.name": "wc"}, run2, 0, 1)
    zombie.begin_commit(3)

    def replaced():
        batch_on(run2, f, 3, {"b": 100})
        batch_on(run2, f, 4, {"a": 1000})

    with pytest.raises(ReportedFailedException, match="wrote txid 4 already.*this write of txid 3 is refused: it "
                                                      "comes from a stale copy of the task"):
        zombie.multi_update([["b"]], [AddWhileFrozen(10, replaced)])
        zombie.commit(3)
    a = 1023 if kind == "transactional" else 1033
    assert read(f, "a", "b", "once") == [a, 101, 11 if kind == "transactional" else 21]
    table = deltalake.DeltaTable(str(uri))
    assert table.transaction_version("squall-trident-wc-0") == 4
    # the epoch beside it, as a Delta application transaction (which Spark does not read)
    epoch = table.transaction_version("squall-trident-wc-0.epoch")
    from squall.external.trident_delta import txids_epoch as epoch_of  # the token each cluster's state keeps
    assert epoch == epoch_of(run2, f.state_type, "squall-trident-wc-0") != epoch_of(run1, f.state_type,
                                                                                    "squall-trident-wc-0")
    assert table.history(1)[0]["squall.epoch"] == str(epoch)


@pytest.mark.parametrize("store", ["redis", "delta"])
@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_topology_run_again_with_another_parallelism_counts_keys_its_last_run_left(tmp_path, request, store, kind):
    """Run 2 (another cluster, its txids from 1 again) with the state's parallelism raised: its
    key "a" now falls in a partition no run wrote before (Redis: every partition is new, its
    marker is ``<index>-of-<count>``). That partition has no last txid, so it was not
    renumbered, and the row run 1 wrote at txid 2 was taken for run 2's own txid 2: a
    transactional state skipped it as its replay (10 lost), an opaque one built on its prev (the
    first run's 1 lost); a row of run 1's txid 3 stalled an opaque one ("ahead") for good. A
    partition's first write finds nothing of its own in the store, so every txid it reads there
    is an earlier numbering's."""
    if store == "redis":
        f = FACTORIES[kind](request.getfixturevalue("redis_server").url)
    else:
        f = DELTA[kind](tmp_path / "counts", KEYS, pa.int64(), value_field="count", local_cache_size=0)
    run1, run2 = OnCluster(), OnCluster()
    for txid, counts in enumerate([{"a": 1, "b": 1}, {"a": 1}, {"c": 1}], 1):
        batch_on(run1, f, txid, counts)  # one partition
    assert batch_on(run2, f, 1, {"b": 10}, partition=(0, 2)) == {"b": 11}
    assert batch_on(run2, f, 1, {"c": 10}, partition=(1, 2)) == {"c": 11}
    assert batch_on(run2, f, 2, {"a": 10}, partition=(1, 2)) == {"a": 12}
    assert batch_on(run2, f, 2, {"a": 10}, partition=(1, 2)) == {"a": 12}  # its own replay
    assert batch_on(run2, f, 3, {"a": 100}, partition=(1, 2)) == {"a": 112}
    assert read(f, "a", "b", "c") == [112, 11, 11]


def _records(state, txid, records):
    """Batch ``txid`` of ``records`` (one a word) on a task's ``state``: each word's count added."""
    counts: dict[str, int] = {}
    for word in records:
        counts[word] = counts.get(word, 0) + 1
    state.begin_commit(txid)
    state.multi_update([[w] for w in counts], [Add(n) for n in counts.values()])
    state.commit(txid)
    return len(records)


@pytest.mark.parametrize("store", ["redis", "delta"])
@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_run_agains_replay_that_brings_in_a_key_its_last_run_wrote_at_that_txid_counts_it(
        tmp_path, request, store, kind):
    """Run 1 wrote "k" at txid 5 and stopped; run 2 (another cluster, its txids from 1 again)
    wrote its batch 5 ("j" only), which then failed downstream, and the replay of txid 5 (an
    opaque spout's may bring other records) has "k" too. Its stored txid 5 is run 1's, but run
    2 had written txid 5 in the partition, so it was taken for run 2's own first attempt: a
    transactional state skipped the replay's 4 records of "k" (counted 32 of 36), an opaque one
    built on run 1's prev and lost run 1's 2 (34 of 36). Now the replay asks which keys its
    epoch wrote at txid 5, and "k" is counted on; "j", which it did write, is not counted twice.
    Every record sent is counted."""
    if store == "redis":
        f = FACTORIES[kind](request.getfixturevalue("redis_server").url)
    else:
        f = DELTA[kind](tmp_path / "counts", KEYS, pa.int64(), value_field="count")
    conf = {"topology.name": "wc"}
    sent = 0
    run1 = f.make_state(conf, OnCluster(), 0, 1)  # one task, its cache kept between batches
    for txid in range(1, 6):
        sent += _records(run1, txid, ["j"] * 3 + (["k"] * 2 if txid == 5 else []))
    run2 = f.make_state(conf, OnCluster(), 0, 1)
    for txid in range(1, 5):
        sent += _records(run2, txid, ["j"] * 3)
    _records(run2, 5, ["j"] * 3)  # in the state, then the batch failed: not counted as sent
    sent += _records(run2, 5, ["j"] * 3 + ["k"] * 4)
    assert sent == 36
    counted = read(f, "j", "k")
    assert counted == [30, 6] and sum(counted) == sent
    sent += _records(run2, 6, ["j"] + ["k"] * 5)  # and run 2 counts on
    assert read(f, "j", "k") == [31, 11] and sent == 42


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_redis_a_replay_after_an_upgrade_of_a_txid_an_older_squall_wrote_counts_it_once(redis_server, kind):
    """Run 2 of a topology (another cluster, its txids from 1 over run 1's) wrote txids 1 to 3
    with a squall from before the written set (`written_key`), and its worker died before batch
    3 was acked. squall is upgraded and the topology goes on, its cluster state kept: batch 3 is
    replayed. Its values at txid 3 are run 2's own, which the older squall listed in no set; the
    replay took them for run 1's (not in the set) and counted them again: 40 of 35 records (the
    same with squall at fd03c131 before the upgrade, run in its own process). Now a set not begun
    at that txid by the epoch says nothing, the values are taken for the epoch's, as before the
    upgrade, and batch 4 starts the set afresh. Every record sent is counted."""
    f = FACTORIES[kind](redis_server.url)
    conf = {"topology.name": "wc"}
    sent = 0
    run1 = f.make_state(conf, OnCluster(), 0, 1)
    for txid in range(1, 6):
        sent += _records(run1, txid, ["a"] * 2 + ["b"])
    cluster = OnCluster()
    run2 = f.make_state(conf, cluster, 0, 1)
    for txid in range(1, 4):
        sent += _records(run2, txid, ["a"] * 3 + ["b"] * 2)
    client = redis.Redis.from_url(redis_server.url)
    written = written_key(marker_key(Options(), 0, 1), "wc/b-0")
    assert client.exists(written)
    client.delete(written)  # what the older squall left: no set
    assert read(f, "a", "b") == [19, 11] and sent == 30
    upgraded = f.make_state(conf, cluster, 0, 1)  # the worker started again, on the new squall
    _records(upgraded, 3, ["a"] * 3 + ["b"] * 2)  # the replay: its records were counted once
    sent += _records(upgraded, 4, ["a"] * 3 + ["b"] * 2)
    counted = read(f, "a", "b")
    assert counted == [22, 13] and sum(counted) == sent == 35
    _records(upgraded, 4, ["a"] * 3 + ["b"] * 2)  # and a replay of batch 4 reads the new set
    assert read(f, "a", "b") == [22, 13]


class AnsweringLate(MemoryBackend):
    """A cluster's transactional state whose answers come late (a master over a slow link): 50
    ms, and 300 ms for the first read of each thread named in ``slow_first``. The value is read
    when asked, the answer given after the delay, as over a link."""

    def __init__(self, slow_first=()):
        super().__init__()
        self.slow_first = set(slow_first)

    def get(self, topology, key):
        blob = super().get(topology, key)
        name = threading.current_thread().name
        time.sleep(0.3 if name in self.slow_first else 0.05)
        self.slow_first.discard(name)
        return blob


class OnLateCluster(OnCluster):
    def __init__(self, slow_first=()):
        self.transactional_home = AnsweringLate(slow_first)


@pytest.mark.parametrize("store", ["redis", "delta"])
@pytest.mark.parametrize("late", ["copy-b", "neither"])
def test_two_first_copies_of_a_task_starting_at_once_keep_one_epoch_and_refuse_the_stale_ones_write(
        tmp_path, request, store, late):
    """Two copies of a partition's task start at once on a cluster whose transactional state
    holds no epoch yet (a task relaunched while its first launch was still starting). Before,
    each put its own epoch and read it back; where copy B's first read was answered late, A
    read its own back before B's put, so the two kept different epochs, and when A, stale, wrote
    its txid 2 after B had committed txids 2 and 3, the write was of "another numbering" and
    refused nothing: its count put back (Redis: 10 of 15 records counted; Delta: 20). Now the
    store arbitrates (a Redis script's compare-and-set, the Delta log's conflict check on the
    claim's application transaction): both keep one epoch, whichever reads first ("neither" late:
    both claim at once, one claim is refused and its copy takes the other's)."""
    if store == "redis":
        f = RedisMapState.transactional(request.getfixturevalue("redis_server").url)
    else:
        f = DELTA["transactional"](tmp_path / "counts", KEYS, pa.int64(), value_field="count", local_cache_size=0)
    cluster = OnLateCluster(["copy-b"] if late == "copy-b" else [])
    copies = {}
    gate = threading.Barrier(2)

    def start(name):
        gate.wait()
        copies[name] = f.make_state({"topology.name": "wc"}, cluster, 0, 1)

    threads = [threading.Thread(target=start, args=(name,), name=name) for name in ("copy-a", "copy-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    a, b = copies["copy-a"], copies["copy-b"]
    epochs = {getattr(c._hooks, "txids_epoch", None) or c._hooks.epoch for c in (a, b)}
    assert len(epochs) == 1
    sent = _records(b, 1, ["w"] * 5)
    a.begin_commit(2)  # the stale copy A starts txid 2, and hangs before its write
    sent += _records(b, 2, ["w"] * 5) + _records(b, 3, ["w"] * 5)  # B, its replacement, replays 2, goes on
    with pytest.raises(ReportedFailedException, match="wrote txid 3 already.*this write of txid 2 is refused"):
        a.multi_update([["w"]], [Add(5)])
        a.commit(2)
    assert read(f, "w") == [15] and sent == 15


def test_delta_a_table_that_records_no_epoch_is_compared_as_before_and_records_one_at_its_next_write(tmp_path):
    """A table written before squall recorded epochs (here by a state with none) says nothing of
    which numbering its txids are: its last txid is taken for this topology's (it may be the
    same numbering going on, its replay of txid 3 skipped as before), so a txid below it is
    refused, naming why; a write that passes records the epoch, and from then on a run on
    another cluster counts on."""
    uri = tmp_path / "counts"
    f = DeltaMapState.transactional(uri, KEYS, pa.int64(), local_cache_size=0, app_id="squall-trident-wc")
    for txid in (1, 2, 3):
        batch(f, txid, {"a": 1})
    run1 = OnCluster()
    with pytest.raises(ReportedFailedException, match="wrote txid 3 already.*the table records no epoch of txid 3"):
        batch_on(run1, f, 1, {"a": 10})
    assert batch_on(run1, f, 3, {"a": 1}) == {"a": 3}  # txid 3 replayed: in the table already
    assert batch_on(run1, f, 4, {"a": 10}) == {"a": 13}
    assert batch_on(OnCluster(), f, 1, {"a": 100}) == {"a": 113}
    assert read(f, "a") == [113]


def _older_commit_properties(self, table, numbering, txid, source):
    """`DeltaMapState._commit_properties` as squall wrote it before the horizon and the commits'
    keys (fd03c131), to make the table a run had written with it before an upgrade."""
    txns = [deltalake.Transaction(self.app_id, txid)]
    meta = {"squall.app": self.app_id, "squall.txid": str(txid)}
    if self.epoch:
        txns.append(deltalake.Transaction(self.app_id + EPOCH_APP, self.epoch))
        meta["squall.epoch"] = str(self.epoch)
        if numbering.mine is None:
            txns.append(deltalake.Transaction(self.app_id + RENUMBERED_APP, self.epoch))
    return deltalake.CommitProperties(custom_metadata=meta, app_transactions=txns)


def test_delta_a_run_renumbered_before_an_upgrade_names_its_commits_keys_only_up_to_a_horizon(
        tmp_path, monkeypatch):
    """Run 1 counted txids 1 to 8, and run 2 (another cluster, its txids from 1) wrote txids 1 to
    3, with a squall from before the horizon (`HORIZON_APP`); run 2 was upgraded and went on, its cluster
    state kept, to txid 14. Its partition was renumbered with no horizon, so every later commit
    named its keys (`KEYS_META`: a hash of every key of the batch in the commit's metadata, 17
    bytes a key), for as long as the run went on (here 9 to 14 too, past every txid of run 1's).
    Now its first write after the upgrade bounds the horizon by the table's highest txid (run 1's
    8), and the keys are named up to it only. Every record sent is counted."""
    uri = tmp_path / "counts"
    f = DELTA["transactional"](uri, KEYS, pa.int64(), value_field="count")
    conf = {"topology.name": "wc"}
    sent = 0
    cluster = OnCluster()
    with monkeypatch.context() as older:
        older.setattr(DeltaMapState, "_commit_properties", _older_commit_properties)
        run1 = f.make_state(conf, OnCluster(), 0, 1)
        for txid in range(1, 9):
            sent += _records(run1, txid, ["a", "z"])
        run2 = f.make_state(conf, cluster, 0, 1)
        for txid in range(1, 4):
            sent += _records(run2, txid, ["a"] * 3 + ["b"])
    upgraded = f.make_state(conf, cluster, 0, 1)
    _records(upgraded, 3, ["a"] * 3 + ["b"])  # its worker died before batch 3 was acked: replayed
    for txid in range(4, 15):
        sent += _records(upgraded, txid, ["a"] * 3 + ["b"])
    counted = read(f, "a", "b", "z")
    assert counted == [8 + 14 * 3, 14, 8] and sum(counted) == sent == 72
    named = sorted(int(c["squall.txid"]) for c in deltalake.DeltaTable(uri).history()
                   if c.get("squall.epoch") == str(upgraded._hooks.epoch) and KEYS_META in c)
    assert named == [4, 5, 6, 7, 8]


def opaque_batch(state, txid, counts):
    """One batch's commit on ``state``, a task's own (its cache kept from its earlier batches)."""
    state.begin_commit(txid)
    out = state.multi_update([[k] for k in counts], [Add(n) for n in counts.values()])
    state.commit(txid)
    return dict(zip(counts, out))


@pytest.mark.parametrize("zombie_first", [False, True])
def test_delta_opaque_zombie_writing_its_replacements_txid_from_a_stale_prev_is_refused(tmp_path, zombie_first):
    """The zombie committed its version of txid 2 (10 records of "a"), then was taken for dead
    before the coordinator heard; the replacement replayed txid 2 (an opaque spout's replay: 20
    records) and that is the txid 2 the coordinator recorded. Then both run txid 3 (100): the
    zombie from its cache, which still holds its own txid 2 (11, prev 1). Before, the zombie's
    write passed the partition's txid check (3 is not below 3): written last, "a" ended at 111
    (the zombie's 10 counted, the replay's 20 lost); written first, the table held 111 until the
    replacement's write. Now a write whose prev is not what the table holds is refused, and "a"
    is 1 + 20 + 100 throughout."""
    uri = tmp_path / "counts"
    f = DeltaMapState.opaque(uri, KEYS, pa.int64(), value_field="count")
    batch(f, 1, {"a": 1})
    zombie = f.make_state({}, None, 0, 1)
    assert opaque_batch(zombie, 2, {"a": 10}) == {"a": 11}
    replacement = f.make_state({}, None, 0, 1)
    assert opaque_batch(replacement, 2, {"a": 20}) == {"a": 21}  # the replay, from prev 1
    stale = pytest.raises(ReportedFailedException, match=r"txid 3 of key \('a',\) was computed from prev 11 but the "
                                                         r"table holds 21 before txid 3: this write is refused: it "
                                                         r"comes from a stale copy of the task .*on Spark's engine")
    if zombie_first:
        with stale:
            opaque_batch(zombie, 3, {"a": 100})
        assert opaque_batch(replacement, 3, {"a": 100}) == {"a": 121}
    else:
        assert opaque_batch(replacement, 3, {"a": 100}) == {"a": 121}
        with stale:
            opaque_batch(zombie, 3, {"a": 100})
    assert read(f, "a") == [121]
    assert rows(uri) == [{"word": "a", "count": 121, "txid": 3, "prev": 21}]
    assert opaque_batch(replacement, 3, {"a": 100}) == {"a": 121}  # its own replay of txid 3: from prev 21
    assert opaque_batch(zombie, 4, {"a": 1000}) == {"a": 1121}  # after its failure, it reads the table again


def test_delta_opaque_float_state_holding_nan_takes_its_next_batches(tmp_path):
    # the stale-prev check compares what a value was built on with what the table holds: a NaN
    # (a float sum that met one) read back is the NaN written, or its key refused every batch
    import math

    f = DeltaMapState.opaque(tmp_path / "sums", KEYS, pa.float64(), value_field="sum")
    assert math.isnan(batch(f, 1, {"a": float("nan")})["a"])
    assert math.isnan(batch(f, 2, {"a": 1.0})["a"])
    assert math.isnan(batch(f, 2, {"a": 2.0})["a"])  # its replay, from prev NaN
    assert batch(f, 3, {"b": 1.5}) == {"b": 1.5}
    [row] = [r for r in rows(tmp_path / "sums") if r["word"] == "a"]
    assert row["txid"] == 2 and math.isnan(row["sum"]) and math.isnan(row["prev"])


def test_delta_opaque_float32_state_takes_each_batch_of_one_task(tmp_path):
    """One task, no zombie: each batch builds on the value its cache kept from its last batch,
    computed in Python as a double (0.1 + 0.1), while the table holds it as its float32 column
    stores it (0.20000000298...). The stale-prev check compares them as stored: compared as
    computed, every batch after the first was refused once (then replayed after its cache was
    rebuilt from the table), for ever."""
    f = DeltaMapState.opaque(tmp_path / "sums", KEYS, pa.float32(), value_field="sum")
    task = f.make_state({}, None, 0, 1)
    for txid in range(1, 6):
        opaque_batch(task, txid, {"a": 0.1})  # each one taken: no FailedException
    [row] = rows(tmp_path / "sums")
    assert row["txid"] == 5
    assert row["sum"] == pytest.approx(0.5, rel=1e-6) and row["prev"] == pytest.approx(0.4, rel=1e-6)


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_redis_write_that_failed_is_written_by_the_replay_in_the_same_task(redis_server, kind):
    # the task lives on after the failed batch: its cache must not hold what Redis did not take
    f = FACTORIES[kind](redis_server.url)
    state = f.make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_update([["a"]], [Add(1)])
    state.commit(1)
    redis_server.stop()
    state.begin_commit(2)
    with pytest.raises(FailedException):
        state.multi_update([["a"]], [Add(1)])  # an opaque map writes here (this key is cached)
        state.commit(2)  # a transactional one here
    redis_server.start()
    state.begin_commit(2)
    assert state.multi_update([["a"]], [Add(1)]) == [2]
    state.commit(2)
    assert read(f, "a") == [2]


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_delta_null_key_is_one_row_counted_once_per_batch(tmp_path, kind):
    # a group whose field is None is a key like any other: SQL's NULL = NULL is not true, so a
    # MERGE on '=' inserted it again each batch, and the next read found two rows and failed the
    # batch on every replay
    uri = tmp_path / "counts"
    f = DELTA[kind](uri, KEYS, pa.int64(), value_field="count")
    for txid in (1, 2, 3):
        assert batch(f, txid, {None: 1, "a": 1}) == {None: txid, "a": txid}
    assert read(f, None, "a") == [3, 3]
    assert [(r["word"], r["count"]) for r in deltalake.DeltaTable(str(uri)).to_pyarrow_table().to_pylist()
            if r["word"] is None] == [(None, 3)]


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_batch_in_which_a_call_failed_is_refused_the_rest_and_its_replay_counts_once(kind):
    """A map state over a real store is rebuilt after a call that raised; the fresh stack knew
    neither the batch's txid nor its writes, so an updater that caught the error and retried
    wrote with txid None, and the batch's replay counted it again. The rest of that batch is
    refused now (the batch fails), and its replay counts each update once."""
    from squall.external._trident_map import StateType, build_map_state
    from squall.state import StateError

    class Flaky:
        def __init__(self):
            self.vals, self.fail_gets = {}, 0

        def multi_get(self, keys):
            if self.fail_gets:
                self.fail_gets -= 1
                raise TimeoutError("store slow")
            return [self.vals.get(tuple(k)) for k in keys]

        def multi_put(self, keys, values):
            self.vals.update((tuple(k), v) for k, v in zip(keys, values))

    store = Flaky()
    state = build_map_state(store, StateType(kind), 0, "$G")
    state.begin_commit(1)
    store.fail_gets = 1
    with pytest.raises(TimeoutError):
        state.multi_update([["w"]], [Add(1)])
    with pytest.raises(StateError, match=r"refuses the rest of batch txid 1, in which a call failed "
                                         r"\(TimeoutError: store slow\)"):
        state.multi_update([["w"]], [Add(1)])  # the updater's retry
    assert state.multi_get([["w"]]) == [None]  # reads go on (a state_query's), from the store
    with pytest.raises(StateError):
        state.commit(1)
    for _ in range(2):  # the replay, then a replay of a batch that failed after this commit
        state.begin_commit(1)
        assert state.multi_update([["w"]], [Add(1)]) == [1]
        state.commit(1)
    state.begin_commit(2)
    assert state.multi_update([["w"]], [Add(1)]) == [2]
    state.commit(2)
    assert state.multi_get([["w"]]) == [2]
