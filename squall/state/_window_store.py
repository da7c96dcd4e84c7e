"""`WindowStore`: a persistent window's tuples, numbered and kept in partitions that are saved to
a `KeyValueState` with each checkpoint (Storm's ``WindowState`` of ``PersistentWindowedBoltExecutor``).

Pure: no thread, no clock; the state is any `KeyValueState`. Each tuple that enters the window
gets the next sequence number (``seq``); the `WindowManager` queues the numbers, not the tuples.
A tuple is kept as a record ``[seq, timestamp, source, values]``, its values already serialized
by the topology's rules when it arrives (so a value that cannot be saved is refused at once,
naming the field), in partition ``seq // partition_size``. The state holds:

- ``"p<pid>"``: the records of one partition, rewritten only when it changed since the last save
  (new tuples, or tuples that left the window), deleted when none of its tuples is left;
- ``"meta"``: the next number, the partitions, the table of sources (component, stream, task,
  fields), and the window manager's, policies' and watermark's progress.

Memory: the window keeps, per tuple, its number and timestamp in the manager's queue. Of the tuples
themselves it holds at most ``max_events`` (decoded tuples plus records of partitions loaded),
plus the tuples that arrived since the last save (those are not in the state yet); a partition
that is saved is dropped from memory when over that bound and read back from the state when a
window needs it (one partition at a time).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._errors import SerializationError
from .._fields import Fields
from .._tuple import Source, Tuple
from ._api import KeyValueState, StateError
from ._kv import StateCodec

_FORMAT = 1
META = "meta"
DEFAULT_MAX_EVENTS_IN_MEMORY = 1_000_000  # Storm's
MAX_PARTITION_EVENTS = 1000  # Storm's


def _key(pid: int) -> str:
    return f"p{pid}"


class _Partition:
    """The records of one partition (None while only in the state), the numbers it holds, and
    whether it changed since the last save."""

    __slots__ = ("dirty", "records", "seqs")

    def __init__(self, records: dict[int, list] | None, seqs: set[int], dirty: bool) -> None:
        self.records = records
        self.seqs = seqs
        self.dirty = dirty


class WindowStore:
    """The tuples of a persistent window; see the module docstring. ``codec`` serializes the
    tuples' values (its owner names the component in errors)."""

    def __init__(self, state: KeyValueState, codec: StateCodec,
                 max_events: int = DEFAULT_MAX_EVENTS_IN_MEMORY) -> None:
        self.state = state
        self.codec = codec
        self.max_events = max_events
        self.partition_size = max(1, min(MAX_PARTITION_EVENTS, max_events // 10))
        self._reset()

    def _reset(self) -> None:
        self.next_seq = 0
        self.partitions: dict[int, _Partition] = {}
        self.tuples: dict[int, Tuple] = {}  # decoded, oldest first
        self.loaded = 0  # records held in memory
        self.sources: list[list] = []  # [component, stream, task, fields]
        self._source_of: dict[Any, int] = {}
        self._sources: list[Source | None] = []
        self._read: tuple[int, dict[int, list]] | None = None  # the last partition read back

    # --- a tuple arrives ----------------------------------------------------------------------------

    def add(self, tup: Tuple, ts: int) -> int:
        """Keep ``tup`` (timestamp ``ts``); returns its number.

        Raises:
            StateError: a value of ``tup`` cannot be serialized (naming the component, the field
                and the tuple's source).
        """
        record = [0, ts, self._source(tup._src), self._encode(tup)]
        seq = record[0] = self.next_seq
        self.next_seq += 1
        p = self._partition(seq // self.partition_size)
        assert p.records is not None  # _partition loads them
        p.records[seq] = record
        p.seqs.add(seq)
        p.dirty = True
        self.loaded += 1
        self.tuples[seq] = tup
        self._trim()
        return seq

    def _encode(self, tup: Tuple) -> bytes:
        src = tup._src
        where = (f"a window tuple of {self.codec.owner} from component [{src.component}] stream "
                 f"[{src.stream}]")
        try:
            return self.codec.encode(tup.values, where)
        except SerializationError as whole:
            for name, v in zip(tup.fields, tup.values):
                try:
                    self.codec.encode(v, f"field {name!r}")
                except SerializationError as e:
                    raise StateError(f"{self.codec.owner}: the window cannot save a tuple from component "
                                     f"[{src.component}] stream [{src.stream}]: {e}") from None
            raise StateError(f"{self.codec.owner}: the window cannot save a tuple from component "
                             f"[{src.component}] stream [{src.stream}]: {whole}") from None

    def _source(self, src: Source) -> int:
        i = self._source_of.get(src)
        if i is None:
            key = [src.component, src.stream, src.task, list(src.fields)]
            i = next((j for j, s in enumerate(self.sources) if s == key), None)
            if i is None:
                i = len(self.sources)
                self.sources.append(key)
                self._sources.append(src)
            self._source_of[src] = i
        return i

    def _partition(self, pid: int) -> _Partition:
        p = self.partitions.get(pid)
        if p is None:
            p = self.partitions[pid] = _Partition({}, set(), True)
        elif p.records is None:
            p.records = self._read_partition(pid)
            self.loaded += len(p.records)
        return p

    # --- the window reads its tuples ----------------------------------------------------------------

    def tuple(self, seq: int) -> Tuple:
        """The tuple numbered ``seq`` (decoded from its record if it is not held as a tuple)."""
        t = self.tuples.get(seq)
        if t is not None:
            return t
        pid = seq // self.partition_size
        p = self.partitions.get(pid)
        records = p.records if p is not None else None
        if records is None:
            if self._read is None or self._read[0] != pid:
                self._read = (pid, self._read_partition(pid))
            records = self._read[1]
        try:
            _, _, src, values = records[seq]
        except KeyError:
            raise StateError(f"{self.codec.owner}: window tuple {seq} is not in partition {pid} of the state") from None
        return Tuple(self.codec.decode(values, f"window tuple {seq}"), self._source_at(src))

    def tuples_of(self, seqs: list[int]) -> Sequence[Tuple]:
        """The tuples numbered ``seqs``: a list when the window may hold them all, else a
        sequence that reads them as it is iterated."""
        if len(seqs) <= self.max_events:
            return [self.tuple(s) for s in seqs]
        return WindowTuples(self, seqs)

    def forget(self, seqs: Iterable[int]) -> None:
        """The tuples numbered ``seqs`` left the window for good: drop them from memory (their
        records leave the state at the next `save`)."""
        pop = self.tuples.pop
        for s in seqs:
            pop(s, None)

    def _source_at(self, i: int) -> Source:
        src = self._sources[i]
        if src is None:
            component, stream, task, fields = self.sources[i]
            src = self._sources[i] = Source(component, stream, task, Fields(fields))
        return src

    def _read_partition(self, pid: int) -> dict[int, list]:
        rows = self.state.get(_key(pid))
        if rows is None:
            raise StateError(f"{self.codec.owner}: window partition {pid} is missing from the state")
        return {r[0]: r for r in rows}

    # --- checkpoints --------------------------------------------------------------------------------

    def save(self, live: set[int], progress: list) -> None:
        """Put into the state (not yet prepared) what changed since the last save: the partitions
        with new tuples or with tuples not in ``live`` (those the window still holds), and the
        meta entry with ``progress`` (the manager's and watermark's states)."""
        state = self.state
        for pid in list(self.partitions):
            p = self.partitions[pid]
            dead = p.seqs - live
            if dead:
                if len(dead) == len(p.seqs):
                    del self.partitions[pid]
                    self.forget(dead)
                    if p.records is not None:
                        self.loaded -= len(p.records)
                    state.delete(_key(pid))
                    continue
                p = self._partition(pid)
                assert p.records is not None  # _partition loads them
                for s in dead:
                    del p.records[s]
                    self.tuples.pop(s, None)
                self.loaded -= len(dead)
                p.seqs -= dead
                p.dirty = True
            if p.dirty:
                assert p.records is not None  # a partition changes only once loaded
                state.put(_key(pid), sorted(p.records.values()))
                p.dirty = False
        state.put(META, [_FORMAT, self.next_seq, sorted(self.partitions), self.sources, progress])
        self._read = None
        self._trim()

    def restore(self) -> builtins.tuple[list | None, list[builtins.tuple[int, int]]]:  # `tuple` is a method here
        """Reload from the state as it is now (the last commit, after a rollback or restart):
        returns the saved progress (None if nothing was saved) and the events ((seq,
        timestamp) in arrival order) for the manager's queue."""
        self._reset()
        meta = self.state.get(META)
        if meta is None:
            return None, []
        try:
            fmt, self.next_seq, pids, sources, progress = meta
            if fmt != _FORMAT:
                raise ValueError(f"format {fmt!r}")
        except (TypeError, ValueError) as e:
            raise StateError(f"{self.codec.owner}: the window's saved state is malformed ({e})") from None
        self.sources = [list(s) for s in sources]
        self._sources = [None] * len(self.sources)
        events: list[tuple[int, int]] = []
        for pid in pids:
            records = self._read_partition(pid)
            self.partitions[pid] = _Partition(records, set(records), False)
            self.loaded += len(records)
            events.extend((seq, r[1]) for seq, r in sorted(records.items()))
            self._trim()
        return progress, events

    def _trim(self) -> None:
        """Keep at most ``max_events`` tuples and records in memory: first drop decoded tuples
        (oldest first), then the records of saved partitions (oldest first)."""
        excess = len(self.tuples) + self.loaded - self.max_events
        if excess <= 0:
            return
        tuples = self.tuples
        while tuples and excess > 0:
            del tuples[next(iter(tuples))]
            excess -= 1
        for p in self.partitions.values():
            if excess <= 0:
                break
            if p.records is not None and not p.dirty:
                excess -= len(p.records)
                self.loaded -= len(p.records)
                p.records = None

    def __len__(self) -> int:
        return sum(len(p.seqs) for p in self.partitions.values())


def runs(seqs: Iterable[int]) -> list[list[int]]:
    """``seqs`` as sorted runs ``[first, last]`` of consecutive numbers: a window's numbers are
    mostly consecutive, so the meta entry stays small however large the window."""
    out: list[list[int]] = []
    for s in sorted(seqs):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def unruns(r: Iterable[list[int]]) -> list[int]:
    """The numbers `runs` made runs of."""
    return [s for first, last in r for s in range(first, last + 1)]


class WindowTuples(Sequence):
    """The tuples of a window larger than a persistent window may hold in memory: read from the
    `WindowStore` one at a time as it is iterated (don't keep them all)."""

    def __init__(self, store: WindowStore, seqs: list[int]) -> None:
        self._store = store
        self._seqs = seqs

    def __len__(self) -> int:
        return len(self._seqs)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._store.tuple(s) for s in self._seqs[i]]
        return self._store.tuple(self._seqs[i])

    def __iter__(self) -> Iterator[Tuple]:
        t = self._store.tuple
        for s in self._seqs:
            yield t(s)

    def __repr__(self) -> str:
        return f"WindowTuples({len(self._seqs)} tuples)"
