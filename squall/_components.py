"""The classes users subclass: `Spout`, `Bolt` and `BasicBolt`.

Every method has a do-nothing default, so a component defines only what it needs. squall copies a
component per task (it pickles the object given to `TopologyBuilder`), so each task has its own
instance, and a worker that restarts gets fresh ones: state kept on ``self`` is per task and does
not survive a crash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._collectors import (
        BasicOutputCollector,
        OutputCollector,
        OutputFieldsDeclarer,
        SpoutOutputCollector,
    )
    from ._context import TopologyContext
    from ._failure import FailureCause
    from ._tuple import Tuple


class _Component:
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare the streams this component emits, with their fields.

        Called once when the topology is built (`TopologyBuilder.create_topology`), never on a
        worker. Use ``declarer.declare(Fields(...))`` for the default stream and
        ``declarer.declare_stream(stream_id, Fields(...))`` for others.
        """

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Configuration for this component only, or None.

        Only custom keys and Storm's per-component keys (``topology.debug``,
        ``topology.max.spout.pending``, ``topology.max.task.parallelism``,
        ``topology.tick.tuple.freq.secs`` and the window keys) are taken; other ``topology.*``
        keys are ignored, as in Storm. The declarer's ``add_configuration`` overrides these.
        """
        return None


class Spout(_Component):
    """A source of tuples (Storm's ``IRichSpout``).

    All of a spout task's methods are called on one thread, one at a time, so a spout needs no
    locks. ``open`` runs when the topology is first active; ``activate``/``deactivate`` when it is
    (re)activated or deactivated. ``close`` is called when the topology is killed cleanly, but is
    not guaranteed to run (a crashed worker never calls it).
    """

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Called once per task before any other method; stores the arguments on ``self``."""
        self.conf = conf
        self.context = context
        self.collector = collector

    def close(self) -> None:
        """Called when the task shuts down cleanly (not guaranteed)."""

    def activate(self) -> None:
        """Called when the topology becomes active, after ``open``."""

    def deactivate(self) -> None:
        """Called when the topology stops being active; ``next_tuple`` is not called until
        ``activate`` again."""

    def next_tuple(self) -> None:
        """Emit zero or more tuples through the collector.

        Called in a loop while the topology is active, max spout pending allows it and the
        topology is not backpressured. It must not block: if there is nothing to emit, return;
        squall backs off (the spout wait strategy) so an idle spout does not burn a core.
        """

    def ack(self, msg_id: Any) -> None:
        """The tuple emitted with ``msg_id`` was fully processed."""

    def fail(self, msg_id: Any) -> None:
        """The tuple emitted with ``msg_id`` failed or timed out; replay it if you need to."""

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """squall's: the tuple emitted with ``msg_id`` failed, and why (`squall.FailureCause`:
        an explicit fail or an exception in a named bolt, a timeout, a lost worker). squall
        calls this instead of `fail`; the default calls ``fail(msg_id)``, so a spout written for
        Storm works unchanged. Override it to treat failures differently, for instance to charge
        a retry budget only for those the record caused (``cause.record_caused``), as squall's
        connectors do."""
        self.fail(msg_id)


class Bolt(_Component):
    """A processing step (Storm's ``IRichBolt``).

    ``execute`` is called once per input tuple; the bolt must ``ack`` or ``fail`` every input
    (or, with acking on, the spout tuple times out). Emits may be anchored to inputs to extend
    their trees. The collector is thread-safe: a bolt may emit and ack from its own threads.
    An exception escaping ``execute`` is reported and fails that input (unless
    ``topology.bolt.fail.fast`` is true: then it crashes the worker, as in Storm).
    """

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None:
        """Called once per task when the topology is first active; stores the arguments."""
        self.conf = conf
        self.context = context
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        """Process one input tuple (tick tuples included, see `is_tick_tuple`)."""

    def cleanup(self) -> None:
        """Called when the task shuts down cleanly (not guaranteed)."""


class BasicBolt(_Component):
    """A bolt whose emits are anchored to the input and whose input is acked for it.

    After ``execute`` returns, the input is acked. Raise `FailedException` to fail it instead
    (`ReportedFailedException` also reports the error). Any other exception is reported and
    fails the input (cause `squall.FailureCause` "exception"), and the bolt goes on with the next
    one; with ``topology.bolt.fail.fast: true`` it crashes the worker instead, as in Storm.
    """

    def prepare(self, conf: dict, context: TopologyContext) -> None:
        """Called once per task when the topology is first active; stores the arguments."""
        self.conf = conf
        self.context = context

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Process one input; ``collector.emit`` anchors to it."""

    def cleanup(self) -> None:
        """Called when the task shuts down cleanly (not guaranteed)."""
