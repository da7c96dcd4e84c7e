"""The baseline loop as a peer: `bench.corpus.baseline_wordcount` timed under default GC."""

from __future__ import annotations

from pathlib import Path

from .. import harness
from ..corpus import baseline_wordcount


def measure(directory: Path) -> tuple[float, dict[str, int], str | None]:
    """(seconds, counts, version) of one pass of the hand-written loop over the corpus."""
    wall, counts = harness.time_baseline(lambda: baseline_wordcount(directory))
    return wall, counts, None
