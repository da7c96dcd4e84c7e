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
own results; but it carries another window's, when those are its inputs: a late result of an
upstream persistent window goes out on it in no spout's tree. (Until 2026-12-07 that stream was
never held, and a sink of it that failed 3 such results lost them, their windows committed.)

A tuple anchored to a result **and** to a spout's tuple (a join of the results with a stream) is
in the spout's tree, yet the spout's replay would not bring the result back: the wrapper of the
bolt that emits it adds `LINEAGE_ANCHOR` to its anchors, the engine marks the child
(`squall._tuple.UNROOTED_LINEAGE`), the mark goes with it between workers and on to the tuples
anchored to it, and a forwarder waits for a marked input as for a result. Unmarked, a sink that
writes in the background let the checkpoint past before writing it, and a SIGKILL of its
worker lost it for good (`tests/process/test_window_lineage_sigkill.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._config import Config
from .._fields import Fields
from .._system import CONTROL_STREAMS
from .._tuple import UNROOTED_LINEAGE, Source, Tuple


def held_streams(components: dict[str, Any], persistent: set[str]) -> dict[str, frozenset[tuple[str, str]]]:
    """For each bolt of ``components`` (id -> `squall._topology.ComponentSpec`), the
    ``(component, stream)`` of its inputs that may carry a result of one of the ``persistent``
    windows (component ids), directly or through other bolts."""
    def carries(src: str, stream: str) -> bool:
        if stream in CONTROL_STREAMS:
            return False
        if src in persistent and stream == components[src].conf.get(Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM):
            return src in fed  # its inputs again: another window's results if it takes them
        return src in persistent or src in fed

    fed: set[str] = set()  # the components that take inputs which may carry a window's result
    grew = True
    while grew:  # downstream, to a fixed point (a topology may loop)
        grew = False
        for cid, spec in components.items():
            if cid not in fed and any(carries(src, stream) for src, stream in spec.inputs):
                fed.add(cid)
                grew = True
    return {cid: frozenset((src, stream) for src, stream in spec.inputs if carries(src, stream))
            for cid, spec in components.items() if spec.kind == "bolt"}


@dataclass(frozen=True)
class ResultsRoute:
    """How a persistent window's results reach a bolt, for an error that names it: the window,
    the stream they leave it on, and the hops between (upstream first, each ``[bolt]`` or
    ``[window]'s late-tuple stream [late]``)."""

    window: str
    stream: str
    hops: tuple[str, ...]

    def __str__(self) -> str:
        through = f", through {', '.join(self.hops)}" if self.hops else ""
        return f"the persistent window [{self.window}] (stream [{self.stream}]{through})"


def results_route(components: dict[str, Any], held: dict[str, frozenset[tuple[str, str]]], persistent: set[str],
                  bolt: str) -> ResultsRoute | None:
    """How the results of one of the ``persistent`` windows reach ``bolt``, following the
    streams `held_streams` found (``held``) back to a window's own results, or None: none do."""
    seen: set[str] = set()

    def back(here: str, hops: tuple[str, ...]) -> ResultsRoute | None:
        for src, stream in sorted(held.get(here, ())):
            late = src in persistent and stream == components[src].conf.get(Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM)
            if src in persistent and not late:
                return ResultsRoute(src, stream, hops)
            if src not in seen:  # a bolt fed by results, or a fed window's late stream: its inputs carry them
                seen.add(src)
                hop = f"[{src}]'s late-tuple stream [{stream}]" if late else f"[{src}]"
                found = back(src, (hop, *hops))
                if found is not None:
                    return found
        return None

    return back(bolt, ())


LINEAGE_ANCHOR = Tuple([], Source("$lineage", "$lineage", -1, Fields()), 0, UNROOTED_LINEAGE)
"""An anchor a wrapper adds to an emit whose anchors hold an input in no spout's tree that
checkpoints wait for beside ones in a spout's tree: in no tree itself, it adds no root and no
edge, and marks the child (`squall._tuple.UNROOTED_LINEAGE`), which would otherwise be taken
for an input its spout replays. Never sent."""


def with_lineage(anchors: Any, held: Callable[[Tuple], bool]) -> Any:
    """``anchors`` (inputs in a list, a tuple or any other iterable, which is then read once, here,
    into a list; one input or no iterable is returned as given) with `LINEAGE_ANCHOR` added if
    one of them is in no spout's tree and ``held`` says checkpoints wait for it, and another is
    in a spout's tree.

    A set or a generator of anchors is read here too: the engine takes them as it takes a list,
    and passed as given, a join's child of a window's result and a spout's tuple went unmarked
    and let the checkpoint past the sink before it wrote it (anchors as a set or a generator,
    the sink failing 3 writes: 400 of 600 ids acked never written)."""
    if type(anchors) is not list and type(anchors) is not tuple:
        if anchors is None or type(anchors) is Tuple:
            return anchors
        try:
            read = iter(anchors)
        except TypeError:
            return anchors  # no iterable: the engine's error names it
        anchors = list(read)
    tuples = [a for a in anchors if isinstance(a, Tuple)]
    if any(not a._root and held(a) for a in tuples) and any(a._root for a in tuples):
        return [*anchors, LINEAGE_ANCHOR]
    return anchors
