"""Runs `Acker` tasks: drains bare ``(kind, root, value, spout_task)`` messages and sends the
replies to spout tasks.

Acker traffic skips the Tuple and stream dispatch that user bolts get: measured, plain tuples in
a dedicated inbox made the acking path about 1.9x faster (ENGINE-SPEED.md, lessons 3 and 9).
"""

from __future__ import annotations

import functools
from typing import Any

from .._config import Config, conf_value
from .._native import acker_drain
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
        self._sample_keys = {t: functools.partial(self._sample_key, t) for t in self.task_ids}

    def _sample_key(self, task: int, kind: int, spout_task: int) -> Any:
        """The figures of a sampled message of ``kind`` from ``spout_task`` at acker ``task``:
        Storm's per input stream (an init's also per spout component), found by its handle from
        then on."""
        handle = (kind, spout_task) if kind == INIT else kind
        source = self.wiring.plan.task_to_component.get(spout_task, "") if kind == INIT else ""
        return self.sampled[task].key(source, ACKER_STREAMS[kind], handle)

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
            # Storm's sampled statistics, per input stream of the acker: runs of plain
            # messages, then a sampled one, counted in its stream's figures
            acker_drain(self.ackers[t], q.popleft, n, now, deliver, self.sampled[t], self._sample_keys[t])
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
