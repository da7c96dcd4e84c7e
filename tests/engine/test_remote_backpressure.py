"""Backpressure across workers through their transports (`BackpressureLink`), as every host
wires it: a worker over its bound throttles the others' spouts, says so again while it lasts,
and a peer that stops saying so is forgotten."""

from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure
from squall.engine.remote_backpressure import BackpressureLink
from squall.engine.transport import InMemoryNetwork, InMemoryTransport

from ..conftest import wait_until


def linked_pair(renew_secs=1.0):
    """Two workers' backpressure, linked through an in-memory network; each is a peer of the
    other (task 1 in "a", task 2 in "b")."""
    clock = SimulatedClock()
    net = InMemoryNetwork()
    a, b = InMemoryTransport(net, "a"), InMemoryTransport(net, "b")
    a.set_peers({2: "b"})
    b.set_peers({1: "a"})
    bp_a, bp_b = Backpressure(10, clock), Backpressure(10, clock)
    bp_a.RENEW_SECS = bp_b.RENEW_SECS = renew_secs
    return clock, (bp_a, a, BackpressureLink(bp_a, a)), (bp_b, b, BackpressureLink(bp_b, b))


def test_a_worker_over_its_bound_throttles_the_others_spouts_until_it_is_under_again():
    _, (bp_a, _, link_a), (bp_b, _, link_b) = linked_pair()
    try:
        bp_a.check(1, 10)
        assert bp_a.over and bp_b.throttled and not bp_b.over
        bp_a.check(1, 5)
        assert not bp_b.throttled
    finally:
        link_a.stop()
        link_b.stop()


def test_a_transport_holding_messages_for_an_absent_peer_throttles_every_workers_spouts_until_it_took_them():
    """`Backpressure.hold` (the transport's `on_held`): the worker counts as over its bound,
    its own inboxes empty, so its spouts and, told through the link, the others' stop."""
    _, (bp_a, _, link_a), (bp_b, _, link_b) = linked_pair()
    try:
        bp_a.hold("tcp://peer:1", True)
        assert bp_a.over and bp_a.throttled and bp_b.throttled
        bp_a.check(1, 10)
        bp_a.check(1, 0)  # its inbox drained: still held for the peer
        assert bp_a.throttled and bp_b.throttled
        bp_a.hold("tcp://peer:1", False)
        assert not bp_a.over and not bp_a.throttled and not bp_b.throttled
    finally:
        link_a.stop()
        link_b.stop()


def test_a_message_that_is_not_backpressure_is_dropped_and_changes_nothing():
    _, (_, a, link_a), (bp_b, b, link_b) = linked_pair()
    try:
        a.broadcast({"over": "yes"})
        a.broadcast(["over", True])
        assert not bp_b.throttled
        assert b.statistics()["dropped"] == {"undecodable": 2}
    finally:
        link_a.stop()
        link_b.stop()


def test_while_over_a_worker_says_so_again_and_a_peer_that_stops_is_forgotten():
    clock, (bp_a, _, link_a), (bp_b, _, link_b) = linked_pair(renew_secs=0.01)
    heard = []
    set_remote = bp_b.set_remote
    bp_b.set_remote = lambda sender, over: (heard.append((sender, over)), set_remote(sender, over))
    try:
        bp_a.check(1, 10)
        assert wait_until(lambda: heard.count(("a", True)) >= 3, 5)
        link_a.stop()  # a dies while over: it can say "under" no more
        assert bp_a.listener is None
        clock.advance(bp_b.EXPIRE_SECS + 1)
        assert wait_until(lambda: not bp_b.throttled, 5)
    finally:
        link_a.stop()
        link_b.stop()
