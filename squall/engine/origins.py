"""Which spout task drew a root id: how an event-time window sees through the bolts in front of it.

An event-time window's watermark waits for each source task of each input stream (Flink's
minimum over input channels; `squall.windowing.watermark`). When the input comes through a bolt,
its source tasks are that bolt's: a shuffle bolt mixes the tuples of every spout task upstream
(the partitions of a Kafka topic, say), so each of its tasks delivers the newest timestamps of
the fastest spout task, and a spout task that falls behind (a backlog, a restart that replays
from its committed offset) had every one of its tuples made late with nothing failing.

A tuple carries the root ids of its trees, and every tree starts at one spout task. So when a
topology has an event-time window behind a bolt, each spout task that feeds it writes its index
into the roots it draws, and the window keys its watermark by the pair of the bolt task a
tuple came from and the spout task its root names (`RootOrigins.origin`): each pair is a channel
in that spout task's order, where the spout task alone would merge the channels through the
bolt's tasks, one of which may run behind the others. A root is then, with ``S`` such spout
tasks and ``n`` ackers::

    root = (random or 1) * (S * n) + spout_index * n + acker_index

so ``root % n`` is still its acker (`squall.engine.spout_executor`: a spout picks a local one),
and ``(root // n) % S`` the spout task. The random part keeps at least `MIN_RANDOM_BITS` bits;
a topology with more spout tasks and ackers than that leaves gets no origins, and its windows
key by their direct source tasks, as before. Untracked tuples (acking off, an unanchored emit)
carry no root and are keyed by their direct source task too.

Both ends compute the layout from the topology alone (`root_origins`), so every worker agrees
without a word between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config
from .._system import ACKER_COMPONENT, CONTROL_STREAMS
from .._topology import StormTopology

MIN_RANDOM_BITS = 48
"""The fewest random bits a root keeps (roots need only be unique among the trees pending)."""


@dataclass(frozen=True)
class RootOrigins:
    """The layout of root ids in a topology with an event-time window behind a bolt.

    ``spout_tasks``: the spout tasks that write their index (their position here);
    ``ackers``: how many acker tasks (``root % ackers`` picks one); ``feeding``: for each bolt
    whose stream such a window reads, the spout tasks whose trees reach it."""

    spout_tasks: tuple[int, ...]
    ackers: int
    feeding: Mapping[str, frozenset[int]]

    @property
    def span(self) -> int:
        """What the random part of a root is multiplied by."""
        return len(self.spout_tasks) * self.ackers

    @property
    def random_bits(self) -> int:
        """How many random bits a root keeps."""
        return 64 - (self.span - 1).bit_length()

    def offset(self, spout_task: int, acker_index: int) -> int | None:
        """What ``spout_task`` adds to ``(random or 1) * span`` for a root tracked by the acker
        at ``acker_index``; None if the task writes no index (no window reads its trees)."""
        try:
            return self.spout_tasks.index(spout_task) * self.ackers + acker_index
        except ValueError:
            return None

    def origin(self, root: int) -> int:
        """The spout task that drew ``root``."""
        return self.spout_tasks[(root // self.ackers) % len(self.spout_tasks)]


def root_origins(topology: StormTopology, task_to_component: Mapping[int, str],
                 component_confs: Mapping[str, Mapping[str, Any]] | None = None) -> RootOrigins | None:
    """The layout for ``topology`` with its tasks numbered ``task_to_component``: None when no
    event-time windowed bolt reads a bolt's stream, without ackers, or when the spout tasks and
    ackers would leave a root fewer than `MIN_RANDOM_BITS` random bits. ``component_confs``: the
    configuration each component sees (`squall.engine.plan.TopologyPlan.component_confs`), where
    a timestamp field the topology's Config sets makes a window event time as its own does
    (without it, the components' own configurations)."""
    tasks: dict[str, list[int]] = {}
    for t, c in sorted(task_to_component.items()):
        tasks.setdefault(c, []).append(t)
    ackers = len(tasks.get(ACKER_COMPONENT, ()))
    if not ackers:
        return None
    comps = topology.components
    feeding: dict[str, frozenset[int]] = {}
    for cid, spec in comps.items():
        conf = component_confs.get(cid, spec.conf) if component_confs is not None else spec.conf
        if spec.kind == "spout" or conf.get(Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME) is None:
            continue
        for src, stream in spec.inputs:
            if stream in CONTROL_STREAMS or src not in comps or comps[src].kind == "spout" or src in feeding:
                continue
            feeding[src] = frozenset(t for c in feeding_spouts(topology, src) for t in tasks.get(c, ()))
    spout_tasks = tuple(sorted(set().union(*feeding.values()))) if feeding else ()
    if not spout_tasks:
        return None
    layout = RootOrigins(spout_tasks, ackers, feeding)
    return layout if layout.random_bits >= MIN_RANDOM_BITS else None


def feeding_spouts(topology: StormTopology, bolt: str) -> list[str]:
    """The spouts whose tuples reach ``bolt``, directly or through other bolts, by data streams
    (a checkpoint, tick or system stream carries none of a spout's trees)."""
    seen: set[str] = set()
    todo = [bolt]
    while todo:
        spec = topology.components[todo.pop()]
        for src, stream in spec.inputs:
            if stream in CONTROL_STREAMS or src in seen or src not in topology.components:
                continue
            seen.add(src)
            todo.append(src)
    return sorted(c for c in seen if topology.components[c].kind == "spout")
