"""Stateful windowed bolts (Storm's ``BaseStatefulWindowedBolt``): a windowed bolt whose state is
checkpointed like a `BaseStatefulBolt`'s.

`TopologyBuilder.set_bolt` runs one in a `StatefulWindowedBoltExecutor` (a `WindowedBoltExecutor`
that also passes ``init_state`` and the checkpoint hooks on), and the builder's checkpoint wiring
runs that inside a `StatefulBoltExecutor`, as Storm nests them. So: inputs wait for INITSTATE; an
input is acked when it left its last window **and** the commit after that went through (the
window's acks are deferred like any stateful bolt's). On ROLLBACK the windows are dropped: every
tuple in them is failed, so its spout replays it and the windows fill again from the replays (in
event time the watermark starts afresh, so replays are not late). Windows are therefore never
lost; a window evaluated before the rollback may be evaluated again (at-least-once, like the
state). Storm 1.x instead asks for a message id field (``withMessageIdField``) to skip windows
already evaluated after a restart; squall needs none.
"""

from __future__ import annotations

from typing import Any

from ..windowing._api import BaseWindowedBolt
from ..windowing.config import input_streams
from ..windowing.executor import WindowedBoltExecutor
from ..windowing.manager import window_manager
from ..windowing.watermark import WatermarkGenerator


class BaseStatefulWindowedBolt(BaseWindowedBolt):
    """A windowed bolt with a checkpointed state; see the module docstring. ``init_state(state)``
    is called once, before the first ``execute(window)``, with the state as last committed."""

    def init_state(self, state: Any) -> None:
        """Receive the state (as last committed), before the first ``execute``."""

    def pre_prepare(self, txid: int) -> None:
        """Called before the state prepares transaction ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Called before the state commits transaction ``txid``."""

    def pre_rollback(self) -> None:
        """Called before the state rolls back to its last commit (and the windows are dropped)."""


class StatefulWindowedBoltExecutor(WindowedBoltExecutor):
    """Runs a `BaseStatefulWindowedBolt` (inside a `StatefulBoltExecutor`); see the module docstring."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self._sources = context.get_this_sources()

    def init_state(self, state: Any) -> None:
        self.bolt.init_state(state)

    def pre_prepare(self, txid: int) -> None:
        self.bolt.pre_prepare(txid)

    def pre_commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)

    def pre_rollback(self) -> None:
        self.bolt.pre_rollback()
        held = [e.value for e in self.manager.queue]
        spec = self.spec
        self.manager = window_manager(self, spec.length, spec.sliding, spec.event_time, spec.lag_ms)
        if spec.event_time:
            self.watermarks = WatermarkGenerator(spec.lag_ms, input_streams(self._sources))
        for t in held:  # replayed, they fill the windows again
            self.collector.fail(t)


def windowed_executor(bolt: BaseWindowedBolt) -> WindowedBoltExecutor:
    """The executor `TopologyBuilder.set_bolt` runs ``bolt`` in."""
    if isinstance(bolt, BaseStatefulWindowedBolt):
        return StatefulWindowedBoltExecutor(bolt)
    return WindowedBoltExecutor(bolt)
