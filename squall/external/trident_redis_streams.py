"""`RedisStreamTridentSpout`: a transactional Trident spout over Redis Streams.

Each stream key is a partition. A batch of a stream is up to ``max_batch_entries`` entries after
the previous batch's last entry id (``XRANGE key (<after> + COUNT n``); its metadata is
``{"after", "last", "count"}``. Entry ids never change and only grow, so a replayed txid reads
the same entries again (``XRANGE key (<after> <last>``) and emits the same tuples; no consumer
group is used (the batches' metadata, kept with Trident's coordinator state, is the position).

A replay that finds fewer entries than the batch had (the stream was trimmed, ``XTRIM``/``MAXLEN``,
or an entry deleted) raises `RedisStreamTridentError` naming the stream, the txid and the ids:
keep streams untrimmed past what Trident has committed. The first batch of a stream starts after
``start_id`` (``"0-0"``: the whole stream; ``"$"``: only entries added after the first batch).
Entries become tuples through `squall.external.redis_streams`' translator (the entry id, then the
declared fields); an entry the translator refuses (`MalformedEntry`) is a dead letter: logged
when its txid is first read (naming the txid; a txid read anew, planned again on Spark's
driver, logs only the entries past what it logged), counted at each attempt for the emitter bolt,
which keeps the last attempt's per txid, and skipped quietly on every replay. A server that is
down fails the batch (`squall.ReportedFailedException`: shown in the topology's errors, naming
the server); the URL's password is never logged.

Needs the ``redis`` extra (``pip install 'squall[redis]'``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from .._failure import CountsDeadLetters
from .._fields import Fields
from .._redact import redact_text
from ..trident.coordinator import max_active_batches
from ..trident.partitioned import IPartitionedTridentSpout
from ._arity import arity_error
from .redis_streams import Entry, FieldsTranslator, MalformedEntry
from .trident_redis import call_or_fail_batch

__all__ = ["RedisStreamTridentError", "RedisStreamTridentSpout"]

log = logging.getLogger("squall.external.trident_redis_streams")


class RedisStreamTridentError(ValueError):
    """A batch that cannot be replayed as it was first emitted."""


@dataclass(frozen=True)
class StreamPartition:
    """One stream, by key."""

    key: str

    def get_id(self) -> str:
        """The stream's key."""
        return self.key


class _ReadKey(NamedTuple):
    """One txid's entries of one stream: the txid, the stream's key, the id they come after."""

    txid: int
    key: str
    after: str


def _entry_order(entry_id: str) -> tuple[int, int]:
    """An entry id (``<ms>-<seq>``) as what orders it."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _client(url: str, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=timeout, socket_connect_timeout=timeout)


class _Calls:
    """Redis calls whose outage fails the batch, named with the URL masked."""

    def __init__(self, url: str, timeout: float) -> None:
        self.client = _client(url, timeout)
        self.where = redact_text(url)

    def __call__(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return call_or_fail_batch(f"RedisStreamTridentSpout: Redis at {self.where}", what, fn, *args, **kwargs)


class _Coordinator(IPartitionedTridentSpout.Coordinator):
    def __init__(self, streams: Sequence[str]) -> None:
        self.streams = list(streams)

    def get_partitions_for_batch(self) -> list[str]:
        """The configured streams, sorted."""
        return sorted(self.streams)


class _Emitter(IPartitionedTridentSpout.Emitter, CountsDeadLetters):
    def __init__(self, spout: RedisStreamTridentSpout, conf: dict) -> None:
        self.spout = spout
        self.start_dead_letter_counts()  # read by the emitter bolt around each batch
        self.max_pending = max_active_batches(conf or {})
        # per txid's entries of a stream, the last entry id its first reads logged through: a
        # txid read anew (planned again on Spark's driver; a Storm batch whose metadata was not
        # stored) logs only the entries after it
        self.logged: dict[_ReadKey, str] = {}
        self.call = _Calls(spout.url, spout.timeout)

    def get_ordered_partitions(self, all_partition_info: Any) -> list[StreamPartition]:
        """The streams, by key."""
        return [StreamPartition(k) for k in sorted(all_partition_info)]

    def _start(self, key: str) -> str:
        if self.spout.start_id != "$":
            return self.spout.start_id
        newest = self.call("read", self.call.client.xrevrange, key, "+", "-", count=1)
        return newest[0][0] if newest else "0-0"

    def _emit(self, collector: Any, tx: Any, key: str, entries: list, logged_through: str | None) -> None:
        """Emits the tuples of ``entries`` of stream ``key``; an entry it cannot read is counted
        as a dead letter at every attempt (the emitter bolt keeps the last attempt's count per
        txid), and logged at the txid's first read only (``logged_through``: the id up to which
        an earlier read of the txid logged them; None: a replay, which logs none): a replay
        reads the same entries, and a line per attempt told a user counting the log more dead
        letters than there were."""
        since = None if logged_through is None else _entry_order(logged_through)
        for entry_id, fields in entries:
            try:
                values = self.spout.translator(key, Entry(entry_id, fields))
            except MalformedEntry as e:
                why = str(e)
            except Exception as e:  # noqa: BLE001 (a user translator: any error is a poison entry, as the Kafka spout's)
                why = f"stream {key!r} entry {entry_id}: translator raised {type(e).__name__}: {e}"
            else:
                # a wrong count fails the batch, and every replay of it again: the stream would stall
                wrong = arity_error(values, self.spout.output_fields)
                if wrong is None:
                    collector.emit(list(values))
                    continue
                why = f"stream {key!r} entry {entry_id}: {wrong}"
            if since is not None and _entry_order(entry_id) > since:
                log.error("RedisStreamTridentSpout dead letter: txid %s: %s", tx.txid, why)
            self.count_dead_letter(None)

    def emit_batch_new(self, tx: Any, collector: Any, partitions: set, last_partition_meta: Mapping) -> dict:
        """Each stream's next entries after the previous batch's last."""
        for done in [k for k in self.logged if k.txid <= tx.txid - self.max_pending]:
            del self.logged[done]  # committed: no attempt of it comes again
        metas = {}
        for p in sorted(partitions, key=StreamPartition.get_id):
            last = last_partition_meta.get(p)
            after = last["last"] if last else self._start(p.key)
            entries = self.call("read", self.call.client.xrange, p.key, f"({after}", "+",
                                count=self.spout.max_batch_entries)
            read = _ReadKey(tx.txid, p.key, after)
            self._emit(collector, tx, p.key, entries, self.logged.get(read, after))
            if entries:
                self.logged[read] = max(self.logged.get(read, after), entries[-1][0], key=_entry_order)
            metas[p] = {"after": after, "last": entries[-1][0] if entries else after, "count": len(entries)}
        return metas

    def covers_records(self, partition_meta: Any) -> bool:
        """Whether the batch read entries of its stream, tuples or dead letters."""
        return int(partition_meta["count"]) > 0

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, partition_meta: Any) -> None:
        """The same entries again; a stream trimmed there is an error. Its dead letters were
        logged at the first read."""
        count = int(partition_meta["count"])
        if count == 0:
            return
        after, last = partition_meta["after"], partition_meta["last"]
        entries = self.call("read", self.call.client.xrange, partition.key, f"({after}", last, count=count)
        if len(entries) != count or entries[-1][0] != last:
            raise RedisStreamTridentError(
                f"RedisStreamTridentSpout: replaying txid {tx.txid}: stream {partition.key!r} holds "
                f"{len(entries)} of the batch's {count} entries after {after} up to {last}: it was trimmed or "
                f"entries were deleted")
        self._emit(collector, tx, partition.key, entries, None)


class RedisStreamTridentSpout(IPartitionedTridentSpout):
    """A transactional Trident spout over the Redis Streams ``streams`` at ``url``; see the module
    docstring.

    ``fields``: the entry fields to emit, after the entry id (``id_field``, None: no id) unless a
    ``translator(stream, Entry) -> values`` with its ``output_fields`` is given;
    ``max_batch_entries``: entries per stream per batch; ``start_id``: see the module docstring.
    """

    def __init__(self, url: str, streams: Sequence[str], fields: Sequence[str] = ("value",), *,
                 id_field: str | None = "id", translator: Callable[[str, Entry], list] | None = None,
                 output_fields: Sequence[str] | None = None, max_batch_entries: int = 1000,
                 start_id: str = "0-0", timeout: float = 5.0) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"RedisStreamTridentSpout: the Redis URL must be a string like redis://host:port/db, "
                             f"not {redact_text(repr(url))}")
        try:  # here, where the user made the spout, rather than in every task of the topology
            redis.connection.parse_url(url)
        except ValueError as e:
            raise ValueError(f"RedisStreamTridentSpout: bad Redis URL {redact_text(url)}: {e}") from None
        if not streams or isinstance(streams, str):
            raise ValueError("RedisStreamTridentSpout: streams must be a list of at least one stream key")
        if max_batch_entries < 1:
            raise ValueError("RedisStreamTridentSpout: max_batch_entries must be >= 1")
        if translator is None:
            default = FieldsTranslator(fields, id_field)
            translator, output_fields = default, default.output_fields()
        elif output_fields is None:
            raise ValueError("RedisStreamTridentSpout: a custom translator needs output_fields")
        self.url = url
        self.streams = list(streams)
        self.translator = translator
        self.output_fields = list(output_fields)
        self.max_batch_entries = max_batch_entries
        self.start_id = start_id
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"RedisStreamTridentSpout({redact_text(self.url)!r}, {self.streams!r})"

    def get_coordinator(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Coordinator:
        """The configured streams."""
        return _Coordinator(self.streams)

    def get_emitter(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Emitter:
        """Reads the task's streams."""
        return _Emitter(self, conf)

    def get_output_fields(self) -> Fields:
        """The translator's fields."""
        return Fields(self.output_fields)
