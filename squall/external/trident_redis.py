"""`RedisMapState`: Trident map states in Redis (storm-redis's ``trident.state.RedisMapState``).

``RedisMapState.transactional(url)``, ``.opaque(url)`` and ``.non_transactional(url)`` are
`StateFactory`s for ``persistent_aggregate`` and ``state_query``: each task's state is
``SnapshottableMap(<Transactional|Opaque|NonTransactional>Map(CachedMap(RedisMapState)))``, as
storm-redis builds it. A key (the group's values) becomes one Redis key (STRING, ``MGET``/``MSET``)
or one field of a hash (HASH, ``HMGET``/``HSET``), through a `KeyFactory`; the value is stored as
Storm's JSON serializers write it: ``[txid, val]`` (transactional), ``[curr_txid, curr, prev]``
(opaque), the plain value (non-transactional), so a Storm topology and a squall one can share the
keys. A key a squall from before 2026-12-07 named otherwise (``[3.0]``, ``[true]``: before 1, 1.0
and True were one key, ``[1]``) is read at that name, in the same round trip, where its own holds
nothing, and moved to its own by its next write (`KeyFactory.old_names`, `RedisMapState._pick`).

What is read back from Redis is hostile until checked: values are JSON (never pickle, so reading
one runs no code), and a value that is not what the state type stores raises
`RedisMapStateError` naming the Redis key and the server. The password in the URL is never
logged: errors and ``repr`` show the URL masked. A server that is down or times out fails the
batch (`squall.ReportedFailedException`: the error, naming the server, is shown in the topology's
errors and the worker log), which Trident replays with the same txid.

A transactional or opaque state refuses a write from a stale copy of its task (a zombie: its
worker taken for dead on a machine that hung or lost the master, which resumed after the task
that replaced it replayed its batch and committed it, and maybe later ones), whose values were
read before those writes and would put their counts back, nothing failing. The check is made by
the write's own script, atomically, in the same round trip (`_WRITE`): beside its marker
(`MARKER`) each partition keeps the last txid it wrote, per topology name and bolt (`txids_key`:
Trident's txids are per topology name and coordinator), and a write of a lower txid of the same
numbering (`txids_epoch`: not a topology run again on another LocalCluster) is refused, as is an
opaque write
whose ``prev`` is not what Redis holds before its txid (the key's ``curr``, or its ``prev`` where
the key is at this very txid; nothing for a key absent), built on what the replacement's replay
replaced. The refusal fails the batch (`squall.ReportedFailedException` naming the partition's
marker, the key, the server and the stale copy); the task drops its cache, so its replay reads
Redis again. A replay of the same txid by the live task passes; values keep Storm's forms. The
prev is checked with Storm's JSON serializer only (the script reads the values with ``cjson``; a
custom serializer gets the txid check alone), and an absent key is not checked when
``expire_interval_secs`` is set (it may have expired). Non-transactional states check nothing.
Not told apart from a replay: a zombie's opaque write at the partition's last txid built on the
same ``prev`` as its replacement's (both read Redis before either wrote), as with Delta.

The numbering of the txids (`squall.external._trident_map`, as `DeltaMapState` does): Trident
numbers a topology's batches in its transactional state, and where that is gone (the same
topology run again on another LocalCluster; a store wiped) they start from 1 again. The field
of the partition's last txid holds ``<txid> <epoch>``; a last txid of another epoch refuses
nothing, and the first write of an epoch over another's, or into a partition with no last txid
(a run with another parallelism, whose keys another partition wrote), adds `RENUMBERED`
(``<txid> <epoch> renumbered``, kept by the epoch's later writes). A value says no epoch and keeps its txid until
its key is written again: in a renumbered partition, one whose txid is above what this epoch
wrote there is an earlier numbering's, and is read (`RedisMapState.multi_get`) and checked (the
script) as of no txid, so the batch of that number applies to it, where a transactional state
took it for its own replay (the count lost) and an opaque one stalled on it as a later batch's.
A value at the epoch's last txid itself is this epoch's only if it wrote the key then: a
renumbered partition's writes keep those keys (`written_key`), which a replay of that txid reads
where the set says it was begun at that txid by this epoch (`written_begun`; an older squall's
writes kept no set, and their value is taken for this epoch's, as they took it).
A field with no epoch (written before squall kept them, or by a state with none) is taken as
this numbering's, its values read as they are.

Needs the ``redis`` extra (``pip install 'squall[redis]'``); only this module imports it.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from .._config import Config
from .._equal_keys import EQUAL_FORMS_LIMIT, canonical_key, equal_forms
from .._errors import ReportedFailedException, StoreUnavailableException
from .._redact import redact_text
from ..trident.state import IBackingMap, OpaqueValue, StateFactory, TransactionalValue
from ._trident_map import EpochClaim, Numbering, StateType, build_map_state, kept_epoch

log = logging.getLogger(__name__)

__all__ = [
    "DefaultKeyFactory", "JSONNonTransactionalSerializer", "JSONOpaqueSerializer",
    "JSONTransactionalSerializer", "KeyFactory", "Options", "RedisMapState", "RedisMapStateError",
    "RedisMapStateFactory", "Serializer", "StateType",
]


def call_or_fail_batch(who: str, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a Redis server away or slow fails the batch instead
    (`StoreUnavailableException` naming ``who`` and ``what``, credentials masked: shown in the
    topology's errors and the worker log, as throttled as any error), which Trident replays with
    the same txid once it is back; a DRPC request's batch is not replayed, its caller gets the
    failure."""
    try:
        return fn(*args, **kwargs)
    except (redis.ConnectionError, redis.TimeoutError) as e:
        # logged where it is reported (the executor's report_error, throttled: a replay a second)
        raise StoreUnavailableException(f"{who} could not {what}: {type(e).__name__}: {redact_text(str(e))} "
                                      f"(the batch fails: a stream's batch replays until it is back, a DRPC "
                                      f"request fails to its caller)") from None


MARKER = "$squall-redis-map-state"
"""The key (a string, the number of the partition's writes: ``1`` at its first, one more at each)
a `RedisMapState` writes with its first values and checks with each later read and write, in the
same round trip: a server that lost it (restarted empty, flushed) lost the values too, which the
state must not take for keys never written; one whose count went down since the task last read
or wrote it went back to an older copy (restarted from a snapshot older than its last writes),
whose values the state must not count on from either (`RedisMapState._went_back`). Each task of a
factory's state has its own, `marker_key` (this name, then the hash's name for a hash, and the
partition): one shared by every task was written afresh by the first write after the loss of a
task that had written nothing before, and the others took their lost keys for keys never
written. A `RedisMapState` made by hand has this one."""


def marker_key(options: Options, partition_index: int, num_partitions: int) -> str:
    """The marker of partition ``partition_index`` of ``num_partitions`` of a map state with
    ``options`` (`MARKER`)."""
    hash_part = f"/{options.hash_key}" if options.data_type == "hash" else ""
    return f"{MARKER}{hash_part}/{partition_index}-of-{num_partitions}"


def txids_key(marker: str) -> str:
    """The hash beside a partition's marker (`marker_key`) that holds the last txid a
    transactional or opaque state of that partition wrote, a field per writer (`txids_field`), as
    Trident's txids are per topology name (one submitted again under its name goes on from its
    txids, another starts from 1) and per coordinator (two unconnected streams of a topology
    number their batches each on its own, and their states may share a marker). Only squall
    writes it; a Storm topology sharing the keys neither reads nor writes it."""
    return f"{marker}/txids"


def txids_field(conf: dict, context: Any) -> str:
    """A state's field in its partition's txids hash (`txids_key`): ``<topology name>/<component
    id>`` (the bolt that holds the state, whose batches one coordinator numbers), the name alone
    where the task's context is not a `TopologyContext` (a state made outside a topology)."""
    name = conf.get(Config.TOPOLOGY_NAME) or ""
    component = getattr(context, "get_this_component_id", None)
    return f"{name}/{component()}" if callable(component) else name


def written_key(marker: str, field: str) -> str:
    """The set beside a partition's txids hash (`txids_key`) of the keys (their Redis names)
    that the writer ``field`` (`txids_field`) wrote at its last txid, kept by a renumbered
    partition's writes (`RENUMBERED`) only, emptied when a later txid is written: a replay of
    that txid tells by it its own earlier attempt's value from an earlier numbering's of the
    same txid (`Numbering.asks`), which carries no epoch of its own. At most one batch's keys,
    and the member `written_begun` that says of which txid and epoch they are."""
    return f"{txids_key(marker)}/{field}/written"


def written_begun(txid: int | str, epoch: str) -> str:
    """The member of the written set (`written_key`) that says it was begun (emptied) by the
    write of batch ``txid`` of epoch ``epoch`` (`txids_epoch`), so that it names every key the
    epoch wrote at that txid. Without it the set says nothing: a squall from before the set (or
    before this member) wrote that txid and kept none, and a value of it not in the set is this
    epoch's own write all the same (its replay would count it twice: 40 of 35 records after an
    upgrade). A NUL byte begins it, as no key name of words or numbers does."""
    return f"\0begun {txid} {epoch}"


TXIDS_EPOCHS = "redis-map-state"
"""The topology's transactional state (`squall.TopologyContext.transactional_state`) that keeps
the numbering of each partition's txids (`txids_epoch`)."""


def txids_epoch(context: Any, state_type: StateType, partition_index: int, num_partitions: int,
                options: Options, claim: EpochClaim | None = None) -> str:
    """Which numbering of Trident's txids a partition's state writes
    (`squall.external._trident_map.kept_epoch`, under `TXIDS_EPOCHS`): a random token, a new one
    when the topology's transactional state is gone (a LocalCluster's lives in its process: the
    same topology run again, its txids from 1, must not be taken for a stale copy of the last
    run's task), where a stale copy of a task shares its replacement's; two first copies racing
    agree through ``claim`` (`RedisEpochClaim`). Its txids hash (`txids_key`) keeps it beside the
    last txid, and a last txid of another numbering refuses nothing. "" (not kept, every last
    txid compared, as with none) for a non-transactional state, or a task whose host lends no
    transactional state (a state made outside a topology)."""
    epoch = kept_epoch(context, state_type, TXIDS_EPOCHS, marker_key(options, partition_index, num_partitions),
                       lambda: secrets.token_hex(8), lambda e: isinstance(e, str), claim)
    return "" if epoch is None else str(epoch)


_REPLACE_CLAIM = """
local held = redis.call('GET', KEYS[1])
if (held == false and ARGV[1] == '') or held == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
"""`RedisEpochClaim.replace`: ``SET KEYS[1] ARGV[2]`` if the key holds ``ARGV[1]`` ("": absent)."""


@dataclass
class RedisEpochClaim:
    """The epoch the first copies of a partition's task agreed on, in Redis (`EpochClaim`,
    `kept_epoch`): the key ``<txids key>/<field>/epoch`` (`txids_key`, `txids_field`), replaced
    by a script only if it still holds what was read."""

    client: redis.Redis
    key: str
    where: str

    def held(self) -> str | None:
        """The claimed epoch (None: none)."""
        raw = call_or_fail_batch(f"Redis map state at {self.where}", "read its epoch", self.client.get, self.key)
        return None if raw is None else raw.decode("ascii", "replace")

    def replace(self, held: str | None, epoch: str) -> bool:
        """Claim ``epoch`` if the key still holds ``held``."""
        done = call_or_fail_batch(f"Redis map state at {self.where}", "claim its epoch", self.client.eval,
                                  _REPLACE_CLAIM, 1, self.key, held or "", epoch)
        return bool(done)


RENUMBERED = "renumbered"
"""After ``<txid> <epoch>`` in a partition's txids hash (`txids_key`): this epoch's first write
found the partition's last txid of another epoch, so that the partition's values may hold txids
of that earlier numbering (`Numbering.txid`, `RedisMapState._numbering`). Kept by each later
write of the epoch."""


def _stored_txid(value: Any) -> int | None:
    """The txid a stored value carries (None: none, or a custom serializer's own type)."""
    if isinstance(value, TransactionalValue):
        return value.txid
    if isinstance(value, OpaqueValue):
        return value.curr_txid
    return None


def _renumbered(value: Any, numbering: Numbering, written: bool | None = None) -> Any:
    """``value`` as read in a renumbered partition: of no txid where its txid is an earlier
    numbering's (`Numbering.txid`; ``written``: whether this epoch wrote its key at its last
    txid, None not asked), so that the batch of that number applies to it; a value of a custom
    serializer's own type as it is."""
    if isinstance(value, TransactionalValue) and numbering.txid(value.txid, written) != value.txid:
        return TransactionalValue(None, value.val)
    if isinstance(value, OpaqueValue) and numbering.txid(value.curr_txid, written) != value.curr_txid:
        return OpaqueValue(None, value.curr, value.prev)
    return value


_WRITE = """
-- the marker counts the partition's writes (`MARKER`): fewer than this task saw means the server
-- went back to an older copy of them
local held = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if not held then return 0 end
  if (tonumber(held) or 0) < tonumber(ARGV[8]) then return {'behind', held} end
end
local hash, expire, txid, epoch = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[7]
local renumbered, mine, begun = false, nil, false
-- the keys: name, value, the number of its old names, the old names (`KeyFactory.old_names`)
local entries, i = {}, 9
while i <= #ARGV do
  local n = tonumber(ARGV[i + 2])
  local olds = {}
  for j = 1, n do olds[j] = ARGV[i + 2 + j] end
  entries[#entries + 1] = {ARGV[i], ARGV[i + 1], olds}
  i = i + 3 + n
end
local function read(name)
  local v
  if hash ~= '' then v = redis.pcall('HGET', hash, name) else v = redis.pcall('GET', name) end
  if type(v) == 'table' then return false end
  return v
end
if txid then
  local last, at, wrote, flag = redis.call('HGET', KEYS[2], ARGV[5]), nil, '', ''
  if last then at, wrote, flag = string.match(last, '^(%d+) ?(%S*) ?(%S*)$') end
  -- `Numbering.of`: another numbering of the txids (epoch: `txids_epoch`) says nothing of this
  -- one's; none recorded, or none of this state's, is taken for this one
  local ours = not at or wrote == '' or epoch == '' or wrote == epoch
  if ours and at and tonumber(at) > txid then return {'txid', at} end
  -- a partition with no last txid holds nothing of its own (another parallelism's keys)
  renumbered = epoch ~= '' and (not ours or not at or flag == 'renumbered')
  if ours and at then mine = tonumber(at) end
  -- `written_begun`: the written set names this epoch's keys at `mine` only if begun there
  if renumbered and mine then
    begun = redis.call('SISMEMBER', KEYS[3], string.char(0) .. 'begun ' .. at .. ' ' .. epoch) == 1
  end
  if ARGV[6] == '1' then
    local function same(a, b)
      if type(a) ~= type(b) then return false end
      if type(a) ~= 'table' then return a == b end
      for k, v in pairs(a) do if not same(v, b[k]) then return false end end
      for k in pairs(b) do if a[k] == nil then return false end end
      return true
    end
    for _, e in ipairs(entries) do
      local name, place = e[1], e[1]
      -- where the key's name holds nothing, its value is the first old name's that holds one,
      -- as `RedisMapState.multi_get` read it
      local stored = read(name)
      if not stored then
        for _, old in ipairs(e[3]) do
          stored = read(old)
          if stored then place = old break end
        end
      end
      local before
      if stored then
        local ok, s = pcall(cjson.decode, stored)
        if not ok or type(s) ~= 'table' or #s ~= 3 then return {'bad', name, stored, place} end
        local at = s[1]
        if at ~= cjson.null and type(at) ~= 'number' then return {'bad', name, stored, place} end
        -- `Numbering.txid`: an earlier numbering's txid is no txid to this one's batches; at
        -- this epoch's last txid, a key it did not write then (`written_key`) is one
        if at ~= cjson.null and renumbered and (not mine or at > mine
            or (at == mine and begun and redis.call('SISMEMBER', KEYS[3], place) == 0)) then at = cjson.null end
        if at ~= cjson.null and at > txid then return {'ahead', name, stored, place} end
        if at == txid then before = s[3] else before = s[2] end
      elseif expire == 0 then
        before = cjson.null
      end
      if before ~= nil then
        local new = cjson.decode(e[2])
        if not same(new[3], before) then
          if stored then return {'prev', name, stored, place} end
          return {'prev', name}
        end
      end
    end
  end
end
local count = (held and tonumber(held) or 0) + 1
redis.call('SET', KEYS[1], count)
for _, e in ipairs(entries) do
  -- the key under its own name from now on: its old names go in the same write
  if hash ~= '' then
    redis.call('HSET', hash, e[1], e[2])
    if #e[3] > 0 then redis.call('HDEL', hash, unpack(e[3])) end
  else
    redis.call('SET', e[1], e[2])
    if expire > 0 then redis.call('EXPIRE', e[1], expire) end
    if #e[3] > 0 then redis.call('DEL', unpack(e[3])) end
  end
end
if txid then
  local mark = ARGV[4]
  if epoch ~= '' then mark = mark .. ' ' .. epoch end
  if renumbered then mark = mark .. ' renumbered' end
  redis.call('HSET', KEYS[2], ARGV[5], mark)
  if renumbered then
    if not mine or txid > mine then
      redis.call('DEL', KEYS[3])
      redis.call('SADD', KEYS[3], string.char(0) .. 'begun ' .. ARGV[4] .. ' ' .. epoch)
    end
    for _, e in ipairs(entries) do redis.call('SADD', KEYS[3], e[1]) end
  end
end
return count
"""
"""A map state's write, atomic as a script is, in one round trip: the marker checked; for a
transactional or opaque state's write in a batch, the batch's txid checked against what the
partition last wrote (`txids_key`), and for an opaque one each value's ``prev`` against what
Redis holds before that txid (a stale copy of the task refused, `RedisMapState._refused`); then
the marker's count of writes (`MARKER`) checked against the most this task saw and counted up, the
values and the partition's txid written, and in a renumbered
partition the keys written at that txid (`written_key`). ``KEYS``: the marker, the txids hash,
the written set. ``ARGV``: marker written already (``1``/``0``), hash key or "", expiry seconds,
the batch's txid ("": none, nothing checked: a non-transactional state, a write outside any
batch), the state's field in the txids hash (`txids_field`), ``1`` to check each value's ``prev`` (values in
Storm's JSON form, which the script reads with ``cjson``), the numbering of the txids (`txids_epoch`, ""
for none: kept as ``<txid> <epoch>``, and a last txid of another numbering checks nothing; from
an epoch's first write over another's, ``<txid> <epoch> renumbered`` (`RENUMBERED`), and a
value's txid above what the epoch wrote is checked as none, as `RedisMapState.multi_get` reads
it, and one equal to it where the key is not in the written set and the set was begun at that
txid, `written_begun`), then per key: its name, its value, the number of its old names
(`KeyFactory.old_names`: names an earlier squall gave it, read where its name holds nothing, as
`RedisMapState.multi_get` reads them, and removed by this write), those names. ``ARGV[8]``, before
the keys: the marker's count of writes this task saw last (`RedisMapState.seen_writes`).

Returns the marker's new count of writes (written; 1 or more), 0 (the marker is gone: nothing
written), ``[behind, <count>]`` (the marker counts fewer writes than this task saw: the server went
back to an older copy, `RedisMapState._went_back`; nothing written), or a refusal, nothing written:
``[txid, <last>]`` (the partition wrote a later txid), ``[ahead, name, stored, at]`` (the key holds
a later txid), ``[prev, name(, stored, at)]`` (the value's prev is not what Redis holds before the
txid; no ``stored``: the key is absent), ``[bad, name, stored, at]`` (a stored value the check cannot
read); ``at`` is the name the stored value was read at (the key's own or an old one). A key of another Redis type is taken for absent, as ``MGET`` reads it."""


class RedisMapStateError(ValueError):
    """A value in Redis that the map state cannot read, or a value or key it cannot write."""


class Serializer(Protocol):
    """Storm's ``trident.state.Serializer``: a stored value to bytes and back. ``deserialize``
    gets what Redis returned: it must check it and raise ``ValueError`` when it is not a value
    of the state's kind."""

    def serialize(self, value: Any) -> bytes:
        """The bytes stored for ``value``."""

    def deserialize(self, data: bytes) -> Any:
        """The value stored as ``data``; ``ValueError`` if ``data`` is not one."""


def _json(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise RedisMapStateError(f"a value of type {type(value).__name__} cannot be stored as JSON ({e}); "
                                 f"give the state a serializer (Options.serializer)") from None


def _parsed(data: bytes) -> Any:
    # json.loads is safe on hostile bytes (no code runs); errors are reported by the caller
    return json.loads(data.decode("utf-8"))


def _txid(raw: Any) -> int | None:
    # None: written outside any batch (a multi_put with no begin_commit), as the maps allow
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 0):
        raise ValueError(f"the txid is {type(raw).__name__}, not a non-negative integer")
    return raw


class JSONNonTransactionalSerializer:
    """Storm's ``JSONNonTransactionalSerializer``: the value as JSON."""

    def serialize(self, value: Any) -> bytes:
        """The JSON text of ``value``."""
        return _json(value)

    def deserialize(self, data: bytes) -> Any:
        """The value of JSON text ``data``."""
        return _parsed(data)


class JSONTransactionalSerializer:
    """Storm's ``JSONTransactionalSerializer``: a `TransactionalValue` as ``[txid, val]``."""

    def serialize(self, value: TransactionalValue) -> bytes:
        """``[txid, val]`` as JSON."""
        return _json([value.txid, value.val])

    def deserialize(self, data: bytes) -> TransactionalValue:
        """The `TransactionalValue` of ``[txid, val]``."""
        raw = _parsed(data)
        if not isinstance(raw, list) or len(raw) != 2:
            raise ValueError("not a JSON array [txid, val]")
        return TransactionalValue(_txid(raw[0]), raw[1])


class JSONOpaqueSerializer:
    """Storm's ``JSONOpaqueSerializer``: an `OpaqueValue` as ``[curr_txid, curr, prev]``."""

    def serialize(self, value: OpaqueValue) -> bytes:
        """``[curr_txid, curr, prev]`` as JSON."""
        return _json([value.curr_txid, value.curr, value.prev])

    def deserialize(self, data: bytes) -> OpaqueValue:
        """The `OpaqueValue` of ``[curr_txid, curr, prev]``."""
        raw = _parsed(data)
        if not isinstance(raw, list) or len(raw) != 3:
            raise ValueError("not a JSON array [curr_txid, curr, prev]")
        return OpaqueValue(_txid(raw[0]), raw[1], raw[2])


DEFAULT_SERIALIZERS: dict[StateType, Callable[[], Serializer]] = {
    StateType.NON_TRANSACTIONAL: JSONNonTransactionalSerializer,
    StateType.TRANSACTIONAL: JSONTransactionalSerializer,
    StateType.OPAQUE: JSONOpaqueSerializer,
}


class KeyFactory(Protocol):
    """Storm's ``KeyFactory``: a state key (the group's values, a list) to a Redis key."""

    def build(self, key: Sequence[Any]) -> str:
        """The Redis key (or hash field) of ``key``; the same for equal keys, different for
        different ones.

        A key factory may also have ``old_names(key) -> list[str] | None``: the names an
        earlier version of it gave keys equal to ``key`` (`DefaultKeyFactory.old_names`), which
        `RedisMapState` reads in the same round trip where ``build``'s name holds nothing, and
        removes at the key's next write."""


class DefaultKeyFactory:
    """Storm's default (a one-element string key is the Redis key) made total and one-to-one:
    a key whose one value is a string not starting with ``[`` is that string, as in Storm, so
    word counts read as ``GET word``; any other key is its canonical JSON array text (which
    starts with ``[``), so ``["a", 1]``, ``[7]`` and ``["[7]"]`` all get keys of their own.
    Numbers are named as Python compares them (`canonical_key`): ``1``, ``1.0`` and ``True``,
    one group of a ``group_by``, are the one Redis key ``[1]``. A squall from before that
    (2026-12-07) named each by its own JSON (``[1.0]``, ``[true]``): `old_names` lists those, which
    `RedisMapState` reads and removes."""

    def build(self, key: Sequence[Any]) -> str:
        """The Redis key of ``key``."""
        key = list(key)
        if len(key) == 1 and isinstance(key[0], str) and not key[0].startswith("["):
            return key[0]
        return self._json(canonical_key(key))

    def old_names(self, key: Sequence[Any]) -> list[str] | None:
        """The other Redis keys an earlier squall gave keys equal to ``key``: the JSON of each
        of its `equal_forms` (``[3.0]`` for ``[3]``; ``[0.0]``, ``[-0.0]``, ``[false]`` for
        ``[0]``; ``[[1.0,2]]``... for ``[(1, 2)]``), in a fixed order; ``[]`` for most keys
        (strings, non-integral floats); None where there are more than `EQUAL_FORMS_LIMIT`
        (`RedisMapState` then reads the key's own name alone, and says so once)."""
        key = list(key)
        if len(key) == 1 and isinstance(key[0], str) and not key[0].startswith("["):
            return []
        forms = equal_forms(canonical_key(key))
        return None if forms is None else [self._json(f) for f in forms]

    @staticmethod
    def _json(key: list[Any]) -> str:
        try:
            return json.dumps(key, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise RedisMapStateError(f"a state key {key!r} has a value that is not JSON ({e}): give the state "
                                     f"a key factory (Options.key_factory)") from None


@dataclass(frozen=True)
class Options:
    """storm-redis's ``Options``.

    ``data_type`` ``"string"`` keeps each key as a Redis key; ``"hash"`` as a field of the hash
    ``hash_key``. ``expire_interval_secs`` > 0 gives STRING keys that time to live after each
    write. ``local_cache_size`` entries are cached per task (`CachedMap`; 0: none).
    ``global_key`` is the key of an ungrouped ``persistent_aggregate``. ``serializer`` and
    ``key_factory`` default to Storm's JSON serializer of the state type and `DefaultKeyFactory`.
    """

    local_cache_size: int = 1000
    global_key: str = "$REDIS-MAP-STATE-GLOBAL"
    key_factory: KeyFactory | None = None
    serializer: Serializer | None = None
    data_type: str = "string"
    hash_key: str | None = None
    expire_interval_secs: int = 0

    def __post_init__(self) -> None:
        for name in ("local_cache_size", "expire_interval_secs"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"RedisMapState Options.{name} must be an int, got {type(value).__name__} {value!r}")
        for name, optional in (("data_type", False), ("hash_key", True), ("global_key", False)):
            value = getattr(self, name)
            if not (isinstance(value, str) or (optional and value is None)):
                raise TypeError(f"RedisMapState Options.{name} must be a string, got {type(value).__name__} "
                                f"{value!r:.100}")
        for name, methods in (("key_factory", ("build",)), ("serializer", ("serialize", "deserialize"))):
            value = getattr(self, name)
            if value is not None and not all(callable(getattr(value, m, None)) for m in methods):
                raise TypeError(f"RedisMapState Options.{name} must be None or have {'() and '.join(methods)}(), "
                                f"got {type(value).__name__} {value!r:.100}")
        if self.data_type not in ("string", "hash"):
            raise ValueError(f"RedisMapState Options.data_type is {self.data_type!r}: it must be 'string' or "
                             f"'hash' (storm-redis supports no other type for map states)")
        if self.data_type == "hash" and not self.hash_key:
            raise ValueError("RedisMapState Options.data_type 'hash' needs Options.hash_key (the hash's name)")
        if self.local_cache_size < 0 or self.expire_interval_secs < 0:
            raise ValueError("RedisMapState Options.local_cache_size and expire_interval_secs must be >= 0")


class _SeenWrites:
    """The most writes of each partition its marker counted (`MARKER`) that a state of this
    process saw, by server, marker and run of the topology (`run_of`): a state made again in the
    same process for the same run starts from what its earlier copies saw. On Spark's engine the
    states live in the driver, and `squall trident` starts the query again, with new states, when a
    store did not answer (`run_restarting`): a redis-server that crashed and came back from an older
    snapshot is seen that way, and the new states counted on from the older values, where the
    states before them would have refused. A topology submitted again is another run: it goes on
    from the values it finds, as the error says (`RedisMapState._went_back`); kept by marker alone,
    its states on the same `LocalCluster` were refused for good, by what the killed run had seen.
    Forgotten where a state finds the marker gone (an emptied server, or a new one on the same
    port), whose count starts again from 1. The `LIMIT` most recently seen are kept (each run's
    entries, in a process that submits topologies on and on). Thread-safe."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str, str], int] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> int:
        with self._lock:
            return self._seen.get(key, 0)

    def saw(self, key: tuple[str, str, str], count: int) -> None:
        with self._lock:
            self._seen[key] = max(count, self._seen.pop(key, 0))  # the most recently seen last
            if len(self._seen) > self.LIMIT:
                self._seen.popitem(last=False)

    def forget(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            self._seen.pop(key, None)


def run_of(context: Any) -> str:
    """Which run of its topology a state is of, for `_SeenWrites`: the task's Storm id on
    squall's engine (one per submission: a task restarted, a partition moved, keep it), the
    topology's name on Spark's (a query `squall trident` starts again in its driver keeps it);
    "" for a state made outside a topology."""
    storm_id = getattr(context, "get_storm_id", None)
    return str(storm_id()) if callable(storm_id) else ""


_SEEN_WRITES = _SeenWrites()


class RedisMapState(IBackingMap):
    """The backing map in Redis; see the module docstring. Built by its factories."""

    def __init__(self, client: redis.Redis, options: Options, serializer: Serializer,
                 key_factory: KeyFactory, where: str, marker: str = MARKER,
                 state_type: StateType | None = None, txids_field: str = "", txids_epoch: str = "",
                 run: str = "") -> None:
        self.client = client
        self.marker = marker  # this state's marker key (`MARKER`)
        # what this process saw of the marker's count, for this server, marker and run (`run_of`)
        self._seen_key = (where, marker, run)
        self.txids = txids_key(marker)
        # the writes of a batch are checked as a stale copy's might be (`_WRITE`) for a
        # transactional or opaque state; None (a state made by hand): not at all, as before
        self.checks_txids = state_type in (StateType.TRANSACTIONAL, StateType.OPAQUE)
        # each value's prev too: an opaque state in Storm's JSON form, which the script can read
        self.checks_prevs = state_type is StateType.OPAQUE and type(serializer) is JSONOpaqueSerializer
        self.txids_field = txids_field  # this state's field in `txids` (`txids_field`)
        self.txids_epoch = txids_epoch  # which numbering of the txids it writes (`txids_epoch`)
        self.written = written_key(marker, txids_field)  # the keys written at its last txid
        self.txid: int | None = None  # the batch's, between `begin_commit` and `commit`
        self.options = options
        self.serializer = serializer
        self.key_factory = key_factory
        self.where = where
        self._marked = False  # the marker is in Redis: found there by `_look_for_marker`, or written
        # the most writes of this partition the marker counted when this task read or wrote it: a
        # server that counts fewer went back to an older copy of them (`_went_back`)
        self.seen_writes = 0
        self._looked = False  # `_look_for_marker` asked Redis whether the marker is there
        self._write = client.register_script(_WRITE)
        # the key factory's `KeyFactory.old_names`, if it has one: keys an earlier squall named
        # otherwise, read and moved to their name (`_old_names`)
        self._old_names_of = getattr(key_factory, "old_names", None)
        self._told: set[str] = set()  # the keys `_pick` warned of, once each
        self._told_too_many = False  # `_old_names` warned of a key with too many old names

    @staticmethod
    def transactional(url: str, options: Options | None = None, timeout: float = 2.0) -> RedisMapStateFactory:
        """A factory of transactional map states (values ``[txid, val]``) in the Redis at ``url``
        (``redis://[:password@]host:port/db``)."""
        return RedisMapStateFactory(url, StateType.TRANSACTIONAL, Options() if options is None else options, timeout)

    @staticmethod
    def opaque(url: str, options: Options | None = None, timeout: float = 2.0) -> RedisMapStateFactory:
        """A factory of opaque map states (values ``[curr_txid, curr, prev]``)."""
        return RedisMapStateFactory(url, StateType.OPAQUE, Options() if options is None else options, timeout)

    @staticmethod
    def non_transactional(url: str, options: Options | None = None, timeout: float = 2.0) -> RedisMapStateFactory:
        """A factory of non-transactional map states (plain values)."""
        return RedisMapStateFactory(url, StateType.NON_TRANSACTIONAL, Options() if options is None else options, timeout)

    def begin_commit(self, txid: int | None) -> None:
        """Batch ``txid`` starts updating the state: its writes are checked with this txid."""
        self.txid = txid

    def commit(self, txid: int | None) -> None:
        """Batch ``txid`` is done (its writes are in: a transactional map writes at its commit,
        before this)."""
        self.txid = None

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        return call_or_fail_batch(f"Redis map state at {self.where}", what, fn, *args)

    def _look_for_marker(self) -> None:
        """Once per state (at its start, else before its first read or write): whether its marker
        is in Redis already, written by an earlier life of this partition (its worker restarted,
        or the topology was submitted again under the same name). Then the values there are this
        partition's, and the marker is checked from the first read and write on: a server that
        comes back empty before this state first wrote (no tuple of its keys came meanwhile) fails
        the batch, where the write would have taken the marker as never written, put a new one,
        and counted the lost keys from zero."""
        if not self._looked:
            # what the process saw, taken before the marker is read: each count in it was written
            # before this read reached the server, so the read holds at least that. Taken after, it
            # may hold the write of another copy of this partition in the process (a zombie and
            # its replacement, two topologies sharing the keys) done after the read, refused as a
            # server gone back (17 of 5,368 copies made beside a writer in 10 s)
            saw_before = _SEEN_WRITES.get(self._seen_key)
            held = self._call("read its marker", self.client.get, self.marker)
            if held is not None:
                self._marked = True
                self.seen_writes = max(self.seen_writes, saw_before)
                self._saw(held)
            else:
                _SEEN_WRITES.forget(self._seen_key)
            self._looked = True

    def _saw(self, held: bytes) -> None:
        """The marker read, ``held``: the partition's writes as the server counts them now (a
        marker an older squall wrote holds ``1``). Fewer than this task saw before fails the batch
        (`_went_back`)."""
        count = int(held) if held.isdigit() else 0
        if count < self.seen_writes:
            raise self._went_back(count)
        self.seen_writes = count
        _SEEN_WRITES.saw(self._seen_key, count)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list:
        """The stored values of ``keys`` (None where absent), each checked by the serializer; in
        a renumbered partition, a value of an earlier numbering's txid as of none
        (`_numbering`)."""
        if not keys:
            return []
        self._look_for_marker()
        names = [self.key_factory.build(k) for k in keys]
        olds = self._old_names(keys, names)
        asked = names + [o for os in olds for o in os]  # a key's old names after every key's own
        # where an epoch tells the numberings apart, the partition's (in the same snapshot)
        numbered = self.checks_txids and bool(self.txids_epoch)
        hash_key = self.options.hash_key if self.options.data_type == "hash" else None

        def read() -> list:
            # one round trip: the values, the marker, the numbering; MULTI: read at one moment
            p = self.client.pipeline(transaction=numbered)
            if hash_key is not None:
                p.hmget(hash_key, asked)
            else:
                p.mget(asked)
            if self._marked:
                p.get(self.marker)
            if numbered:
                p.hget(self.txids, self.txids_field)
            return p.execute()
        replies = self._call("read", read)
        if self._marked:
            if replies[1] is None:
                raise self._lost()
            self._saw(replies[1])
        if len(asked) > len(names):
            names, datas = self._pick(names, olds, replies[0])
        else:
            datas = replies[0]
        values = [None if data is None else self._decoded(name, data) for name, data in zip(names, datas)]
        if numbered:
            numbering = self._numbering(replies[-1])
            if numbering.renumbered:
                written = self._written_at_mine(names, values, numbering)
                values = [_renumbered(v, numbering, w) for v, w in zip(values, written)]
        return values

    def _old_names(self, keys: Sequence[Sequence[Any]], names: list[str]) -> list[list[str]]:
        """Per key, the names an earlier squall gave it (`KeyFactory.old_names`; none for most
        keys, and for a key factory without them): 1, 1.0 and True were stored apart before
        they were one key, as ``[1]``, ``[1.0]`` and ``[true]``. A key with more than
        `EQUAL_FORMS_LIMIT` is read under its own name alone (a warning, the first time)."""
        of = self._old_names_of
        if of is None:
            return [[] for _ in keys]
        out = []
        for key, name in zip(keys, names):
            olds = of(key)
            if olds is None:
                olds = []
                if not self._told_too_many:  # once: such keys are usually all of a state's
                    self._told_too_many = True
                    log.warning("Redis map state at %s: the key %r has more than %d names an earlier squall may "
                                "have stored it under (1.0 or True for 1, in each of its parts): it, and any "
                                "other such key, is read and written under its own name only", self.where,
                                name[:200], EQUAL_FORMS_LIMIT)
            out.append(olds)
        return out

    def _pick(self, names: list[str], olds: list[list[str]], datas: list) -> tuple[list[str], list]:
        """Each key's stored bytes and the name they are at, out of the read of every key's
        name and then its old names (`_old_names`), in that order: its own name's where it holds
        a value, else its first old name's that does (stored by a squall from before 1, 1.0 and
        True were one key), which the key's next write moves to its name (`_WRITE`). Where more
        than one of them holds a value (the old squall kept equal keys apart, and counted
        each on its own), the one read wins, the others are dropped at the next write, and a
        warning names them all with their values, once a key, for whoever merges them."""
        at, out = list(names), list(datas[:len(names)])
        i = len(names)
        for k, os in enumerate(olds):
            held = [(o, d) for o, d in zip(os, datas[i:i + len(os)]) if d is not None]
            i += len(os)
            if not held:
                continue
            if out[k] is None:
                at[k], out[k] = held[0]
                held = held[1:]
            if held and names[k] not in self._told:
                self._told.add(names[k])
                log.warning("Redis map state at %s: the key %r is stored under several names by a squall from "
                            "before 1, 1.0 and True were one key: %s is read, and its next write removes %s",
                            self.where, names[k][:200], _shown(at[k], out[k]),
                            ", ".join(_shown(o, d) for o, d in held))
        return at, out

    def _written_at_mine(self, names: list[str], values: list, numbering: Numbering) -> list[bool | None]:
        """For each of ``values`` (read at ``names``), whether this epoch wrote it at its last txid
        (`written_key`), asked only where it matters (`Numbering.asks`: this batch replays that
        txid, and the value is of it), in a second round trip; None where not asked, or where
        the set was not begun at that txid by this epoch (`written_begun`: an older squall wrote
        it, and kept no set)."""
        mine = numbering.mine
        asked = [numbering.asks(self.txid) and _stored_txid(v) == mine for v in values]
        if not any(asked) or mine is None:
            return [None] * len(values)
        begun = written_begun(mine, self.txids_epoch)
        *found, known = self._call("read the keys it wrote at its last txid", self.client.smismember, self.written,
                                   [*names, begun])
        if not known:
            return [None] * len(values)
        return [bool(f) if a else None for a, f in zip(asked, found)]

    def _numbering(self, raw: bytes | None) -> Numbering:
        """What this state's field of the partition's txids hash (`txids_key`), ``raw``, says of
        its txids: ``<txid>``, ``<txid> <epoch>`` or ``<txid> <epoch> renumbered`` (`RENUMBERED`),
        read as `_WRITE` reads it (anything else: no last txid)."""
        m = re.fullmatch(rb"(\d+) ?(\S*) ?(\S*)", raw or b"")
        if m is None:
            return Numbering.of(None, None, None, self.txids_epoch)
        wrote = m[2].decode("ascii", "replace") or None
        return Numbering.of(int(m[1]), wrote, wrote if m[3] == RENUMBERED.encode() else None, self.txids_epoch)

    def _lost(self) -> ReportedFailedException:
        return ReportedFailedException(
            f"Redis map state at {self.where}: the server no longer holds what this state wrote to it (the "
            f"key {self.marker!r} is gone): it restarted without persistence, was flushed or restored from an older "
            f"snapshot, and the values it held are lost. Its batches fail (and are replayed) until the server "
            f"holds them again (restored); to start the state afresh on purpose, kill the topology and "
            f"submit it again")

    def _went_back(self, held: int) -> ReportedFailedException:
        # Redis acknowledges a write before it is on disk: a server restarted from its last RDB
        # save point, from an append-only file not yet fsynced when the machine crashed, or failed
        # over to a replica behind it, holds an older copy of the values with the marker still
        # there. Each later batch would count on from the older values, the batches written since
        # lost without a word, and a query would read counts that went down.
        return ReportedFailedException(
            f"Redis map state at {self.where}: the server went back to an older copy of what this state wrote "
            f"to it (the key {self.marker!r} counts {held} writes of this partition, where this process saw "
            f"{self.seen_writes}): it restarted from a snapshot or append-only file older than its last writes, "
            f"or failed over to a replica behind it, and the values of the batches written since are lost. Its "
            f"batches fail until the server holds them again (restored from a copy newer than that), replayed "
            f"meanwhile on squall's engine; on Spark's engine the query stops. A state started again over the "
            f"older copy (the topology submitted again, the query started again) cannot tell, and counts on from "
            f"the older values without the lost batches: do that only on purpose")

    def _decoded(self, name: str, data: bytes) -> Any:
        try:
            return self.serializer.deserialize(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: "[[[[..." nested too deep
            place = f"field {name!r} of hash {self.options.hash_key!r}" if self.options.data_type == "hash" \
                else f"key {name!r}"
            raise RedisMapStateError(f"Redis map state at {self.where}: the value at {place} ({len(data)} bytes) "
                                     f"is not what this state stores: {e}") from None

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """Store ``values`` at ``keys`` at once, in one script (with the expiries, if any); once
        this state wrote the marker, only if it is still there (else the batch fails: `_lost`);
        in a batch of a transactional or opaque state, only if the write is not a stale copy's
        (`_refused`)."""
        if not keys:
            return
        self._look_for_marker()
        named = [self.key_factory.build(k) for k in keys]
        wrote = dict(zip(named, values))
        mapping = {name: self.serializer.serialize(v) for name, v in wrote.items()}
        # a key's old names (`_old_names`), each key's once (its last value, as `wrote`)
        olds = dict(zip(named, self._old_names(keys, named)))
        hash_key = self.options.hash_key if self.options.data_type == "hash" else ""
        txid = self.txid if self.checks_txids else None
        args: list[Any] = ["1" if self._marked else "0", hash_key or "", self.options.expire_interval_secs,
                           "" if txid is None else str(txid), self.txids_field, "1" if self.checks_prevs else "0",
                           self.txids_epoch, self.seen_writes]
        for name, value in mapping.items():
            args += [name, value, len(olds[name]), *olds[name]]
        done = self._call("write", self._write, [self.marker, self.txids, self.written], args)
        if isinstance(done, list) and done[0] == b"behind":
            raise self._went_back(int(done[1]) if done[1].isdigit() else 0)
        if isinstance(done, list):
            assert txid is not None  # the script refuses only a batch's write
            raise self._refused(done, txid, wrote)
        if not done:
            raise self._lost()
        self._marked = True
        self.seen_writes = max(self.seen_writes, done)
        _SEEN_WRITES.saw(self._seen_key, done)

    def _refused(self, reply: list, txid: int, wrote: dict[str, Any]) -> Exception:
        """The error of a write the script refused (`_WRITE`'s replies): it comes from a stale
        copy of this task, a zombie (its worker taken for dead on a machine that hung or lost the
        master, which resumed) whose batch the task that replaced it replayed and committed, and
        later ones too. Its values were read before those writes, or from its own cache, and would
        put their counts back. Trident commits a partition's batches in txid order, so a txid below
        the partition's last write is a stale copy's; an opaque value whose ``prev`` is not what
        Redis holds before its txid was built on what the replacement's replay replaced."""
        what = reply[0].decode()
        name = reply[1].decode("utf-8", "replace") if len(reply) > 1 else ""
        at = reply[3].decode("utf-8", "replace") if len(reply) > 3 else name  # an old name's value: that name
        place = f"field {at!r} of hash {self.options.hash_key!r}" if self.options.data_type == "hash" \
            else f"key {at!r}"
        head = f"Redis map state at {self.where}, partition {self.marker!r} (writer {self.txids_field!r})"
        # on Spark's engine the states run in the driver, one copy, and a lower txid means the
        # query's checkpoint went back (its latest offsets/N removed, an older copy restored):
        # the user who deleted a checkpoint file read only of dead workers
        stale = ("refused: it comes from a stale copy of the task (a worker taken for dead, which resumed after "
                 "the task that replaced it committed its batch), or, on Spark's engine, from a query whose "
                 "checkpoint is behind this state (its latest offsets file removed, or an older copy of it "
                 "restored), whose values would undo the later ones; the batch fails, and its replay reads "
                 "Redis again")
        if what == "txid":
            return ReportedFailedException(
                f"{head} wrote txid {reply[1].decode()} already ({self.txids!r}); this write of txid {txid} is "
                f"{stale}. (A state whose txids start from 1 again with no transactional state to tell, one made "
                f"outside a topology, is refused too: delete its field, HDEL {self.txids!r} {self.txids_field!r}, or "
                f"use another topology name)")
        # the stored OpaqueValue (absent: None, only for "prev"); raises if Python cannot read it either
        stored: Any = self._decoded(at, reply[2]) if len(reply) > 2 else None
        if what == "ahead":
            return ReportedFailedException(
                f"{head}: the value at {place} was written by txid {stored.curr_txid}, later than this write's "
                f"txid {txid}: {stale} (or another topology writes these keys)")
        if what == "prev":
            before = None if stored is None else stored.prev if stored.curr_txid == txid else stored.curr
            return ReportedFailedException(
                f"{head}: the value of txid {txid} at {place} was computed from prev "
                f"{wrote[name].prev!r:.100} but Redis holds {before!r:.100} before txid {txid}: {stale}")
        return RedisMapStateError(f"{head}: the value at {place} is not what this state stores "
                                  f"(Storm's JSON [curr_txid, curr, prev]): {reply[2][:100]!r}")


def _shown(name: str, data: bytes) -> str:
    """A stored key and its value, for a log line."""
    return f"{name[:200]!r} ({data[:200].decode('utf-8', 'replace')})"


class RedisMapStateFactory(StateFactory):
    """The `StateFactory` `RedisMapState`'s factories return: picklable (only the URL and the
    options travel with the topology); each ``make_state`` opens its own connection."""

    def __init__(self, url: str, state_type: StateType, options: Options, timeout: float = 2.0) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"RedisMapState: the Redis URL must be a string like redis://host:port/db, "
                             f"not {redact_text(repr(url))}")
        try:  # here, where the user made the factory, rather than in every task at make_state
            redis.connection.parse_url(url)
        except ValueError as e:
            raise ValueError(f"RedisMapState: bad Redis URL {redact_text(url)}: {e}") from None
        if not isinstance(options, Options):
            raise TypeError(f"RedisMapState: options must be an Options (squall.external.trident_redis.Options, "
                            f"e.g. Options(data_type='hash', hash_key='counts')), got {type(options).__name__} "
                            f"{redact_text(repr(options)):.200}")
        self.url = url
        self.state_type = state_type
        self.options = options
        self.timeout = timeout
        self.serializer = options.serializer or DEFAULT_SERIALIZERS[state_type]()
        self.key_factory = options.key_factory or DefaultKeyFactory()

    def __repr__(self) -> str:
        return f"RedisMapStateFactory({redact_text(self.url)!r}, {self.state_type.value})"

    def store_location(self) -> str | None:
        """The server, database and key space its states write (`StateFactory.store_location`):
        the hash ``hash_key``, or the database's keys as `DefaultKeyFactory` names them (the
        default ``Options``); None for a custom key factory of STRING keys, whose names only it
        knows. The password is left out."""
        if self.options.data_type != "hash" and type(self.key_factory) is not DefaultKeyFactory:
            return None
        at = redis.connection.parse_url(self.url)
        server = at.get("path") or f"{at.get('host', 'localhost')}:{at.get('port', 6379)}"
        where = f"redis {server} db {at.get('db', 0)}"
        if self.options.data_type == "hash":
            return f"{where}, hash {self.options.hash_key!r}"
        return f"{where}, its keys (data_type 'string')"

    def make_state(self, conf: dict, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        """A map state for one partition; see the module docstring."""
        where = redact_text(self.url)
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=self.timeout,
                                          socket_connect_timeout=self.timeout)
        except ValueError as e:
            raise ValueError(f"RedisMapState: bad Redis URL {where}: {e}") from None
        marker, field = marker_key(self.options, partition_index, num_partitions), txids_field(conf, metrics)
        claim = RedisEpochClaim(client, f"{txids_key(marker)}/{field}/epoch", where)
        backing = RedisMapState(client, self.options, self.serializer, self.key_factory, where, marker,
                                self.state_type, field, txids_epoch(metrics, self.state_type, partition_index,
                                                                    num_partitions, self.options, claim),
                                run_of(metrics))
        try:
            # at the task's start, while the server still holds what an earlier life of this
            # partition wrote; a server away now is asked again before the first read or write
            backing._look_for_marker()
        except (ReportedFailedException, redis.RedisError):
            pass
        return build_map_state(backing, self.state_type, self.options.local_cache_size, self.options.global_key)
