"""User multi-reducers and comparators the multi_reduce and min/max tests run (importable by
a worker process)."""

from __future__ import annotations

from squall.trident import GroupedMultiReducer, MultiReducer


class Tally(MultiReducer):
    """Per partition and batch, for each stream: ``[stream index, tuples, total length of its last input
    field]`` (its input fields learnt in prepare), emitted in stream order at the end."""

    def prepare(self, conf, context) -> None:
        self.last = [f[len(f) - 1] for f in context.input_fields]
        self.project = [context.make_projection_factory(i, [name]) for i, name in enumerate(self.last)]

    def init(self, collector):
        return [[0, 0] for _ in self.last]

    def execute(self, state, stream_index, input, collector) -> None:
        state[stream_index][0] += 1
        state[stream_index][1] += len(str(self.project[stream_index](input).get_value(0)))

    def complete(self, state, collector) -> None:
        for i, (n, total) in enumerate(state):
            collector.emit([i, n, total])


class PerSide(GroupedMultiReducer):
    """Per group of a batch: ``[group values..., tuples of stream 0, of stream 1, ...]``."""

    def __init__(self, streams: int) -> None:
        self.streams = streams

    def init(self, collector, group):
        return [0] * self.streams

    def execute(self, state, stream_index, group, input, collector) -> None:
        state[stream_index] += 1

    def complete(self, state, group, collector) -> None:
        collector.emit([*group.values, *state])


def by_age_reversed(a, b) -> int:
    """A comparator ordering ages greatest first (so min is the oldest)."""
    return (b > a) - (b < a)


def by_age_mod_3(a, b) -> int:
    """Whole tuples ordered by age % 3 (many ties)."""
    x, y = a.get_value_by_field("age") % 3, b.get_value_by_field("age") % 3
    return (x > y) - (x < y)
