"""Operations the Trident compiler tests use: Storm's ``trident.testing`` helpers (Split,
CountAsAggregator, StringLength, TrueFilter) and a plain batch spout for building graphs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from squall import Fields
from squall.trident.operation import BaseAggregator, BaseFilter, BaseFunction, CombinerAggregator
from squall.trident.spout import IBatchSpout


class Split(BaseFunction):
    """Emits each space-separated word of the first field (Storm's ``Split``)."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        for word in tuple[0].split(" "):
            if word:
                collector.emit([word])


class StringLength(BaseFunction):
    """The length of the first field (Storm's ``StringLength``)."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        collector.emit([len(tuple[0])])


class TrueFilter(BaseFilter):
    """Keeps every tuple."""

    def is_keep(self, tuple) -> bool:  # noqa: A002
        return True


class CountAsAggregator(BaseAggregator):
    """Counts the tuples of a batch (Storm's ``CountAsAggregator``)."""

    def init(self, batch_id: Any, collector) -> list:
        return [0]

    def aggregate(self, state: list, tuple, collector) -> None:  # noqa: A002
        state[0] += 1

    def complete(self, state: list, collector) -> None:
        collector.emit([state[0]])


class CountCombiner(CombinerAggregator):
    """Counts tuples as a combiner (Storm's builtin ``Count``)."""

    def init(self, tuple) -> int:  # noqa: A002
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class SumCombiner(CombinerAggregator):
    """Sums the first field (Storm's builtin ``Sum``)."""

    def init(self, tuple) -> Any:  # noqa: A002
        return tuple[0]

    def combine(self, val1: Any, val2: Any) -> Any:
        return val1 + val2

    def zero(self) -> int:
        return 0


class Get:
    """A query function for planning only."""

    def prepare(self, conf, context):
        pass

    def cleanup(self):
        pass

    def batch_retrieve(self, state, tuples):
        return [None] * len(tuples)

    def execute(self, tuple, result, collector):  # noqa: A002
        collector.emit([result])


class ListSpout(IBatchSpout):
    """A batch spout of fixed fields for graphs that are only planned, never run."""

    def __init__(self, *fields: str) -> None:
        self.fields = Fields(list(fields))

    def open(self, conf: dict, context: Any) -> None:
        pass

    def emit_batch(self, batch_id: int, collector) -> None:
        pass

    def ack(self, batch_id: int) -> None:
        pass

    def get_output_fields(self) -> Fields:
        return self.fields


class Recorded:
    """What `Record` filters saw, per key, shared by every copy of them in this process (squall
    pickles operations into each task, as LocalCluster runs them in-process)."""

    _lock = threading.Condition()
    _seen: dict[str, list[tuple[int, list]]] = {}

    @classmethod
    def add(cls, key: str, txid: int, values: list) -> None:
        with cls._lock:
            cls._seen.setdefault(key, []).append((txid, list(values)))
            cls._lock.notify_all()

    @classmethod
    def add_all(cls, key: str, txid: int, rows: list[list]) -> None:
        """Record ``rows`` of one batch at once: a waiter never sees part of them."""
        with cls._lock:
            cls._seen.setdefault(key, []).extend((txid, list(v)) for v in rows)
            cls._lock.notify_all()

    @classmethod
    def get(cls, key: str) -> list[tuple[int, list]]:
        with cls._lock:
            return list(cls._seen.get(key, []))

    @classmethod
    def wait_for(cls, key: str, done: Callable[[list[tuple[int, list]]], bool], timeout: float = 60) -> list:
        """Wait until ``done(records)``; fail the test with what was seen if it never is."""
        deadline = time.monotonic() + timeout
        with cls._lock:
            while not done(list(cls._seen.get(key, []))):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{key}: still not done after {timeout} s; seen {cls._seen.get(key)}")
                cls._lock.wait(left)
            return list(cls._seen.get(key, []))


class Record(BaseAggregator):
    """Records every tuple of each batch with its txid under ``key`` (at the batch's end, so a
    failed attempt records nothing)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def init(self, batch_id: Any, collector) -> list:
        return [batch_id.txid, []]

    def aggregate(self, state: list, tuple, collector) -> None:  # noqa: A002
        state[1].append(list(tuple.values))

    def complete(self, state: list, collector) -> None:
        Recorded.add_all(self.key, state[0], state[1])
        for values in state[1]:
            collector.emit(values)


def latest(records: list[tuple[int, list]]) -> dict:
    """``{key: value}`` of ``[key, value]`` records, the newest txid winning."""
    out: dict = {}
    for txid, (key, value) in sorted(records, key=lambda r: r[0]):
        out[key] = value
    return out
