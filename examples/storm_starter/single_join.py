"""Storm's storm-starter ``SingleJoinExample``: two streams joined on their common fields.

    gender (FeederSpout: id, gender) --fields("id")--\\
                                                      join (SingleJoinBolt: gender, age)
    age    (FeederSpout: id, age)    --fields("id")--/

`SingleJoinBolt` finds the fields its sources share (here ``id``), keeps each side's tuple until
the other side's tuple with the same id arrives, then emits the output fields it was given,
each taken from the source that declares it, anchored to both inputs, and acks both. A side
whose match has not come within ``topology.message.timeout.secs`` is failed, as Storm's bolt
does with its ``TimeCacheMap``; here tick tuples rotate the buckets of pending ids.

Storm's example feeds the ages in the reverse order of the genders, so a join holds up to all
of one side before the first match: a spout's ``topology.max.spout.pending`` must not stop it
short of that (squall's automatic default grows while the spout is held at it and nothing
completes: docs/concepts.md#max-spout-pending).

Run it (a few seconds on a LocalCluster)::

    python examples/storm_starter/single_join.py
"""

from __future__ import annotations

import sys
import time
from typing import Any

from squall import Bolt, Config, Fields, GlobalStreamId, LocalCluster, StormTopology, TopologyBuilder, is_tick_tuple
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt

BUCKETS = 3
"""Buckets of pending ids, as Storm's ``TimeCacheMap``: a side waits between T and 1.5 T."""


class SingleJoinBolt(Bolt):
    """Joins one tuple of each source on the fields all sources share (Storm's ``SingleJoinBolt``)."""

    def __init__(self, out_fields: Fields) -> None:
        self.out_fields = out_fields

    def get_component_configuration(self) -> dict[str, Any]:
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1}  # a tick a second; prepare says how many rotate

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        # rotate every T / (BUCKETS - 1) seconds, as TimeCacheMap's thread does
        timeout = int(conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
        self.ticks_per_rotation = max(1, timeout // (BUCKETS - 1))
        self.ticks = 0
        sources = list(context.get_this_sources())
        self.num_sources = len(sources)
        self.field_locations: dict[str, GlobalStreamId] = {}
        shared: set[str] | None = None
        for source in sources:
            fields = context.get_component_output_fields(source.get_component_id(), source.get_stream_id())
            shared = set(fields.to_list()) if shared is None else shared & set(fields.to_list())
            for name in self.out_fields:
                if name in fields.to_list():
                    self.field_locations[name] = source
        self.id_fields = Fields(sorted(shared or ()))
        if len(self.field_locations) != len(self.out_fields):
            raise ValueError(f"Cannot find all outfields among sources: {self.out_fields.to_list()}")
        self.buckets: list[dict[tuple, dict[GlobalStreamId, Any]]] = [{} for _ in range(BUCKETS)]

    def execute(self, tup: Any) -> None:
        if is_tick_tuple(tup):
            self.ticks += 1
            if self.ticks % self.ticks_per_rotation == 0:
                self._rotate()
            return
        key = tuple(tup.select(self.id_fields))
        stream = GlobalStreamId(tup.get_source_component(), tup.get_source_stream_id())
        parts = next((b.pop(key) for b in self.buckets if key in b), {})
        if stream in parts:
            raise RuntimeError(f"Received same side of single join twice: {stream} for id {key}")
        parts[stream] = tup
        if len(parts) < self.num_sources:
            self.buckets[0][key] = parts
            return
        joined = [parts[self.field_locations[name]].get_value_by_field(name) for name in self.out_fields]
        self.collector.emit(joined, anchors=list(parts.values()))
        for part in parts.values():
            self.collector.ack(part)

    def _rotate(self) -> None:
        """The oldest bucket expires: its sides never met theirs, and fail (Storm's ExpireCallback)."""
        for parts in self.buckets.pop().values():
            for part in parts.values():
                self.collector.fail(part)
        self.buckets.insert(0, {})

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.out_fields)


def build(gender: FeederSpout, age: FeederSpout, sink: Bolt | None = None) -> StormTopology:
    """The topology of Storm's example; ``sink`` (if given) takes the joined tuples."""
    builder = TopologyBuilder()
    builder.set_spout("gender", gender)
    builder.set_spout("age", age)
    builder.set_bolt("join", SingleJoinBolt(Fields(["gender", "age"]))) \
        .fields_grouping("gender", Fields(["id"])) \
        .fields_grouping("age", Fields(["id"]))
    if sink is not None:
        builder.set_bolt("sink", sink).shuffle_grouping("join")
    return builder.create_topology()


def feed(gender: FeederSpout, age: FeederSpout, n: int) -> None:
    """Storm's input for ids 0..n-1: the genders in order, the ages in reverse order; message
    ids ``("gender", i)`` and ``("age", i)``."""
    for i in range(n):
        gender.feed([i, "male" if i % 2 == 0 else "female"], ("gender", i))
    for i in reversed(range(n)):
        age.feed([i, i + 20], ("age", i))


def expected(n: int) -> list[list[Any]]:
    """The joined ``[gender, age]`` of ids 0..n-1, sorted: what the join must emit, once each."""
    return sorted([["male" if i % 2 == 0 else "female", i + 20] for i in range(n)], key=lambda v: v[1])


def main(n: int = 1000, timeout: float = 30.0) -> int:
    """Feed ``n`` ids to each side, wait until every input is acked, print the joins and check
    them against `expected`. Returns 0 when the join is complete and exact."""
    gender, age = FeederSpout(Fields(["id", "gender"])), FeederSpout(Fields(["id", "age"]))
    tracker = AckFailMapTracker()
    gender.set_ack_fail_delegate(tracker)
    age.set_ack_fail_delegate(tracker)
    sink = TupleCaptureBolt()
    feed(gender, age, n)
    inputs = [(side, i) for side in ("gender", "age") for i in range(n)]
    with LocalCluster() as cluster:
        cluster.submit_topology("join-example", Config(), build(gender, age, sink))
        deadline = time.monotonic() + timeout
        while not all(tracker.is_acked(m) or tracker.is_failed(m) for m in inputs) and time.monotonic() < deadline:
            time.sleep(0.1)
        joined = sorted((values for _stream, values in sink.results().get("join", [])), key=lambda v: v[1])
    failed = sum(tracker.is_failed(m) for m in inputs)
    for values in joined[:5]:
        print(values)
    ok = joined == expected(n) and failed == 0
    print(f"{len(joined)} joins of {n} ids, {failed} inputs failed: {'exact' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
