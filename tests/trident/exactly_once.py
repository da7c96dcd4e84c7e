"""What the exactly-once word counts share on every host (LocalCluster, the process host, Spark):
the sentences and their expected counts, the word count itself, a spout wrapper recording every
batch attempt the spout emits (so a test reads how many batches were replayed), an opaque
partitioned spout whose replays differ from their first attempt, and, for LocalCluster, induced
failures at chosen calls of the operations and of the state (`Faults`)."""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squall import Fields
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import FailedException
from squall.trident.partitioned import IOpaquePartitionedTridentSpout, IPartitionedTridentSpout
from squall.trident.spout import BatchCoordinator, Emitter, ITridentSpout
from squall.trident.state import (
    IBackingMap,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    StateFactory,
    TransactionalMap,
)
from squall.testing._registry import SharedLog

from .trident_ops import Split


def sentences(n: int, start: int = 0) -> list[str]:
    """``n`` sentences of 3 to 5 words over a small vocabulary (repeated words, shared words)."""
    return [" ".join(f"w{(i * 7 + j * 3) % 23}" for j in range(3 + i % 3)) + " the" for i in range(start, start + n)]


def counted(text: Iterable[str]) -> dict[str, int]:
    """Every word of ``text`` with how often it occurs."""
    return dict(collections.Counter(w for s in text for w in s.split(" ") if w))


def word_count(topo: TridentTopology, name: str, spout: Any, factory: StateFactory, split: Any = None,
               count: Any = None, spout_tasks: int = 2, count_tasks: int = 2) -> None:
    """``new_stream -> each(Split) -> group_by(word) -> persistent_aggregate(factory, Count())``."""
    topo.new_stream(name, spout).parallelism_hint(spout_tasks) \
        .each(Fields("sentence"), split or Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(factory, count or Count(), Fields("count")) \
        .parallelism_hint(count_tasks)


# --- batch attempts ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Replays:
    """What a run's spout emitted: batches (txids) emitted, txids emitted more than once, and
    attempts beyond each txid's first."""

    batches: int
    replayed_batches: int
    extra_attempts: int


def replays(attempts: SharedLog) -> Replays:
    """The `Replays` of the attempts `Watched` recorded (one record per emitter task)."""
    seen = {(txid, attempt) for txid, attempt in attempts.items()}
    per_txid = collections.Counter(txid for txid, _ in seen)
    return Replays(len(per_txid), sum(1 for n in per_txid.values() if n > 1),
                   sum(n - 1 for n in per_txid.values()))


class _Recording:
    """A spout collector that also records ``(txid, attempt_id, values)`` of each emit."""

    def __init__(self, collector: Any, tx: Any, emitted: SharedLog) -> None:
        self._collector, self._tx, self._emitted = collector, tx, emitted

    def emit(self, values, *args, **kwargs):
        self._emitted.append((self._tx.txid, self._tx.attempt_id, tuple(values)))
        return self._collector.emit(values, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collector, name)


class _WatchedEmitter(Emitter):
    def __init__(self, emitter: Emitter, attempts: SharedLog, emitted: SharedLog | None) -> None:
        self.emitter = emitter
        self.attempts = attempts
        self.emitted = emitted

    def emit_batch(self, tx, metadata, collector) -> None:
        self.attempts.append((tx.txid, tx.attempt_id))
        if self.emitted is not None:
            collector = _Recording(collector, tx, self.emitted)
        self.emitter.emit_batch(tx, metadata, collector)

    def success(self, tx) -> None:
        self.emitter.success(tx)

    def close(self) -> None:
        self.emitter.close()


class Watched(ITridentSpout):
    """``spout`` (an `ITridentSpout`), recording ``(txid, attempt_id)`` of every batch each of
    its emitter tasks emits in ``attempts``, and with ``emitted`` ``(txid, attempt_id, values)``
    of every tuple (what `emitted_in_two_txids` reads when counts are off)."""

    def __init__(self, spout: ITridentSpout, attempts: SharedLog, emitted: SharedLog | None = None) -> None:
        self.spout = spout
        self.attempts = attempts
        self.emitted = emitted

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        return self.spout.get_coordinator(txid_key, conf, context)

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        return _WatchedEmitter(self.spout.get_emitter(txid_key, conf, context), self.attempts, self.emitted)

    def get_output_fields(self) -> Fields:
        return self.spout.get_output_fields()

    def get_component_configuration(self) -> dict | None:
        return self.spout.get_component_configuration()


def emitted_in_two_txids(emitted: SharedLog) -> dict[Any, list[tuple[int, int]]]:
    """Each tuple (values that name their record, say with its offset) `Watched` saw emitted
    under more than one txid, with the ``(txid, attempt_id)`` of each emit: a transactional spout
    emits a record in one txid only, whatever its attempts (for a failed test's message: where a
    count that is off came from)."""
    where: dict[Any, list[tuple[int, int]]] = {}
    for txid, attempt, value in emitted.items():
        where.setdefault(value, []).append((txid, attempt))
    return {v: sorted(set(at)) for v, at in where.items() if len({t for t, _ in at}) > 1}


# --- an opaque spout ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """A partition of `SentenceParts`."""

    pid: str

    def get_id(self) -> str:
        return self.pid


class _PartsCoordinator(IOpaquePartitionedTridentSpout.Coordinator):
    def __init__(self, pids: list[str]) -> None:
        self.pids = pids

    def get_partitions_for_batch(self) -> list[str]:
        return self.pids


class _ListsEmitter:
    """What the emitters over fixed lists share: the lists, the batch size, the partitions."""

    def __init__(self, parts: Mapping[str, list[str]], per_batch: int) -> None:
        self.parts = parts
        self.per_batch = per_batch

    def get_ordered_partitions(self, all_partition_info: Any) -> list[Part]:
        return [Part(p) for p in all_partition_info]


class _PartsEmitter(_ListsEmitter, IOpaquePartitionedTridentSpout.Emitter):
    def emit_batch_new(self, tx, collector, partitions, last_batch_meta):
        metas = {}
        for p in partitions:
            start = last_batch_meta[p]["next"] if last_batch_meta.get(p) else 0
            # a replay takes more than its first attempt did: what it holds differs (opaque)
            rows = self.parts[p.pid][start:start + self.per_batch + tx.attempt_id]
            for s in rows:
                collector.emit([s])
            metas[p] = {"next": start + len(rows)}
        return metas


class SentenceParts(IOpaquePartitionedTridentSpout):
    """An opaque partitioned spout over fixed lists of sentences (partition id -> sentences):
    each batch takes the next ``per_batch + attempt_id`` sentences of each partition after what
    the txid before it took, so a replayed txid holds more sentences than its first attempt, and
    every sentence is in exactly one batch that commits."""

    def __init__(self, parts: Mapping[str, list[str]], per_batch: int) -> None:
        self.parts = dict(parts)
        self.per_batch = per_batch

    def get_coordinator(self, conf: dict, context: Any) -> _PartsCoordinator:
        return _PartsCoordinator(sorted(self.parts))

    def get_emitter(self, conf: dict, context: Any) -> _PartsEmitter:
        return _PartsEmitter(self.parts, self.per_batch)

    def get_output_fields(self) -> Fields:
        return Fields("sentence")


class _ShiftingCoordinator(IOpaquePartitionedTridentSpout.Coordinator):
    def __init__(self, schedule: list[tuple[int, list[str]]]) -> None:
        self.schedule = schedule
        self.calls = 0

    def get_partitions_for_batch(self) -> list[str]:
        self.calls += 1
        return next(pids for upto, pids in self.schedule if self.calls <= upto)


class ShiftingParts(SentenceParts):
    """`SentenceParts` whose partition list changes as batches are started (replays count):
    ``schedule`` is ``[(last call, partition ids), ...]``, the last entry's for good. A partition
    added in front of the sorted list moves the others between the spout's tasks; one left out
    for a while vanishes from the txids then, replays included."""

    def __init__(self, parts: Mapping[str, list[str]], per_batch: int, schedule: list[tuple[int, list[str]]]) -> None:
        super().__init__(parts, per_batch)
        self.schedule = schedule

    def get_coordinator(self, conf: dict, context: Any) -> _ShiftingCoordinator:
        return _ShiftingCoordinator(self.schedule)


# --- a transactional spout whose first batch is held up ---------------------------------------------

class _SecondBatch:
    """Per name, in this process: set once the master coordinator asked whether txid 2 may
    start (it emits it right after), which the spout coordinator's copy waits for."""

    _lock = threading.Lock()
    _events: dict[str, threading.Event] = {}  # noqa: RUF012 (shared by every copy, on purpose)

    @classmethod
    def event(cls, name: str) -> threading.Event:
        with cls._lock:
            return cls._events.setdefault(name, threading.Event())


class _SlowStartCoordinator(IPartitionedTridentSpout.Coordinator):
    def __init__(self, pids: list[str], name: str) -> None:
        self.pids = pids
        self.name = name
        self.held = False

    def is_ready(self, txid: int) -> bool:
        if txid >= 2:  # the master's copy: txid 2 goes out now
            _SecondBatch.event(self.name).set()
        return True

    def get_partitions_for_batch(self) -> list[str]:
        if not self.held:
            # txid 1's batch fails only once txid 2's is on its way, which so goes on first
            self.held = True
            if not _SecondBatch.event(self.name).wait(120):
                raise AssertionError("the master coordinator never asked for txid 2")
            raise FailedException("induced: the source is not there yet")
        return self.pids


class _TxPartsEmitter(_ListsEmitter, IPartitionedTridentSpout.Emitter):
    def emit_batch_new(self, tx, collector, partitions, last_batch_meta):
        metas = {}
        for p in partitions:
            start = last_batch_meta[p]["end"] if last_batch_meta.get(p) else 0
            metas[p] = {"start": start, "end": min(start + self.per_batch, len(self.parts[p.pid]))}
            self.re_emit_partition_batch(tx, collector, p, metas[p])
        return metas

    def re_emit_partition_batch(self, tx, collector, partition, meta) -> None:
        for i in range(meta["start"], meta["end"]):
            collector.emit([self.parts[partition.pid][i], partition.pid, i])


class SlowStartTxParts(IPartitionedTridentSpout):
    """A transactional partitioned spout over fixed lists of sentences (partition id ->
    sentences), ``per_batch`` of each partition a batch, emitting ``[sentence, partition,
    index]``; its coordinator holds the first batch until the master coordinator is about to
    emit txid 2 and then fails it, as a Kafka spout's does while its topic is not there yet, so
    that txid 2's batch reaches the emitter before txid 1's replay. ``name`` (unique per
    topology) names the event the two copies of the coordinator share. The master coordinator
    must run on another thread than the spout coordinator (``topology.executor.own.thread``):
    on a shared one it asks only once the watchdog moved it, after a second or more."""

    def __init__(self, parts: Mapping[str, list[str]], per_batch: int, name: str) -> None:
        self.parts = dict(parts)
        self.per_batch = per_batch
        self.name = name

    def get_coordinator(self, conf: dict, context: Any) -> _SlowStartCoordinator:
        return _SlowStartCoordinator(sorted(self.parts), self.name)

    def get_emitter(self, conf: dict, context: Any) -> _TxPartsEmitter:
        return _TxPartsEmitter(self.parts, self.per_batch)

    def get_output_fields(self) -> Fields:
        return Fields(["sentence", "partition", "index"])


# --- induced failures (LocalCluster: every task in this process) -----------------------------------

class Faults:
    """Failures at chosen calls, counted per site over every copy of the operations in this
    process: ``plan`` maps a site to the call numbers (from 1) that fail. `hit` returns whether
    this call of the site fails, and records it; `fired` says which planned calls did."""

    _lock = threading.Lock()
    _calls: dict[tuple[str, str], int] = {}
    _fired: dict[str, list[tuple[str, int]]] = {}
    _notes: dict[str, list[str]] = {}

    def __init__(self, name: str, plan: Mapping[str, Iterable[int]]) -> None:
        self.name = name
        self.plan = {site: frozenset(calls) for site, calls in plan.items()}

    def hit(self, site: str) -> bool:
        with self._lock:
            n = self._calls[(self.name, site)] = self._calls.get((self.name, site), 0) + 1
            fails = n in self.plan.get(site, ())
            if fails:
                self._fired.setdefault(self.name, []).append((site, n))
            return fails

    def note(self, what: str) -> None:
        """Record that ``what`` happened."""
        with self._lock:
            self._notes.setdefault(self.name, []).append(what)

    def notes(self) -> list[str]:
        """What `note` recorded, in order."""
        with self._lock:
            return list(self._notes.get(self.name, []))

    def fired(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._fired.get(self.name, []))

    def planned(self) -> list[tuple[str, int]]:
        return sorted((site, n) for site, calls in self.plan.items() for n in calls)


class FlakySplit(Split):
    """`Split`, failing its batch at the planned ``split`` calls."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def execute(self, tuple, collector) -> None:  # noqa: A002
        if self.faults.hit("split"):
            raise FailedException("induced failure in Split")
        super().execute(tuple, collector)


class FlakyCount(Count):
    """`Count`, failing its batch at the planned ``combine`` calls (partial counts before the
    repartition and the combine into the stored count)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def combine(self, val1: int, val2: int) -> int:
        if self.faults.hit("combine"):
            raise FailedException("induced failure in Count.combine")
        return super().combine(val1, val2)


class Store:
    """A key-value store outside the workers (in this process, as LocalCluster's tasks are):
    what the map states of one test write."""

    _lock = threading.Lock()
    _data: dict[str, dict[tuple, Any]] = {}
    # every write, in order, as (thread name, key, value): what says how a count came out wrong
    _writes: dict[str, list[tuple[str, tuple, Any]]] = {}

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, keys: list[tuple]) -> list[Any]:
        with self._lock:
            data = self._data.setdefault(self.name, {})
            return [data.get(k) for k in keys]

    def put(self, items: dict[tuple, Any]) -> None:
        with self._lock:
            self._data.setdefault(self.name, {}).update(items)
            thread = threading.current_thread().name
            self._writes.setdefault(self.name, []).extend((thread, k, v) for k, v in items.items())

    def writes_of(self, keys: Iterable[tuple]) -> list[tuple[str, tuple, Any]]:
        """Every write of ``keys``, in order: ``(thread name, key, value)``."""
        wanted = set(keys)
        with self._lock:
            return [w for w in self._writes.get(self.name, []) if w[1] in wanted]

    def items(self) -> dict[tuple, Any]:
        with self._lock:
            return dict(self._data.get(self.name, {}))


class _FlakyBacking(IBackingMap):
    """A backing map in a `Store`: at the planned ``put`` calls it fails before writing, at the
    planned ``put_written`` calls after writing every value."""

    def __init__(self, store: Store, faults: Faults) -> None:
        self.store = store
        self.faults = faults

    def multi_get(self, keys):
        return self.store.get([tuple(k) for k in keys])

    def multi_put(self, keys, vals) -> None:
        if self.faults.hit("put"):
            raise FailedException("induced failure in multi_put, before writing")
        self.store.put({tuple(k): v for k, v in zip(keys, vals)})
        if self.faults.hit("put_written"):
            raise FailedException("induced failure in multi_put, after writing")


class _Wrapped(MapState):
    """A map state passing every call to ``state``; subclasses change ``commit``."""

    def __init__(self, state: MapState) -> None:
        self.state = state

    def multi_get(self, keys):
        return self.state.multi_get(keys)

    def multi_update(self, keys, updaters):
        return self.state.multi_update(keys, updaters)

    def multi_put(self, keys, values) -> None:
        self.state.multi_put(keys, values)

    def begin_commit(self, txid) -> None:
        self.state.begin_commit(txid)

    def commit(self, txid) -> None:
        self.state.commit(txid)


class _FlakyCommits(_Wrapped):
    """``state``, whose ``commit`` fails at the planned ``commit`` calls (after the batch was
    written), and at the planned ``slow_commit`` calls holds the commit until the spout emitted
    the batch again: its ``$commit`` timed out (topology.message.timeout.secs) and was replayed."""

    def __init__(self, state: MapState, faults: Faults, attempts: SharedLog) -> None:
        super().__init__(state)
        self.faults = faults
        self.attempts = attempts

    def commit(self, txid) -> None:
        if self.faults.hit("commit"):
            raise FailedException(f"induced failure in commit of txid {txid}, after it was written")
        if self.faults.hit("slow_commit"):
            emitted = self._emits(txid)
            deadline = time.monotonic() + 120
            while self._emits(txid) == emitted and time.monotonic() < deadline:
                time.sleep(0.01)  # until the master coordinator replays this txid: its tree timed out
            if self._emits(txid) > emitted:
                self.faults.note(f"commit of txid {txid} timed out and was replayed")
        self.state.commit(txid)

    def _emits(self, txid: int) -> int:
        return sum(1 for t, _ in self.attempts.items() if t == txid)


MAPS = {"transactional": TransactionalMap, "opaque": OpaqueMap, "non_transactional": NonTransactionalMap}


class FlakyMapState(StateFactory):
    """A ``kind`` map state (`TransactionalMap`, `OpaqueMap`, `NonTransactionalMap`) over a
    `Store`, with the failures ``faults`` plans in its backing map and its commits."""

    def __init__(self, kind: str, store: Store, faults: Faults, attempts: SharedLog) -> None:
        self.kind = kind
        self.store = store
        self.faults = faults
        self.attempts = attempts

    def make_state(self, conf, metrics, partition_index, num_partitions):
        state = MAPS[self.kind].build(_FlakyBacking(self.store, self.faults))
        return _FlakyCommits(state, self.faults, self.attempts)


def plain(kind: str, value: Any) -> Any:
    """The count a ``kind`` map stored as ``value``."""
    return {"transactional": lambda v: v.val, "opaque": lambda v: v.curr, "non_transactional": lambda v: v}[kind](value)


# --- over a real Redis, for the hosts whose workers die (the process host, Spark) ------------------

class _Held(_Wrapped):
    def __init__(self, state: MapState, hold: HeldCommit) -> None:
        super().__init__(state)
        self.hold = hold

    def commit(self, txid) -> None:
        if txid == self.hold.txid:
            self.hold.wait()
        self.state.commit(txid)


class HeldCommit(StateFactory):
    """``factory``'s states, the first of whose commits of ``txid`` (over every task and state
    sharing ``directory``) is held, after the batch's writes, until the file ``release`` appears
    in ``directory`` (or 120 s passed): it writes its pid to ``held`` there first, so a test
    knows which worker is in the middle of a commit, and can kill it or the master then."""

    def __init__(self, factory: StateFactory, txid: int, directory: str) -> None:
        self.factory = factory
        self.txid = txid
        self.directory = directory

    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _Held(self.factory.make_state(conf, metrics, partition_index, num_partitions), self)

    def wait(self) -> None:
        try:  # the claim stays: only its maker holds
            os.close(os.open(Path(self.directory) / "claimed", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return  # another task holds its commit
        (Path(self.directory) / "held.tmp").write_text(str(os.getpid()))
        os.rename(Path(self.directory) / "held.tmp", Path(self.directory) / "held")  # whole when seen
        deadline = time.monotonic() + 120
        while not (Path(self.directory) / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


def held_pid(directory: Any) -> int | None:
    """The pid of the worker holding a `HeldCommit`, once one does."""
    path = Path(directory) / "held"
    return int(path.read_text()) if path.exists() else None


REDIS_HASHES = {"transactional": "counts-transactional", "opaque": "counts-opaque"}
"""The Redis hash each map state of `redis_word_counts` keeps its counts in."""


@dataclass(frozen=True)
class RedisRun:
    """`redis_word_counts`'s topology: what it was built from, to check its run against."""

    topology: Any
    text: list[str]
    committers: list[str]
    attempts: dict[str, SharedLog]


def redis_word_counts(url: str, hold: Any, n: int = 240, per_batch: int = 6, hold_txid: int = 10) -> RedisRun:
    """Two word counts of ``n`` sentences into the Redis at ``url``, in one topology: a
    transactional spout (FixedBatchSpout, ``per_batch`` sentences a batch) into a
    `TransactionalMap` (hash ``counts-transactional``), and the opaque `SentenceParts` (two
    partitions) into an `OpaqueMap` (hash ``counts-opaque``). One commit of txid ``hold_txid`` is
    held (`HeldCommit` in directory ``hold``). Make it inside
    ``squall.testing.shared_state_dir`` when its workers are other processes (the attempts logs)."""
    from squall.external.trident_redis import Options, RedisMapState
    from squall.trident.partitioned import OpaquePartitionedTridentSpoutExecutor
    from squall.trident.spout import BatchSpoutAdapter, FixedBatchSpout

    text = sentences(n)
    attempts = {"transactional": SharedLog(), "opaque": SharedLog()}
    topo = TridentTopology()
    fixed = BatchSpoutAdapter(FixedBatchSpout(Fields("sentence"), per_batch, *[[s] for s in text]))
    word_count(topo, "fixed", Watched(fixed, attempts["transactional"]),
               HeldCommit(RedisMapState.transactional(
                   url, Options(data_type="hash", hash_key=REDIS_HASHES["transactional"])), hold_txid, str(hold)),
               spout_tasks=1)
    parts = SentenceParts({"p0": text[0::2], "p1": text[1::2]}, per_batch=per_batch // 2)
    word_count(topo, "parts", Watched(OpaquePartitionedTridentSpoutExecutor(parts), attempts["opaque"]),
               HeldCommit(RedisMapState.opaque(url, Options(data_type="hash", hash_key=REDIS_HASHES["opaque"])),
                          hold_txid, str(hold)))
    built = topo.build()
    committers = sorted(cid for cid, c in built.bolts.items() if getattr(getattr(c.obj, "spec", None), "committer", 0))
    return RedisRun(built, text, committers, attempts)


def redis_counts(client: Any) -> dict[str, dict[str, int]]:
    """The counts each state of `redis_word_counts` stored (Storm's JSON values: ``[txid, val]``,
    ``[curr_txid, curr, prev]``: the count is the second)."""
    import json
    return {kind: {k.decode(): json.loads(v)[1] for k, v in client.hgetall(h).items()}
            for kind, h in REDIS_HASHES.items()}


def totals(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Words stored per state."""
    return {kind: sum(c.values()) for kind, c in counts.items()}
