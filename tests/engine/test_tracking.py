"""A tracked topology's counts (squall.engine.tracking): what a worker that died held is
counted as lost, exactly, whatever arrives or is run there afterwards; and what the in-memory
transport drops is counted as lost too."""

import time

from squall.engine.tracking import TupleCounts
from squall.engine.transport import InMemoryNetwork, InMemoryTransport


def _done(counts: TupleCounts) -> bool:
    return counts.wait_for(0, time.monotonic())


def test_a_dead_workers_items_are_lost_and_late_arrivals_and_runs_keep_the_counts_exact():
    counts = TupleCounts()
    here, there = counts.worker(), counts.worker()
    here.transfer("bolt", 3)          # three local deliveries
    counts.transfer("sink", 2)        # two sent to the other worker...
    there.arrive("sink", 2)           # ...which arrive there
    here.process("bolt", 1)
    there.process("sink", 1)
    assert not _done(counts) and counts.unprocessed() == {"bolt": 2, "sink": 1}
    there.died()                      # the one it had not run is lost
    assert counts.lost_by == {"sink": 1} and counts.unprocessed() == {"bolt": 2}
    counts.transfer("sink")           # sent after the death, into its inboxes
    there.arrive("sink")
    assert counts.lost_by == {"sink": 2}
    there.process("sink", 1)          # a loop that was still running finishes one: not lost after all
    assert counts.lost_by == {"sink": 1} and counts.processed_by["sink"] == 2
    there.died()                      # a second notice changes nothing
    here.process("bolt", 2)
    assert _done(counts)
    assert counts.amounts() == {"spout-emitted": 0, "transferred": 6, "processed": 5, "lost": 1}
    assert counts.workers_died == 1
    counts.forget()


def test_what_the_in_memory_transport_drops_is_reported_by_task():
    network = InMemoryNetwork()
    sender = InMemoryTransport(network, "a")
    dropped = []
    sender.on_drop = dropped.append
    sender.set_peers({7: "gone"})     # no endpoint there
    sender.sender(7)("item")
    receiver = InMemoryTransport(network, "b")

    def refuse(task, item):           # a worker not hosting the task
        raise KeyError(task)
    receiver.set_receiver(refuse)
    sender.set_peers({8: "b"})
    sender.sender(8)("item")
    assert dropped == [7, 8]
    assert sender.statistics()["dropped"] == {"no_endpoint": 1, "misdirected": 1}
