"""KafkaSpout's event-time merge (`EventTimeMerge`, Kafka Streams' PartitionGroup): a task emits
the waiting head with the smallest event time among its partitions, and polls a partition with
nothing waiting that is not at its end, for at most ``max_wait_ms``, before it emits past it.

Driven over an in-memory consumer that behaves as librdkafka's does for a backlog: a poll hands
over a run of ONE partition (librdkafka's consume gives runs of a partition's fetch), a partition
is fetchable only up to what the "broker" has sent, and a poll that finds nothing takes its
timeout on the spout's simulated clock."""

from __future__ import annotations

import random
from collections import deque

import pytest

from squall.engine.clock import SimulatedClock
from squall.external.kafka import EventTimeMerge, KafkaSpout, KafkaSpoutConfig, Record, RetryBackoff, TopicPartition
from squall.external.kafka_merge import HeadOrder

from .test_kafka import Context, MemoryConsumer, open_spout, run

P0, P1, P2 = (TopicPartition("t", p) for p in range(3))


class RunConsumer(MemoryConsumer):
    """``logs``: per partition, its records' event times (ms; the value is "p<partition>@<ts>").
    ``fetchable[tp]``: how far the partition can be read now (default: all of it). A poll returns
    up to ``run`` records of the first partition (in assignment order) that has any fetchable and
    is not paused; nothing found, the clock advances by the timeout (as a real poll blocks)."""

    def __init__(self, times, clock, run=4):
        super().__init__({tp: [f"p{tp.partition}@{t}" for t in ts] for tp, ts in times.items()})
        self.times = times
        self.clock = clock
        self.run = run
        self.fetchable = {tp: len(ts) for tp, ts in times.items()}
        self.polls = []   # (timeout, the partitions polled)

    def end_offset(self, tp):
        return len(self.logs[tp])   # the high watermark, as the last fetch response said

    def poll(self, timeout, paused):
        self._check()
        self.polls.append((timeout, sorted(tp.partition for tp in self.positions if tp not in paused)))
        for tp, pos in self.positions.items():
            if tp in paused or pos >= self.fetchable[tp]:
                continue
            end = min(self.fetchable[tp], pos + self.run)
            self.positions[tp] = end
            return [Record(tp.topic, tp.partition, o, None, self.logs[tp][o], self.times[tp][o]) for o in range(pos, end)]
        self.clock.advance(timeout)
        return []


def merged(times, run_=4, **cfg):
    clock = SimulatedClock()
    c = RunConsumer(times, clock, run_)
    spout, col, _ = open_spout(c, clock, **cfg)
    return c, spout, col, clock


def run_until(spout, col, n, calls=100):
    """Calls ``next_tuple`` until ``n`` tuples are out (the clock then says how long they took:
    a poll with nothing to hand over takes its timeout), at most ``calls`` times."""
    for _ in range(calls):
        if len(col.emitted) >= n:
            return
        spout.next_tuple()


def event_times(col):
    return [int(v[0].split("@")[1]) for v, _ in col.emitted]


def test_backlog_of_partitions_comes_out_in_event_time():
    # two partitions of a backlog, events interleaved in time; each poll hands over one partition's run
    times = {P0: list(range(0, 40, 2)), P1: list(range(1, 40, 2))}
    c, spout, col, clock = merged(times)
    run_until(spout, col, 40)
    assert clock.now() == 0   # nothing waited for: each dry partition had records to fetch
    run(spout, 5)
    assert len(col.emitted) == 40   # every record, once
    assert event_times(col) == list(range(40))   # storm-kafka-client's order: 0, 2, 4, 6, 1, 3, 5, 7...
    for v, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    run(spout, 2)
    assert c.commits[P0].offset == 20 and c.commits[P1].offset == 20


def test_dry_partition_is_polled_before_the_task_emits_past_it():
    times = {P0: [10, 11, 12], P1: [5, 6]}
    c, spout, col, clock = merged(times)
    c.fetchable[P1] = 0   # its records not fetched yet
    spout.next_tuple()
    assert col.emitted == []   # P0's 10 waits: P1 is behind its end, polled (alone) for it
    assert c.polls[-1][1] == [1]
    c.fetchable[P1] = 2   # its fetch came back
    run(spout, 6)
    assert event_times(col) == [5, 6, 10, 11, 12]
    assert clock.now() < 0.3   # within the bound


@pytest.mark.parametrize("wait_ms", [300, 0])
def test_a_partition_that_stays_dry_holds_the_others_at_most_max_wait_ms(wait_ms):
    times = {P0: [10, 11, 12], P1: [5, 6]}
    c, spout, col, clock = merged(times, event_time=EventTimeMerge(max_wait_ms=wait_ms))
    c.fetchable[P1] = 0   # behind its end, and nothing comes
    run_until(spout, col, 3)
    assert event_times(col) == [10, 11, 12]   # emitted past it once its wait was over
    assert clock.now() == pytest.approx(wait_ms / 1000)   # what the polls of it waited, all told
    # once waited for, it is polled without waiting (at most every 10 ms), and what reaches it joins in
    polls = len(c.polls)
    c.fetchable[P1] = 2
    clock.advance(0.01)
    run(spout, 4)
    assert event_times(col) == [10, 11, 12, 5, 6] and len(c.polls) > polls


def test_an_idle_partition_at_its_end_holds_nothing():
    times = {P0: [10, 11, 12], P1: []}   # P1 read to its end (its high watermark 0)
    c, spout, col, clock = merged(times)
    run_until(spout, col, 3)
    assert event_times(col) == [10, 11, 12]
    assert clock.now() == 0   # not waited for
    assert all(parts != [1] for _, parts in c.polls)   # nor polled alone


def test_a_consumer_that_cannot_tell_the_end_is_merged_without_waiting():
    # MemoryConsumer has no end_offset: what waits is merged, nothing is waited for
    clock = SimulatedClock()
    c = MemoryConsumer({P0: ["a", "b", "c"], P1: ["x"]})
    spout, col, _ = open_spout(c, clock)
    run(spout, 6)
    assert sorted(v[0] for v, _ in col.emitted) == ["a", "b", "c", "x"] and clock.now() == 0


def test_a_failed_record_is_replayed_in_its_place_in_event_time():
    times = {P0: [0, 2, 4, 6], P1: [1, 3, 5, 7]}
    c, spout, col, clock = merged(times, retry=RetryBackoff(initial_delay=1.0, delay_period=1.0, max_delay=1.0))
    run(spout, 2)
    assert event_times(col) == [0, 1]
    first = col.emitted[0][1]
    spout.fail(first)
    run(spout, 10)
    assert event_times(col) == list(range(8))   # the failure not due yet
    for _, m in col.emitted[1:]:
        spout.ack(m)
    clock.advance(1.0)
    run(spout, 3)
    assert event_times(col) == [*range(8), 0]   # replayed (P0 sought back to it)
    spout.ack(col.emitted[-1][1])
    clock.advance(1.0)
    run(spout, 2)
    assert len(col.emitted) == 9 and c.commits[P0].offset == 4 and c.commits[P1].offset == 4


def test_user_extractor_and_merge_off():
    # the event time from the value (a producer that left the record timestamps to the broker)
    times = {P0: [30, 20, 10], P1: [25, 15, 5]}
    _, spout, col, _ = merged(times, event_time=EventTimeMerge(lambda r: -int(r.value.split("@")[1])))
    run(spout, 8)
    assert event_times(col) == [30, 25, 20, 15, 10, 5]
    # off: one partition's run after another, as storm-kafka-client emits
    _, spout, col, _ = merged({P0: [0, 2], P1: [1, 3]}, event_time=None)
    run(spout, 6)
    assert event_times(col) == [0, 2, 1, 3]


def test_max_wait_ms_below_zero_is_named():
    config = KafkaSpoutConfig("mem:0", ["t"], "g", event_time=EventTimeMerge(max_wait_ms=-1))
    with pytest.raises(ValueError, match=r"event_time.max_wait_ms: -1"):
        KafkaSpout(config)


def test_three_partitions_one_task_of_two_merges_its_own():
    # task 1 of 2 reads P1 only (round robin): a single partition is emitted as it comes
    times = {P0: [0, 1], P1: [3, 2], P2: [4]}
    clock = SimulatedClock()
    c = RunConsumer(times, clock)
    spout, col, _ = open_spout(c, clock, context=Context(index=1, tasks=2))
    run(spout, 4)
    assert event_times(col) == [3, 2]


def test_a_partition_at_its_end_is_asked_of_the_consumer_at_most_every_10_ms():
    """Each next_tuple with records waiting looks at the partitions with none: one at its end
    holds nothing back, and the consumer is asked so at most every 10 ms (two calls a partition
    at each next_tuple were most of what the merge cost a record); one behind its end is asked
    each time, so that a partition that just reached its end is never waited for."""
    times = {P0: list(range(40)), P1: []}   # P1 read to its end
    c, spout, col, clock = merged(times, run_=40)
    asked = []
    end_offset = c.end_offset
    c.end_offset = lambda tp: asked.append(tp) or end_offset(tp)
    run_until(spout, col, 40)
    assert event_times(col) == list(range(40)) and clock.now() == 0
    assert asked.count(P1) == 1   # 40 next_tuples within the same 10 ms


# --- HeadOrder: the merge's heap of heads ------------------------------------------------------------

def _rec(tp, offset, t):
    return Record(tp.topic, tp.partition, offset, None, f"p{tp.partition}@{t}", t)


def _key(r):
    return (0, 0) if r.timestamp is None else (1, r.timestamp)


def test_head_order_picks_the_smallest_head_ties_to_the_partition_first_heard_and_skips_stale_heads():
    order = HeadOrder(_key)
    waiting = {P1: deque([_rec(P1, 0, 5), _rec(P1, 1, 9)]), P0: deque([_rec(P0, 0, 5)])}
    for tp, q in waiting.items():
        order.head_changed(tp, q)
    assert order.pick(waiting, ()) == P1          # 5 against 5: P1 got records first
    assert order.pick(waiting, {P1}) == P0        # P1 passed over (a held suspect's partition)
    assert order.pick(waiting, ()) == P1          # ... and back on the heap after
    waiting[P1].popleft()
    order.head_changed(P1, waiting[P1])
    assert order.pick(waiting, ()) == P0          # P1's emitted head is stale: dropped at the top
    waiting[P0] = deque([_rec(P0, 1, 20)])        # a queue replaced (a commit past its records)
    order.head_changed(P0, waiting[P0])
    assert order.pick(waiting, ()) == P1
    del waiting[P1]
    order.forget(P1)                               # revoked
    assert order.pick(waiting, ()) == P0
    waiting[P0].clear()
    assert order.pick(waiting, ()) is None


def test_head_order_with_keys_that_do_not_compare_gives_up_for_the_scan():
    order = HeadOrder(lambda r: (1, r.value))
    waiting = {P0: deque([_rec(P0, 0, 1)._replace(value=1)]), P1: deque([_rec(P1, 0, 1)._replace(value="x")])}
    for tp, q in waiting.items():
        order.head_changed(tp, q)
    assert order.broken and order.pick(waiting, ()) is None


class _ManyRunsConsumer(RunConsumer):
    """A poll hands over a run of each of up to ``width`` partitions (as librdkafka's consume
    does when several fetches came back), in a random order of the partitions."""

    def __init__(self, times, clock, run, width, rng):
        super().__init__(times, clock, run)
        self.width, self.rng = width, rng

    def poll(self, timeout, paused):
        self._check()
        ready = [tp for tp, pos in self.positions.items() if tp not in paused and pos < self.fetchable[tp]]
        self.rng.shuffle(ready)
        out = []
        for tp in ready[:self.width]:
            pos = self.positions[tp]
            end = min(self.fetchable[tp], pos + self.run)
            self.positions[tp] = end
            out += [Record(tp.topic, tp.partition, o, None, self.logs[tp][o], self.times[tp][o]) for o in range(pos, end)]
        if not out:
            self.clock.advance(timeout)
        return out


@pytest.mark.parametrize("seed", range(6))
def test_the_heap_emits_what_the_scan_of_every_head_emits(seed):
    """The spout's order with `HeadOrder` against the scan of every head it replaced (the order
    made to give up, as for keys that do not compare), over random backlogs of 1-12 partitions
    with many equal event times, polls handing over runs of several partitions, and a tenth of
    the records failing and replayed: the same records in the same order, every record out."""
    rng = random.Random(seed)
    parts = [TopicPartition("t", p) for p in range(rng.randint(1, 12))]
    times = {tp: sorted(rng.randrange(60) for _ in range(rng.randint(0, 40))) for tp in parts}
    out = []
    for broken in (False, True):
        clock = SimulatedClock()
        c = _ManyRunsConsumer(times, clock, run=1 + seed, width=1 + seed % 4, rng=random.Random(seed))
        spout, col, _ = open_spout(c, clock, retry=RetryBackoff(initial_delay=0.0, delay_period=0.0, max_delay=0.0))
        spout._order.broken = broken
        fails = random.Random(seed)
        for _ in range(3000):
            before = len(col.emitted)
            spout.next_tuple()
            for _, m in col.emitted[before:]:
                spout.fail(m) if fails.random() < 0.1 else spout.ack(m)
            clock.advance(0.001)
        out.append([v[0] for v, _ in col.emitted])
    assert out[0] == out[1]
    assert set(out[0]) == {f"p{tp.partition}@{t}" for tp, ts in times.items() for t in ts}
