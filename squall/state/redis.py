"""`RedisKeyValueStateProvider`: states in a Redis server (storm-redis's ``RedisKeyValueState``).

Storm's layout, under a prefix of the topology's name (``<topology>/<namespace>``, so two
topologies never share a state and a resubmitted one finds its own): the hash ``<ns>`` holds the
committed entries, ``<ns>$prepare`` the prepared transaction (a deleted key is an empty value),
``<ns>$txid`` the fields ``commit`` and ``prepare``. A commit is one MULTI/EXEC. Every value
carries an HMAC under the cluster's secret bound to its namespace and key, checked before it is
decoded: a value in Redis is hostile until then (it may be a pickle). LocalCluster's secret is
``squall.secret`` when set, else one of its own, so what one LocalCluster wrote is not read back
by another unless both set ``squall.secret``.

``topology.state.provider.config``: ``{"url": "redis://host:port/db"}`` (a password in the URL
is never logged), or Storm's ``{"jedisPoolConfig": {"host", "port", "database", "password",
"timeout"}}`` (the password as it is: any character). A setting it does not know is refused, as
Storm's (Jackson) parsing refuses it; ``jedisClusterConfig`` (Redis Cluster) is refused by
name; Storm's ``keyClass``, ``valueClass`` and serializer classes are accepted and unused. Needs
the ``redis`` extra; only this module imports it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import redis

from .._redact import redact_text
from .._worker_resources import LAUNCH, LaunchView
from ._api import KeyValueState, StateError, StateProvider
from ._kv import Changes, StateCodec, TransactionalKeyValueState
from ._names import PROVIDER_CONFIG_KEY, owner_of, provider_config, state_home, topology_of

if TYPE_CHECKING:
    from .._context import TopologyContext

_TAG = 32
_TOMBSTONE = b""
_WRITER = b"writer"  # the field of <ns>$txid naming the worker that wrote the state last
_RUN = b"writer_run"  # and the storm id of its topology's submission (launch ids count per submission)


_LAST_RUN = b"$last"  # the field of <topology>/$runs counting the submissions seen (not a storm id)


class StateFenced(StateError):
    """A worker the master replaced (a zombie) tried to write a state another worker took over."""


class RedisStore:
    """A `squall.state._kv.StateStore` in Redis; see the module docstring."""

    def __init__(self, client: redis.Redis, namespace: str, key: bytes, where: str,
                 launch: LaunchView | None = None, owner: str = "", run: str = "",
                 runs_key: bytes = b"") -> None:
        """``launch``: the worker's `LaunchView`, to fence writes by (None: none, as on a
        `LocalCluster`); ``owner``: the state's task, for the message of a write refused;
        ``run``: the storm id of the topology's submission the worker runs ("": unknown);
        ``runs_key``: the hash ``<topology>/$runs`` ordering the topology's submissions
        (`_my_order`; ``b""``: the namespace's own ``<ns>$runs``)."""
        self.client = client
        self.ns = namespace.encode()
        self._key = key
        self.where = where
        self.launch = launch
        self.owner = owner
        self.run = run
        self._runs = runs_key or self.ns + b"$runs"
        self._order: int | None = None  # this submission's place in `_runs` (`_my_order`)
        self._fenced: str | None = None  # why this worker may no longer write here (for good)

    def _mac(self, hash_name: bytes, field: bytes, value: bytes) -> bytes:
        return hmac.new(self._key, b"%d:%s%d:%s" % (len(hash_name), hash_name, len(field), field) + value,
                        hashlib.sha256).digest()

    def _sealed(self, field: bytes, value: bytes | None) -> bytes:
        v = _TOMBSTONE if value is None else b"v" + value
        return self._mac(self.ns, field, v) + v

    def _opened(self, field: bytes, data: bytes) -> bytes | None:
        tag, v = data[:_TAG], data[_TAG:]
        if len(tag) != _TAG or not hmac.compare_digest(tag, self._mac(self.ns, field, v)):
            raise StateError(f"a state value in Redis at {self.where} (hash {self.ns.decode(errors='replace')!r}) "
                             f"fails its MAC: written by something else, or under another secret (squall.secret)")
        return None if v == _TOMBSTONE else v[1:]

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except redis.RedisError as e:
            raise StateError(f"Redis at {self.where} failed to {what} state {self.ns.decode(errors='replace')!r}: "
                             f"{type(e).__name__}: {e}") from e

    def get(self, key: bytes) -> bytes | None:
        """`StateStore.get`: ``key``'s committed value, its MAC checked. Raises `StateError` if the MAC
        fails or Redis does (as every method here)."""
        data = self._call("read", self.client.hget, self.ns, key)
        return None if data is None else self._opened(key, data)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """`StateStore.items`: the committed entries, the hash read whole (HSCAN) before any is yielded,
        each MAC checked."""
        for k, data in self._call("read", lambda: list(self.client.hscan_iter(self.ns, count=100))):
            v = self._opened(k, data)
            if v is not None:
                yield k, v

    def keys(self) -> list[bytes]:
        """`StateStore.keys`: the fields of the hash ``<ns>``, no MACs checked. Read by HSCAN, as
        `items` reads: HKEYS answers a hash of millions of fields in one command, which holds
        every other client of the server (other tasks' states, other topologies) until it ends.
        A field may come twice (HSCAN's guarantee), none is missed."""
        return self._call("read", lambda: [k for k, _v in self.client.hscan_iter(self.ns, count=1000)])

    def checked(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """`StateStore.checked`: HMGET of 1,000 fields at a time; a value that fails its MAC is
        left out (a `get` of it raises `StateError`), a tombstone is none."""
        out: dict[bytes, bytes] = {}
        for at in range(0, len(keys), 1000):
            batch = list(keys[at:at + 1000])
            for k, data in zip(batch, self._call("read", self.client.hmget, self.ns, batch)):
                if data is None:
                    continue
                try:
                    v = self._opened(k, data)
                except StateError:
                    continue
                if v is not None:
                    out[k] = v
        return out

    def txids(self) -> tuple[int | None, int | None]:
        """`StateStore.txids`: the ``commit`` and ``prepare`` fields of ``<ns>$txid``."""
        c, p = self._call("read", self.client.hmget, self.ns + b"$txid", [b"commit", b"prepare"])
        return self._txid(b"commit", c), self._txid(b"prepare", p)

    def _txid(self, field: bytes, raw: bytes | None) -> int | None:
        if raw is None:
            return None
        try:
            return int(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise StateError(f"the state txids in Redis at {self.where} (hash "
                             f"{(self.ns + b'$txid').decode(errors='replace')!r}, field {field.decode()!r}) are "
                             f"not squall's ({raw[:40]!r}): written by something else; delete the keys "
                             f"{self.ns.decode(errors='replace')!r}* to start this state afresh") from None

    def prepared(self) -> Changes:
        """`StateStore.prepared`: the hash ``<ns>$prepare``, each MAC checked (a tombstone is None:
        a delete)."""
        raw = self._call("read", self.client.hgetall, self.ns + b"$prepare")
        return {k: self._opened(k, v) for k, v in raw.items()}

    def _write(self, what: str, queue: Callable[[Any], None]) -> None:
        """Queue a write with ``queue(pipeline)`` and run it in one MULTI/EXEC, fenced: where
        the worker lends a `LaunchView`, the field ``writer`` of ``<ns>$txid`` names the worker
        that wrote the state last (`LaunchView.token`), and the write goes only if that is this
        worker, none, or a launch this worker knows the master replaced (then this worker
        takes the state over); the field ``writer_run`` names the writer's submission of the
        topology, whose launches a later submission's workers cannot know (`_refused`). Otherwise this worker is the replaced one (cut off from the
        master while its tasks moved elsewhere: a zombie): `StateFenced`, and nothing is
        written, so it can neither roll back nor overwrite what the task's new copy prepared.
        A launch once replaced stays replaced: later writes are refused at once, with no round
        trip (its checkpoint spout retries a failed rollback at once, for as long as the cut
        lasts)."""
        if self._fenced is not None:
            raise StateFenced(self._fenced)
        launch = self.launch
        if launch is None:
            def run() -> None:
                p = self.client.pipeline(transaction=True)
                queue(p)
                p.execute()
            self._call(what, run)
            return
        me = launch.token
        txid_key = self.ns + b"$txid"

        def fenced() -> None:
            if self.run:
                self._my_order()  # the submission takes its place before its first write
            with self.client.pipeline(transaction=True) as p:
                while True:
                    try:
                        p.watch(txid_key)
                        raw, raw_run = p.hmget(txid_key, [_WRITER, _RUN])
                        writer = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                        run = raw_run.decode(errors="replace") if isinstance(raw_run, bytes) else raw_run
                        later = (run is not None and bool(self.run) and run != self.run
                                 and self._place(p.hget(self._runs, run)) > self._my_order())
                        why = self._refused(writer, run or "", later)
                        if why is not None:
                            self._fenced = why
                            raise StateFenced(why)
                        p.multi()
                        queue(p)
                        if writer != me or (self.run and run != self.run):
                            p.hset(txid_key, mapping={_WRITER: me, _RUN: self.run})
                        p.execute()
                        return
                    except redis.WatchError:
                        continue  # another write came between: look again
        self._call(what, fenced)

    def _my_order(self) -> int:
        """This worker's submission's place among the topology's submissions: the hash
        ``<topology>/$runs`` maps each storm id to the count (its field ``$last``) when a worker
        of that submission first opened or wrote one of the topology's Redis states, kept for
        good (`HSETNX`: every worker of a submission gets the first one's place). A later
        submission's workers start after the kill of an earlier one, so they come later, whatever
        the storm ids say: the master's clock may lag (Nimbus HA) or be set back, and a cluster
        whose ``storm.local.dir`` was wiped counts its storm ids afresh. (A worker of the killed
        submission that first opens a state only after the next submission's did, cut off from
        the master all along, would take the next one's place.) Read once."""
        if self._order is None:
            raw = self.client.hget(self._runs, self.run)
            if raw is None:
                n = self.client.hincrby(self._runs, _LAST_RUN, 1)
                self.client.hsetnx(self._runs, self.run, n)
                raw = self.client.hget(self._runs, self.run)
            self._order = self._place(raw)
        return self._order

    @staticmethod
    def _place(raw: Any) -> int:
        """A place `_my_order` keeps; 0 for none (a writer of a squall before it: earlier)."""
        try:
            return int(raw)
        except (TypeError, ValueError):
            return 0

    def _refused(self, writer: str | None, run: str, later: bool) -> str | None:
        """Why this worker may not write over the last writer ``writer`` of submission ``run``
        ("": not recorded), None if it may. Launch ids count afresh in each submission of a
        topology (a slot's first launch is 1), and a topology resubmitted under its name finds
        its states: a writer of another submission is taken over, unless that submission is
        the ``later`` one (`_my_order`: this worker is then a killed or replaced submission's, cut
        off from the master); within one submission, the launch table tells
        (`LaunchView.replaced`)."""
        launch = self.launch
        if writer is None or launch is None:
            return None
        if self.run and run != self.run:
            if not later:
                return None
            return (f"{self.owner or 'a state'}: this worker ({launch.slot}, launch {launch.launch_id}) of "
                    f"submission {self.run} may no longer write state {self.ns.decode(errors='replace')!r} in "
                    f"Redis at {self.where}: the topology's later submission {run} (worker "
                    f"{writer.replace('#', ', launch ')}) took it over. This worker's submission was killed or "
                    f"replaced while its machine was cut off from the master; it stops once it reaches the "
                    f"master again. Nothing was written")
        if writer == launch.token or launch.replaced(writer):
            return None
        return (f"{self.owner or 'a state'}: this worker ({launch.slot}, launch {launch.launch_id}) "
                f"may no longer write state {self.ns.decode(errors='replace')!r} in Redis at "
                f"{self.where}: the worker {writer.replace('#', ', launch ')} took it over, a "
                f"launch newer than this worker knows of. The master replaced this worker "
                f"(its machine was cut off from the master, and its tasks moved elsewhere); "
                f"it stops once it reaches the master again. Nothing was written")

    def claim(self) -> None:
        """Take the state over as `_write` would, writing nothing else: done when the state is
        opened, so that from then on a replaced worker's writes are refused, before this one
        reads what it starts from (the checkpoint spout reads its saved step back at its next
        save, and took a zombie's write in between for a store that lost its state). A worker
        that is itself replaced is only marked fenced here: its writes are refused, its reads
        go on."""
        if self.launch is None:
            return
        try:
            self._write("claim", lambda p: None)
        except StateFenced:
            pass

    def prepare(self, txid: int, changes: Changes) -> None:
        """`StateStore.prepare`: replace ``<ns>$prepare`` with ``changes`` and set the ``prepare`` txid,
        in one MULTI/EXEC (fenced: `_write`)."""
        def queue(p: Any) -> None:
            p.delete(self.ns + b"$prepare")
            if changes:
                p.hset(self.ns + b"$prepare", mapping={k: self._sealed(k, v) for k, v in changes.items()})
            p.hset(self.ns + b"$txid", b"prepare", str(txid))
        self._write("prepare", queue)

    def commit(self, txid: int) -> None:
        """`StateStore.commit`: write the prepared changes into ``<ns>``, set ``commit`` to ``txid`` and
        drop the prepared transaction, in one MULTI/EXEC (fenced: `_write`)."""
        changes = self.prepared()

        def queue(p: Any) -> None:
            self._queue(p, changes)
            p.hset(self.ns + b"$txid", b"commit", str(txid))
            p.hdel(self.ns + b"$txid", b"prepare")
            p.delete(self.ns + b"$prepare")
        self._write("commit", queue)

    def _queue(self, p: Any, changes: Changes) -> None:
        puts = {k: self._sealed(k, v) for k, v in changes.items() if v is not None}
        dels = [k for k, v in changes.items() if v is None]
        if puts:
            p.hset(self.ns, mapping=puts)
        if dels:
            p.hdel(self.ns, *dels)

    def apply(self, changes: Changes) -> None:
        """`StateStore.apply`: write ``changes`` into ``<ns>`` at once, outside any state transaction
        (in one MULTI/EXEC, fenced: `_write`)."""
        self._write("write", lambda p: self._queue(p, changes))

    def rollback(self) -> None:
        """`StateStore.rollback`: delete ``<ns>$prepare`` and the ``prepare`` txid, in one MULTI/EXEC
        (fenced: `_write`)."""
        def queue(p: Any) -> None:
            p.delete(self.ns + b"$prepare")
            p.hdel(self.ns + b"$txid", b"prepare")
        self._write("roll back", queue)


_KNOWN = {"url", "timeout", "jedisPoolConfig", "jedisClusterConfig",
          "keyClass", "valueClass", "keySerializerClass", "valueSerializerClass"}  # Storm's StateConfig
_POOL = {"host", "port", "timeout", "database", "password"}  # Storm's JedisPoolConfig


def _url(cfg: dict[str, Any], owner: str) -> tuple[str, float]:
    """The Redis URL and socket timeout (s) ``topology.state.provider.config`` gives. Storm's
    Kryo settings (``keyClass``... ``valueSerializerClass``) are accepted and unused (squall's
    serializer is the topology's)."""
    where = f"{owner}: {PROVIDER_CONFIG_KEY!r}"
    unknown = sorted(str(k) for k in cfg if k not in _KNOWN)
    if unknown:
        raise StateError(f"{where} has unknown settings {unknown} for squall.state.redis:"
                         f"RedisKeyValueStateProvider (it takes \"url\" or \"jedisPoolConfig\")")
    if "jedisClusterConfig" in cfg:
        raise StateError(f"{where}: \"jedisClusterConfig\" (Redis Cluster) is not supported by "
                         f"squall.state.redis:RedisKeyValueStateProvider; give one server with \"url\" or "
                         f"\"jedisPoolConfig\"")
    if "url" in cfg:
        if not isinstance(cfg["url"], str):
            raise StateError(f"{where} \"url\" must be a string")
        return cfg["url"], _number(cfg.get("timeout", 2000), f"{where} \"timeout\"") / 1000.0
    pool = cfg.get("jedisPoolConfig") or {}
    if not isinstance(pool, dict):
        raise StateError(f"{where} \"jedisPoolConfig\" must be a map")
    unknown = sorted(str(k) for k in pool if k not in _POOL)
    if unknown:
        raise StateError(f"{where} \"jedisPoolConfig\" has unknown settings {unknown} (it takes "
                         f"{sorted(_POOL)})")
    host = pool.get("host", "localhost")
    if not isinstance(host, str) or not host or any(c in host for c in "/@?#[] "):
        raise StateError(f"{where} \"jedisPoolConfig\" \"host\" must be a host name or address, got {host!r}")
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    port = _integer(pool.get("port", 6379), f"{where} \"jedisPoolConfig\" \"port\"")
    database = _integer(pool.get("database", 0), f"{where} \"jedisPoolConfig\" \"database\"")
    password = pool.get("password")
    # the password as it is (Jedis takes any): %-quoted, so an "@", "/" or "#" in it is not read
    # as the URL's host or path (it went to the wrong server)
    auth = f":{quote(str(password), safe='')}@" if password else ""
    timeout = _number(pool.get("timeout", 2000), f"{where} \"jedisPoolConfig\" \"timeout\"")
    return f"redis://{auth}{host}:{port}/{database}", timeout / 1000.0


def _integer(value: Any, what: str) -> int:
    if type(value) is int or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    raise StateError(f"{what} must be a whole number, got {value!r}")


def _number(value: Any, what: str) -> float:
    if type(value) in (int, float) and 0 < value < float("inf"):
        return float(value)
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            pass
        else:
            if 0 < f < float("inf"):
                return f
    raise StateError(f"{what} must be a positive number of milliseconds, got {value!r}")


class RedisKeyValueStateProvider(StateProvider):
    """States in Redis; see the module docstring."""

    @staticmethod
    def check_config(options: dict[str, Any], owner: str) -> None:
        """At submit: the settings `_url` reads (no connection is made), so a misspelt one is
        refused there rather than by every worker that makes a state."""
        _url(options, owner)

    def new_state(self, namespace: str, conf: dict[str, Any], context: TopologyContext | None) -> KeyValueState:
        owner = owner_of(namespace, context)
        url, timeout = _url(provider_config(conf, owner), owner)
        where = redact_text(url)
        try:
            client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
            client.ping()
        except (redis.RedisError, ValueError) as e:
            raise StateError(f"{owner}: the state provider squall.state.redis:RedisKeyValueStateProvider cannot "
                             f"reach Redis at {where} ({PROVIDER_CONFIG_KEY}): {type(e).__name__}: {e}") from None
        key = state_home(context).key
        if key is None:
            raise StateError(f"{owner}: no cluster secret to authenticate state values in Redis with (a state "
                             f"made outside a cluster needs a StateHome with a secret)")
        resources = getattr(context, "worker_resources", None)
        launch = resources.get_or_make(LAUNCH, lambda: None) if resources is not None else None
        get_run = getattr(context, "get_storm_id", None)
        run = get_run() if callable(get_run) else ""
        topology = topology_of(conf)
        store = RedisStore(client, f"{topology}/{namespace}", key, where,
                           launch if isinstance(launch, LaunchView) else None, owner,
                           run if isinstance(run, str) else "", f"{topology}/$runs".encode())
        store.claim()
        return TransactionalKeyValueState(store, StateCodec(conf, owner))

