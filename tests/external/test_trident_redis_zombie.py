"""`RedisMapState` against a stale copy of its task, with a real redis-server: a zombie (its
worker taken for dead on a machine that hung, resumed after the task that replaced it replayed
and committed its batch, and later ones) whose late write would put the replacement's counts
back, with nothing failing. Two state objects of one partition play the replacement and the
zombie, each keeping its own cache, as two copies of a task would."""

from __future__ import annotations

import json

import pytest

from squall import FailedException
from squall._transactional import MemoryBackend
from squall.trident.state import ValueUpdater
from squall.trident.txstate import MemoryTransactionalState

redis = pytest.importorskip("redis")

from squall.external.trident_redis import Options, RedisMapState  # noqa: E402

CONF = {"topology.name": "wc"}
TXIDS = "$squall-redis-map-state/0-of-1/txids"  # partition 0 of 1's last txids, beside its marker


class Add(ValueUpdater):
    """Adds ``n`` to what is stored (None as 0)."""

    def __init__(self, n):
        self.n = n

    def update(self, stored):
        return (stored or 0) + self.n


def run(state, txid, counts):
    """Batch ``txid`` on a task's ``state`` (its cache kept from its earlier batches)."""
    state.begin_commit(txid)
    out = state.multi_update([[k] for k in counts], [Add(n) for n in counts.values()])
    state.commit(txid)
    return dict(zip(counts, out))


def stored(client, *keys):
    return [client.get(k) for k in keys]


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_zombies_write_of_a_txid_its_replacement_went_past_is_refused(redis_server, kind):
    """The zombie committed txid 4 and read "a" for txid 5; then its machine hung, the
    replacement replayed txid 5 (the same 10 records of "a") and committed it, and txid 6 (100
    of "a" and of "b"). Before, the zombie's write of txid 5 went in when it resumed: "a" went
    back to 11, txid 6's 100 lost for good (nothing fails, nothing replays). Now it is refused,
    naming the partition, the server (its password masked) and the stale copy, and Redis holds
    exactly the replacement's values."""
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("requirepass", "s3cret-pw")
    url = redis_server.url.replace("redis://", "redis://:s3cret-pw@")
    client = redis.Redis.from_url(url)
    f = getattr(RedisMapState, kind)(url)
    zombie = f.make_state(CONF, None, 0, 1)
    assert run(zombie, 4, {"a": 1, "b": 1}) == {"a": 1, "b": 1}
    zombie.begin_commit(5)
    zombie.multi_get([["a"]])  # a state_query, or the aggregate's read, before the hang

    replacement = f.make_state(CONF, None, 0, 1)
    assert run(replacement, 5, {"a": 10}) == {"a": 11}
    assert run(replacement, 6, {"a": 100, "b": 100}) == {"a": 111, "b": 101}
    after_6 = stored(client, "a", "b")
    assert after_6 == ([b"[6,111]", b"[6,101]"] if kind == "transactional" else [b"[6,111,11]", b"[6,101,1]"])

    with pytest.raises(FailedException) as refused:
        zombie.multi_update([["a"]], [Add(10)])  # an opaque map writes here
        zombie.commit(5)  # a transactional one here
    message = str(refused.value)
    assert "wrote txid 6 already" in message and "this write of txid 5 is refused" in message
    assert "stale copy of the task" in message
    # on Spark's engine (one copy, in the driver) the cause is a checkpoint that went back
    assert "on Spark's engine, from a query whose checkpoint is behind this state" in message
    assert "'$squall-redis-map-state/0-of-1'" in message and "127.0.0.1" in message
    assert "s3cret-pw" not in message and ":***@" in message
    assert stored(client, "a", "b") == after_6
    assert client.hgetall(TXIDS) == {b"wc": b"6"}

    # the replacement's own replay of txid 6 passes (a fresh copy of it: its cache dropped), and
    # it goes on exact
    assert run(f.make_state(CONF, None, 0, 1), 6, {"a": 100, "b": 100}) == {"a": 111, "b": 101}
    assert stored(client, "a", "b") == after_6
    assert run(replacement, 7, {"a": 1000}) == {"a": 1111}


@pytest.mark.parametrize("data_type", ["string", "hash"])
@pytest.mark.parametrize("zombie_first", [False, True])
def test_an_opaque_zombie_at_its_replacements_txid_with_another_prev_is_refused(redis_server, zombie_first, data_type):
    """The zombie committed its version of txid 2 (10 records of "a") and was taken for dead
    before the coordinator heard; the replacement replayed txid 2 (an opaque spout's replay: 20
    records). Then both run txid 3 (100), the zombie from its cache, which holds its own txid 2
    (11, prev 1). Its txid is not below the partition's last, so only the prev tells it apart.
    Before, its write went in: written last, "a" ended at 111 (its 10 counted, the replay's 20
    lost); written first, Redis held 111 until the replacement's write. Now it is refused, and
    "a" is 1 + 20 + 100 throughout."""
    client = redis.Redis.from_url(redis_server.url)
    f = RedisMapState.opaque(redis_server.url, Options(data_type=data_type, hash_key="counts"))

    def a():
        return client.hget("counts", "a") if data_type == "hash" else client.get("a")

    assert run(f.make_state(CONF, None, 0, 1), 1, {"a": 1}) == {"a": 1}
    zombie = f.make_state(CONF, None, 0, 1)
    assert run(zombie, 2, {"a": 10}) == {"a": 11}
    replacement = f.make_state(CONF, None, 0, 1)
    assert run(replacement, 2, {"a": 20}) == {"a": 21}  # the replay, from prev 1
    stale = pytest.raises(FailedException, match=r"txid 3 at (key|field) 'a'.* was computed from prev 11 but Redis "
                                                 r"holds 21 before txid 3.*stale copy of the task")
    if zombie_first:
        with stale:
            run(zombie, 3, {"a": 100})
        assert a() == b"[2,21,1]"
        assert run(replacement, 3, {"a": 100}) == {"a": 121}
    else:
        assert run(replacement, 3, {"a": 100}) == {"a": 121}
        with stale:
            run(zombie, 3, {"a": 100})
    assert a() == b"[3,121,21]"
    assert run(replacement, 3, {"a": 100}) == {"a": 121}  # its own replay of txid 3: from prev 21
    assert a() == b"[3,121,21]"
    assert run(zombie, 4, {"a": 1000}) == {"a": 1121}  # after its failure, it reads Redis again


class BoltContext:
    """What `txids_field` asks of a task's `TopologyContext`: the id of the bolt holding the state."""

    def __init__(self, component):
        self.component = component

    def get_this_component_id(self):
        return self.component


def test_another_topology_another_stream_and_a_non_transactional_state_are_not_taken_for_stale_copies(
        redis_server):
    """The partition's last txid is kept per topology name and bolt, as Trident numbers batches
    per topology name and per coordinator: a second topology writing the same keys (its txids
    from 1) is not refused, nor a state of another stream of the topology with its own
    coordinator (its txids behind) that shares the marker (the same Options), whose every batch
    a record per topology refused, for good. A non-transactional state is unchanged: nothing
    checked, nothing kept."""
    client = redis.Redis.from_url(redis_server.url)
    f = RedisMapState.transactional(redis_server.url)
    for txid in (1, 2, 3):
        run(f.make_state({"topology.name": "one"}, None, 0, 1), txid, {"a": 1})
    assert run(f.make_state({"topology.name": "two"}, None, 0, 1), 1, {"a": 10}) == {"a": 13}
    assert client.hgetall(TXIDS) == {b"one": b"3", b"two": b"1"}
    client.delete(TXIDS)

    words, users = BoltContext("b-0-words"), BoltContext("b-1-users")
    for txid in (1, 2, 3):
        run(f.make_state(CONF, words, 0, 1), txid, {"the": 1})
    assert run(f.make_state(CONF, users, 0, 1), 1, {"ann": 1}) == {"ann": 1}
    assert client.hgetall(TXIDS) == {b"wc/b-0-words": b"3", b"wc/b-1-users": b"1"}
    with pytest.raises(FailedException, match=r"\(writer 'wc/b-0-words'\) wrote txid 3 already"):
        run(f.make_state(CONF, words, 0, 1), 2, {"the": 1})  # a stale copy of the words' task

    # an opaque value a later txid wrote (another topology's) is not overwritten from a task's
    # cache, as Storm's OpaqueValue refuses it when read
    o = RedisMapState.opaque(redis_server.url)
    one = o.make_state({"topology.name": "one"}, None, 0, 1)
    run(one, 4, {"b": 1})
    run(o.make_state({"topology.name": "two"}, None, 0, 1), 7, {"b": 10})
    with pytest.raises(FailedException, match="key 'b' was written by txid 7, later than this write's txid 5"):
        run(one, 5, {"b": 1})
    assert client.get("b") == b"[7,11,1]"

    n = RedisMapState.non_transactional(redis_server.url)
    client.delete(TXIDS)
    run(n.make_state(CONF, None, 0, 1), 5, {"x": 1})
    assert run(n.make_state(CONF, None, 0, 1), 4, {"x": 1}) == {"x": 2}  # at-least-once, as ever
    assert client.exists(TXIDS) == 0


class OnCluster(BoltContext):
    """A task's context (bolt "b-0" of topology "wc") on a cluster whose transactional state,
    where Trident numbers the topology's batches and the state keeps its epoch, goes with it: a
    LocalCluster's."""

    def __init__(self):
        super().__init__("b-0")
        self.transactional_home = MemoryBackend()

    def transactional_state(self, name):
        return MemoryTransactionalState(self.transactional_home, "wc", name)


class AddWhileFrozen(Add):
    """`Add`, after ``meanwhile()`` ran: its task read the stored value, then stood still (its
    machine hung) while ``meanwhile`` happened."""

    def __init__(self, n, meanwhile):
        super().__init__(n)
        self.meanwhile = meanwhile

    def update(self, stored):
        self.meanwhile()
        return super().update(stored)


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_topology_run_again_on_another_cluster_counts_the_keys_its_last_run_left_and_a_stale_copy_is_still_refused(
        redis_server, kind):
    """Run 1 on one cluster wrote txids 1-3 ("once" at txid 2); run 2 on another numbers from 1
    again (another epoch). Before, a value's txid was taken for run 2's: a transactional state
    took run 1's "once" of txid 2 for run 2's own replay of txid 2 and skipped it (the count
    lost), an opaque one refused "a" of txid 3 at run 2's txid 1, for good ("Current batch (1) is
    behind state's batch"). Now the partition is renumbered at run 2's first write, and a value
    above what run 2 wrote is read as of no txid: every count goes on; run 2's own replay of
    txid 2 is one (transactional: not counted again; opaque: from prev), and a stale copy of run
    2's task (its epoch) is refused as before."""
    client = redis.Redis.from_url(redis_server.url)
    f = getattr(RedisMapState, kind)(redis_server.url)
    run1, run2 = OnCluster(), OnCluster()
    for txid, counts in enumerate([{"a": 1, "b": 1}, {"a": 1, "once": 1}, {"a": 1}], 1):
        run(f.make_state(CONF, run1, 0, 1), txid, counts)
    task = f.make_state(CONF, run2, 0, 1)
    assert run(task, 1, {"a": 10}) == {"a": 13}
    assert run(task, 2, {"a": 10, "once": 10}) == {"a": 23, "once": 11}
    replay = {"a": 10, "once": 10} if kind == "transactional" else {"a": 20, "once": 20}  # an opaque replay may differ
    assert run(f.make_state(CONF, run2, 0, 1), 2, replay) == (
        {"a": 23, "once": 11} if kind == "transactional" else {"a": 33, "once": 21})
    txid, epoch, renumbered = client.hget(TXIDS, "wc/b-0").split()
    assert (txid, renumbered) == (b"2", b"renumbered") and len(epoch) == 16

    zombie = f.make_state(CONF, run2, 0, 1)
    zombie.begin_commit(3)

    def replaced():
        run(f.make_state(CONF, run2, 0, 1), 3, {"b": 100})
        run(f.make_state(CONF, run2, 0, 1), 4, {"a": 1000})

    with pytest.raises(FailedException, match="wrote txid 4 already.*this write of txid 3 is refused"):
        zombie.multi_update([["b"]], [AddWhileFrozen(10, replaced)])  # an opaque map writes here
        zombie.commit(3)  # a transactional one here
    counts = [json.loads(v)[1] for v in stored(client, "a", "b", "once")]
    assert counts == ([1023, 101, 11] if kind == "transactional" else [1033, 101, 21])
