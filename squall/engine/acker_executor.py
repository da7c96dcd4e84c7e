"""Runs `Acker` tasks: drains bare ``(kind, root, value, spout_task)`` messages and sends the
replies to spout tasks.

Acker traffic skips the Tuple and stream dispatch that user bolts get: measured, plain tuples in
a dedicated inbox made the acking path about 1.9x faster (ENGINE-SPEED.md, lessons 3 and 9).
"""

from __future__ import annotations

from .._config import Config, conf_value
from .._native import acker_run
from .acker import ACK, FAIL, INIT, RESET, Acker
from .executor import Executor, Wiring
from .plan import ExecutorSpec

# Storm's streams into the acker, by message kind (its statistics are kept per input stream)
ACKER_STREAMS = {INIT: "__ack_init", ACK: "__ack_ack", FAIL: "__ack_fail", RESET: "__ack_reset_timeout"}


class AckerExecutor(Executor):
    """The executor of ``__acker`` tasks."""

    kind = "acker"

    def __init__(self, spec: ExecutorSpec, wiring: Wiring, conf: dict) -> None:
        super().__init__(spec, wiring)
        self.conf = conf
        self.ackers = {t: Acker() for t in self.task_ids}

    def drain(self, limit: int) -> int:
        done = 0
        now = self.wiring.clock.now()
        deliver = self.wiring.deliver
        for t, q in self.inboxes.items():
            n = len(q)
            if not n:
                continue
            if n > limit:  # noqa: PLR1730 (a compare, not a min() call, on the drain path)
                n = limit
            acker = self.ackers[t]
            update = acker.update
            pop = q.popleft
            # Storm's sampled statistics, per input stream of the acker: runs of `left - 1`
            # plain messages, then a sampled one
            sampled = self.sampled[t]
            ran = 0
            while ran < n:
                left = sampled.left
                run = left - 1 if left - 1 < n - ran else n - ran  # noqa: FURB136 (a compare, not a min() call, on the drain path)
                acker_run(acker, pop, run, now, deliver)
                ran += run
                sampled.left = left - run
                if ran < n:
                    kind, root, val, spout_task = pop()
                    reply = update(kind, root, val, spout_task, now)
                    if reply is not None:
                        deliver[reply[0]](reply[1:])
                    handle = (kind, spout_task) if kind == INIT else kind
                    ks = sampled.by_handle.get(handle)
                    if ks is None:
                        source = self.wiring.plan.task_to_component.get(spout_task, "") if kind == INIT else ""
                        ks = sampled.key(source, ACKER_STREAMS[kind], handle)
                    ks.executed += sampled.freq
                    sampled.next_gap()
                    ran += 1
            stats = self.stats[t]
            stats.executed += n
            done += n
        return done

    def timers(self):
        if not conf_value(self.conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS):
            return []
        return [(float(self.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]), self.rotate)]

    def rotate(self) -> None:
        """Expire the oldest bucket of every acker task."""
        for a in self.ackers.values():
            a.rotate()
