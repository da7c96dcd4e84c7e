"""Operations of the Trident windowing tests, in a module of their own so that the process host's
workers import them (`tests/trident/test_windowing.py`, `tests/process/test_trident_windowing_sigkill.py`)."""

from __future__ import annotations

from typing import Any

from squall.trident import BaseAggregator, BaseFilter, FailedException


class Span(BaseAggregator):
    """A window's first and last tuple number and its size; with ``faults`` (a
    `tests.trident.exactly_once.Faults`), fails its batch at the planned ``agg`` calls of
    ``complete``."""

    def __init__(self, faults: Any = None) -> None:
        self.faults = faults

    def init(self, batch_id, collector):
        return []

    def aggregate(self, state, tuple, collector) -> None:
        state.append(tuple[0])

    def complete(self, state, collector) -> None:
        if self.faults is not None and self.faults.hit("agg"):
            raise FailedException("induced failure in the window's aggregator")
        collector.emit([min(state), max(state), len(state)])


class FlakyPass(BaseFilter):
    """Keeps every tuple; fails its batch at the planned ``before`` calls of ``faults``."""

    def __init__(self, faults: Any) -> None:
        self.faults = faults

    def is_keep(self, tuple) -> bool:
        if self.faults.hit("before"):
            raise FailedException("induced failure before the window")
        return True


def expected_windows(n: int, length: int, slide: int) -> dict[tuple[int, int], int]:
    """(first, last) -> size of each window a count window of ``length`` tuples every ``slide``
    makes of tuples 0 .. n-1."""
    return {(max(0, end - length), end - 1): min(end, length) for end in range(slide, n + 1, slide)}
