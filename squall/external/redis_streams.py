"""Redis Streams in and out: Kestrel's open/ack/fail semantics on a server people run today.

`RedisStreamSpout` reads a stream through a consumer group (``XREADGROUP``), emits each entry
with its entry id as message id, ``XACK``s it when its tuple tree completes and re-emits it on
failure with an exponential backoff; after ``max_retries`` failures that the entry caused (a bolt
failed it or raised on it, or it took the spout's worker down with it, below; a lost worker or a
timeout does not count) it goes to a dead-letter
stream, with the cause of its last failure, and is acked there. A task's consumer name comes from its component id and task index, so a restarted
task finds its own pending entries (``XREADGROUP ... 0``) and replays them first; entries left
pending by a consumer that is gone are taken over with ``XAUTOCLAIM`` after ``claim_idle_ms``.

A live task keeps the entries it holds (buffered, in flight or waiting to be retried) from
looking idle: it resets their idle time (``XCLAIM ... JUSTID``, only while it still owns them)
when it re-emits them and every third of ``claim_idle_ms``, so only a dead consumer's entries
are ever claimed.

Retry budgets outlive the spout's worker. An entry that crashes the worker the spout runs in (a
bolt beside it with ``topology.bolt.fail.fast``, a segfault, ``os._exit``) is never failed: the
spout dies with its counts, and a budget kept in memory would replay the entry for ever, the
good entries in flight beside it with it. So the failures charged to an entry are kept in a
hash beside the stream (`charges_key`: ``<stream>:<group>:charged``, entry id -> ``"<charged>
<deaths>"``), written when an entry is charged and deleted with its XACK or dead letter. A
worker's death cannot be told from a record's fault while several entries were in flight, so
it is charged only to an entry that was in flight *alone*: an entry delivered again (taken from
the pending list after its consumer stopped: ``XPENDING``'s delivery count is above 1), or
failed because another worker died while a bolt there executed it (``worker-died``), is a
suspect (one only in flight in a worker that died, ``worker-lost``, is not: it goes out again
beside the others), and a suspect is emitted only when
nothing else of its task is in flight, and nothing else until its tree ends: in a group of up
to 32 suspects (`squall.external.retry.SUSPECT_GROUPS`), each one's level raised beforehand
(``"<charged> <deaths> <level>"``, nothing charged), while it never died in one, and alone
after a death in a group (or after ``worker-died``). Before one goes alone its charge is
written as if it will take its worker down with it; its ack deletes the charge (or the raised
level), a failure it caused keeps it, any other failure (a timeout, a rollback, another
worker's death this spout outlived) takes it back, and so does the spout's ``close`` (a
rebalance, a kill). Only a death that takes the spout down with the suspect in flight alone
leaves the charge in place: a live spout still charges no lost worker to anyone. So after the
spout's worker dies with N good entries pending they replay in N / 32 rounds of trees, not N.
A suspect found charged
past ``max_retries`` when it is taken is dead-lettered at once (a cause of kind ``worker-lost``
saying how often it was delivered and how many of those times its worker died with it in
flight alone). Good entries in flight beside a poison one are delivered again as suspects,
in a group, then alone if the poison one killed their group, and never charged for its deaths. Each task holds back only its own tuples: with
several spout tasks in one worker, a suspect of one in flight alone when another task's entry
kills the worker is charged for that death too. Without a limit (``max_retries`` None) nothing
is counted and nothing is held back.

The spout never waits on Redis for new entries on its loop's thread, which a worker's other
executors share: a thread of its own (`_Reader`) does the blocking ``XREADGROUP ... BLOCK`` on a
connection of its own, only when the spout has nothing left to emit, and wakes the loop
(`SpoutOutputCollector.wake`) when entries arrive, so an entry is emitted as soon as Redis has it,
whatever the spout wait strategy's sleep, and the bolts beside the spout are never held up by
the read. Acks are sent as one ``XACK`` per loop round (at the next ``next_tuple``, or at once
when ``batch_size`` of them are waiting), not one round trip per tuple.

`RedisStreamSinkBolt` writes tuples idempotently (``HSET`` on a key made of an id field, or an
``XADD`` guarded by a set of written ids in one Lua script), so a replayed tuple overwrites
instead of duplicating, and acks only after the write. `RedisLookupBolt` and `RedisFilterBolt`
are storm-redis's lookup and filter bolts for all its data types.

Needs the ``redis`` extra (``pip install 'squall[redis]'``); only this module imports it.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import redis

from .._components import Bolt, Spout
from .._config import Config
from .._failure import (
    EXPLICIT,
    UNAVAILABLE,
    UNKNOWN,
    CountsDeadLetters,
    FailureCause,
    fail_because,
    fail_for,
    shown_value,
)
from .._fields import Fields
from .._redact import redact_text
from .._tuple import is_tick_tuple
from ..engine.clock import Clock
from ._arity import arity_error
from .retry import (
    AloneGate,
    Charge,
    RetryBackoff,
    RetrySchedule,
    gate_patience,
    group_size,
    warn_stood_alone,
    warn_suspects_taken_back,
    worker_gate,
)

log = logging.getLogger(__name__)

# The errors that mean "the server is unreachable or went away": the component logs them,
# waits, and tries again; anything else is a bug or bad data and is reported as such.
_DOWN = (redis.ConnectionError, redis.TimeoutError)

# Besides `_DOWN`, the replies of a server that takes no write now, whatever the tuple: out of
# memory, a replica, unable to persist (MISCONF), running a slow script (BUSY), restarted (its
# scripts gone: NOSCRIPT), a cluster without a master. redis-py gives some their own class and
# leaves the others a ResponseError that starts with the code.
_UNAVAILABLE_ERRORS = (*_DOWN, redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError,
                       redis.exceptions.NoScriptError, redis.exceptions.TryAgainError,
                       redis.exceptions.ClusterDownError)
_UNAVAILABLE_CODES = frozenset({"OOM", "READONLY", "MISCONF", "BUSY", "LOADING", "NOSCRIPT", "MASTERDOWN",
                                "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN"})


def store_unavailable(error: BaseException) -> bool:
    """Whether ``error``, from a call a sink or lookup made for a tuple, is the server's state
    and not the tuple's doing (`_UNAVAILABLE_ERRORS`): the tuple then fails as `UNAVAILABLE`,
    which no retry budget charges. Any other error (WRONGTYPE: the key the tuple names holds
    another type; a value the server refuses) is the tuple's, and charged."""
    if isinstance(error, _UNAVAILABLE_ERRORS):
        return True
    return isinstance(error, redis.ResponseError) and str(error).split(" ", 1)[0] in _UNAVAILABLE_CODES


def _failure_kind(error: BaseException) -> str:
    """The kind of failure of a tuple a call failed with ``error``: `UNAVAILABLE` or `EXPLICIT`."""
    return UNAVAILABLE if store_unavailable(error) else EXPLICIT


_DEFAULT_BACKOFF = RetryBackoff(max_retries=3)  # frozen: one shared by every spout that takes the default


class MalformedEntry(ValueError):
    """A stream entry a translator cannot turn into a tuple; it goes to the dead-letter stream."""


def ExponentialBackoff(initial_delay: float = 0.0, multiplier: float = 2.0, max_delay: float = 10.0,
                       max_retries: int | None = 3) -> RetryBackoff:
    """The `RetryBackoff` this spout's earlier backoff arguments meant: retry n waited
    ``initial_delay * multiplier ** (n - 1)``, at most ``max_delay``, which is Storm's formula
    with ``delay_period = initial_delay`` when ``multiplier`` is 2, Storm's ratio (the only one
    its ``KafkaSpoutRetryExponentialBackoff`` has). Kept so those arguments go on working with
    the same delays; new code passes a `RetryBackoff`."""
    if multiplier != 2:
        raise ValueError(f"ExponentialBackoff: multiplier must be 2, got {multiplier!r}: the retry "
                         "backoff is storm-kafka-client's, whose delays double (pass a RetryBackoff("
                         "initial_delay, delay_period, max_retries, max_delay) instead)")
    return RetryBackoff(initial_delay=initial_delay, delay_period=initial_delay, max_retries=max_retries,
                        max_delay=max_delay)


@dataclass(frozen=True)
class Entry:
    """One stream entry: its id and its field map (None if the entry was deleted meanwhile)."""

    id: str
    fields: Mapping[str, str] | None


class FieldsTranslator:
    """The default translator: the tuple is the declared fields read from the entry's field map,
    preceded by the entry id when ``id_field`` is set. A missing field raises `MalformedEntry`
    naming the stream, the entry id and the field."""

    def __init__(self, fields: Sequence[str], id_field: str | None = "id") -> None:
        self.fields = list(fields)
        self.id_field = id_field

    def output_fields(self) -> list[str]:
        """The fields the spout declares."""
        return ([self.id_field] if self.id_field else []) + self.fields

    def __call__(self, stream: str, entry: Entry) -> list:
        """The tuple's values for ``entry`` of ``stream``."""
        if entry.fields is None:
            raise MalformedEntry(f"stream {stream!r} entry {entry.id}: deleted from the stream")
        values = [entry.id] if self.id_field else []
        for name in self.fields:
            if name not in entry.fields:
                raise MalformedEntry(f"stream {stream!r} entry {entry.id}: missing field {name!r} "
                                     f"(has {sorted(entry.fields)})")
            values.append(entry.fields[name])
        return values


@dataclass
class _Tracked:
    """An entry the spout has taken and not yet acked: its values and retries so far (failures
    charged to it: those it caused, and deaths of its worker while it was in flight alone), of
    which ``deaths`` were deaths; ``delivered``, Redis's delivery count when it was taken;
    ``suspect``, whether it is emitted in a group of suspects (see the module docstring);
    ``charged``, whether the hash of charges may hold it; ``level``, its `Charge.level` (the
    deaths of its worker while it was in flight in a group of suspects); ``lone``, whether it
    goes alone whatever its level (it failed as ``worker-died``)."""

    entry: Entry
    values: list
    retries: int = 0
    deaths: int = 0
    delivered: int = 1
    suspect: bool = False
    charged: bool = False
    level: int = 0
    lone: bool = False
    beside: int = 0   # deaths of its worker while it was in flight set aside beside others

    @property
    def group_size(self) -> int:
        """How many suspects it may go out with, itself included (`squall.external.retry.group_size`)."""
        return 1 if self.lone else group_size(self.level)

    @property
    def charge(self) -> Charge:
        """Its charge as it stands, no mark of a delivery in a group or alone on it."""
        return Charge(self.retries, self.deaths, self.level, self.beside)


@dataclass(frozen=True)
class _DeadLetter:
    """An entry given up (past its retries, or malformed) whose dead-letter write and XACK the
    server has not taken yet: kept, and held like one in flight, until it does."""

    entry: Entry
    error: str
    cause: FailureCause | None


class _Reader(threading.Thread):
    """Reads new entries (``XREADGROUP ... >``, BLOCK ``block_ms``) for one spout task on a
    connection of its own, one batch per `request`, and hands each batch (or the error a read
    raised) to the task's loop through `arrived`, waking it with ``wake``. It reads only when
    asked, i.e. when the task has nothing left to emit: an entry waits in Redis, not here, and
    a task held at max spout pending or deactivated reads nothing more."""

    def __init__(self, client: Any, stream: str, group: str, consumer: str, count: int,
                 block_ms: int, wake: Callable[[], None]) -> None:
        super().__init__(name=f"redis-stream-reader-{consumer}", daemon=True)
        self.client = client
        self.stream, self.group, self.consumer = stream, group, consumer
        self.count, self.block_ms = count, block_ms
        self.wake = wake
        # batches of (id, fields) pairs, or the exception a read raised; popped by the loop
        self.arrived: deque[list[tuple[str, dict[str, str]]] | Exception] = deque()
        self._wanted = threading.Event()
        self._stopping = False

    def request(self) -> None:
        """Read one more batch (at once if one is not being read already)."""
        self._wanted.set()

    def run(self) -> None:
        """Reads a batch per request until `stop`."""
        while True:
            self._wanted.wait()
            if self._stopping:
                return
            self._wanted.clear()
            try:
                reply = cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", self.client.xreadgroup(
                    self.group, self.consumer, {self.stream: ">"}, count=self.count, block=self.block_ms))
            except Exception as e:  # noqa: BLE001 - the loop handles it as its own read's error
                if self._stopping:
                    return
                self.arrived.append(e)
                self.wake()
                continue
            # an empty batch too: nothing came within block_ms, and the loop asks again
            self.arrived.append(reply[0][1] if reply else [])
            self.wake()

    def stop(self) -> None:
        """Ends the thread: a read under way is cut short by closing its connection (entries it
        took stay pending under this consumer, replayed by its next task)."""
        self._stopping = True
        self._wanted.set()
        self.client.close()
        self.join(1.0)


def _no_wake() -> None:
    """For a collector that cannot wake its loop: the next poll finds what arrived."""


@dataclass
class _Outage:
    """Whether the server is known down, and until when to leave it alone."""

    since: float | None = None
    retry_at: float = 0.0
    errors: int = 0


def consumer_name(component_id: str, task_index: int) -> str:
    """A task's consumer name: stable across restarts, so a restarted task finds its pending."""
    return f"{component_id}-{task_index}"


def charges_key(stream: str, group: str) -> str:
    """The hash that keeps the failures charged to the entries of ``stream`` that ``group``
    holds (entry id -> ``"<charged> <deaths> [<level> [<beside>]]"``), across the spout's restarts."""
    return f"{stream}:{group}:charged"


# Resets the idle time of the entries this consumer still owns (XCLAIM with min-idle 0 and
# JUSTID: no delivery count, no entry bodies) and returns those it no longer owns. A bare XCLAIM
# would also take back an entry another task claimed meanwhile, and both would process it; the
# check and the claim run in one script, so no claim can come in between.
# KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3..] entry ids.
_TOUCH = """
local mine, lost = {}, {}
for i = 3, #ARGV do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2]) == 1 then
    mine[#mine + 1] = ARGV[i]
  else
    lost[#lost + 1] = ARGV[i]
  end
end
if #mine > 0 then
  mine[#mine + 1] = 'JUSTID'
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(mine))
end
return lost
"""
# Dead-letters entry ARGV[2] of group ARGV[1] of stream KEYS[1] into stream KEYS[2] (fields
# ARGV[3..]) only if the XACK acked it: a write whose reply was lost (the server went down after
# it) is sent again, and must not add a second dead letter; an entry acked otherwise adds none.
# Its charges (hash KEYS[3]) go with it.
_DEAD_LETTER = """
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if acked == 1 then
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))
end
redis.call('HDEL', KEYS[3], ARGV[2])
return acked
"""
# For each entry ARGV[2..] of group ARGV[1] of stream KEYS[1]: its delivery count (XPENDING's;
# 0 if it is not pending) and its charges in hash KEYS[2] (false if none).
_LOOK_UP = """
local out = {}
for i = 2, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  out[#out + 1] = (#p == 1) and p[1][4] or 0
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i])
end
return out
"""
# Creates group ARGV[1] of stream KEYS[1] (MKSTREAM) from its start; if this call created it,
# deletes the hash of charges KEYS[2]: what it holds was charged to the entries a group of that
# name held before (XGROUP DESTROY), which the new group delivers afresh. 1 if created, 0 if
# the group exists.
_CREATE_GROUP = """
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(made) == 'table' and made.err then
  if string.find(made.err, 'BUSYGROUP', 1, true) then
    return 0
  end
  return redis.error_reply(made.err)
end
redis.call('DEL', KEYS[2])
return 1
"""
_READ_MARGIN_SECS = 5.0   # the reading connection's socket timeout beyond its BLOCK
# Every other connection's socket and connect timeouts, unless the URL sets them: redis-py 6's
# default, given here because redis-py 5 (which pyproject allows) waits for ever by default, and
# a server that is stopped (SIGSTOP, a network partition) would hang a worker's loop for good
_SOCKET_TIMEOUT_SECS = 5.0
_TOUCH_BATCH = 1000   # ids per script call: bounds the script's run (Redis serves nothing else)


def _client(url: str, socket_timeout: float = _SOCKET_TIMEOUT_SECS) -> Any:
    """A client of ``url`` (str replies) whose calls end after ``socket_timeout`` seconds, and
    its connects after `_SOCKET_TIMEOUT_SECS`, unless the URL's query sets them (its own win)."""
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=socket_timeout,
                                socket_connect_timeout=_SOCKET_TIMEOUT_SECS)


class RedisStreamSpout(Spout, CountsDeadLetters):
    """Reads ``stream`` through consumer group ``group`` (see the module docstring).

    ``fields``: the entry fields the tuple carries (default translator); ``id_field``: the name
    of the leading field holding the entry id (None: no id field). ``translator(stream, entry)``
    replaces the default and must then come with ``output_fields``. ``batch_size`` is
    ``XREADGROUP``'s COUNT and the most acks held back for one ``XACK``; ``block_ms`` the BLOCK
    of the reading thread's ``XREADGROUP`` (how long it waits for an entry before the spout
    asks again; ``next_tuple`` itself never blocks on it). ``dead_letter_stream`` defaults to
    ``<stream>:dead``. ``down_retry_secs``: how long to
    leave an unreachable server alone before trying again.
    """

    def __init__(self, url: str, stream: str, group: str, fields: Sequence[str] = ("value",), *,
                 id_field: str | None = "id", translator: Callable[[str, Entry], list] | None = None,
                 output_fields: Sequence[str] | None = None, batch_size: int = 100,
                 block_ms: int = 1000, backoff: RetryBackoff = _DEFAULT_BACKOFF,
                 dead_letter_stream: str | None = None, claim_idle_ms: int = 60_000,
                 claim_interval_secs: float = 5.0, down_retry_secs: float = 1.0,
                 clock: Clock | None = None) -> None:
        if translator is None:
            default = FieldsTranslator(fields, id_field)
            translator, output_fields = default, default.output_fields()
        elif output_fields is None:
            raise ValueError("RedisStreamSpout: a custom translator needs output_fields")
        self.url = url
        self.stream = stream
        self.group = group
        self.translator = translator
        self.output_fields = list(output_fields)
        for name, value, least in (("batch_size", batch_size, 1), ("block_ms", block_ms, 1),
                                   ("claim_idle_ms", claim_idle_ms, 1), ("claim_interval_secs", claim_interval_secs, 0),
                                   ("down_retry_secs", down_retry_secs, 0)):
            # claim_idle_ms 0 would claim live consumers' entries at once; block_ms 0 blocks for
            # ever (Redis's BLOCK 0); a claim or retry interval of 0 means at every step
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < least:
                raise ValueError(f"RedisStreamSpout: {name} must be a number of at least {least}, got {value!r}")
        url_timeout = redis.connection.parse_url(url).get("socket_timeout")
        if url_timeout is not None and url_timeout * 1000 <= block_ms:
            raise ValueError(f"RedisStreamSpout: block_ms {block_ms} must be below the socket_timeout "
                             f"of the URL ({url_timeout} s): a read blocked that long would look like "
                             "a server that is down")
        self.batch_size = batch_size
        self.block_ms = block_ms
        self.backoff = backoff
        self.dead_letter_stream = dead_letter_stream or f"{stream}:dead"
        self.claim_idle_ms = claim_idle_ms
        self.claim_interval_secs = claim_interval_secs
        self.down_retry_secs = down_retry_secs
        self.clock = clock or Clock()

    def declare_output_fields(self, declarer) -> None:
        """The translator's fields on the default stream."""
        declarer.declare(Fields(self.output_fields))

    def open(self, conf, context, collector) -> None:
        """Connects lazily: the first `next_tuple` creates the group and replays own pending."""
        super().open(conf, context, collector)
        self.consumer = consumer_name(context.get_this_component_id(), context.get_this_task_index())
        self.client = _client(self.url)
        self._touch_script = self.client.register_script(_TOUCH)
        self._dead_letter_script = self.client.register_script(_DEAD_LETTER)
        self._look_up_script = self.client.register_script(_LOOK_UP)
        self._create_group_script = self.client.register_script(_CREATE_GROUP)
        self._charges = charges_key(self.stream, self.group)
        # Acking off (topology.acker.executors 0): at most once. Each entry is XACKed before it
        # goes out, so a restart's replay of the consumer's pending entries never emits it again
        # (the ack emit makes is a late one). Nothing is ever failed: no budget is kept.
        self._at_most_once = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0
        # a budget to keep: charges are counted across restarts, and suspects emitted alone
        self._counting = self.backoff.max_retries is not None and not self._at_most_once
        # the reading connection's socket timeout outlasts its BLOCK (redis-py's default, 5 s,
        # would end a longer one as if the server were down); a URL's socket_timeout is kept
        reader_client = _client(self.url, self.block_ms / 1000 + _READ_MARGIN_SECS)
        self._reader = _Reader(reader_client, self.stream, self.group,
                               self.consumer, self.batch_size, self.block_ms,
                               getattr(collector, "wake", None) or _no_wake)
        self._reading = False                      # a batch was requested and has not arrived
        self._ready: deque[str] = deque()          # entry ids to emit, in order
        self._tracked: dict[str, _Tracked] = {}    # taken, not acked (ready, in flight, waiting)
        self._retrying: RetrySchedule[str] = RetrySchedule(self.backoff)  # failed ids, by due time
        self._to_ack: list[str] = []               # acks the server did not take yet
        self._dead: dict[str, _DeadLetter] = {}    # given up, not yet in the dead-letter stream
        self.start_dead_letter_counts()
        # what goes out when; shared with every spout task of this worker that keeps charges
        self._gate: AloneGate[str] = AloneGate(self.backoff.max_retries if self._counting else None,
                                               worker_gate(context), gate_patience(conf))
        self._to_write: dict[str, str] = {}        # charges the server did not take yet
        self._aside: list[str] = []                # suspects alone set aside, their marks not yet beside
        self._to_forget: list[str] = []            # charges to delete with the acks held back
        self._set_up = False
        self._history_from: str | None = "0"       # own pending still to replay (None: done)
        self._conf = conf
        self._next_claim = 0.0
        self._claim_from = "0-0"                   # where the next XAUTOCLAIM scan goes on from
        # Every entry held here is touched at least this often, so it never looks idle to a
        # claim (its idle time stays below a third of claim_idle_ms plus one touch's delay).
        self._touch_every = self.claim_idle_ms / 3000
        self._next_touch = self.clock.now() + self._touch_every
        self._outage = _Outage()
        # The reading thread and the connections die with the worker, closed or not: a worker
        # that crashed is never closed, and where its host lives on (LocalCluster runs workers
        # in its own process) the thread, blocked in its XREADGROUP, took the next entries to
        # arrive under this consumer after the restarted task had replayed its pending ones;
        # nobody emitted them until a claim found them idle (claim_idle_ms, a minute by default)
        resources = getattr(context, "worker_resources", None)
        if resources is not None:
            resources.at_end(f"the Redis Streams reader of {self.consumer}", self._disconnect)

    def close(self) -> None:
        """Sends the acks held back, stops the reading thread and closes the connections;
        entries not acked stay pending for the next task. The charge of a suspect in flight
        alone, or of each suspect in flight in a group, is taken back: its worker did not die
        with it."""
        for entry_id, _ in self._gate.marked() if self._counting else ():
            t = self._tracked.get(entry_id)
            if t is not None:
                self._to_write[entry_id] = str(t.charge)
        self._safely(self.clock.now(), self._flush_acks)
        self._safely(self.clock.now(), self._write_dead_letters)
        self._gate.clear()   # the worker's other spout tasks no longer wait for its entries
        self._disconnect()

    def _disconnect(self) -> None:
        """Stops the reading thread (a read under way is cut short: what it took stays pending
        under this consumer, for its next task) and closes both connections. Again is harmless:
        `close` calls it, and so does the end of the worker (`squall._worker_resources`), which
        a crash reaches without ``close``."""
        if self._reader.is_alive():
            self._reader.stop()
        else:
            self._reader.client.close()
        self.client.close()

    def deactivate(self) -> None:
        """Sends the acks held back and takes what the reading thread delivered (``next_tuple``,
        which does both, is not called until ``activate``), so those entries are held like the
        others: touched while acks come, emitted after ``activate``."""
        def flush_and_take() -> None:
            self._flush_acks()
            self._take_arrived()
        self._safely(self.clock.now(), flush_and_take)

    def activate(self) -> None:
        """Takes what the reading thread delivered while the spout was deactivated, so that the
        next ``next_tuple`` touches those entries with the rest before it emits any: one that
        idled past ``claim_idle_ms`` meanwhile may be another task's now."""
        self._safely(self.clock.now(), self._take_arrived)

    # --- the loop ---------------------------------------------------------------------------

    def next_tuple(self) -> None:
        """Emits at most one tuple: a due retry first, then a taken entry, reading a batch when
        none is left. Server errors are logged and retried after ``down_retry_secs``."""
        try:
            self._next_tuple()
        finally:
            self._gate.turn_ended()   # an entry let go and not emitted after all, a claim not needed

    def _next_tuple(self) -> None:
        now = self.clock.now()
        if now < self._outage.retry_at:
            return
        if not self._safely(now, lambda: self._step(now)):
            return
        if self._at_most_once:
            self._emit_acked(now)
            return
        while self._ready:
            entry_id = self._ready[0]
            t = self._tracked.get(entry_id)
            if t is None:
                self._ready.popleft()
                continue
            size = t.group_size
            held = self._gate.hold(t.suspect, size, now)
            aside = self._gate.set_aside_alone()
            if aside:
                warn_stood_alone(log, self.consumer, len(aside), self._gate.patience)
                self._aside.extend(aside)
            # a suspect alone set aside: its mark a death beside others, before anything goes
            # out beside it (`AloneGate.set_aside_alone`)
            if self._aside and not self._safely(now, self._mark_aside):
                return
            if held:
                return   # a suspect waits for what is in flight, and nothing goes out beside its group
            alone = self._gate.goes_alone(t.suspect)
            # a suspect's mark beforehand (the death that would end this delivery leaves no one
            # to write it): alone, charged as dying; in a group, its level raised
            if alone and not self._safely(now, functools.partial(self._mark, entry_id, t, size)):
                return
            self._ready.popleft()
            self._gate.emitted(entry_id, alone, size)
            self.collector.emit(t.values, msg_id=entry_id)
            return

    def _emit_acked(self, now: float) -> None:
        """At most once (acking off): up to ``batch_size`` taken entries XACKed in one call, then
        all of them emitted in this same ``next_tuple``, so that no ``close`` (a kill, a
        rebalance) comes between the XACK and the emit: a worker that dies in between loses them
        (at most once), while a restart, which replays the consumer's pending entries first,
        never emits one again. Before, an entry's XACK went with the round's others at the next
        ``next_tuple``, and a worker that died between emitted it again. The server down: they
        stay taken, and go once it is back. One XACK a batch, not an entry: 20,000 entries
        driven through the spout alone at 9.3-9.9k a second, against 5.1-5.3k with one an entry.
        No entry is a suspect here (nothing fails, nothing is charged), so the gate only counts
        them in flight."""
        batch: list[tuple[str, Any]] = []
        while self._ready and len(batch) < self.batch_size:
            entry_id = self._ready.popleft()
            t = self._tracked.get(entry_id)
            if t is not None:
                batch.append((entry_id, t))
        if not batch:
            return
        ids = [entry_id for entry_id, _ in batch]
        if not self._safely(now, functools.partial(self.client.xack, self.stream, self.group, *ids)):
            self._ready.extendleft(reversed(ids))   # acked nothing: they go once the server is back
            return
        for entry_id, t in batch:
            self._gate.emitted(entry_id, False, t.group_size)
            self.collector.emit(t.values, msg_id=entry_id)

    def ack(self, msg_id: Any) -> None:
        """Queues the entry's XACK: the acks of a round go in one XACK at the next
        ``next_tuple`` (the loop calls it after the acks it delivered, whenever the spout may
        emit), or here once ``batch_size`` are waiting. If the server is down, they are kept and
        sent when it is back (until then the entry stays pending, so a crash meanwhile replays
        it: at least once); a held-back ack's entry is touched like one in flight."""
        grouped = self._gate.in_group(msg_id)
        alone = self._gate.ended(msg_id) and not grouped
        t = self._tracked.pop(msg_id, None)
        self._retrying.done(msg_id)   # its uncharged failures back off from the start if it comes again
        self._to_write.pop(msg_id, None)
        if t is not None and t.charged:
            self._to_forget.append(msg_id)
        if not self._at_most_once:   # at most once: XACKed before it went out (`_emit_acked`)
            self._to_ack.append(msg_id)
        now = self.clock.now()
        # a slow topology at max spout pending calls ack and fail but not next_tuple: the
        # entries it holds are kept from looking idle here too
        def flush_and_touch() -> None:
            # a suspect's ack at once: its charge must be gone before the next one goes out
            if alone or len(self._to_ack) >= self.batch_size:
                self._flush_acks()
            self._touch_due(now)
        if now >= self._outage.retry_at:
            self._safely(now, flush_and_touch)

    def fail(self, msg_id: Any) -> None:
        """A failure without a cause: counted as one the entry caused (`fail_with`)."""
        self.fail_with(msg_id, UNKNOWN)

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """Schedules a retry after the backoff's delay, or, past the retry limit, dead-letters
        the entry with the cause. Only failures the entry caused (``cause.record_caused``: a
        bolt failed it or raised on it) count against ``max_retries``; after a lost worker or a
        timeout the entry is retried without being charged (beside the others; after
        ``worker-died``, as a suspect, alone: see the module docstring). A worker's death is charged only when it takes this
        spout down too, with the entry in flight alone: then no one calls this method, and the
        charge written before the entry went out stays."""
        grouped = self._gate.in_group(msg_id)
        marked = self._gate.ended(msg_id)
        alone = marked and not grouped
        t = self._tracked.get(msg_id)
        if t is None:
            return
        charged = cause.record_caused
        if charged:
            t.retries += 1
        if self._gate.lost_worker(cause):
            t.suspect = t.lone = True
        if self._counting and (marked or charged):
            # alone, it was charged beforehand as a death: that charge becomes the failure it
            # caused, or is taken back (a timeout, a lost worker, a rollback: this spout lives);
            # in a group, its level raised beforehand is taken back so too
            t.charged = True
            self._to_write[msg_id] = str(t.charge)
        now = self.clock.now()
        if charged:
            scheduled = self._retrying.schedule(msg_id, t.retries, now)
        else:
            self._retrying.reschedule(msg_id, t.retries, now)
            scheduled = True
        if not scheduled:
            self._tracked.pop(msg_id)
            self._to_write.pop(msg_id, None)   # its dead letter deletes its charges
            self._dead_letter(t.entry, f"failed {t.retries} times (max_retries {self.backoff.max_retries})"
                              f"{cause.reason_suffix()}", cause)
            return
        def flush_and_touch() -> None:
            if alone:   # a suspect's charge at once: the next one is charged only after it
                self._flush_acks()
            self._touch_due(now)
        if now >= self._outage.retry_at:
            self._safely(now, flush_and_touch)

    # --- helpers ------------------------------------------------------------------------------

    def _step(self, now: float) -> None:
        if not self._set_up:
            self._create_group()
            self._set_up = True
        self._flush_acks()
        self._write_dead_letters()
        self._move_due_retries(now)
        self._touch_due(now)   # before _fill's XAUTOCLAIM: it must not find our own entries idle
        if not self._ready:
            self._fill(now)
        self._recovered(now)

    def _safely(self, now: float, step: Callable[[], object]) -> bool:
        """Runs ``step``; False if the server is down (logged, left alone a while) or the group
        is gone (recreated at the next `next_tuple`)."""
        try:
            step()
        except _DOWN as e:
            self._down(now, e)
            return False
        except redis.ResponseError as e:
            # UNBLOCKED: the stream was deleted under the reading thread's blocked XREADGROUP
            if "NOGROUP" not in str(e) and "UNBLOCKED" not in str(e):
                raise
            self._group_gone(e)
            return False
        return True

    def _fill(self, now: float) -> None:
        if self._history_from is not None:
            if self._read_history(self._history_from):
                return
            self._history_from = None
        if now >= self._next_claim:
            self._next_claim = now + self.claim_interval_secs
            if self._claim():
                return
        self._take_arrived()
        if not self._ready and not self._reading:
            if not self._reader.is_alive():
                self._reader.start()
            self._reading = True
            self._reader.request()

    def _take_arrived(self) -> None:
        """Takes the batches the reading thread delivered; a read's error is raised here, on
        the loop, as if the read had been the loop's own."""
        arrived = self._reader.arrived
        while arrived:
            batch = arrived.popleft()
            self._reading = False
            if isinstance(batch, Exception):
                raise batch
            self._take(Entry(i, f) for i, f in batch)

    def _create_group(self) -> None:
        """Creates the group unless it exists; the task that creates it deletes the charges
        left by an earlier group of its name, in the same script call (`_CREATE_GROUP`): the
        new group delivers those entries afresh, and a fresh delivery's ack deletes no charge,
        so a leftover one would stay and be applied when the entry is delivered again."""
        self._create_group_script(keys=[self.stream, self._charges], args=[self.group])

    def _read_history(self, start: str) -> bool:
        """One XREADGROUP of own pending entries after ``start``, without blocking."""
        # [[stream, [(id, fields), ...]]] (redis types the reply as any protocol version's shape)
        reply = cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", self.client.xreadgroup(
            self.group, self.consumer, {self.stream: start}, count=self.batch_size))
        entries = reply[0][1] if reply else []
        if entries:
            if start == "0" and self._counting:
                # the groups they take are the recovery's length: said before the first goes
                # out, not left to guess (XPENDING's summary counts them all: one round trip)
                mine = [c["pending"] for c in self.client.xpending(self.stream, self.group)["consumers"]
                        if c["name"] == self.consumer]
                warn_suspects_taken_back(log, self.consumer, int(mine[0]) if mine else len(entries), self._conf)
            self._history_from = entries[-1][0]
        self._take([Entry(i, f) for i, f in entries], again=True)
        return bool(entries)

    def _claim(self) -> bool:
        """XAUTOCLAIM entries idle longer than ``claim_idle_ms`` (a consumer that is gone)."""
        reply = self.client.xautoclaim(self.stream, self.group, self.consumer, self.claim_idle_ms,
                                       start_id=self._claim_from, count=self.batch_size)
        # go on from where this scan stopped ("0-0" once the pending list was scanned whole):
        # else entries at its head, our own in flight among them, would hide all the others
        self._claim_from = reply[0] or "0-0"
        entries, deleted = reply[1], (reply[2] if len(reply) > 2 else [])
        # Our own in-flight entries may be idle too; they are tracked already.
        fresh = [Entry(i, f) for i, f in entries if i not in self._tracked]
        fresh += [Entry(i, None) for i in deleted if i not in self._tracked]
        if fresh:
            # a warning: each of them waited claim_idle_ms at least, and a pipeline that sat
            # that long with nothing failing and nothing said looks hung
            log.warning("%s: claimed %d entries of stream %r left pending by a consumer that no longer reads "
                        "them, each idle for over claim_idle_ms (%d ms; claims every claim_interval_secs, %s s): "
                        "they waited that long", self.consumer, len(fresh), self.stream, self.claim_idle_ms,
                        self.claim_interval_secs)
        self._take(fresh, again=True)
        return bool(fresh)

    def _take(self, entries: Iterable[Entry], again: bool = False) -> None:
        """Tracks ``entries`` and queues them to be emitted; ``again``: they were delivered
        before (taken from the pending list), so they are suspects, with the charges the hash
        keeps, and one charged past ``max_retries`` is dead-lettered instead."""
        acked = set(self._to_ack)   # acked while the server was down: still pending there
        # acked or given up while the server was down: still pending there, not taken anew
        # (a given-up entry taken again would go to the bolts with a fresh retry budget)
        entries = [e for e in entries if e.id not in self._tracked and e.id not in acked and e.id not in self._dead]
        looked_up = self._look_up(entries) if again and self._counting else {}
        for entry in entries:
            delivered, retries, deaths, level, beside = looked_up.get(entry.id, (1, 0, 0, 0, 0))
            if self._gate.gives_up(Charge(retries, deaths, level, beside)):
                self._dead_letter(entry, *self._gate.death_reason(Charge(retries, deaths, level, beside), delivered))
                continue
            try:
                values = self.translator(self.stream, entry)
            except MalformedEntry as e:
                self._dead_letter(entry, str(e))
                continue
            except Exception as e:  # noqa: BLE001 (a user translator: any error is a poison entry)
                # Raising here would kill the worker, and the restarted task replays this very
                # entry first: a crash loop. The entry goes to the dead letters instead.
                self._dead_letter(entry, f"stream {self.stream!r} entry {entry.id}: translator "
                                         f"raised {type(e).__name__}: {e}")
                continue
            wrong = arity_error(values, self.output_fields)  # else emit raises: the same crash loop
            if wrong is not None:
                self._dead_letter(entry, f"stream {self.stream!r} entry {entry.id}: {wrong}")
                continue
            self._tracked[entry.id] = _Tracked(entry, values, retries, deaths, delivered,
                                               suspect=entry.id in looked_up,
                                               charged=retries > 0 or level > 0 or beside > 0, level=level,
                                               beside=beside)
            self._ready.append(entry.id)

    def _look_up(self, entries: list[Entry]) -> dict[str, tuple[int, int, int, int, int]]:
        """Each entry's delivery count and the failures (and deaths, level, deaths beside
        others) the hash of charges keeps for it, in one script call per `_TOUCH_BATCH` ids."""
        ids = [e.id for e in entries]
        found: dict[str, tuple[int, int, int, int, int]] = {}
        for i in range(0, len(ids), _TOUCH_BATCH):
            batch = ids[i:i + _TOUCH_BATCH]
            reply = self._look_up_script(keys=[self.stream, self._charges], args=[self.group, *batch])
            for k, entry_id in enumerate(batch):
                delivered, charges = reply[2 * k], reply[2 * k + 1]
                try:
                    charge = Charge.parse(charges)
                except (ValueError, TypeError):
                    # a Redis key any client may write: raising here failed this spout again at every
                    # restart, as it reads the same value first (the Kafka spout ignores its malformed
                    # budgets so too)
                    log.warning("%s: the charge %r of entry %s in %s is not one (\"<failures> <deaths> [<level> [<beside>]]\"); "
                                "ignored: the entry starts with a fresh budget, and its next charge replaces it",
                                self.consumer, str(charges)[:100], entry_id, self._charges)
                    charge = Charge()
                found[entry_id] = (int(delivered), charge.retries, charge.deaths, charge.level, charge.beside)
        return found

    def _mark(self, entry_id: str, t: _Tracked, size: int) -> None:
        """Writes the mark of ``t``'s delivery as a suspect before it goes out, as if its worker
        will die with it: alone (``size`` 1), its charge as dying; in a group, its level raised.
        What was acked or charged before goes in the same round trip, first (`_flush_acks`)."""
        mark = t.charge.dying() if size == 1 else t.charge.in_group()
        self._flush_acks()
        self.client.hset(self._charges, entry_id, str(mark))
        t.charged = True

    def _mark_aside(self) -> None:
        """Writes the mark of each suspect alone set aside (`_aside`) as a death beside others
        instead of a death alone (`Charge.set_aside`); its failure or the spout's close writes
        its charge as it stands, taking that back, as it takes back a death alone."""
        marks = {m: str(t.charge.dying().set_aside()) for m in self._aside if (t := self._tracked.get(m)) is not None}
        self._flush_acks()
        if marks:
            self.client.hset(self._charges, mapping=marks)
        self._aside.clear()

    def _move_due_retries(self, now: float) -> None:
        """Moves the retries that are due to the front of the ready queue, after resetting
        their idle time in one batch; one another task claimed meanwhile is not re-emitted."""
        due = []
        while (entry_id := self._retrying.pop_ready(now)) is not None:
            if entry_id in self._tracked:
                due.append(entry_id)
            else:
                self._retrying.done(entry_id)
        # ready before the touch: if the server is down, they are emitted once it is back (the
        # emit skips one the touch found claimed by another task)
        self._ready.extendleft(reversed(due))
        if due:
            self._touch(due)

    def _touch_due(self, now: float) -> None:
        """Resets the idle time of every entry held here, once per ``claim_idle_ms / 3``."""
        if now < self._next_touch:
            return
        if (self._tracked or self._to_ack or self._dead) and self._set_up:
            self._touch([*self._tracked, *self._to_ack, *self._dead])
        self._next_touch = now + self._touch_every

    def _touch(self, ids: list[str]) -> None:
        """Resets the idle time of ``ids`` in the group's pending list (`_TOUCH`); those no
        longer ours (claimed by another task, or gone with the group) are dropped: their owner
        processes them now. One still in flight here may still be acked (XACK by anyone acks)."""
        lost: list[str] = []
        for i in range(0, len(ids), _TOUCH_BATCH):
            lost += self._touch_script(keys=[self.stream],
                                       args=[self.group, self.consumer, *ids[i:i + _TOUCH_BATCH]])
        if lost:
            log.warning("%s: %d entries of stream %r held here were claimed by another consumer "
                        "(this task stalled for more than claim_idle_ms %d?); leaving them to it: "
                        "%s", self.consumer, len(lost), self.stream, self.claim_idle_ms, lost[:10])
        for entry_id in lost:
            self._tracked.pop(entry_id, None)
            self._retrying.done(entry_id)
            self._dead.pop(entry_id, None)

    def _flush_acks(self) -> None:
        """Sends the acks held back, and the charges written or deleted meanwhile, in one round
        trip."""
        if not (self._to_ack or self._to_write or self._to_forget):
            return
        with self.client.pipeline(transaction=False) as p:
            if self._to_write:
                p.hset(self._charges, mapping=self._to_write)
            if self._to_ack:
                p.xack(self.stream, self.group, *self._to_ack)
            if self._to_forget:
                p.hdel(self._charges, *self._to_forget)
            p.execute()
        self._to_ack, self._to_write, self._to_forget = [], {}, []

    def _dead_letter(self, entry: Entry, error: str, cause: FailureCause | None = None) -> None:
        """XADD the entry to the dead-letter stream and XACK it, atomically (a script), so it is
        never both lost and acked; ``cause``, the failure that gave it up, goes with it as the
        JSON field ``cause`` (kind, component, task, error, message). If the server is down the
        entry is kept here (pending there, touched like one in flight) and written once it is
        back, by the next `next_tuple`."""
        log.error("%s: entry %s of stream %r to dead-letter stream %r: %s", self.consumer,
                  entry.id, self.stream, self.dead_letter_stream, error)
        self._dead[entry.id] = _DeadLetter(entry, error, cause)  # counted once written (`_write_dead_letters`)
        self._safely(self.clock.now(), self._write_dead_letters)

    def _write_dead_letters(self) -> None:
        """Writes the entries given up (`_dead_letter`), each with its XACK in one script call
        (`_DEAD_LETTER`: written once, however often it is sent), and forgets each once written;
        raises as the server's calls do. A dead letter is counted (`dead_lettered`) by the call
        that wrote it, not when the entry was given up: a task cut off from Redis past the claim
        idle time loses its entries to another task, which may ack one (then no dead letter is
        written) or give it up and count it itself. A call whose reply was lost after the
        server ran it is not counted (its retry finds the entry acked, as another task's ack
        would leave it): a count short by one in that case, never one over."""
        for entry_id, dead in list(self._dead.items()):
            record: dict[str, str] = {
                "stream": self.stream, "id": entry_id, "error": dead.error,
                "fields": json.dumps(dict(dead.entry.fields) if dead.entry.fields is not None else None)}
            if dead.cause is not None:
                record["cause"] = json.dumps(dead.cause.as_dict())
            written = self._dead_letter_script(keys=[self.stream, self.dead_letter_stream, self._charges],
                                               args=[self.group, entry_id, *(x for kv in record.items() for x in kv)])
            del self._dead[entry_id]
            if written == 1:  # 0: acked meanwhile (by another task that claimed it), or written by an earlier call
                self.count_dead_letter(dead.cause)

    def _group_gone(self, error: Exception) -> None:
        """The stream or the group vanished (a Redis restart without persistence, a FLUSHALL):
        its pending entries are gone with it, so the group is recreated (MKSTREAM) at the next
        `next_tuple` and reading goes on; entries in flight are acked as no-ops."""
        log.warning("%s: stream %r or its group %r is gone from Redis at %s (%s: restarted "
                    "without persistence?); recreating them", self.consumer, self.stream,
                    self.group, redact_text(self.url), error)
        self._set_up = False
        self._history_from = "0"

    def _down(self, now: float, error: Exception) -> None:
        o = self._outage
        o.errors += 1
        o.retry_at = now + self.down_retry_secs
        if o.since is None:
            o.since = now
            message = (f"{self.consumer}: Redis at {redact_text(self.url)} unreachable reading stream "
                       f"{self.stream!r} ({error}); retrying every {self.down_retry_secs}s")
            self.collector.report_error(message)  # which logs it

    def _recovered(self, now: float) -> None:
        o = self._outage
        if o.since is not None:
            log.warning("%s: Redis at %s reachable again after %.1fs (%d failed attempts)",
                        self.consumer, redact_text(self.url), now - o.since, o.errors)
            self._outage = _Outage()


class _Writer(threading.Thread):
    """The sink's writes, off its loop's thread: it takes every write queued since its last
    round trip and sends them as one pipeline, then acks (or fails) each tuple. No flush
    interval: a write queued while none is under way goes at once; one queued meanwhile goes
    with the next pipeline, right after."""

    MAX_BATCH = 1000   # writes per pipeline at most: bounds a pipeline's memory and run in Redis

    def __init__(self, sink: RedisStreamSinkBolt) -> None:
        super().__init__(name=f"redis-sink-writer-{sink.target}", daemon=True)
        self.sink = sink
        self.queued: deque[tuple[Any, str, dict[str, Any]]] = deque()   # (tuple, key, other fields)
        self._ready = threading.Event()
        self._stopping = False

    def put(self, tup: Any, key: str, values: dict[str, Any]) -> None:
        """Queues one tuple's write (any thread)."""
        self.queued.append((tup, key, values))
        self._ready.set()

    def run(self) -> None:
        """Writes what is queued, a pipeline at a time, until `stop` and the queue is empty."""
        queued = self.queued
        while True:
            self._ready.wait()
            self._ready.clear()
            while queued:
                batch = [queued.popleft() for _ in range(min(len(queued), self.MAX_BATCH))]
                self.sink._write(batch)
            if self._stopping and not queued:
                return

    def stop(self) -> None:
        """Writes what is queued, then ends the thread (at most a few seconds: what is left is
        not acked, and is replayed)."""
        self._stopping = True
        self._ready.set()
        self.join(5.0)


class RedisStreamSinkBolt(Bolt):
    """Writes each tuple to Redis idempotently, then acks it; a write error fails it (replay).
    A server that is down, loading, out of memory or read-only fails it as `UNAVAILABLE`, which
    no retry budget charges: an outage sends no record to the dead letters. A write refused for
    the tuple's own sake (WRONGTYPE: its key holds another type) is charged.

    ``mode="hash"``: ``HSET <key_prefix><tuple[id_field]>`` with the tuple's other fields, so a
    replay overwrites. ``mode="stream"``: ``XADD target`` of the tuple's fields, skipped when
    ``tuple[id_field]`` is already in the set ``<target>:written`` (one Lua script, atomic), so a
    replay does not append twice.

    The writes go from a thread of the bolt's own (`_Writer`), which sends whatever is queued
    in one pipeline per round trip, and acks each tuple after its write: ``execute`` never waits
    on Redis, so neither the bolt's loop nor the executors sharing it wait out one round trip
    per tuple, and a tuple is written as soon as the write before it returned.
    """

    # Redis does not roll a script back when it errors half-way: mark the id written only
    # after the XADD succeeded, so a failing XADD (WRONGTYPE, OOM) is replayed, never lost; a
    # failure between the two can only duplicate on replay.
    _XADD_ONCE = """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return false
end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return id
"""

    def __init__(self, url: str, target: str, *, mode: str = "hash", id_field: str = "id",
                 key_prefix: str | None = None) -> None:
        if mode not in ("hash", "stream"):
            raise ValueError(f"RedisStreamSinkBolt: mode must be 'hash' or 'stream', not {mode!r}")
        self.url = url
        self.target = target
        self.mode = mode
        self.id_field = id_field
        self.key_prefix = f"{target}:" if key_prefix is None else key_prefix

    def prepare(self, conf, context, collector) -> None:
        """Connects (lazily, at the first write)."""
        super().prepare(conf, context, collector)
        self._where = (context.get_this_component_id(), context.get_this_task_id())
        self.client = _client(self.url)
        self._xadd_once = self.client.register_script(self._XADD_ONCE)
        self._script_loaded = False
        self._failing = False
        self._writer = _Writer(self)

    def execute(self, tup) -> None:
        """Queues the tuple's write (acked once written, failed on a server error). A tick
        tuple is skipped, as storm-redis's bolts (``BaseTickTupleAwareRichBolt``) skip it."""
        if is_tick_tuple(tup):
            return
        fields = tup.get_fields().to_list()
        if self.id_field not in fields:
            reason = (f"RedisStreamSinkBolt: tuple from {tup.get_source_component()!r} stream "
                      f"{tup.get_source_stream_id()!r} has no field {self.id_field!r} (has {fields})")
            self.collector.report_error(reason)
            fail_for(self.collector, tup, FailureCause.of_reason(*self._where, reason))
            return
        values = dict(zip(fields, tup.get_values()))
        key = str(values.pop(self.id_field))
        if not self._writer.is_alive():
            self._writer.start()
        self._writer.put(tup, key, values)

    def _write(self, batch: list[tuple[Any, str, dict[str, Any]]]) -> None:
        """Writes ``batch`` in one pipeline (on the writer's thread), then acks each tuple
        written and fails each one whose write failed: as `UNAVAILABLE` (not charged) if the
        server was down or took no writes (`store_unavailable`), else as refused for it."""
        try:
            if self.mode == "stream" and not self._script_loaded:
                # loaded once, not checked per pipeline (a script in a pipeline costs redis-py
                # a SCRIPT EXISTS round trip at every execute)
                self.client.script_load(self._XADD_ONCE)
                self._script_loaded = True
            with self.client.pipeline(transaction=False) as p:
                for _tup, key, values in batch:
                    if self.mode == "hash":
                        p.hset(self.key_prefix + key, mapping={k: _text(v) for k, v in values.items()})
                    else:
                        flat = [x for k, v in values.items() for x in (k, _text(v))]
                        p.evalsha(self._xadd_once.sha, 2, self.target, f"{self.target}:written",
                                  key, self.id_field, key, *flat)
                results = p.execute(raise_on_error=False)
        except redis.RedisError as e:
            results = [e] * len(batch)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            self._script_loaded = False   # the server restarted: loaded again before the next write
        error = next((r for r in results if isinstance(r, Exception)), None)
        if error is not None and not self._failing:
            self.collector.report_error(  # which logs it
                f"RedisStreamSinkBolt: cannot write {self.target!r} to {redact_text(self.url)} ({error}); "
                f"failing tuples for replay")
        self._failing = error is not None
        for (tup, _key, _values), result in zip(batch, results):
            if isinstance(result, Exception):
                # why goes with the failure: a record given up after its retries says it in its
                # dead letter (the URL's password masked); a server that is down is no fault of
                # the record's, and is not charged to it (`store_unavailable`)
                fail_for(self.collector, tup, FailureCause.of_reason(
                    *self._where, f"RedisStreamSinkBolt: cannot write {self.target!r}: "
                    f"{type(result).__name__}: {redact_text(str(result))}", _failure_kind(result)))
            else:
                self.collector.ack(tup)

    def cleanup(self) -> None:
        """Writes what is queued, then closes the connection."""
        if self._writer.is_alive():
            self._writer.stop()
        self.client.close()


def _text(v: Any) -> str | bytes | int | float:
    """``v`` as Redis takes it: strings, bytes and numbers as they are, anything else (bools,
    None, lists, dicts) as JSON. redis-py refuses a bool (``DataError``), which would otherwise
    fail the tuple at every replay as if the server were down."""
    if isinstance(v, (str, bytes, float)) or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    return json.dumps(v)


# storm-redis's RedisDataTypeDescription.RedisDataType, in the same spelling lower-cased
DATA_TYPES = ("string", "hash", "list", "set", "sorted_set", "hyper_log_log", "geo")


@dataclass(frozen=True)
class LookupSpec:
    """What a lookup or filter reads (storm-redis's ``RedisDataTypeDescription``): the key is
    ``prefix`` + the tuple's ``key_field``; ``data_type`` is one of `DATA_TYPES` (Storm's names,
    any case), and ``additional_key`` the hash, set, sorted set or geo index it is looked up in,
    where the bolt's query needs one. ``hash_key`` is short for ``data_type="hash",
    additional_key=hash_key``. Checked against each bolt's queries by the bolt."""

    key_field: str
    hash_key: str | None = None
    prefix: str = ""
    data_type: str | None = None
    additional_key: str | None = None

    @property
    def kind(self) -> str:
        """The data type, lower-cased: ``data_type``, else "hash" with a ``hash_key``, else
        "string"."""
        if self.data_type is not None:
            return self.data_type.lower()
        return "hash" if self.hash_key is not None else "string"

    @property
    def container(self) -> str | None:
        """The additional key (``additional_key`` or ``hash_key``)."""
        return self.additional_key if self.additional_key is not None else self.hash_key


def _position(reply: list) -> list[float] | None:
    """GEOPOS of one member: ``[longitude, latitude]``, or None if it is not in the index."""
    return list(reply[0]) if reply and reply[0] is not None else None


# What each bolt runs per data type: (needs the additional key, query(client, key, container)),
# as storm-redis's RedisLookupBolt.process and RedisFilterBolt.execute do.
_Query = tuple[bool, Callable[[Any, str, Any], Any]]

_LOOKUPS: dict[str, _Query] = {
    "string": (False, lambda c, key, _: c.get(key)),
    "list": (False, lambda c, key, _: c.lpop(key)),   # storm-redis pops: each lookup consumes
    "hash": (True, lambda c, key, container: c.hget(container, key)),
    "set": (False, lambda c, key, _: c.scard(key)),
    "sorted_set": (True, lambda c, key, container: c.zscore(container, key)),
    "hyper_log_log": (False, lambda c, key, _: c.pfcount(key)),
    "geo": (True, lambda c, key, container: _position(c.geopos(container, key))),
}

_FILTERS: dict[str, _Query] = {
    "string": (False, lambda c, key, _: c.exists(key) > 0),
    "hash": (True, lambda c, key, container: c.hexists(container, key)),
    "set": (True, lambda c, key, container: c.sismember(container, key)),
    "sorted_set": (True, lambda c, key, container: c.zrank(container, key) is not None),
    "hyper_log_log": (False, lambda c, key, _: c.pfcount(key) > 0),
    "geo": (True, lambda c, key, container: _position(c.geopos(container, key)) is not None),
}


class _RedisKeyBolt(Bolt):
    """What the lookup and filter bolts share: the spec checked against the bolt's ``_QUERIES``
    (a clear ValueError at build time), the key a tuple names, the connection, and a server
    error failing the tuple; each declares ``output_fields``."""

    _QUERIES: ClassVar[dict[str, _Query]] = {}

    def __init__(self, url: str, spec: LookupSpec, output_fields: Sequence[str]) -> None:
        name, kind = type(self).__name__, spec.kind
        if kind not in self._QUERIES:
            why = (f"; storm-redis's {name} has no {kind!r} either ('string' tests that a key "
                   f"exists)" if kind in DATA_TYPES else "")
            raise ValueError(f"{name}: LookupSpec data_type {spec.data_type!r} is not one of "
                             f"{list(self._QUERIES)}{why}")
        if spec.hash_key is not None and kind != "hash":
            raise ValueError(f"{name}: LookupSpec hash_key {spec.hash_key!r} is for data_type "
                             f"'hash', not {kind!r}: pass additional_key")
        needs = self._QUERIES[kind][0]
        if needs and spec.container is None:
            raise ValueError(f"{name}: LookupSpec data_type {kind!r} needs additional_key (the "
                             f"key of the {kind.replace('_', ' ')} that field {spec.key_field!r} "
                             f"names a member of)")
        if not needs and spec.container is not None:
            raise ValueError(f"{name}: LookupSpec data_type {kind!r} reads the key named by field "
                             f"{spec.key_field!r} itself and takes no additional_key "
                             f"({spec.container!r})")
        self.url = url
        self.spec = spec
        self.output_fields = list(output_fields)

    def declare_output_fields(self, declarer) -> None:
        """``output_fields``."""
        declarer.declare(Fields(self.output_fields))

    def prepare(self, conf, context, collector) -> None:
        """Connects (lazily)."""
        super().prepare(conf, context, collector)
        self._where = (context.get_this_component_id(), context.get_this_task_id())
        self.client = _client(self.url)

    def _found(self, key: str) -> Any:
        """The query's reply for ``key``."""
        query = self._QUERIES[self.spec.kind][1]   # looked up here: a lambda does not pickle
        return query(self.client, key, self.spec.container)

    def _process(self, tup, key: str) -> None:
        """The query of ``key`` (the one ``tup`` names), and what is emitted or acked for
        ``tup`` (each bolt's own)."""
        raise NotImplementedError

    def execute(self, tup) -> None:
        """Runs the query; on a server error, or a tuple without ``key_field``, reports it and
        fails the tuple (replay) with that reason: a server that is down or cannot serve
        (`store_unavailable`) as `UNAVAILABLE`, not charged to the tuple's retry budget. A tick tuple is skipped, as storm-redis's
        bolts (``BaseTickTupleAwareRichBolt``) skip it."""
        if is_tick_tuple(tup):
            return
        try:  # the key: ``prefix`` + the tuple's ``key_field``
            key = self.spec.prefix + str(tup.get_value_by_field(self.spec.key_field))
        except ValueError:  # looked into only then: a reason costs nothing on a tuple that has the field
            if self.spec.key_field in tup.get_fields():
                raise
            self._fail(tup, f"{type(self).__name__}: tuple from {tup.get_source_component()!r} stream "
                            f"{tup.get_source_stream_id()!r} has no key field {self.spec.key_field!r} "
                            f"(has {tup.get_fields().to_list()})")
            return
        try:
            self._process(tup, key)
        except redis.RedisError as e:
            # what, where and why: the query, the key (cut: it is the user's data, of any size),
            # the server (its password masked) and the error; the reason goes with the failure
            # into a dead letter
            in_container = f" in {self.spec.container!r}" if self.spec.container is not None else ""
            self._fail(tup, f"{type(self).__name__}: {self.spec.kind} query of key {shown_value(key)}{in_container} "
                            f"on {redact_text(self.url)} failed: {type(e).__name__}: {redact_text(str(e))}",
                       _failure_kind(e))
            return
        self.collector.ack(tup)

    def _fail(self, tup, reason: str, kind: str = EXPLICIT) -> None:
        self.collector.report_error(reason)
        fail_because(self.collector, tup, *self._where, reason, kind)

    def cleanup(self) -> None:
        """Closes the connection."""
        self.client.close()


class RedisLookupBolt(_RedisKeyBolt):
    """storm-redis's ``RedisLookupBolt``: looks up the key the tuple's ``key_field`` names and
    emits the input's values plus the reply, anchored to the input, under ``output_fields``
    (the input's fields, then the value's). By data type: string ``GET key``; list ``LPOP key``
    (as storm-redis: each lookup removes the head); hash ``HGET additional_key key``; set
    ``SCARD key``; sorted_set ``ZSCORE additional_key key``; hyper_log_log ``PFCOUNT key``; geo
    ``GEOPOS additional_key key`` as ``[longitude, latitude]``. None where there is nothing."""

    _QUERIES = _LOOKUPS

    def _process(self, tup, key: str) -> None:
        self.collector.emit(list(tup.get_values()) + [self._found(key)], anchors=tup)


class RedisFilterBolt(_RedisKeyBolt):
    """storm-redis's ``RedisFilterBolt``: passes the input on (anchored) only if what the
    tuple's ``key_field`` names exists; acks it either way. By data type: string ``EXISTS key``;
    hash ``HEXISTS additional_key key``; set ``SISMEMBER additional_key key``; sorted_set
    ``ZRANK additional_key key`` not nil; hyper_log_log ``PFCOUNT key`` above 0; geo ``GEOPOS
    additional_key key`` not nil. No list (storm-redis has none). ``output_fields``: the
    input's fields."""

    _QUERIES = _FILTERS

    def _process(self, tup, key: str) -> None:
        if self._found(key):
            self.collector.emit(list(tup.get_values()), anchors=tup)
