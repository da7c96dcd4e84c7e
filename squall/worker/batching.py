"""`BatchingTransport`: what squall's two wires between worker processes have in common.

Items for a task in another worker are queued per peer worker by the task's sender, in the
peer's `Outbox` (`squall._native`): compiled, a plain item is written there as its batch's bytes
when it is emitted, with no Tuple kept until the flush; anything else is kept as it is, for the
serializer. `flush` (called by the loops after every working round, see
`squall.engine.transport.Transport.flush`) takes each outbox's batches, encodes what is not
bytes yet, and seals each batch (`squall.worker.envelope`), so a tuple crossing processes pays
for one message per batch, not per tuple (ENGINE-SPEED.md, lesson 8). A message
that arrives is opened (MAC and header checked) before anything in it is decoded, because
decoding may unpickle, and pickles must never be loaded from an unauthenticated peer.

The wire is the subclass's: `squall.worker.transport.ZmqTransport` (ZeroMQ, with CurveZMQ
encryption) and `squall.worker.tcp.TcpTransport` (plain TCP sockets that the worker's loops read
and write themselves). A subclass binds its port, calls `_listening`, and implements `_send`,
`_moved`, `poll` and `close`.
"""

from __future__ import annotations

import abc
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

import msgpack

from .._config import Config, default_of
from .._native import Outbox
from .._native import sender as native_sender
from .._ratelimit import RateLimitedLog
from .._tuple import Tuple
from ..engine.serialize import PLAIN_TYPES, SerializationError, Serializer
from ..engine.transport import IntoReceiver, PeerReach, Transport
from .envelope import CONTROL, DATA, SEAL_OVERHEAD, Opener, Origin, Refused, Sealer

log = logging.getLogger("squall.worker")

MAX_BATCH = 2048  # items per message: bounds a message's size and the receiver's latency
MAX_MESSAGE_KEY = Config.SQUALL_TRANSPORT_MAX_MESSAGE_BYTES
# A batch of MAX_BATCH small tuples is ~7 KB; 64 MB leaves room for large values, and bounds
# what one message from a stranger can make a worker allocate.
DEFAULT_MAX_MESSAGE_BYTES = default_of(MAX_MESSAGE_KEY)
ROUTE_ROOM = 512  # bytes a message's route may take beside a batch the outbox wrote (`_send_data`)
# Fewer, larger messages (`BatchingTransport.flush_due`): what a message costs whatever it holds
# (sealing and opening, a system call each way, the transport's Python around them) is shared by
# more items. W1 on 2 workers sent one message a round per peer of ~300 items.
TRANSFER_BATCH_KEY = Config.TOPOLOGY_TRANSFER_BATCH_SIZE
FLUSH_INTERVAL_KEY = Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS
DEFAULT_TRANSFER_BATCH = default_of(TRANSFER_BATCH_KEY)
DEFAULT_FLUSH_INTERVAL_MS = default_of(FLUSH_INTERVAL_KEY)
# A peer whose kernel acknowledges nothing this worker sent for this long is unreachable (a
# partition, a lost machine): the wire says so, naming it (`BatchingTransport._unreachable`;
# ZeroMQ's closes the connection, `squall.worker.transport`; the TCP wire's keeps it,
# `squall.worker.tcp`). Shorter than the default topology.message.timeout.secs (30), so that the
# cause is in the log before the first timeouts. A 25 s partition between two workers said
# nothing of the peer without it. A topology with a shorter message timeout gets a shorter bound
# (`silent_bound`).
SILENT_SECS = 10.0
MIN_SILENT_SECS = 3.0  # at least this: a healthy network's retransmissions (200 ms, doubling) fit well within


def silent_bound(message_timeout_secs: float) -> float:
    """How long a peer may acknowledge nothing before it is said to be unreachable, for a
    topology whose tuples time out after ``message_timeout_secs``: half of it, so that the
    peer is named before the first tuples that crossed to it time out (a spout's warning about
    them then names the peer, not ``topology.max.spout.pending``:
    `squall.engine.pending_tuner.MaxPending.replay_storm`), but at most `SILENT_SECS` and at
    least `MIN_SILENT_SECS`."""
    return max(MIN_SILENT_SECS, min(SILENT_SECS, message_timeout_secs / 2))
# When this worker holds its spouts back for a peer (`Transport.on_held`): as soon as anything
# waits for a peer that is away (its connection broke or is refused: the worker died or is
# restarting), and once HOLD_MESSAGES wait for one still connected that does not read (hung);
# until at most RELEASE_MESSAGES wait, none for an absent peer. A message may hold 2,048 tuples:
# held only at HOLD_MESSAGES, a spout sent 85,000 tuples in 42 messages to a restarting sink's
# worker, all in its inbox at its start (three times its bound). Both under the wires' bounds
# (`squall.worker.tcp.MAX_BACKLOG`, the ZeroMQ wire's `MAX_UNSENT`: 1,000 messages, past which
# the oldest are given up). A live peer never lets this much wait: its loops, or the
# transport's watchman for a loop in a long round, read whatever arrives.
HOLD_MESSAGES = 250
RELEASE_MESSAGES = 50


class BatchingTransport(Transport):
    """Per-peer batches of items, sealed on the way out and opened on the way in; see the
    module docstring.

    Args:
        peers: the address of the worker hosting each remote task (changed later by `set_peers`).
        serializer: encodes and decodes batches (`squall.engine.serialize.Serializer`).
        secret: the cluster's shared secret.
        receive: called with ``(task, item)`` for every item that arrives (the worker's
            ``receive``); set later with `set_receiver` if the worker does not exist yet.
        origin: this worker's topology, slot and launch id, which its messages carry and
            against which it checks the messages it receives.
        max_message_bytes: the largest message sent or accepted (``squall.transport.max.message.bytes``).
        transfer_batch_size: items queued for a peer that `flush_due` sends however young
            (``topology.transfer.batch.size``).
        flush_interval_ms: how long `flush_due` lets a peer's items wait for more
            (``topology.batch.flush.interval.millis``; 0: it sends everything, as `flush`).
        now: the monotonic clock, in seconds, that the interval is measured on.
    """

    def __init__(self, peers: dict[int, str], serializer: Any, secret: bytes,
                 receive: Callable[[int, Any], None] | None, *, origin: Origin, max_message_bytes: int,
                 transfer_batch_size: int = DEFAULT_TRANSFER_BATCH,
                 flush_interval_ms: float = DEFAULT_FLUSH_INTERVAL_MS,
                 now: Callable[[], float] = monotonic) -> None:
        self._serializer = serializer
        self._receive = receive
        self._receive_batch: Callable[[list], int] | None = None
        self._receive_into: IntoReceiver | None = None
        # a serializer of another format (a test's) has no decode_into: its batches are decoded whole
        self._decode_into: Callable[[Any, dict], int | None] | None = getattr(serializer, "decode_into", None)
        self._poll_lock = threading.Lock()
        self._control: Callable[[str, Any], None] | None = None
        self.max_message_bytes = int(max_message_bytes)
        self._secret = secret
        self._origin = origin
        self._warn = RateLimitedLog(log, limit=5, period=10.0)
        self.refused = 0  # items refused because, alone, they exceed max_message_bytes
        self.on_refused: Callable[[int, str], None] | None = None  # told (emitting task, why) of each
        # `Transport.on_held` is told (the peer's first address, holding) when this worker
        # starts holding its spouts for a peer (see HOLD_MESSAGES) and when it stops; never
        # under the send lock
        self._holding: set[str] = set()
        self._flips: deque[tuple[str, bool]] = deque()
        # one thread tells at a time, in the order noted: a hold told after its release (two
        # loops, or a loop and the watchman, each telling one) would hold the spouts for good.
        # Reentrant: on_held broadcasts the worker's new state through this transport, which
        # tells what it noted meanwhile
        self._tell_lock = threading.RLock()
        self.given_up = 0  # messages given up for a peer that did not take them (`_gave_up_messages`)
        self.reach: PeerReach = PeerReach(now)  # the peers whose connection broke, until it is made again
        self._silent: set[str] = set()  # connected peers named silent (`_check_silences`), until they acknowledge
        # queues, sockets and backlogs are keyed by the address a peer worker first had: a
        # worker that restarts elsewhere (a Spark task on another executor) gets a new address
        # (`set_peers`), but the senders the executors hold keep appending to the same queue
        self._queues: dict[str, Outbox] = {}
        self._task_queue: dict[int, Outbox] = {}
        self._task_key: dict[int, str] = {}
        self._address: dict[str, str] = {}
        self._batch_items = max(MAX_BATCH, int(transfer_batch_size))
        for task, addr in peers.items():
            self._task_queue[task] = self._outbox(addr)
            self._task_key[task] = addr
            self._address[addr] = addr
        self._routes: dict[str, bytes] = {}  # key -> the encoded route to the peer's current address
        self._send_lock = threading.Lock()
        self._sealer = Sealer(secret, origin)
        self._now = now
        self._ready_len = int(transfer_batch_size)  # items in an outbox that flush_due sends however young
        self._max_wait = float(flush_interval_ms) / 1000.0
        self._batch_len = 2 * self._batch_items  # a list chunk is flat: task, item, ...
        self._waiting: dict[str, float] = {}  # key -> the flush_due before the one that left its items unsent
        self._last_due = now()  # when flush_due was last called
        self._flush_wanted = False  # a flush found the send lock taken: its holder flushes after it (`_released`)
        # when the wire wants a whole flush for its own sake though the loops work on (the TCP
        # wire's reach check and attempts to connect: `squall.worker.tcp`); inf: never. A loop
        # busy every round calls only `flush_due`, which does one then: the one comparison it costs
        self._tend_at = float("inf")
        self._closed = False
        self._encode_errors: set[str] = set()  # logged once each (see _encode)

    def _outbox(self, key: str) -> Outbox:
        """The outbox of the peer first known as ``key``, made at first use."""
        q = self._queues.get(key)
        if q is None:
            # a batch written at emit must fit a message: its route and seal take the rest (an
            # item too large for it is kept as it is, and `_send_batch` refuses it); the bytes
            # are squall's batch format, so a serializer of another (a test's) gets every item
            # seed: the edge ids of tracked emits written here are drawn by the outbox (a run carries
            # its first state, not an id an item); from the OS, so that no two outboxes of any two
            # workers (forked from one parent, say) draw the same ids, which would cancel in a tree
            q = self._queues[key] = Outbox(self._batch_items, max(0, self.max_message_bytes - SEAL_OVERHEAD - ROUTE_ROOM),
                                           write=isinstance(self._serializer, Serializer),
                                           seed=secrets.randbits(64))
        return q

    def _listening(self, address: str) -> None:
        """This worker's data address, once bound: the address its messages must be for."""
        self.address = address
        self._opener = Opener(self._secret, self._origin.storm_id, address, now=self._now)

    # --- what the wire does ---------------------------------------------------------------------------
    @abc.abstractmethod
    def _send(self, key: str, message: bytes) -> None:
        """Send one sealed message to the peer first known as ``key``, never blocking (under
        the send lock)."""

    @abc.abstractmethod
    def _moved(self, key: str) -> bool:
        """The peer first known as ``key`` has a new address (`_route` gives it): close its old
        connection, and send to the new one what waits for the old (the worker there died: it
        was held for its next launch, which is this one) where the wire can; return whether
        anything sent to the old address may have been lost (under the send lock)."""

    def _held_messages(self, key: str) -> tuple[int, bool]:
        """How many messages wait for the peer first known as ``key`` because it does not take
        them, and whether it is away (no connection to it now); under the send lock."""
        return 0, False

    def _lost_only_before(self, key: str, heard: float) -> float | None:
        """A time (``now``'s) before which anything sent to the peer first known as ``key``
        that was lost with a worker that died there was sent: since then, what was sent went
        into a connection to a live worker, or waits for one. ``heard``: when this worker first
        took a message from a later launch there, which came after the death: what this
        worker's spouts emitted that reached the dead worker through other workers, or that
        this worker sent into a connection that broke before, was emitted before it. None when
        the wire cannot tell (under the send lock)."""
        return None

    # --- shared -----------------------------------------------------------------------------------
    def _check_held(self) -> None:
        """Note each peer for which this worker starts or stops holding its spouts (see
        `HOLD_MESSAGES`), for `_tell_held` (under the send lock)."""
        for key in self._queues:
            waiting, away = self._held_messages(key)
            hold = waiting >= HOLD_MESSAGES or (away and waiting > 0)
            if key in self._holding:
                if waiting <= RELEASE_MESSAGES and not hold:
                    self._holding.discard(key)
                    self._flips.append((key, False))
            elif hold:
                self._holding.add(key)
                self._flips.append((key, True))

    def _tell_held(self) -> None:
        """Tell ``on_held`` what `_check_held` noted (not under the send lock: the worker's
        backpressure broadcasts its new state through this transport)."""
        if not self._flips:  # every flush calls this: no lock taken then
            return
        with self._tell_lock:
            while self._flips:
                key, holding = self._flips.popleft()
                if holding:
                    log.info("holding the spouts back while messages wait for the worker at %s, which does not "
                             "take them (dead, hung or restarting)", self._address[key])
                else:
                    log.info("the worker at %s takes its messages again: spouts no longer held for it",
                             self._address[key])
                if self.on_held is not None:
                    self.on_held(key, holding)

    def _gave_up_messages(self, key: str, messages: int) -> None:
        """``messages`` waiting for the peer first known as ``key`` were given up (it has been
        away long): say so, rate-limited, rather than lose them silently (under the send lock)."""
        self.given_up += messages
        self._warn.warning("gave up %d message(s) of tuples waiting for the worker at %s, which has not taken "
                           "them (%d given up by this worker so far): with acking on their tuples fail at the "
                           "message timeout and replay; with acking off they are lost",
                           messages, self._address[key], self.given_up)

    def _unreachable(self, key: str, why: str,
                     waits: str = "what is sent to it waits for the connection to be made again") -> None:
        """The connection to the peer first known as ``key`` broke, or its peer stopped
        acknowledging (``why``; ``waits``: where what is sent to it goes meanwhile): say so once,
        naming the peer, until it is reached again (`_reached`)."""
        description = self.reach.describe(self._address[key], [t for t, k in self._task_key.items() if k == key])
        if self.reach.broke(key, description):
            log.info("cannot reach %s: %s; %s (its tuples fail at the message timeout and replay)",
                     description, why, waits)

    def _check_silences(self, connected: Iterable[tuple[str, Any]], unacknowledged_for: Callable[[Any], float],
                        bound: float, verb: str = "sent") -> None:
        """Say which ``connected`` peers (the key of each, and what ``unacknowledged_for`` asks
        the kernel about: the TCP wire's socket, the ZeroMQ wire's descriptor of ZeroMQ's
        connection) acknowledged nothing ``verb`` to them for ``bound`` seconds (unreachable: a
        partition, a lost machine), once, and which of those acknowledge again; their connections
        are kept. Each wire's ``_check_reach``, under its send lock: the wires differ only in how
        a connection's socket is reached, and each forgets a peer of `_silent` when its
        connection goes."""
        for key, conn in connected:
            silent = unacknowledged_for(conn)
            if silent >= bound and key not in self._silent:
                self._silent.add(key)
                self._unreachable(key, f"it has acknowledged nothing {verb} to it for {silent:.0f} s (a "
                                       f"partition, a lost machine?)",
                                  f"the connection is kept: what is {verb} to it waits, and reaches it once "
                                  f"it acknowledges again")
            elif silent < bound and key in self._silent:
                self._silent.discard(key)
                self._reached(key)

    def _reached(self, key: str) -> None:
        """A connection to the peer first known as ``key`` is made: say so if it was unreachable."""
        away = self.reach.made(key)
        if away is not None:
            log.info("reached the worker at %s again, after %.0f s unreachable", self._address[key], away)

    @property
    def dropped(self) -> int:
        """Messages received and dropped, for any reason (`statistics` tells which)."""
        return self._opener.drops.total()

    def statistics(self) -> dict[str, Any]:
        """Drops by reason, items refused for their size, messages given up, connections to
        peers that broke and the peers unreachable now (for the worker's heartbeat: the
        master's topology info shows them per worker)."""
        return {"dropped": self._opener.drops.as_dict(), "refused": self.refused, "given_up": self.given_up,
                "peer_breaks": self.reach.breaks,
                "unreachable": sorted(self._address.get(key, key) for key in self.reach.away())}

    def set_launches(self, launches: dict[str, int], floor: int = 0) -> None:
        """The master's launch id per slot (``floor``: of the others): messages from older
        launches are dropped."""
        self._opener.set_floor(launches, floor)

    def loss_age(self, tasks: Iterable[int], slot: str, launch: int) -> float | None:
        """Only once a later launch of ``slot`` has sent this worker a message is ``launch``
        surely gone (its connections hung up before; a worker merely cut off from the master,
        or hung, still holds them open): then what went to ``tasks`` since each peer's
        `_lost_only_before` reached a later launch, or waits for one. Never later than when
        that launch was first heard from for a peer this worker had no live connection to:
        its spouts' tuples reach the dead worker through other workers too (a bolt in a third
        worker), and what the dead one held of them is lost whoever sent it."""
        heard = self._opener.heard_from(slot)
        if launch <= 0 or heard is None or heard[0] <= launch:
            return None
        keys = {self._task_key[t] for t in tasks if t in self._task_key}
        if not keys:
            return None
        with self._send_lock:
            bounds = [self._lost_only_before(key, heard[1]) for key in keys]
        self._released()
        known = [b for b in bounds if b is not None]
        if len(known) < len(bounds):
            return None
        return max(0.0, self._now() - max(known))

    def set_receiver(self, receive: Callable[[int, Any], None],
                     receive_batch: Callable[[list], int] | None = None,
                     receive_into: IntoReceiver | None = None) -> None:
        """Where arriving items go: the worker's ``receive``, or ``receive_batch`` for the items
        of a batch delivered at once, or ``receive_into`` for a batch the serializer decodes
        straight into the worker's inboxes (`Serializer.decode_into`; a batch it does not take
        goes to ``receive_batch``)."""
        self._receive = receive
        self._receive_batch = receive_batch
        self._receive_into = receive_into if receive_batch is not None and self._decode_into is not None else None

    def set_control_handler(self, handle: Callable[[str, Any], None]) -> None:
        """Where arriving control messages go, with the slot of the worker that sent them (see
        `broadcast`); the handler raises an exception for a message it cannot take."""
        self._control = handle

    def broadcast(self, message: Any) -> None:
        """Send a small msgpack-able control message (backpressure state) to every peer worker,
        after the batches queued for it."""
        data = msgpack.packb(message)
        with self._send_lock:
            if self._closed:
                return
            self._flush_locked()
            for key in self._queues:
                self._send(key, self._sealer.seal(CONTROL, self._route(key), data))
            self._check_held()
        self._released()

    def set_peers(self, peers: dict[int, str]) -> frozenset[int]:
        """Addresses of peer workers: new tasks (before `sender` is asked for them), or a new
        address for a worker that restarted elsewhere. A moved peer's old connection closes;
        what was held for it (sent after its death was seen) goes to the new address
        (`_moved`). Returns the tasks of the moved peers to which something sent may have been
        lost (see `squall.engine.transport.Transport.set_peers`)."""
        lost: set[str] = set()
        with self._send_lock:
            for task, addr in peers.items():
                key = self._task_key.get(task)
                if key is None:
                    self._task_queue[task] = self._outbox(addr)
                    self._task_key[task] = addr
                    self._address.setdefault(addr, addr)
                    continue
                if self._address[key] == addr:
                    continue
                log.info("peer worker of task %s moved from %s to %s", task, self._address[key], addr)
                self._address[key] = addr
                self._routes.pop(key, None)
                if self._moved(key):
                    lost.add(key)
            self._check_held()
            moved = frozenset(t for t, key in self._task_key.items() if key in lost)
        self._released()
        return moved

    def sender(self, task_id: int) -> Callable[[Any], None]:
        q = self._task_queue.get(task_id)
        if q is None:
            raise KeyError(f"no worker hosts task {task_id}")
        # Values are serialized at flush, after the emit has returned; the sender checks the few
        # that may fail now (a Tuple with a value not of PLAIN_TYPES), so that the emit raises in
        # the emitting component's code (which may catch it) instead of the whole batch failing
        # later, attributed to nobody.
        return native_sender(q, task_id, Tuple, PLAIN_TYPES, self._serializer.check)

    def flush(self) -> None:
        """Send every queued item now (a loop about to sleep, or a user's thread). When another
        thread holds the send lock the items are left to it (`_released`): not waited for, since
        the holder may be a loop in a long send, and a loop must not block on another."""
        self._flush_wanted = True
        while self._flush_wanted and self._send_lock.acquire(blocking=False):
            try:
                self._flush_wanted = False
                if not self._closed:
                    self._flush_locked()
            finally:
                self._send_lock.release()
        self._tell_held()

    def _released(self) -> None:
        """After the send lock is released by whoever held it: a `flush` that found it taken
        meanwhile is done now. A flush skipped that way used to trust the holder to send its
        items, but not every holder sends the queues (the TCP wire's watchman writing a backlog,
        the ZeroMQ wire's retry thread): a loop that flushed before its sleep then slept with its
        items unsent until something else woke it (an input, a timer)."""
        if self._flush_wanted:
            self.flush()
        else:
            self._tell_held()

    def flush_due(self) -> None:
        """`flush` for a loop that goes on working: a peer's items go once they fill a message
        (``topology.transfer.batch.size``) or once ``topology.batch.flush.interval.millis`` have
        passed since the call before the one that first found them (they were queued after it:
        a long round's items are not held for one more round); the others wait for more, so a
        message carries several rounds' items. A loop about to sleep calls `flush`."""
        if self._max_wait <= 0.0:
            self.flush()
            return
        if not self._send_lock.acquire(blocking=False):
            return  # another loop of this worker is flushing; it takes our items too
        try:
            if self._closed:
                return
            now = self._now()
            before, self._last_due = self._last_due, now
            waiting = self._waiting
            sent = False
            for key, q in self._queues.items():
                if not q:
                    continue
                if len(q) < self._ready_len:
                    since = waiting.get(key)
                    if since is None:
                        since = waiting[key] = before
                    if now - since < self._max_wait:
                        continue
                waiting.pop(key, None)
                self._send_queue(key, q)
                sent = True
            # a loop calls this every round (W1: 0.52 us with nothing to send, 0.85 with one peer
            # looked at, 1.72 with 8): a hold starts only where a message is left waiting (a send)
            # or a connection with a backlog breaks (`flush`, the wire's own checks), so peers are
            # looked at here only after a send, or while one is held, for its release
            if now >= self._tend_at:
                # the wire's own flush is due (`_tend_at`): a loop never idle must not skip it.
                # The TCP wire's reach check ran only from `flush`, and a worker busy every round
                # through a partition kept its connection's backoff capped at 1 s, so the kernel
                # gave the connection up 14.4 s into the cut, and what it held was lost
                self._flush_locked()
            elif sent or self._holding:
                self._check_held()
        finally:
            self._send_lock.release()
        self._released()

    def _flush_locked(self) -> None:
        self._waiting.clear()
        for key, q in self._queues.items():
            self._send_queue(key, q)
        self._check_held()

    def _send_queue(self, key: str, q: Outbox) -> None:
        for chunk in q.take():
            if type(chunk) is bytes:  # a batch written at emit
                self._send_data(key, chunk)
                continue
            for i in range(0, len(chunk), self._batch_len):
                self._send_batch(key, chunk[i:i + self._batch_len])

    def _send_data(self, key: str, data: bytes) -> None:
        """Seal and send a batch the outbox wrote, to the peer first known as ``key``."""
        route = self._route(key)
        if SEAL_OVERHEAD + len(route) + len(data) <= self.max_message_bytes:
            self._send(key, self._sealer.seal(DATA, route, data))
        else:  # a route longer than ROUTE_ROOM: its items again, for the halving and refusing path
            self._send_batch(key, self._serializer.decode_batch(data))

    def _send_batch(self, key: str, items: list) -> None:
        """Encode, seal and send ``items`` (flat: task, item, ...) to the peer first known as ``key``."""
        data = self._encode(items)
        route = self._route(key)
        if SEAL_OVERHEAD + len(route) + len(data) <= self.max_message_bytes:
            self._send(key, self._sealer.seal(DATA, route, data))
        elif len(items) > 2:  # the peer would refuse it: send it in halves, cut between two items
            half = len(items) // 4 * 2
            self._send_batch(key, items[:half])
            self._send_batch(key, items[half:])
        else:
            task, item = items[0], items[-1]
            header = SEAL_OVERHEAD + len(route)
            src = getattr(item, "_src", None)  # a tuple's emitter, in this worker: whose error it is
            what = (f"a tuple emitted by [{src.component}] task {src.task} on stream [{src.stream}] for task {task}"
                    if src is not None else f"an item for task {task}")
            why = (f"{what} is {len(data)} bytes serialized, which with its message's "
                   f"{header}-byte header is over {MAX_MESSAGE_KEY} ({self.max_message_bytes}); it was "
                   f"not sent, and its tuple will time out")
            self.refused += 1
            self._warn.warning("%s", why)
            if self.on_refused is not None:
                self.on_refused(src.task if src is not None else task, why)

    def _route(self, key: str) -> bytes:
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._sealer.route(self._address[key])
        return route

    def _encode(self, items: list[Any]) -> bytes:
        """One batch of ``items``. Values were checked at emit (`sender`), but one may have been
        changed since (a list the component kept and appended to): then the items that cannot
        be encoded are dropped, to time out and replay as lost tuples do, and each distinct
        error is logged once, instead of the loop crashing on an error that names no emit."""
        encode = self._serializer.encode_batch
        try:
            return encode(items)
        except SerializationError:
            pass
        good: list[Any] = []
        for i in range(0, len(items), 2):
            one = items[i:i + 2]
            try:
                encode(one)
            except SerializationError as e:
                if str(e) not in self._encode_errors and len(self._encode_errors) < 100:
                    self._encode_errors.add(str(e))
                    log.error("dropped a tuple changed after its emit: %s", e)
                continue
            good += one
        return encode(good)

    def _take(self, message: bytes, peer: str | None = None) -> int:
        """Check one message and deliver it: the items of a batch (how many is returned), or a
        control message. The MAC is checked before anything is decoded: decoding may unpickle.
        Called by one thread at a time, in the order the messages came (under ``_poll_lock``).
        ``peer``: the ``host:port`` the message came from, where the wire knows it (TCP's does,
        ZeroMQ's does not), for the warning when it is refused: an unauthenticated message has
        no sender to name but its address."""
        try:
            header, data = self._opener.open(message)
        except Refused as e:
            if peer is None:
                self._warn.warning("dropped %s", e)
            else:
                self._warn.warning("dropped %s, from %s", e, peer)
            return 0
        if header.kind == CONTROL:
            if self._control is not None:
                try:
                    self._control(header.slot, msgpack.unpackb(data))
                except Exception as e:  # noqa: BLE001 (a peer's bad message is dropped and counted, not this worker's end)
                    self._opener.count("undecodable")
                    self._warn.warning("dropped a control message from %s: %s", header.slot, e)
            return 0
        into, decode_into = self._receive_into, self._decode_into
        if into is not None and decode_into is not None:
            # straight into the inboxes: no list of the batch's items made, walked and freed
            delivered = into(lambda inboxes: decode_into(data, inboxes))
            if delivered is not None:
                return delivered
        try:
            items = self._serializer.decode_batch(data)
        except Exception as e:  # noqa: BLE001 (a peer's bad batch is dropped and counted, not this worker's end)
            self._opener.count("undecodable")
            self._warn.warning("dropped an undecodable batch from %s: %s", header.slot, e)
            return 0
        return self._deliver(items)

    def _deliver(self, items: list[Any]) -> int:
        """Hand a decoded batch (flat: task, item, ...) to the worker; returns the items delivered."""
        if self._receive_batch is not None:
            return self._receive_batch(items)
        receive = self._receive
        if receive is None:
            return 0
        for task, item in zip(items[::2], items[1::2]):
            try:
                receive(task, item)
            except KeyError:
                # not (or no longer) ours, e.g. sent under an old assignment: as Storm, drop
                log.debug("dropped an item for task %s, not in this worker", task)
        return len(items) // 2
