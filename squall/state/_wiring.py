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
from .._fields import GlobalStreamId
from .._grouping import ALL, Grouping
from .._topology import ComponentSpec
from ._bolt import BaseStatefulBolt, CheckpointTupleForwarder, StatefulBoltExecutor
from ._windowed import StatefulWindowedBoltExecutor
from .checkpoint import CHECKPOINT_COMPONENT_ID, CHECKPOINT_FIELDS, CHECKPOINT_STREAM_ID, CheckpointSpout


def add_checkpointing(components: dict[str, ComponentSpec]) -> dict[str, ComponentSpec]:
    """``components`` (id -> `ComponentSpec`) wired for checkpoints if a bolt is stateful, else
    as given (a transform of `squall._topology.register_topology_transform`)."""
    if not any(_stateful(c.obj) for c in components.values()):
        return components
    out = {}
    for cid, spec in components.items():
        if spec.kind != "bolt":
            out[cid] = spec
            continue
        wrapper = StatefulBoltExecutor if _stateful(spec.obj) else CheckpointTupleForwarder
        c = spec.copy(wrapper(spec.obj))
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
