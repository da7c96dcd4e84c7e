"""A `KafkaSpoutConfig.dead_letter` of the user's that raises (the dead-letter topic or table it
writes to is down) neither loses the record nor takes the spout down: the error is logged,
naming the handler, the record and the reason; the record is handed over again every
``down_retry_secs`` while the other records go on, counted in ``deadLettered`` once its handler
returned, and its offset does not commit before (a spout that stops first leaves it to the next
reader). Before, the handler's bare exception came out of ``next_tuple`` (or ``fail``): a spout
that lived on had skipped the record, no letter anywhere, its offset committed past it and
``deadLettered`` 0; a worker it took down handed the record over again first at its restart (on
a LocalCluster, 3 raises: 3 worker crashes, the restarts backing off), a crash loop while the
store stayed down."""

from __future__ import annotations

import logging

from squall.engine.clock import SimulatedClock
from squall.external.kafka import RetryBackoff

from .test_kafka import MemoryConsumer, open_spout
from .test_kafka_dead_once import TP, drain, parse


class FlakyStore:
    """A dead-letter handler whose store is down for its first ``down`` calls."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.calls: list[int] = []
        self.written: list[int] = []

    def __call__(self, record, reason: str) -> None:
        self.calls.append(record.offset)
        if len(self.calls) <= self.down:
            raise ConnectionError("dead-letter store down")
        self.written.append(record.offset)


def dead_lettered(spout) -> float:
    return sum(spout.dead_letter_counts.figures().values())


def handler_errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "dead_letter handler" in r.getMessage()]


def test_a_malformed_record_whose_handler_raises_is_named_handed_over_again_and_counted_once(caplog):
    logs, commits = {TP: ["v0", "bad-1", "v2", "bad-3", "v4"]}, {}
    store = FlakyStore(down=2)   # down for bad-1's and bad-3's first calls, back by their retry a second later
    spout, collector, clock = open_spout(MemoryConsumer(logs, commits), translator=parse, dead_letter=store,
                                         offset_commit_period_ms=100)
    with caplog.at_level(logging.ERROR, logger="squall.external.kafka"):
        drain(spout, collector, logs, commits, clock, steps=50)   # half a second
        assert [v for (v,), _ in collector.emitted] == ["v0", "v2", "v4"]   # the others went on
        assert store.calls == [1, 3] and store.written == [] and dead_lettered(spout) == 0
        assert commits[TP].offset == 1   # held at bad-1, owed its letter
        drain(spout, collector, logs, commits, clock)
    spout.close()
    assert store.calls == [1, 3, 1, 3] and store.written == [1, 3]   # each record's letter written once
    assert dead_lettered(spout) == 2
    assert commits[TP].offset == 5
    first, third = handler_errors(caplog)   # once per record, not per try
    assert "FlakyStore" in first and "ConnectionError: dead-letter store down" in first, first
    assert "topic 't' partition 0 offset 1" in first and "malformed record: not a value: 'bad-1'" in first
    assert "handed over again every 1.0 s" in first
    assert "topic 't' partition 0 offset 3" in third


def test_a_record_failed_past_max_retries_whose_handler_raises_is_handed_over_again_and_counted_once(caplog):
    logs, commits = {TP: ["v0", "v1", "v2"]}, {}
    store = FlakyStore(down=1)
    spout, collector, clock = open_spout(MemoryConsumer(logs, commits), dead_letter=store,
                                         retry=RetryBackoff(0.0, 0.001, 1, 0.01))
    with caplog.at_level(logging.ERROR, logger="squall.external.kafka"):
        drain(spout, collector, logs, commits, clock, fails={"v1"})
    spout.close()
    assert [v for (v,), _ in collector.emitted] == ["v0", "v1", "v2", "v1"]   # v1: its try and one retry
    assert store.calls == [1, 1] and store.written == [1]
    [logged] = handler_errors(caplog)
    assert "topic 't' partition 0 offset 1" in logged and "failed 2 times (max_retries 1)" in logged, logged
    assert dead_lettered(spout) == 1
    assert commits[TP].offset == 3


def test_a_record_owed_its_letter_when_the_spout_stops_is_given_up_by_the_next_life():
    """The store stays down until the first life stops: bad-1's offset never committed, the
    next life reads it again and its letter is written then, once."""
    logs, commits = {TP: ["v0", "bad-1", "v2"]}, {}
    clock = SimulatedClock()
    store = FlakyStore(down=10**6)
    spout, collector, _ = open_spout(MemoryConsumer(logs, commits), clock=clock, translator=parse, dead_letter=store)
    drain(spout, collector, logs, commits, clock, steps=300)
    spout.close()
    assert len(store.calls) >= 3 and store.written == [] and dead_lettered(spout) == 0
    assert commits[TP].offset == 1
    store.down = 0
    spout, collector, _ = open_spout(MemoryConsumer(logs, commits), clock=clock, translator=parse, dead_letter=store)
    drain(spout, collector, logs, commits, clock)
    spout.close()
    assert store.written == [1] and dead_lettered(spout) == 1
    assert [v for (v,), _ in collector.emitted] == ["v2"] and commits[TP].offset == 3


def test_a_handler_that_works_is_called_once_per_record_given_up_as_deadlettered_counts():
    logs, commits = {TP: ["v0", "bad-1", "v2", "v3", "bad-4"]}, {}
    store = FlakyStore(down=0)
    spout, collector, clock = open_spout(MemoryConsumer(logs, commits), translator=parse, dead_letter=store,
                                         retry=RetryBackoff(0.0, 0.001, 2, 0.01))
    drain(spout, collector, logs, commits, clock, fails={"v3"})
    spout.close()
    assert sorted(store.written) == [1, 3, 4] and len(store.calls) == 3
    assert dead_lettered(spout) == 3
    assert commits[TP].offset == 5


class FlakyLetters(list):
    """The dead letters of tests/external/test_kafka_deaths.py's workers, whose store is down at
    each record's first letter."""

    def __init__(self) -> None:
        super().__init__()
        self.raised: list[str] = []

    def append(self, item) -> None:
        value, _ = item
        if value not in self.raised:
            self.raised.append(value)
            raise ConnectionError("dead-letter store down")
        super().append(item)


def test_a_poison_record_given_up_for_its_deaths_whose_handler_raises_is_handed_over_again_once():
    """tests/external/test_kafka_deaths.py's poison records (each kills the worker), the handler
    raising at each one's first letter: each is given up after its deaths, handed over again
    a second later without another death, written once, and every good record goes out."""
    from .test_kafka_deaths import IN_FLIGHT, POISON, Worker, logs_of, metadata, values

    logs, commits, dead = logs_of(values()), {}, FlakyLetters()
    clock = SimulatedClock()
    out: set[str] = set()
    deaths = 0
    w = Worker(logs, commits, dead, clock)
    try:
        for _ in range(200_000):
            if not w.in_flight and all(tp in commits and commits[tp].offset == len(log) for tp, log in logs.items()):
                break
            assert deaths < 40, (deaths, dead)
            clock.advance(0.01)
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            emitted = w.collector.emitted[before:]
            w.in_flight.extend((msg_id, value) for (value,), msg_id in emitted)
            if w.in_flight and (len(w.in_flight) >= IN_FLIGHT or not emitted):
                msg_id, value = w.in_flight.popleft()
                if value in POISON:
                    deaths += 1
                    w = Worker(logs, commits, dead, clock)   # the old one dropped: no close
                    continue
                out.add(value)
                w.spout.ack(msg_id)
    finally:
        w.spout.close()
    assert sorted(dead.raised) == sorted(POISON)
    assert sorted(v for v, _ in dead) == sorted(POISON)   # each written once, after its raise
    assert len(out) == len(values()) - len(POISON)
    for tp in logs:
        assert metadata(commits, tp)["charged"] == {} and metadata(commits, tp)["dead"] == {}, commits[tp]
