"""What the Trident map states over real stores share (`squall.external.trident_redis`,
`squall.external.trident_delta`): the state type, the stack of wrappers a factory builds over a
backing map (storm-redis's ``RedisMapState.Factory.makeState``), a backing map's own commit
hook, and how a store tells one numbering of a partition's txids from another (`kept_epoch`,
`Numbering`).

Trident numbers a topology's batches in its transactional state; where that is gone (the same
topology run again on another `LocalCluster`, which keeps it in its process; a cluster whose
store was wiped) they start from 1 again. A store's partition keeps its last txid, to refuse a
stale copy of its task, and its values keep the txid that wrote them, for a replay to know its
own write: both say nothing of a new numbering's batches. So each partition has an epoch, a
token kept in the topology's transactional state beside its txids (`kept_epoch`), and the store
keeps it beside the partition's last txid. A last txid of another epoch refuses nothing; and
from the first write of an epoch over another's, or into a partition with no last txid (a run
with another parallelism: its keys were another partition's), the partition is *renumbered*: a value whose
txid is above what this epoch wrote in the partition (a value says no epoch, and keeps its txid
until its key is written again) was written by an earlier numbering, and is read as of no txid
(`Numbering.txid`), so the batch of that number applies to it (a transactional state would take
it for its own replay and skip it; an opaque one would refuse it as written by a later batch).
A value at exactly that txid is either this epoch's earlier attempt's or an earlier numbering's
of the same number: the store keeps which keys the epoch wrote at its last txid, and a replay of
it asks (`Numbering.asks`). The first copies of a partition's task agree on its epoch through
the store (`EpochClaim`): the transactional state has no put-if-absent.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from ..state import StateError
from ..trident.state import (
    CachedMap,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    Snapshottable,
    SnapshottableMap,
    TransactionalMap,
)


class StateType(enum.Enum):
    """Storm's ``StateType``: which `MapState` wraps the backing map, and so what it stores per key
    (a plain value, a `TransactionalValue` or an `OpaqueValue`)."""

    NON_TRANSACTIONAL = "non-transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


E = TypeVar("E")


class EpochClaim(Protocol):
    """Where a store keeps the epoch its partition's tasks of the running topology agreed on
    (`kept_epoch`), changed only atomically, against what was read: Redis, a key that a script
    sets only if it still holds what was read; Delta, an application transaction that the log
    commits only if no commit of it came after the version read (its own conflict check)."""

    def held(self) -> Any:
        """The epoch the store holds (None: none)."""
        ...

    def replace(self, held: Any, epoch: Any) -> bool:
        """Set ``epoch`` if the store still holds ``held`` (what `held` returned); False if not."""
        ...


_CLAIM_TRIES = 10


def kept_epoch(context: Any, state_type: StateType, name: str, where: str, new: Callable[[], E],
               valid: Callable[[Any], bool], claim: EpochClaim | None = None) -> E | None:
    """The epoch of a partition's txids (see the module docstring): kept in the topology's
    transactional state ``name`` (`squall.TopologyContext.transactional_state`), where the
    coordinator keeps its txids, under a key of the task's bolt and ``where`` (the partition in
    the store); agreed on by the partition's first copies of the task, and read by every later
    copy, so a stale copy shares its replacement's, and made again (``valid`` says no) where that
    state is gone. None (no epoch: every last txid compared as the state's) for a
    non-transactional state, or a task whose host lends no transactional state (a state made
    outside a topology; Spark's engine, whose txids are its checkpoint's, a lower one a
    checkpoint gone back).

    The transactional state has no put-if-absent: two first copies racing (a task relaunched
    while its first launch was still starting) each put their own epoch, and one that read its
    own back before the other's put kept it, so that neither refused the other's stale writes.
    So the store arbitrates (``claim``): each first copy lists its candidate in the
    transactional state (a key of its own, before it claims), then takes the store's claimed
    epoch if it is listed there (this run's, a racing copy's), or replaces it atomically
    (`EpochClaim.replace`: an earlier run's, or none) with its own; every copy then puts the
    winner as the kept epoch. Without ``claim``, put then read back, as before."""
    if state_type not in (StateType.TRANSACTIONAL, StateType.OPAQUE) \
            or getattr(context, "transactional_home", None) is None:
        return None
    store = context.transactional_state(name)
    component = getattr(context, "get_this_component_id", None)
    writer = component() if callable(component) else ""
    key = "epoch-" + hashlib.sha256(f"{writer}\n{where}".encode()).hexdigest()[:32]
    epoch = store.get(key)
    if valid(epoch):
        return epoch
    if claim is None:
        store.put(key, new())
        return store.get(key)  # read back: of two first copies racing, the one stored (or not)
    mine = new()
    listed = key + "-candidates/"
    store.put(listed + str(mine), True)  # listed before claimed, so a copy that finds it claimed adopts it
    for _ in range(_CLAIM_TRIES):
        held = claim.held()
        if valid(held) and store.get(listed + str(held)) is not None:
            epoch = held  # this run's: its racing copy's claim, or this copy's own
            break
        if claim.replace(held, mine):  # an earlier run's, or none
            epoch = mine
            break
    else:
        raise StateError(f"the state's partition {where} could not agree on the epoch of its txids: its claim in "
                         f"the store changed {_CLAIM_TRIES} times while this task started (several runs of the "
                         f"topology writing the same store at once?)")
    store.put(key, epoch)  # every copy puts the winner, so whichever puts last puts it
    return epoch


class Numbering(NamedTuple):
    """What a store says of a partition's txids (see the module docstring): ``last``, the last
    txid it wrote, of whatever epoch; ``ours``, whether that txid is of this state's epoch (or no
    epoch tells: then it is compared as ours); ``recorded``, whether the store recorded the epoch
    of ``last``; ``renumbered``, whether the partition's values may hold txids of an earlier
    epoch, which this one's batches must not take for theirs. Made by `Numbering.of`."""

    last: int | None
    ours: bool
    recorded: bool
    renumbered: bool

    @classmethod
    def of(cls, last: int | None, wrote: Any, renumbered_by: Any, epoch: Any) -> Numbering:
        """The numbering of a partition whose last txid is ``last``, written by epoch ``wrote``
        (None: not recorded), renumbered by epoch ``renumbered_by`` (None: never), seen by a
        state of epoch ``epoch`` (falsy: none, every last txid compared as ours)."""
        if not epoch:
            return cls(last, True, False, False)
        ours = last is None or wrote is None or wrote == epoch
        # a partition this epoch has not written yet (``mine`` None) holds nothing of its own:
        # neither where its last txid is another epoch's, nor where it has none, its keys
        # written by another partition of an earlier run with another parallelism
        return cls(last, ours, wrote is not None, not ours or last is None or renumbered_by == epoch)

    @property
    def mine(self) -> int | None:
        """The last txid this epoch's batches wrote in the partition (None: none yet)."""
        return self.last if self.ours else None

    def txid(self, stored: int | None, written: bool | None = None) -> int | None:
        """What a value's stored txid ``stored`` is to this epoch's batches: None (no txid, older
        than every batch) where it is an earlier epoch's, in a renumbered partition: above what
        this one wrote there, or equal to it (`mine`) where this epoch did not write the key at
        that txid (``written`` False); else ``stored``. ``written`` None (not asked) takes such a
        value for this epoch's: which it is changes nothing but a replay of `mine`, which asks
        (`asks`)."""
        if self.renumbered and stored is not None and (
                self.mine is None or stored > self.mine or (stored == self.mine and written is False)):
            return None
        return stored

    def asks(self, txid: int | None) -> bool:
        """Whether batch ``txid`` must know which keys this epoch wrote at `mine` (``written`` of
        `txid`): it replays the epoch's last txid in a renumbered partition, where a value stored
        at that very txid is this epoch's earlier attempt's (its own write, a transactional state
        skips it, an opaque one builds on its prev) or an earlier numbering's write of the same
        number, which a replay whose records differ (an opaque spout's) brings in: the update of
        this batch applies to it. Before, both were taken for this epoch's, and the key's count of
        this batch (transactional) or of the earlier run's batch (opaque) was lost."""
        return self.renumbered and self.mine is not None and txid == self.mine


_WRAPPERS: dict[StateType, Callable[[Any], Any]] = {  # each wrapper's build(backing)
    StateType.NON_TRANSACTIONAL: NonTransactionalMap.build,
    StateType.TRANSACTIONAL: TransactionalMap.build,
    StateType.OPAQUE: OpaqueMap.build,
}


_WRITES = frozenset({"multi_update", "multi_put", "update", "set", "commit"})
"""The calls `CommittingMapState` refuses in a batch in which a call failed."""


class CommittingMapState(MapState, Snapshottable):
    """The map state a factory here returns: storm-redis's stack, rebuilt after a failure, and
    whose backing map hears ``begin_commit``/``commit`` when it wants to.

    ``build()`` makes the stack (`build_map_state`). A call that raises (the store down, a value
    refused) drops it for a fresh one before the error goes on: what the stack kept of the
    batch (what it wrote, what it cached) may not be what the store has, and the task lives on
    to replay the batch, which must read the store again. The rest of that batch's writes are
    refused (`StateError`), up to its next ``begin_commit``: the fresh stack knows neither the
    batch's txid nor its writes so far, so an updater that caught the error and went on would
    write as if outside any batch (a replay would count it again). Reads go on (a
    ``state_query`` reads the store, which the fresh stack reads again). ``hooks`` (the backing
    map, or None) has ``begin_commit(txid)`` and ``commit(txid)``, called before and after the
    state's own: Storm's map wrappers keep the txid to themselves, and a store that tags each
    batch's write with it (the Delta table) needs it.
    """

    def __init__(self, build: Callable[[], Any], hooks: Any = None) -> None:
        self._build = build
        self._state = build()
        self._hooks = hooks
        self._batch: tuple[int | None] | None = None  # (txid,) between begin_commit and commit
        self._failed: str | None = None  # the error that failed the open batch

    def _run(self, method: str, *args: Any) -> Any:
        if self._failed is not None and self._batch is not None and method in _WRITES:
            raise StateError(f"the map state refuses the rest of batch txid {self._batch[0]}, in which a call "
                             f"failed ({self._failed}): the batch must fail, and its replay reads the store again")
        try:
            return getattr(self._state, method)(*args)
        except BaseException as e:
            self._state = self._build()
            if self._batch is not None:
                self._failed = f"{type(e).__name__}: {e}"
            raise

    def begin_commit(self, txid: int | None) -> None:
        """The batch ``txid`` starts updating the state."""
        self._batch, self._failed = (txid,), None
        if self._hooks is not None:
            self._hooks.begin_commit(txid)
        self._run("begin_commit", txid)

    def commit(self, txid: int | None) -> None:
        """The batch ``txid`` updated the state."""
        self._run("commit", txid)
        self._batch = None
        if self._hooks is not None:
            self._hooks.commit(txid)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list:
        """`MapState.multi_get`."""
        return self._run("multi_get", keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[Any]) -> list:
        """`MapState.multi_update`."""
        return self._run("multi_update", keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """`MapState.multi_put`."""
        self._run("multi_put", keys, values)

    def get(self) -> Any:
        """`Snapshottable.get`: the global key's value."""
        return self._run("get")

    def update(self, updater: Any) -> Any:
        """`Snapshottable.update` of the global key."""
        return self._run("update", updater)

    def set(self, value: Any) -> None:
        """`Snapshottable.set` of the global key."""
        self._run("set", value)


def build_map_state(backing: Any, state_type: StateType, local_cache_size: int, global_key: str) -> Any:
    """storm-redis's ``makeState``: ``SnapshottableMap(<type>Map.build(CachedMap(backing,
    local_cache_size)), [global_key])`` (``local_cache_size`` 0: no cache), in a
    `CommittingMapState` that rebuilds it after a failure and passes ``begin_commit``/``commit`` to
    ``backing`` when it has them."""
    def build() -> Any:
        inner = CachedMap(backing, local_cache_size) if local_cache_size > 0 else backing
        return SnapshottableMap(_WRAPPERS[state_type](inner), [global_key])
    hooks = backing if hasattr(backing, "begin_commit") and hasattr(backing, "commit") else None
    return CommittingMapState(build, hooks)
