"""Stateful bolts and their state (Storm's ``org.apache.storm.state`` and ``topology``'s stateful
executors). See docs/state.md.

`BaseStatefulBolt` gets a `KeyValueState` from the provider ``topology.state.provider`` names:
`InMemoryKeyValueStateProvider` (the default), `squall.state.file.FileKeyValueStateProvider`,
`squall.state.redis.RedisKeyValueStateProvider` (the ``redis`` extra; not imported here).
"""

from .._topology import register_bolt_kind, register_topology_transform
from ._api import KeyValueState as KeyValueState
from ._api import State as State
from ._api import StateError as StateError
from ._api import StateHome as StateHome
from ._api import StateProvider as StateProvider
from ._api import state_key as state_key
from ._bolt import BaseStatefulBolt as BaseStatefulBolt
from ._bolt import CheckpointTupleForwarder as CheckpointTupleForwarder
from ._bolt import StatefulBoltExecutor as StatefulBoltExecutor
from ._names import get_state as get_state
from ._windowed import BaseStatefulWindowedBolt as BaseStatefulWindowedBolt
from ._windowed import PersistentWindowedBoltExecutor as PersistentWindowedBoltExecutor
from ._windowed import StatefulWindowedBoltExecutor as StatefulWindowedBoltExecutor
from ._windowed import windowed_executor
from ._wiring import add_checkpointing
from .checkpoint import CheckpointSpout as CheckpointSpout
from .file import FileKeyValueStateProvider as FileKeyValueStateProvider
from .memory import HostMemory as HostMemory
from .memory import InMemoryKeyValueStateProvider as InMemoryKeyValueStateProvider

# How the builder takes stateful bolts (docs/architecture.md, "Extension points"): as they are,
# for create_topology's checkpoint wiring to wrap; a stateful windowed one in its executor.
register_bolt_kind(BaseStatefulBolt)
register_bolt_kind(BaseStatefulWindowedBolt, windowed_executor)
register_topology_transform(add_checkpointing)

__all__ = [
    "BaseStatefulBolt", "BaseStatefulWindowedBolt", "CheckpointSpout", "CheckpointTupleForwarder", "FileKeyValueStateProvider", "HostMemory",
    "InMemoryKeyValueStateProvider", "KeyValueState", "PersistentWindowedBoltExecutor", "State", "StateError", "StateHome", "StateProvider",
    "StatefulBoltExecutor", "StatefulWindowedBoltExecutor", "get_state", "state_key",
]
