"""The in-memory transport: one endpoint per worker on a topology's network, delivering data,
following peer moves, holding what is sent to a worker that is gone for its next launch,
carrying control messages, and closing."""

import pytest

from squall.engine import transport as transport_module
from squall.engine.transport import InMemoryNetwork, InMemoryTransport, Transport


class Inbox:
    """A worker's receiver: keeps what arrives for the tasks it hosts (KeyError for others, as
    `Worker.receive` raises)."""

    def __init__(self, *tasks):
        self.tasks = set(tasks)
        self.items = []

    def __call__(self, task, item):
        if task not in self.tasks:
            raise KeyError(task)
        self.items.append((task, item))


def endpoint(network, address, *tasks):
    t = InMemoryTransport(network, address)
    inbox = Inbox(*tasks)
    t.set_receiver(inbox)
    return t, inbox


def test_it_is_a_transport_and_delivers_in_order_to_the_worker_hosting_the_task():
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    _, inbox_b = endpoint(net, "b", 5, 6)
    a.set_peers({5: "b", 6: "b"})
    assert isinstance(a, Transport) and a.address == "a"
    to5, to6 = a.sender(5), a.sender(6)
    for i in range(3):
        to5(i)
    to6("x")
    a.flush()
    assert inbox_b.items == [(5, 0), (5, 1), (5, 2), (6, "x")]
    assert a.statistics() == {"dropped": {}, "refused": 0}


def test_a_task_no_peer_was_given_for_has_no_sender():
    a = InMemoryTransport(InMemoryNetwork(), "a")
    with pytest.raises(KeyError, match="task 9"):
        a.sender(9)


def test_a_sender_made_before_a_peer_restarted_or_moved_finds_it_without_being_rebuilt():
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    b, inbox_b = endpoint(net, "b", 5)
    a.set_peers({5: "b"})
    send = a.sender(5)
    send("before")
    b.close()  # the peer dies: what is sent meanwhile waits for its next launch
    send("held")
    b2, inbox_b2 = endpoint(net, "b", 5)  # restarted under the same address
    send("same address")
    b2.close()
    send("held for its next launch")
    _, inbox_c = endpoint(net, "c", 5)  # ... which comes elsewhere (a Spark task on another port)
    assert a.set_peers({5: "c"}) == frozenset()  # nothing lost: what b held goes to c
    send("moved")
    assert inbox_b.items == [(5, "before")]
    assert inbox_b2.items == [(5, "held"), (5, "same address")]
    assert inbox_c.items == [(5, "held for its next launch"), (5, "moved")]
    assert a.statistics()["dropped"] == {}
    endpoint(net, "d", 5)
    assert a.set_peers({5: "d"}) == {5}  # c took items for 5 until now: they may be lost with it


def test_items_for_a_task_the_worker_there_does_not_host_are_dropped_and_counted():
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    _, inbox_b = endpoint(net, "b", 5)
    a.set_peers({7: "b"})  # a stale route: task 7 is not (or no longer) b's
    a.sender(7)("x")
    assert inbox_b.items == []
    assert a.statistics()["dropped"] == {"misdirected": 1}


def test_what_arrives_before_the_worker_set_its_receiver_is_dropped_and_counted():
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    b = InMemoryTransport(net, "b")
    a.set_peers({5: "b"})
    a.sender(5)("early")
    assert b.statistics()["dropped"] == {"no_receiver": 1}


def test_broadcast_reaches_every_peers_control_handler_with_the_senders_slot():
    net = InMemoryNetwork()
    a = InMemoryTransport(net, "a", slot="host:6700")
    others = [InMemoryTransport(net, x) for x in "bcs"]
    heard = {}
    for t in (a, *others):
        t.set_control_handler(lambda sender, msg, t=t: heard.setdefault(t.address, []).append((sender, msg)))
    a.set_peers({5: "b", 6: "b", 7: "c", 1: "a"})  # a task of its own address is not a peer
    a.broadcast({"over": True})
    assert heard == {"b": [("host:6700", {"over": True})], "c": [("host:6700", {"over": True})]}


def test_a_control_message_the_handler_rejects_is_dropped_and_counted_not_raised_to_the_sender():
    net = InMemoryNetwork()
    a, b = InMemoryTransport(net, "a"), InMemoryTransport(net, "b")

    def reject(sender, msg):
        raise TypeError("not a backpressure message")
    b.set_control_handler(reject)
    a.set_peers({5: "b"})
    a.broadcast("garbage")
    assert b.statistics()["dropped"] == {"undecodable": 1}


def test_close_unregisters_the_endpoint_and_stops_its_sending():
    net = InMemoryNetwork()
    a, inbox_a = endpoint(net, "a", 1)
    b, inbox_b = endpoint(net, "b", 5)
    heard = []
    b.set_control_handler(lambda sender, msg: heard.append(msg))
    a.set_peers({5: "b"})
    b.set_peers({1: "a"})
    send = a.sender(5)
    a.close()
    send("after close")
    a.broadcast({"over": True})
    b.sender(1)("to a closed worker")
    a.set_peers({5: "b"})  # a closed endpoint does not come back
    send("still closed")
    assert inbox_a.items == [] and inbox_b.items == [] and heard == []
    assert b.statistics()["dropped"] == {}  # held for a's next launch
    _, inbox_a2 = endpoint(net, "a", 1)  # its address is free again
    b.sender(1)("to the new one")
    assert inbox_a2.items == [(1, "to a closed worker"), (1, "to the new one")]


def test_two_live_endpoints_cannot_share_an_address():
    net = InMemoryNetwork()
    InMemoryTransport(net, "a")
    with pytest.raises(ValueError, match="address a already has an endpoint"):
        InMemoryTransport(net, "a")


def test_a_working_loop_flushes_what_is_due_and_a_stopping_loop_sends_everything():
    """A loop calls the transport's flush_due after each working round (a peer's items may wait
    there for more, `BatchingTransport.flush_due`) and its flush when it ends, so nothing held
    for a later round stays behind a stopped loop."""
    import threading

    from squall.engine.clock import Clock
    from squall.engine.loop import Backpressure, ExecutorLoop, TopologyActivation

    calls: list[str] = []
    rounds = threading.Event()
    clock = Clock()
    loop = ExecutorLoop("test-loop", TopologyActivation(active=True), Backpressure(high=10, clock=clock), clock, {},
                        lambda *a: None)
    loop.poll = lambda: 1  # every round works: the loop never sleeps

    def flush_due():
        calls.append("due")
        if calls.count("due") >= 3:
            rounds.set()

    loop.flush_due = flush_due
    loop.flush = lambda: calls.append("all")
    loop.start()
    assert rounds.wait(30)
    loop.stop()
    assert loop.join(30)
    assert calls[-1] == "all" and "all" not in calls[:-1]


def test_a_worker_that_hangs_up_takes_nothing_more_and_its_next_launch_gets_what_was_sent_meanwhile_in_order():
    """A crashed worker's endpoint leaves the network at once (`hang_up`): what each peer sends
    from then on is held, per sender, until the next launch at that address sets its receiver,
    then delivered there in the order sent, before anything newer; a task the new launch does
    not host is dropped as misdirected."""
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    c, _ = endpoint(net, "c", 2)
    b, inbox_b = endpoint(net, "b", 5, 6)
    a.set_peers({5: "b", 6: "b", 7: "b"})
    c.set_peers({5: "b"})
    a.sender(5)("a0")
    b.hang_up()
    for i in range(1, 4):
        a.sender(5)(f"a{i}")
        c.sender(5)(f"c{i}")
    a.sender(7)("not its task")
    a.sender(6)("a6")
    assert inbox_b.items == [(5, "a0")]
    b.close()
    b2 = InMemoryTransport(net, "b")
    a.sender(5)("before its receiver")  # registered, but taking nothing yet: held too
    inbox_b2 = Inbox(5, 6)
    b2.set_receiver(inbox_b2)
    a.sender(5)("after")
    from_a = [item for task, item in inbox_b2.items if item[0] in "ab"]
    from_c = [item for task, item in inbox_b2.items if item[0] == "c"]
    assert from_a == ["a1", "a2", "a3", "a6", "before its receiver", "after"]
    assert from_c == ["c1", "c2", "c3"]
    assert a.statistics()["dropped"] == {"misdirected": 1} and c.statistics()["dropped"] == {}


def test_what_a_sender_holds_is_bounded_the_oldest_given_up_first_and_closing_it_gives_up_the_rest(monkeypatch):
    """As the TCP wire's backlog: at most MAX_HELD items a sender and address, the oldest
    given up first, each counted (and reported to ``on_drop``, which a tracked topology counts
    as lost); a sender that closes gives up what it held."""
    monkeypatch.setattr(transport_module, "MAX_HELD", 3)
    net = InMemoryNetwork()
    a, _ = endpoint(net, "a", 1)
    b, _ = endpoint(net, "b", 5)
    dropped = []
    a.on_drop = dropped.append
    a.set_peers({5: "b"})
    b.close()
    for i in range(5):
        a.sender(5)(i)
    assert a.statistics()["dropped"] == {"given_up": 2} and dropped == [5, 5]
    _, inbox_b2 = endpoint(net, "b", 5)
    assert inbox_b2.items == [(5, 2), (5, 3), (5, 4)]
    net.endpoint("b").close()
    a.sender(5)("x")
    a.close()
    assert a.statistics()["dropped"] == {"given_up": 2, "closed": 1} and dropped == [5, 5, 5]
