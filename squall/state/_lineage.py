"""Which of a bolt's inputs may carry a persistent window's results: the ones a checkpoint must
wait for (`squall.state.CheckpointTupleForwarder`).

A tuple in no spout's tree, in a stateful topology with acking on, is one of two kinds, and
both look alike at a bolt (``_root`` 0):

- a persistent window's result (emitted unanchored, as Storm's: its inputs are acked at the
  commit), or a tuple anchored only to such results. Nothing replays it: if a sink let a
  PREPARE past before writing it, the commit recorded the window as fired while the result
  could still die with the sink's worker. squall's forwarder holds checkpoints for it.
- a spout's emit without a message id, or a tuple anchored only to such emits. The user chose
  at most once for it, and Storm's forwarder never waits for it. Held, a bolt that batches its
  inputs (keeps them un-acked until it has N) held every checkpoint until its batch filled, and
  every stateful bolt in the topology committed that rarely (`tests/state/test_unreliable_batching.py`).

A bolt cannot tell them apart by the tuple, but the topology can by where it comes from: only
a persistent window and the bolts downstream of it can send the first kind. `held_streams`
names, for each bolt, those of its input streams; an input in no spout's tree on any other is an
unreliable emit's, passed as Storm passes it. (A bolt fed both by a persistent window and by an
unreliable spout sends both kinds on one stream: its inputs in no tree hold checkpoints still.)
A persistent window's late-tuple stream is anchored to its inputs, so it carries none of its
results.
"""

from __future__ import annotations

from typing import Any

from .._config import Config
from .._system import CONTROL_STREAMS


def held_streams(components: dict[str, Any], persistent: set[str]) -> dict[str, frozenset[tuple[str, str]]]:
    """For each bolt of ``components`` (id -> `squall._topology.ComponentSpec`), the
    ``(component, stream)`` of its inputs that may carry a result of one of the ``persistent``
    windows (component ids), directly or through other bolts."""
    def carries(src: str, stream: str) -> bool:
        if stream in CONTROL_STREAMS:
            return False
        if src in persistent:
            return stream != components[src].conf.get(Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM)
        return src in carriers

    carriers = set(persistent)  # the components whose emits may descend from a window's result
    grew = True
    while grew:  # downstream, to a fixed point (a topology may loop)
        grew = False
        for cid, spec in components.items():
            if cid not in carriers and any(carries(src, stream) for src, stream in spec.inputs):
                carriers.add(cid)
                grew = True
    return {cid: frozenset((src, stream) for src, stream in spec.inputs if carries(src, stream))
            for cid, spec in components.items() if spec.kind == "bolt"}

