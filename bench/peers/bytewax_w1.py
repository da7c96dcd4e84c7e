"""W1 on Bytewax: read the corpus files, split, count per word, emit the running count per word.

    DirSource(part-*.txt) -> flat_map(split " ") -> key_on(word) -> stateful_map(count + 1)
        -> sink (keeps the last count seen per word)

Like squall's WordCount (and Storm's), the count step emits ``(word, count)`` for every word, not
only at the end; the sink keeps the last count per word (one dict store per word) so the run can be
checked against the reference counts. One worker in this process (``bytewax.testing.run_main``);
Bytewax's own file source reads the files (a file per partition, lines in batches of 1000).
The time is that of ``run_main`` only (building the dataflow object is not timed; it takes < 1 ms).
"""

from __future__ import annotations

import time
from pathlib import Path


def build(directory: Path, out: dict[str, int]):
    """The dataflow; the sink writes the last count per word into ``out``."""
    import bytewax.operators as op
    from bytewax.connectors.files import DirSource
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    class _LastCount(StatelessSinkPartition):
        def write_batch(self, items) -> None:
            for word, count in items:
                out[word] = count

    class _LastCountSink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return _LastCount()

    def count(state, _word):
        state = (state or 0) + 1
        return state, state

    flow = Dataflow("w1")
    lines = op.input("sentences", flow, DirSource(Path(directory), glob_pat="part-*.txt"))
    words = op.flat_map("split", lines, lambda line: line.split(" "))
    keyed = op.key_on("key", words, lambda word: word)
    counts = op.stateful_map("count", keyed, count)
    op.output("out", counts, _LastCountSink())
    return flow


def measure(directory: Path) -> tuple[float, dict[str, int], str | None]:
    """(seconds, counts, version) of one Bytewax run over the corpus."""
    from importlib.metadata import version

    from bytewax.testing import run_main

    out: dict[str, int] = {}
    flow = build(directory, out)
    t0 = time.perf_counter()
    run_main(flow)
    return time.perf_counter() - t0, out, version("bytewax")
