"""What `TopologyBuilder.create_topology` does to a topology with a stateful bolt (Storm's
``TopologyBuilder.createTopology``): it adds the ``$checkpointspout`` (one task), wraps every
stateful bolt in a `StatefulBoltExecutor` and every other bolt in a `CheckpointTupleForwarder`,
gives each bolt the ``$checkpoint`` output stream, and subscribes each, with all grouping, to
the checkpoint spout for its inputs from spouts and to ``(B, $checkpoint)`` for its inputs from
bolt B."""

from __future__ import annotations

from typing import Any

from .._collectors import StreamInfo
from .._config import Config
from .._errors import InvalidTopologyException
from .._fields import GlobalStreamId
from .._grouping import ALL, Grouping
from .._topology import ComponentSpec
from ._bolt import BaseStatefulBolt, CheckpointTupleForwarder, StatefulBoltExecutor
from ._lineage import held_streams, results_route
from ._windowed import PersistentWindowedBoltExecutor, StatefulWindowedBoltExecutor
from .checkpoint import CHECKPOINT_COMPONENT_ID, CHECKPOINT_FIELDS, CHECKPOINT_STREAM_ID, CheckpointSpout


def add_checkpointing(components: dict[str, ComponentSpec]) -> dict[str, ComponentSpec]:
    """``components`` (id -> `ComponentSpec`) wired for checkpoints if a bolt is stateful, else
    as given (a transform of `squall._topology.register_topology_transform`)."""
    if not any(_stateful(c.obj) for c in components.values()):
        return components
    # the inputs that may carry a persistent window's results: the only ones in no spout's tree
    # that checkpoints wait for (`squall.state._lineage`), and the ones a window that drops its
    # contents must not take
    persistent = {cid for cid, spec in components.items() if isinstance(spec.obj, PersistentWindowedBoltExecutor)}
    held = held_streams(components, persistent)
    _check_unanchored_inputs(components, held, persistent)
    _check_windows_in_memory(components, held, persistent)
    out = {}
    for cid, spec in components.items():
        if spec.kind != "bolt":
            out[cid] = spec
            continue
        wrapper = StatefulBoltExecutor if _stateful(spec.obj) else CheckpointTupleForwarder
        c = spec.copy(wrapper(spec.obj, held_streams=held[cid]))
        c.streams[CHECKPOINT_STREAM_ID] = StreamInfo(CHECKPOINT_FIELDS)
        sources = {src for (src, _stream) in spec.inputs}
        for src in sorted(sources):
            is_spout = src in components and components[src].kind == "spout"
            stream = GlobalStreamId(CHECKPOINT_COMPONENT_ID if is_spout else src, CHECKPOINT_STREAM_ID)
            c.inputs[stream] = Grouping(ALL)
        out[cid] = c
    spout = ComponentSpec(CHECKPOINT_COMPONENT_ID, CheckpointSpout(), "spout", 1)
    spout.conf = {Config.TOPOLOGY_TASKS: 1}
    spout.streams = {CHECKPOINT_STREAM_ID: StreamInfo(CHECKPOINT_FIELDS)}
    out[CHECKPOINT_COMPONENT_ID] = spout
    return out


def _stateful(obj: Any) -> bool:
    return isinstance(obj, (BaseStatefulBolt, StatefulWindowedBoltExecutor))


def _check_unanchored_inputs(components: dict[str, ComponentSpec], held: dict[str, frozenset[tuple[str, str]]],
                             persistent: set[str]) -> None:
    """Refuse a stateful windowed bolt without persistence that takes, directly or through other
    bolts, the results of a persistent window: on one of the streams ``held`` names
    (`squall.state._lineage.held_streams`, the rule the checkpoints follow too).

    A persistent window's results are emitted unanchored (Storm's), in no spout's tuple tree. A
    stateful window without persistence drops its windows at a ROLLBACK and fails what they held
    for the spouts to replay; nothing replays those results, and the persistent window re-fires
    only the windows it fired after the last commit: the results that reached the bolt before
    that commit were lost (a rollback while such a bolt held 3 of them: 3 results, 6 records,
    missing from its windows, nothing failed or reported). Persistent, the bolt keeps them in its
    committed window state, and the results after the commit come again from the re-fired
    windows. A persistent window's late-tuple stream is anchored to its inputs, so it is allowed
    unless those inputs are another persistent window's results (then its late tuples are such
    results, and the error names that stream among the hops).

    Raises:
        InvalidTopologyException: naming both components, the way between them and what to do.
    """
    for cid, spec in sorted(components.items()):
        if type(spec.obj) is not StatefulWindowedBoltExecutor:  # its persistent subclass keeps them
            continue
        route = results_route(components, held, persistent, cid)
        if route is not None:
            raise InvalidTopologyException(
                f"Component [{cid}]: a stateful windowed bolt without persistence cannot take the results of "
                f"{route}: they are unanchored, so when a rollback drops [{cid}]'s windows nothing replays the "
                f"ones it held from before the last commit, and they are lost. Make [{cid}] persistent too "
                f"(with_persistence()): its windows are then restored as committed")


def _check_windows_in_memory(components: dict[str, ComponentSpec], held: dict[str, frozenset[tuple[str, str]]],
                             persistent: set[str]) -> None:
    """Refuse a bolt that keeps its inputs in windows in memory (``squall_holds_inputs``: a
    plain windowed bolt, a streams windowed aggregation), not stateful, that takes the results
    of a persistent window on one of the streams ``held`` names.

    Such a bolt acks an input only when it leaves its last window, so checkpoints pass it at
    once (Storm's rule; held, no checkpoint passed it while a window held anything). Its inputs
    in a spout's tree replay if its worker dies; a persistent window's results are unanchored,
    and the window's commit has recorded them as fired: the ones in the dead worker's windows
    were lost (on LocalCluster, 600 ids through a persistent window of one id into a plain count
    window of 20, its worker crashed once: 16 ids acked at the spout never came out of it, 2
    runs). Storm documents only stateful windowed bolts as safe behind a persistent one. A
    stateful window with persistence commits its windows with the checkpoints and restores
    them; holding the checkpoints for the plain window instead would stall every commit while
    its windows hold anything.

    Raises:
        InvalidTopologyException: naming both components, the way between them and what to use.
    """
    for cid, spec in sorted(components.items()):
        if spec.kind != "bolt" or _stateful(spec.obj) or not getattr(spec.obj, "squall_holds_inputs", False):
            continue
        route = results_route(components, held, persistent, cid)
        if route is not None:
            raise InvalidTopologyException(
                f"Component [{cid}]: a windowed bolt without state cannot take the results of {route}: they are "
                f"unanchored, and [{cid}] keeps them only in memory while checkpoints pass it, so a worker that "
                f"dies loses the ones its windows held after [{route.window}]'s commit recorded them as fired. "
                f"Make [{cid}] a stateful windowed bolt with persistence (a BaseStatefulWindowedBolt, "
                f".with_persistence()): its windows are then committed with the checkpoints and restored")
