"""`KeyValueState` as a user calls it: which keys are one key, what the providers' settings
mean, and what a commit writes (the pure core, the file store and a real redis-server)."""

import subprocess
import sys
import textwrap

from squall.state._kv import MemoryStore, StateCodec, TransactionalKeyValueState
from squall.state.file import state_dir

from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .test_redis import Ctx  # a task's context, as the Redis provider reads it

KEY = b"k" * 32


def kv(store=None, conf=None):
    return TransactionalKeyValueState(store or MemoryStore(), StateCodec(conf or {}, "component [count] task 3"))


# --- keys that are equal are one key --------------------------------------------------------------------------

def test_keys_that_are_equal_are_one_key_whatever_order_their_sets_and_maps_were_built_in():
    s = kv()
    for i in range(100):
        s.put(frozenset([i, i + 8]), i)  # i and i + 8 share a slot: the set's order is its history
        s.put(("pair", {i + 8, i}), i)
        s.put({"b": i, "a": [i]}, i)
    for i in range(100):
        assert s.get(frozenset([i + 8, i])) == i
        assert s.get(("pair", {i, i + 8})) == i
        assert s.get({"a": [i], "b": i}) == i
    assert len(list(s)) == 300  # one entry per key, none twice
    keys = [k for k, _v in s]
    assert frozenset([3, 11]) in keys and type(keys[0]) is frozenset  # keys read back as they were put



def test_keys_equal_in_python_are_one_key_before_and_after_a_commit(tmp_path):
    """``1``, ``1.0`` and ``True`` are one key of a dict and go to one task under fields grouping
    (JSON sources give 1 as an int in one place and 1.0 in another); the state kept each under
    its own bytes, so a bolt counting per key split one key's count three ways and ``get(1.0)``
    after ``put(1, 5)`` answered None, before and after a commit."""
    from squall.state.file import FileStore
    d = state_dir(tmp_path, "topo", "count-3")
    s = TransactionalKeyValueState(FileStore(d, "count-3", KEY), StateCodec({}, "component [count] task 3"))
    records = [1, 1.0, True, 2, 2.0, (1.0, "a"), (True, "a"), [1.0, {2.0: -0.0}], [1, {2: 0}], frozenset({1.0}),
               {True}, 0.5] * 10
    for k in records:
        s.put(k, s.get(k, 0) + 1)
    s.put(1, 5)
    assert (s.get(1.0), s.get(True), s.get((1, "a"))) == (5, 5, 20)
    s.prepare_commit(1)
    s.commit(1)
    restored = TransactionalKeyValueState(FileStore(d, "count-3", KEY), StateCodec({}, "component [count] task 3"))
    assert (restored.get(1.0), restored.get(True), restored.get(2.0)) == (5, 5, 20)
    counted = list(restored)  # one entry per key, under its int form, every record counted
    assert sorted(map(repr, counted)) == sorted(map(repr, [
        (1, 5), (2, 20), ((1, "a"), 20), ([1, {2: 0}], 20), (frozenset({1}), 20), (0.5, 10)]))  # a set equals its frozenset
    assert sum(v for _k, v in counted) - 5 == len(records) - 30  # the 30 records of 1, 1.0, True: put(1, 5)


OLD_ONE_POINT_O = b"\xcb?\xf0\x00\x00\x00\x00\x00\x00"
"""The bytes `StateCodec.key` made of 1.0 before keys equal in Python were one key (msgpack's float)."""


def test_a_state_written_with_the_old_key_bytes_is_found_and_migrated_in_redis(redis_server, caplog):  # noqa: F811
    """A Redis state written before: 1.0 under the float's bytes, ``(2.0, "a")``, ``True`` and
    ``7.0`` in a prepared transaction, and 5 kept apart from 5.0. Each is found by any key equal
    to it; the clash is named in a warning (the int's value answers); the next write of a key
    moves it to its int bytes in the same commit, and the old bytes are gone from the hash."""
    import logging

    from squall.state import get_state
    conf = redis_conf({"url": redis_server.url})
    old = get_state("count-3", conf, Ctx())
    codec = old.codec
    assert codec.encode(1.0, "old") == OLD_ONE_POINT_O  # what squall wrote before, in Redis as the field
    old.store.apply({codec.encode(k, "old"): codec.value(k, v)
                     for k, v in [(1.0, 3), ((2.0, "a"), 4), (5, 50), (5.0, 7), ("café", 9), (0.5, 1)]})
    old.store.prepare(4, {codec.encode(True, "old"): None, codec.encode(7.0, "old"): codec.value(7, 70)})
    assert redis_server.client().hlen("t/count-3") == 6
    with caplog.at_level(logging.INFO, logger="squall.state._kv"):
        s = get_state("count-3", conf, Ctx())
    assert (s.get(1), s.get(True), s.get(1.0), s.get((2, "a")), s.get((True + 1.0, "a"))) == (3, 3, 3, 4, 4)
    assert (s.get(5), s.get(5.0), s.get(7), s.get("café"), s.get(0.5)) == (50, 50, 70, 9, 1)
    assert sorted(map(repr, s)) == sorted(map(repr, [(1, 3), ((2, "a"), 4), (5, 50), (7, 70), ("café", 9),
                                                     (0.5, 1)]))
    clash = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(clash) == 1 and "5 -> 50, 5.0 -> 7" in clash[0], clash
    s.commit(4)  # the old worker's prepared transaction, committed by this one
    s.put(1, s.get(1) + 1)
    s.put(5.0, s.get(5) + 1)
    s.delete((2, "a"))
    s.prepare_commit(5)
    s.commit(5)
    import redis
    fields = redis.Redis.from_url(redis_server.url).hkeys("t/count-3")
    # 1 and 5 under the int's bytes; 7.0 as the old prepare committed it (moved at its next write)
    assert sorted(fields) == sorted([b"\x01", b"\x05", codec.encode(7.0, "old"), codec.key("café"), codec.key(0.5)])
    fresh = get_state("count-3", conf, Ctx())
    assert sorted(map(repr, fresh)) == sorted(map(repr, [(1, 4), (5, 51), (7, 70), ("café", 9), (0.5, 1)]))


def test_a_state_file_written_with_the_old_key_bytes_is_found_and_migrated(tmp_path):
    from squall.state.file import FileStore
    d = state_dir(tmp_path, "topo", "count-3")
    codec = StateCodec({}, "component [count] task 3")
    FileStore(d, "count-3", KEY).apply({codec.encode(k, "old"): codec.value(k, v)
                                        for k, v in [(1.0, 3), ({2.0}, 4), ("x", 1)]})  # as squall wrote them
    s = TransactionalKeyValueState(FileStore(d, "count-3", KEY), codec)
    assert (s.get(True), s.get(frozenset({2})), s.get({2}), s.get("x")) == (3, 4, 4, 1)
    s.put(1, s.get(1) + 1)
    s.put({2}, s.get({2}) + 1)
    s.prepare_commit(1)
    s.commit(1)
    assert sorted(FileStore(d, "count-3", KEY).keys()) == sorted([codec.key(1), codec.key(frozenset({2})), codec.key("x")])
    assert sorted(map(repr, TransactionalKeyValueState(FileStore(d, "count-3", KEY), codec))) == \
        sorted(map(repr, [(1, 4), (frozenset({2}), 5), ("x", 1)]))


def test_an_old_set_inside_a_tuple_key_is_found_and_migrated():
    """A key written before as a tuple holding a set (``("pair", {2})``: the set's own ext type,
    a frozenset's now) was not recognised as an old form (the scan found the set, then forgot
    it), so ``get`` answered None and the bolt counted the key from 0 beside its old entry."""
    codec = StateCodec({}, "component [count] task 3")
    store = MemoryStore()
    old = [(("pair", {2}), 40), (((1, {3}),), 50), ({"m": ("x", {4})}, 60), (("plain", 5), 70)]
    store.apply({codec.encode(k, "old"): codec.value(k, v) for k, v in old})  # as squall wrote them
    s = TransactionalKeyValueState(store, codec)
    for k, _v in old * 3:  # 12 records, 3 of each key
        s.put(k, s.get(k, 0) + 1)
    s.prepare_commit(1)
    s.commit(1)
    counted = sorted(map(repr, TransactionalKeyValueState(store, codec)))
    assert counted == sorted(map(repr, [(("pair", frozenset({2})), 43), (((1, frozenset({3})),), 53),
                                        ({"m": ("x", frozenset({4}))}, 63), (("plain", 5), 73)]))
    assert len(store.committed) == 4  # the old forms are gone, each key stored once


def test_a_key_that_holds_itself_is_refused_naming_the_state_not_a_recursion_traceback():
    import traceback

    import pytest

    from squall.engine.serialize import SerializationError
    s = kv()
    loop = [1]
    loop.append(loop)
    for key in (loop, ("t", loop), {"m": loop}):
        with pytest.raises(SerializationError, match=r"a state key of component \[count\] task 3: the key contains itself") \
                as e:
            s.put(key, 1)
        assert len(traceback.extract_tb(e.value.__traceback__)) < 10
    assert list(s) == []


def test_opening_a_redis_state_of_many_old_keys_reads_their_values_together_and_scans_the_hash(
        redis_server):  # noqa: F811
    """Opening a state scans it for the keys written before equal keys were one key: one HGET
    per such key (and two more for the warning) took ~9 s for 20,000 keys written as floats,
    and HKEYS answered the whole hash in one command that held every client of the server."""
    import redis

    from squall.state import get_state
    conf = redis_conf({"url": redis_server.url})
    old = get_state("count-3", conf, Ctx())
    codec = old.codec
    n = 5000
    for at in range(0, n, 1000):
        old.store.apply({codec.encode(float(i), "old"): codec.value(i, i) for i in range(at, at + 1000)})
    old.store.apply({codec.encode(1, "old"): codec.value(1, 7)})  # 1 and 1.0 both: one clash
    client = redis.Redis.from_url(redis_server.url)
    client.config_resetstat()
    s = get_state("count-3", conf, Ctx())
    stats = client.info("commandstats")
    calls = {name: int(v["calls"]) for name, v in stats.items()}
    assert "cmdstat_hkeys" not in calls, calls
    # by the thousand: the candidates' values, then their int forms' and theirs again for the warning
    assert calls.get("cmdstat_hget", 0) + calls.get("cmdstat_hmget", 0) <= 3 * (n // 1000 + 1) + 2, calls
    assert sum(v for _k, v in s) == sum(range(n)) - 1 + 7  # every key once, 1 as its int entry
    assert (s.get(2), s.get(4999.0), s.get(True)) == (2, 4999, 7)


def nested_key(levels: int, leaf=1):
    """``leaf`` inside ``levels`` frozensets and tuples, one inside the other."""
    key = leaf
    for level in range(levels):
        key = (key,) if level % 2 else frozenset({key})
    return key


def test_a_key_nested_deeper_than_a_worker_decodes_is_refused_at_put_not_stored_unreadable():
    """A key's sets are encoded apart (their elements sorted by their bytes), each from the top,
    so the serializer's bound on tuples and sets inside one another (32: the decoder refuses
    deeper bytes) never saw a key's whole depth: ``put`` of a key 33 frozensets and tuples deep
    stored it, and iterating the state then raised StateError ("cannot be read back") at every
    read, as a restored window store would. It is refused at ``put`` as the same value is."""
    import pytest

    from squall.engine.serialize import SerializationError
    s = kv()
    s.put(nested_key(32), "at the bound")
    s.put(("wrapped", [nested_key(31)]), "lists do not count")
    with pytest.raises(SerializationError, match="nested inside more than 32 tuples, sets or registered values"):
        s.put(nested_key(33), "too deep")
    with pytest.raises(SerializationError, match="more than 32"):
        s.put((nested_key(32),), "too deep")
    with pytest.raises(SerializationError, match="more than 32"):
        s.get(frozenset({nested_key(40)}))
    entries = list(s)  # every key put reads back, and none of the refused ones was stored
    assert len(entries) == 2, entries
    assert (nested_key(32), "at the bound") in entries
    assert (("wrapped", [nested_key(31)]), "lists do not count") in entries

def test_a_set_key_of_strings_is_found_by_a_worker_with_another_hash_seed(tmp_path):
    # the process host's restarted worker is a new interpreter, whose str hashes (and so a set's
    # order) differ: the key must still be found
    d = state_dir(tmp_path, "topo", "count-3")
    script = textwrap.dedent(f"""
        import sys
        from squall.state._kv import StateCodec, TransactionalKeyValueState
        from squall.state.file import FileStore
        s = TransactionalKeyValueState(FileStore({str(d)!r}, "count-3", {KEY!r}), StateCodec({{}}, "count"))
        if sys.argv[1] == "put":
            for i in range(50):
                s.put(frozenset([f"user{{i}}", f"other{{i}}", f"third{{i}}"]), i)
            s.prepare_commit(0)
            s.commit(0)
        else:
            found = [i for i in range(50) if s.get(frozenset([f"third{{i}}", f"user{{i}}", f"other{{i}}"])) == i]
            print(len(found), len(list(s)))
    """)
    env_base = {"PYTHONPATH": ":".join(p for p in sys.path if p)}
    subprocess.run([sys.executable, "-c", script, "put"], check=True, timeout=60,
                   env={**env_base, "PYTHONHASHSEED": "1"})
    out = subprocess.run([sys.executable, "-c", script, "get"], check=True, timeout=60, capture_output=True,
                         text=True, env={**env_base, "PYTHONHASHSEED": "2"}).stdout.split()
    assert out == ["50", "50"]


# --- the Redis provider's settings ----------------------------------------------------------------------------

REDIS = "squall.state.redis:RedisKeyValueStateProvider"


def redis_conf(cfg):
    return {"topology.name": "t", "topology.state.provider": REDIS, "topology.state.provider.config": cfg}


def test_a_jedis_pool_password_with_any_character_reaches_its_own_server(redis_server, caplog):  # noqa: F811
    import redis

    from squall.state import StateError, get_state
    password = "p@ss/w#rd?:x%41"
    redis_server.client().execute_command("CONFIG", "SET", "requirepass", password)
    pool = {"host": "127.0.0.1", "port": redis_server.port, "password": password, "timeout": 1000}
    try:
        s = get_state("count-3", redis_conf({"jedisPoolConfig": pool}), Ctx())
        s.put("a", 1)
        s.prepare_commit(0)
        s.commit(0)
        assert get_state("count-3", redis_conf(f'{{"jedisPoolConfig": {{"host": "127.0.0.1", "port": '
                                               f'{redis_server.port}, "password": "{password}"}}}}'),
                         Ctx()).get("a") == 1
        with caplog.at_level("DEBUG"):
            try:
                get_state("count-3", redis_conf({"jedisPoolConfig": {**pool, "password": "wr@ng/pw"}}), Ctx())
                raise AssertionError("a wrong password was accepted")
            except StateError as e:
                msg = str(e)
        assert "AuthenticationError" in msg and f"127.0.0.1:{redis_server.port}" in msg
        assert "wr@ng" not in msg and "ng/pw" not in msg and "wr@ng" not in caplog.text and password not in caplog.text
    finally:
        redis.Redis(host="127.0.0.1", port=redis_server.port, password=password).execute_command(
            "CONFIG", "SET", "requirepass", "")


def test_redis_settings_it_cannot_honour_are_refused_naming_the_key_and_setting():
    import pytest
    pytest.importorskip("redis")
    from squall.state import StateError, get_state
    cases = [
        ({"jedisClusterConfig": {"nodes": ["127.0.0.1:7000"]}}, "jedisClusterConfig"),
        ({"jedisPoolconfig": {"host": "10.0.0.5"}}, "jedisPoolconfig"),
        ({"jedisPoolConfig": {"host": "127.0.0.1", "pasword": "x"}}, "pasword"),
        ({"jedisPoolConfig": {"host": "127.0.0.1", "port": "abc"}}, '"port"'),
        ({"jedisPoolConfig": {"host": "127.0.0.1", "database": 1.5}}, '"database"'),
        ({"url": "redis://127.0.0.1:1/0", "timeout": "soon"}, '"timeout"'),
    ]
    for cfg, named in cases:
        try:
            get_state("count-3", redis_conf(cfg), Ctx())
        except StateError as e:
            msg = str(e)
        else:
            raise AssertionError(f"{cfg} was accepted")
        assert "component [count] task 3" in msg and "topology.state.provider.config" in msg, msg
        assert named in msg, msg
        assert "localhost:6379" not in msg, msg  # never a server the settings did not name


# --- Redis failing under the state ----------------------------------------------------------------------------

def test_a_prepare_lost_by_a_redis_restart_is_still_committed(redis_server):  # noqa: F811
    from squall.state import StateError, get_state
    conf = redis_conf({"url": redis_server.url, "timeout": 1000})
    s = get_state("count-3", conf, Ctx())
    s.put("kept", 1)
    s.put("gone", 1)
    s.prepare_commit(0)
    s.commit(0)
    redis_server.client().execute_command("SAVE")  # the last snapshot: before the prepare below
    s.put("kept", 2)
    s.put("new", {"n": 1})
    s.delete("gone")
    s.prepare_commit(1)
    redis_server.proc.kill()  # dies without saving: restarts from the snapshot, the prepare lost
    redis_server.proc.wait(10)
    redis_server.start()
    for _attempt in range(3):  # the checkpoint spout sends a failed COMMIT again
        try:
            s.commit(1)
            break
        except StateError:
            continue
    fresh = get_state("count-3", conf, Ctx())
    assert fresh.get("kept") == 2 and fresh.get("new") == {"n": 1} and fresh.get("gone") is None
    assert redis_server.client().hget("t/count-3$txid", "commit") == "1"


def test_txids_in_redis_written_by_a_stranger_are_a_state_error_naming_the_hash(redis_server):  # noqa: F811
    import pytest

    from squall.state import StateError, get_state
    conf = redis_conf({"url": redis_server.url})
    s = get_state("count-3", conf, Ctx())
    s.put("a", 1)
    s.prepare_commit(0)
    s.commit(0)
    redis_server.client().hset("t/count-3$txid", "commit", "garbage")
    s.put("a", 2)
    with pytest.raises(StateError, match=r"'t/count-3\$txid', field 'commit'.*written by something else"):
        s.prepare_commit(1)


# --- topology.state.provider.config at submit -----------------------------------------------------------------

def test_a_provider_config_that_is_not_a_json_object_is_refused_at_submit_naming_the_key(tmp_path):
    import pytest

    from squall import Config, InvalidTopologyException, LocalCluster

    from .counting import counting_topology
    with LocalCluster() as cluster:
        for bad, says in [('{"directory": "/x", "password": "hunter2"', "not valid JSON"),
                          ('["a list"]', "must be a map")]:
            conf = Config({"test.out.dir": str(tmp_path), Config.TOPOLOGY_STATE_PROVIDER_CONFIG: bad})
            with pytest.raises(InvalidTopologyException) as e:
                cluster.submit_topology("t", conf, counting_topology(10))
            msg = str(e.value)
            assert "topology.state.provider.config" in msg and says in msg and "component [count]" in msg, msg
            assert "hunter2" not in msg
        conf = Config({"test.out.dir": str(tmp_path), Config.TOPOLOGY_STATE_PROVIDER_CONFIG: '{"a": 1}'})
        cluster.submit_topology("t", conf, counting_topology(10))  # a JSON object passes (Storm's form)
        cluster.kill_topology("t", wait_secs=0)


def test_a_provider_class_that_does_not_resolve_is_refused_at_submit_unless_its_module_is_elsewhere(tmp_path):
    """A typo in ``topology.state.provider`` (its module imports, the class is not there) made
    every worker fail to make its state and restart, again and again; a module that does not
    import here may import on the workers (an extra this machine lacks), and passes."""
    import pytest

    from squall import Config, InvalidTopologyException, LocalCluster

    from .counting import counting_topology
    with LocalCluster() as cluster:
        for bad, says in [("squall.state.memory:NoSuchProvider", "does not name a class"),
                          ("squall.state.memory", "has no new_state"),  # a module, not a class
                          ("squall.state:KeyValueState", "has no new_state"),
                          ("squall.state.memory:", "does not name a class")]:
            conf = Config({"test.out.dir": str(tmp_path), Config.TOPOLOGY_STATE_PROVIDER: bad})
            with pytest.raises(InvalidTopologyException) as e:
                cluster.submit_topology("t", conf, counting_topology(10))
            msg = str(e.value)
            assert "topology.state.provider" in msg and says in msg and "component [count]" in msg, msg
        conf = Config({"test.out.dir": str(tmp_path),
                       Config.TOPOLOGY_STATE_PROVIDER: "squall_provider_only_on_the_workers:Provider"})
        cluster.submit_topology("t", conf, counting_topology(10))  # may import on the workers alone
        cluster.kill_topology("t", wait_secs=0)


def test_settings_a_provider_does_not_take_are_refused_at_submit(tmp_path):
    """A misspelt ``"directory"`` of the file provider was ignored: its states went to
    storm.local.dir, not where the user said, without a word. Redis's provider refused an
    unknown setting only in each worker that made a state; both are refused at submit now."""
    import pytest

    from squall import Config, InvalidTopologyException, LocalCluster

    from .counting import counting_topology
    with LocalCluster() as cluster:
        for provider, settings in [("squall.state:FileKeyValueStateProvider", {"directroy": str(tmp_path)}),
                                   ("squall.state.redis:RedisKeyValueStateProvider", {"ulr": "redis://127.0.0.1:1/0"})]:
            conf = Config({"test.out.dir": str(tmp_path), Config.TOPOLOGY_STATE_PROVIDER: provider,
                           Config.TOPOLOGY_STATE_PROVIDER_CONFIG: settings})
            with pytest.raises(InvalidTopologyException) as e:
                cluster.submit_topology("t", conf, counting_topology(10))
            msg = str(e.value)
            assert f"has unknown settings {sorted(settings)} for {provider}" in msg and "component [count]" in msg, msg
