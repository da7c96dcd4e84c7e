"""The seam between workers: how items and control messages reach the other workers of a topology.

A `Transport` is one worker's end of the topology's network. The engine's `Worker` only asks it
for a sender per remote task and to `flush`; the host that runs the worker (`LocalCluster`, the
process and Spark hosts) does the rest: it says where arriving items go (`set_receiver`), where
each remote task lives and when it moves (`set_peers`), and links the worker's `Backpressure`
to its peers through `broadcast` and `set_control_handler` (`squall.engine.remote_backpressure`).

`InMemoryTransport` joins the workers of one process through an `InMemoryNetwork`: no
serialization, no sockets, no threads. `squall.worker.transport.ZmqTransport` sends batches
between processes over ZeroMQ.
"""

from __future__ import annotations

import abc
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any, NamedTuple

from .._ratelimit import RateLimitedLog
from .clock import WakeEvent

log = logging.getLogger("squall.engine")

class Origin(NamedTuple):
    """Who sends: the topology, the worker's slot (``host:port``) and its launch id. Each of a
    worker's messages carries it (`squall.worker.envelope` authenticates it on the network).
    ``first_seq``: the sequence number of its first message: 0, but above every number an
    earlier process of the same launch sent when its supervisor started it again while no
    master answered (`squall.cluster.local_assignment`)."""

    storm_id: str
    slot: str
    launch: int
    first_seq: int = 0


class PeerReach:
    """The peer workers that one worker's wire cannot reach: a connection that broke (its worker
    died, or answered none of the wire's heartbeats or keepalive probes for its bound: a
    partition, a lost machine), from the break until a connection is made again. The wire says
    so once at the break and once at the recovery, naming the peer (`describe`), and counts the
    breaks (``breaks``, in the worker's transport statistics); a spout whose tuples time out
    while a peer is unreachable names the peer as the cause (`recent`), rather than its
    ``topology.max.spout.pending`` (`squall.engine.pending_tuner.MaxPending.replay_storm`).

    Peers are the wire's keys (a worker's first address); ``now``: the monotonic clock, seconds.
    Thread-safe: the wire's threads note, the spouts' loops read."""

    def __init__(self, now: Callable[[], float] = monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._away: dict[str, tuple[float, str]] = {}  # peer -> (when its connection broke, its description)
        self._back: dict[str, tuple[float, str]] = {}  # peer -> (when it was reached again, its description)
        self.breaks = 0  # connections to peers that broke, in all
        # the components of a worker's tasks, for `describe` (set by the engine's `Worker`)
        self.components: Callable[[Iterable[int]], list[str]] | None = None

    def describe(self, address: str, tasks: Iterable[int]) -> str:
        """``the worker at host:port (tasks 3, 4: sink)``: what a line about a peer names."""
        tasks = sorted(tasks)
        if not tasks:
            return f"the worker at {address}"
        names = self.components(tasks) if self.components is not None else []
        listed = ", ".join(map(str, tasks))
        return f"the worker at {address} (tasks {listed}{': ' + ', '.join(names) if names else ''})"

    def broke(self, peer: str, description: str) -> bool:
        """``peer``'s connection broke: True if it was reachable until now (say so, once)."""
        with self._lock:
            if peer in self._away:
                return False
            self._away[peer] = (self._now(), description)
            self._back.pop(peer, None)
            self.breaks += 1
            return True

    def made(self, peer: str) -> float | None:
        """A connection to ``peer`` is made: for how many seconds it was unreachable, or None
        if it was not (a first connection)."""
        with self._lock:
            away = self._away.pop(peer, None)
            if away is None:
                return None
            now = self._now()
            self._back[peer] = (now, away[1])
            return now - away[0]

    def forget(self, peer: str) -> None:
        """``peer`` is gone for good (closed, moved): not unreachable any more."""
        with self._lock:
            self._away.pop(peer, None)
            self._back.pop(peer, None)

    def away(self) -> list[str]:
        """The peers unreachable now."""
        with self._lock:
            return list(self._away)

    def recent(self, secs: float) -> list[str]:
        """The descriptions of the peers unreachable now or at any time in the last ``secs``
        seconds, each with for how long (a spout's message timeout: what may have made its
        tuples time out)."""
        with self._lock:
            now = self._now()
            out = [f"{d} (unreachable for {now - t:.0f} s now)" for t, d in self._away.values()]
            out += [f"{d} (unreachable until {now - t:.0f} s ago)" for t, d in self._back.values() if now - t <= secs]
            return out


Receiver = Callable[[int, Any], None]            # (task, item): the worker's ``receive``
BatchReceiver = Callable[[list], int]            # [task, item, task, item, ...]: the worker's ``receive_batch``
# fill(inboxes) decodes a batch into the worker's inboxes: the worker's ``receive_into``
IntoReceiver = Callable[[Callable[[dict], "int | None"]], "int | None"]
ControlHandler = Callable[[Any, Any], None]      # (sender slot, message)


class Transport(abc.ABC):
    """One worker's end of the network between a topology's workers.

    Data: an item (a tuple or an acker message) given to ``sender(task)`` reaches the worker
    that hosts ``task`` when it is sent (at once, or at the next `flush`), and that worker's
    receiver is called with ``(task, item)``. Items from one worker to one task arrive in the
    order they were sent. Delivery is at most once: an item that reached a worker which then
    died, or for a task whose worker no longer hosts it, is lost or dropped (and counted,
    `statistics`); its tuple times out or is failed by `Worker.tasks_lost`, and replays, as in
    Storm. What is sent to a worker that died, after it died, waits (bounded) for its next launch
    at the same address, the replays made at the notice of its death among it.

    Control: `broadcast` sends a small message (plain dicts, lists, strings, numbers, booleans)
    to every peer worker, after the items this worker queued for that peer before the call;
    the peer's control handler gets it with the sender's slot, which the transport vouches for
    (`ZmqTransport` authenticates it). A message the handler rejects (it raises) is dropped and
    counted as ``undecodable``.

    Attributes:
        address: this worker's data address, which its peers are given in `set_peers`.
    """

    address: str
    # told ``(task, why)`` of each item it refused to send (too large to cross): the emitting
    # task of a tuple (else the target's), whose component the worker reports it as an error of
    on_refused: Callable[[int, str], None] | None = None
    # told, from the transport's own thread, that items arrived for `poll`: the worker wakes
    # its sleeping loops
    on_arrival: Callable[[], None] | None = None
    # told ``(peer, holding)`` when the transport starts holding many messages for a peer worker
    # that does not take them (dead, hung, restarting; ``peer`` names it for as long as the
    # transport lives, whatever its moves), and when the peer took them: the worker holds its
    # spouts back meanwhile (`squall.engine.loop.Backpressure.hold`). Only the wires between
    # processes hold messages so (`squall.worker.batching.BatchingTransport`).
    on_held: Callable[[str, bool], None] | None = None
    # the peers a wire between processes cannot reach now, or could not lately (`PeerReach`):
    # in memory, every peer is always reached
    reach: PeerReach | None = None

    def loop_event(self) -> WakeEvent:
        """A new event for a loop of this worker to sleep on (`ExecutorLoop.wake` sets it).
        A transport without a thread of its own (`squall.worker.tcp.TcpTransport`) returns one
        whose wait also ends when its sockets have something for `poll`."""
        return threading.Event()

    def poll(self) -> int:
        """Deliver, on the calling thread, what arrived since the last call; return how many
        items. The worker's loops call it at the start of every round, so a transport whose
        receiving thread only queues messages hands whole batches to the loop, which checks,
        decodes and delivers them without a thread switch or a wake-up per item (`ZmqTransport`). A
        transport that delivers as items are sent (in memory) has nothing to do."""
        return 0

    @abc.abstractmethod
    def sender(self, task_id: int) -> Callable[[Any], None]:
        """A function that delivers one item to ``task_id``, wherever it runs now (moves told by
        `set_peers` apply to senders made before them).

        Raises:
            KeyError: no peer of ``task_id`` was given to `set_peers`.
        """

    def flush(self) -> None:
        """Send what the senders have batched. Loops call it before they sleep (and `flush_due`
        after a round that did work), so a batch never waits while its worker is idle."""

    def flush_due(self) -> None:
        """Send what the senders have batched and should not wait for more: a loop calls it
        after a round that did work and goes on working. A transport that pays per message
        keeps a peer's items a little longer, to send them in fewer, larger messages
        (`squall.worker.batching.BatchingTransport.flush_due`); by default, `flush`."""
        self.flush()

    @abc.abstractmethod
    def set_receiver(self, receive: Receiver, receive_batch: BatchReceiver | None = None,
                     receive_into: IntoReceiver | None = None) -> None:
        """Where arriving items go: ``receive(task, item)`` (the worker's ``receive``, which
        raises KeyError for a task it does not host: such items are dropped), or, for the items
        of one batch delivered by `poll`, ``receive_batch(items)`` when given (the worker's
        ``receive_batch``, which drops those and returns how many it delivered), or
        ``receive_into(fill)`` when given, for a transport that can decode a batch straight into
        the worker's inboxes (the worker's ``receive_into``: ``fill(inboxes)`` appends to them,
        or returns None and the batch goes to ``receive_batch``). Until it is set, arriving items
        are dropped (or, in the process host, kept by its `_EarlyItems`)."""

    @abc.abstractmethod
    def set_peers(self, peers: dict[int, str]) -> frozenset[int]:
        """The address of the worker hosting each remote task: new tasks (before `sender` is
        asked for them), or a new address for a worker that restarted elsewhere (a Spark task
        on another port). What was held for a moved task's old address, sent after its worker
        died (the spouts' replays at the master's notice among it), goes to the new address: it
        was held for that worker's next launch, which is the one there now.

        Returns the moved tasks to which something sent may have been lost in the move (a
        transport that cannot take back what it held, or a connection to the old address that
        was not seen to break): the caller fails the spouts' tuples that may have been among it
        (`squall.engine.dropped_items`). What was delivered or written to the old worker before
        it was seen to die is not counted: the master's notice of the death fails it."""

    def set_launches(self, launches: dict[str, int], floor: int = 0) -> None:
        """The master's launch id per slot (``floor``: of every slot not named, one the
        topology left): messages from an older launch of a slot (a worker replaced since) are
        dropped. A transport whose closed endpoints can send nothing, as the in-memory one, has
        none to drop."""

    def loss_age(self, tasks: Iterable[int], slot: str, launch: int) -> float | None:
        """Launch ``launch`` of ``slot``, which hosted ``tasks``, died (the master's notice):
        how many seconds ago this worker's spouts last emitted anything that may have been lost
        with it, sent by this worker or through others. What it sent since went to a later
        launch of the slot, or waits for one. None when
        the transport cannot tell (every item sent until now may be lost), as when it has not
        heard from a later launch of the slot, or cannot see its connections (the in-memory
        transport, ZeroMQ's)."""
        return None

    @abc.abstractmethod
    def set_control_handler(self, handle: ControlHandler) -> None:
        """Where arriving control messages go: ``handle(sender_slot, message)``; it raises for a
        message it cannot take (then dropped and counted as ``undecodable``)."""

    @abc.abstractmethod
    def broadcast(self, message: Any) -> None:
        """Send the control ``message`` to every peer worker (every address of `set_peers`),
        after the items queued for it; nothing once closed."""

    @abc.abstractmethod
    def statistics(self) -> dict[str, Any]:
        """``{"dropped": {reason: count}, "refused": count}``, for the worker's heartbeat."""

    def hang_up(self) -> None:
        """The worker crashed: stop taking items at once, before its death is reported to
        anyone, so that what its peers send from now on (the replays of what it held, made at
        the master's notice) waits for its next launch rather than reaching its dead inboxes.
        Sending, and `close`, are unaffected. A transport whose process ends with its worker has
        nothing to do: its peers see the hang-up when the process exits (`squall.worker.tcp`)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop receiving and sending: from now on this worker's address has no endpoint, and
        what its senders are given is dropped."""


# Items one sender holds for one address whose worker died, for its next launch there (as the
# TCP wire's backlog holds a peer's messages, `squall.worker.tcp.MAX_BACKLOG`, and gives the oldest
# up first). That wire holds at most 1,000 messages a peer, ~7 MB of batches; an item held here is
# a Python object, not bytes (a small tuple with its values and ids, a few hundred bytes), so
# 20,000 of them hold a few MB, the same order.
MAX_HELD = 20_000


class _Held:
    """What one sending endpoint holds for one address while no worker takes items there.

    ``take`` is the sender's path to the address meanwhile; `hand_over` gives the new launch's
    receiver what was held, in the order it was sent, and every later item (a sender that read
    the address's cell before it was rewritten calls ``take`` still). ``drop(task, reason)``
    counts an item given up.
    """

    __slots__ = ("drop", "items", "lock", "receive")

    def __init__(self, drop: Callable[[int, str], None]) -> None:
        self.drop = drop
        self.items: deque[tuple[int, Any]] = deque()
        self.lock = threading.Lock()
        self.receive: Receiver | None = None

    def take(self, task: int, item: Any) -> None:
        with self.lock:
            receive = self.receive
            if receive is None:
                self.items.append((task, item))
                if len(self.items) > MAX_HELD:  # the worker has been away long: give the oldest up
                    self.drop(self.items.popleft()[0], "given_up")
                return
        receive(task, item)  # a KeyError (not its task) is the sender's to count

    def hand_over(self, receive: Receiver) -> None:
        """Deliver what is held to ``receive``, and from now on everything ``take`` is given."""
        with self.lock:
            while self.items:
                task, item = self.items.popleft()
                try:
                    receive(task, item)
                except KeyError:  # the new launch does not host the task
                    self.drop(task, "misdirected")
            self.receive = receive

    def hold(self) -> None:
        """The address's worker is gone: hold from now on."""
        with self.lock:
            self.receive = None

    def take_out(self, task: int) -> list[Any]:
        """Remove and return what is held for ``task`` (its worker moved: it goes there)."""
        with self.lock:
            out = [item for t, item in self.items if t == task]
            if out:
                self.items = deque((t, item) for t, item in self.items if t != task)
            return out

    def give_up(self, reason: str, tasks: frozenset[int] | None = None) -> None:
        """Drop what is held (for ``tasks`` only, if given), counting each as ``reason``."""
        with self.lock:
            kept: deque[tuple[int, Any]] = deque()
            for task, item in self.items:
                if tasks is None or task in tasks:
                    self.drop(task, reason)
                else:
                    kept.append((task, item))
            self.items = kept


class InMemoryNetwork:
    """The wire between one topology's workers in one process: address -> the endpoint there.

    Endpoints register when made and leave when closed (or, for a worker that crashed, at once:
    `InMemoryTransport.hang_up`); a worker restarted under the same address replaces the one
    that died. Each sending endpoint holds, per peer address, a cell (a list whose first item is
    the function that delivers there): the receiver of the endpoint at that address; while an
    endpoint that was there is gone and its next launch has not set its receiver, the sender's
    `_Held` for the address, which keeps what is sent for that launch, as the process host's TCP
    wire keeps it in the peer's backlog; and at an address where no endpoint ever was, the
    sender's drop counter. The network rewrites the cells of an address when its endpoint
    comes, goes or sets its receiver, so the data path is one call through a cell, without a
    lookup per item.
    """

    def __init__(self) -> None:
        self._endpoints: dict[str, InMemoryTransport] = {}
        self._cells: dict[str, list[list[Any]]] = {}  # address -> the senders' cells for it
        self._gone: set[str] = set()  # addresses whose worker left and whose next launch takes nothing yet
        self._lock = threading.Lock()

    def endpoint(self, address: str) -> InMemoryTransport | None:
        """The endpoint at ``address`` now, if any."""
        return self._endpoints.get(address)

    def register(self, endpoint: InMemoryTransport) -> None:
        """Make ``endpoint`` the one at its address.

        Raises:
            ValueError: another live endpoint has that address.
        """
        with self._lock:
            there = self._endpoints.get(endpoint.address)
            if there is not None and there is not endpoint:
                raise ValueError(f"address {endpoint.address} already has an endpoint on this network")
            self._endpoints[endpoint.address] = endpoint
            self._point(endpoint.address)

    def unregister(self, endpoint: InMemoryTransport) -> None:
        """Remove ``endpoint`` (if it is still the one at its address): what is sent there from
        now on is held for the next endpoint's receiver."""
        with self._lock:
            if self._endpoints.get(endpoint.address) is endpoint:
                del self._endpoints[endpoint.address]
                self._gone.add(endpoint.address)
                self._point(endpoint.address)

    def holding(self, address: str) -> bool:
        """Whether what is sent to ``address`` is held now: its worker is gone, and its next
        launch takes nothing yet."""
        with self._lock:
            return address in self._gone

    def receiver_changed(self, endpoint: InMemoryTransport) -> None:
        """``endpoint`` has a new receiver: deliver there from now on (what was held first)."""
        with self._lock:
            if self._endpoints.get(endpoint.address) is endpoint:
                self._gone.discard(endpoint.address)
                self._point(endpoint.address)

    def subscribe(self, address: str, missing: Receiver, drop: Callable[[int, str], None]) -> list[Any]:
        """A new cell ``[deliver, missing, held]`` for a sender to ``address``: ``deliver`` is the
        receiver of the endpoint there, or ``held.take`` while one that was there is gone,
        or ``missing`` while there never was one; ``drop(task, reason)`` counts what the
        sender's `_Held` gives up."""
        with self._lock:
            cell = [missing, missing, _Held(drop)]
            self._cells.setdefault(address, []).append(cell)
            self._point_cell(address, cell)
            return cell

    def unsubscribe(self, address: str, cell: list[Any]) -> None:
        """Stop updating ``cell`` (its sender closed); it drops from now on, and what it held
        is given up."""
        with self._lock:
            cells = self._cells.get(address, [])
            if cell in cells:
                cells.remove(cell)
            cell[0] = cell[1]
        cell[2].give_up("closed")

    def _point(self, address: str) -> None:
        for cell in self._cells.get(address, ()):
            self._point_cell(address, cell)

    def _point_cell(self, address: str, cell: list[Any]) -> None:
        there = self._endpoints.get(address)
        held: _Held = cell[2]
        if address in self._gone:  # no worker there, or its next launch takes nothing yet
            held.hold()
            cell[0] = held.take
        elif there is None:
            cell[0] = cell[1]
        else:
            held.hand_over(there.receive)
            cell[0] = there.receive


class InMemoryTransport(Transport):
    """A worker's endpoint on an `InMemoryNetwork`: delivers by calling the receiver of the
    endpoint at the task's address, on the sending thread.

    A peer that restarted (under the same address or, after `set_peers`, another) is found
    without rebuilding anyone's senders. An item for an address whose worker is gone waits for
    its next launch there (at most `MAX_HELD` a sender and address, the oldest given up first),
    as the process host's TCP wire keeps it in the peer's backlog; one for an address where no
    worker ever was is dropped. Nothing else is queued, so `flush` has nothing to do and a
    broadcast always follows the items sent before it.

    Args:
        network: the topology's network; the endpoint registers on it at once.
        check: called with each item given to a sender, before it is delivered: it raises for
            an item that could not cross processes (`squall.engine.serialize.Serializer.emit_check`),
            so a value that fails its emit on the other hosts fails it here too.
        address: this worker's address on it.
        slot: the name the peers' control handlers are told the messages come from (default:
            ``address``).
    """

    def __init__(self, network: InMemoryNetwork, address: str, slot: Any = None,
                 check: Callable[[Any], None] | None = None) -> None:
        self.network = network
        self.check = check
        self.address = address
        self.slot = address if slot is None else slot
        self.receive: Receiver = self._no_receiver
        self._addresses: dict[int, str] = {}      # remote task -> its worker's address
        # per remote task a one-item list holding the cell of its address (`InMemoryNetwork`):
        # the senders keep the list, so set_peers moves a task for senders already made
        self._routes: dict[int, list[list[Any]]] = {}
        self._cells: dict[str, list[Any]] = {}     # peer address -> its cell
        self._peer_addresses: frozenset[str] = frozenset()
        self._control: ControlHandler | None = None
        self._drops: Counter[str] = Counter()
        self._warn = RateLimitedLog(log, limit=5, period=10.0)
        self._closed = False
        # called with the task of each item it drops (a tracked topology counts it as lost)
        self.on_drop: Callable[[int], None] | None = None
        network.register(self)

    def sender(self, task_id: int) -> Callable[[Any], None]:
        route = self._routes.get(task_id)
        if route is None:
            raise KeyError(f"no worker hosts task {task_id}")
        drops = self._drops
        check = self.check

        def send(item: Any) -> None:
            try:
                route[0][0](task_id, item)
            except KeyError:  # the worker there does not host the task (it moved): as Storm, drop
                drops["misdirected"] += 1
                if self.on_drop is not None:
                    self.on_drop(task_id)
        if check is None:
            return send

        def check_and_send(item: Any) -> None:
            check(item)  # raises in the emitting component, as the process host's sender does
            send(item)
        return check_and_send

    def set_receiver(self, receive: Receiver, receive_batch: BatchReceiver | None = None,
                     receive_into: IntoReceiver | None = None) -> None:
        self.receive = receive
        self.network.receiver_changed(self)

    def _no_receiver(self, task: int, item: Any) -> None:
        self._dropped(task, "no_receiver")

    def _no_endpoint(self, task: int, item: Any) -> None:
        self._dropped(task, "no_endpoint")

    def _dropped(self, task: int, reason: str) -> None:
        self._drops[reason] += 1
        if self.on_drop is not None:
            self.on_drop(task)

    def set_peers(self, peers: dict[int, str]) -> frozenset[int]:
        lost: set[int] = set()
        if self._closed:
            return frozenset()
        for task, address in peers.items():
            cell = self._cells.get(address)
            if cell is None:
                cell = self._cells[address] = self.network.subscribe(address, self._no_endpoint, self._dropped)
            route = self._routes.get(task)
            if route is None:
                self._routes[task] = [cell]
            elif route[0] is not cell:
                old_address = self._addresses[task]
                log.info("peer worker of task %s moved from %s to %s", task, old_address, address)
                old, route[0] = route[0], cell
                if not self.network.holding(old_address):
                    # a worker there took items for the task (or none ever was: they were dropped)
                    lost.add(task)
                # what was held for the dead worker's next launch goes to that launch, here now
                for item in old[2].take_out(task):
                    try:
                        cell[0](task, item)
                    except KeyError:  # the worker there does not host the task
                        self._dropped(task, "misdirected")
                        lost.add(task)
            self._addresses[task] = address
        self._peer_addresses = frozenset(a for a in self._addresses.values() if a != self.address)
        return frozenset(lost)

    def set_control_handler(self, handle: ControlHandler) -> None:
        self._control = handle

    def broadcast(self, message: Any) -> None:
        if self._closed:
            return
        for address in self._peer_addresses:
            peer = self.network.endpoint(address)
            if peer is not None:
                peer._take_control(self.slot, message)

    def _take_control(self, sender: Any, message: Any) -> None:
        """A peer's control message arrives (on the peer's thread)."""
        handle = self._control
        if handle is None or self._closed:
            return
        try:
            handle(sender, message)
        except Exception as e:  # noqa: BLE001 - it runs on the sender's loop, which a peer must not crash
            self._drops["undecodable"] += 1
            self._warn.warning("dropped a control message from %s: %s", sender, e)

    def statistics(self) -> dict[str, Any]:
        """Items dropped by reason (``no_endpoint``: sent to an address where no worker ever
        was; ``misdirected``: to a worker not hosting the task; ``no_receiver``: arrived before
        the worker existed; ``undecodable``: a control message the handler rejected; and of
        what was held for a dead worker's next launch: ``given_up``, the oldest past `MAX_HELD`,
        ``closed``, held when this endpoint closed; what was held for a task that moved goes to
        its new address)."""
        return {"dropped": dict(self._drops), "refused": 0}

    def hang_up(self) -> None:
        """Leave the network now (the worker crashed): what peers send to this address from
        now on is held for its next launch, not put in the dead worker's inboxes."""
        self.network.unregister(self)

    def close(self) -> None:
        self._closed = True
        self.network.unregister(self)
        for address, cell in self._cells.items():
            self.network.unsubscribe(address, cell)
        self._peer_addresses = frozenset()
