"""The bolts a `StreamBuilder` makes (Storm's ``ProcessorBolt``, ``WindowedProcessorBolt``,
``StatefulProcessorBolt`` and their shared ``ProcessorBoltDelegate``).

Each runs the processors the builder fused into it. An input from a spout is handed to the first
processors as the spout's `squall.Tuple`; one from another stream bolt is its value (field
``value``) or its `Pair` (fields ``key``, ``value``). A `ProcessorBolt` acks each input once it
has been processed (and emits anchored to it), except that a batch processor in a window holds
the inputs of the window until its punctuation passes: an input whose processing raises is not
acked, so its spout tuple times out or fails and is replayed (at least once). A
`WindowedProcessorBolt` is a `squall.BaseWindowedBolt`: the window's inputs are acked as they
leave it, and its emits are anchored to the window. A `StatefulProcessorBolt` is a
`squall.BaseStatefulBolt`: its acks take effect at the next checkpoint's commit.
"""

from __future__ import annotations

from typing import Any

from .._collectors import OutputCollector, OutputFieldsDeclarer
from .._components import Bolt
from .._fields import Fields
from .._tuple import Tuple
from ..state import BaseStatefulBolt
from ..windowing import BaseWindowedBolt, TupleWindow
from .contexts import (
    ChainedProcessorContext,
    EmittingProcessorContext,
    ForwardingProcessorContext,
    ProcessorContext,
    RefCountedTuple,
    Step,
)
from .pair import Pair
from .processors import StatefulProcessor, UpdateStateByKeyProcessor
from .util import PUNCTUATION, get_punctuation_stream, get_source_stream, is_punctuation
from .windowing import Window

SPOUT_PREFIX = "spout"
"""The builder's spout ids start with it: an input from such a component is a spout's tuple."""


def is_spout_id(component_id: str) -> bool:
    """Whether ``component_id`` is one of the builder's spouts (Storm's ``startsWith("spout")``)."""
    return component_id.startswith(SPOUT_PREFIX)


class ProcessorBoltDelegate:
    """What the three stream bolts share: their processors (`Step` s, set by the builder), the
    contexts that link them, and the punctuation bookkeeping (Storm's ``ProcessorBoltDelegate``).

    ``stream_to_initial`` maps each input stream (a spout's as ``<spout id><stream id>``) to the
    steps that take it first.

    A step after a regrouping of windows ends its window once every upstream task of each of its
    windowed parent streams has sent a punctuation since it last ended one: the punctuations are
    kept as the set of tasks they came from (``punctuation_state``: step -> stream -> tasks).
    Storm's counts them, and ends the window at as many punctuations as there are upstream
    tasks, whoever sent them: two from one task (a task whose window ended twice before the
    other's ended once, a task restarted after its worker died, whose first window ends on a
    clock of its own) ended the window without the other task's, and from then on every window
    of the step ended one punctuation early, the other task's values waiting a window more.
    """

    def __init__(self, bolt_id: str) -> None:
        self.id = bolt_id
        self.steps: list[Step] = []
        self.stream_to_initial: dict[str, list[int]] = {}
        self.timestamp_field: str | None = None
        self.emitting: list[EmittingProcessorContext] = []
        self.punctuation_state: dict[int, dict[str, set[int | None]]] = {}
        self.stream_input_tasks: dict[str, frozenset[int]] = {}
        self.reach: dict[str, frozenset[int]] = {}
        self.emitting_steps: list[int] = []
        self.collector: Any = None

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Link the steps' contexts and find the tasks each input stream comes from (a window
        ends downstream once a punctuation came from each of them)."""
        self.collector = collector
        self.emitting = []
        self.emitting_steps = []
        for i, step in enumerate(self.steps):
            ctx: ProcessorContext
            if not step.children:
                ctx = self._emitting(i, step)
            else:
                children = {s: [self.steps[i].processor for i in idxs] for s, idxs in step.children.items()}
                forwarding = ForwardingProcessorContext(step, children)
                ctx = ChainedProcessorContext(step, [forwarding, self._emitting(i, step)]) if step.outgoing \
                    else forwarding
            step.processor.init(ctx)
        for ectx in self.emitting:
            ectx.timestamp_field = self.timestamp_field
        self.punctuation_state = {}
        self.stream_input_tasks = {s: _input_tasks(context, s) for s in self.stream_to_initial}
        self.reach = {s: self._reachable(idxs) for s, idxs in self.stream_to_initial.items()}

    def _reachable(self, initial: list[int]) -> frozenset[int]:
        """The steps the values (and punctuations) of an input stream flow through."""
        seen: set[int] = set()
        todo = list(initial)
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                todo.extend(j for idxs in self.steps[i].children.values() for j in idxs)
        return frozenset(seen)

    def _emitting(self, index: int, step: Step) -> ProcessorContext:
        contexts: list[ProcessorContext] = []
        for stream in step.output_streams:
            ectx = EmittingProcessorContext(step, self.collector, stream)
            self.emitting.append(ectx)
            self.emitting_steps.append(index)
            contexts.append(ectx)
        return ChainedProcessorContext(step, contexts)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Each step's output streams and their punctuation streams (with the event-time field
        last, when the topology's window keeps event time)."""
        extra = [] if self.timestamp_field is None else [self.timestamp_field]
        for step in self.steps:
            for stream in step.output_streams:
                declarer.declare_stream(stream, Fields([*step.output_fields, *extra]))
                declarer.declare_stream(get_punctuation_stream(stream), Fields([PUNCTUATION, *extra]))

    def value_and_stream(self, tup: Tuple) -> tuple[Any, str]:
        """The value ``tup`` carries and the stream it counts as (see the module docstring)."""
        if is_spout_id(tup.source_component):
            return tup, tup.source_component + tup.source_stream
        fields = tup.fields
        if len(fields) >= 2 and fields[0] == "key":
            return Pair(tup.get_value(0), tup.get_value(1)), tup.source_stream
        return tup.get_value(0), tup.source_stream

    def process_and_ack(self, tup: Tuple) -> None:
        """Process one input and ack it, unless a window's batch processor holds it."""
        ref = RefCountedTuple(tup)
        value, stream = self.value_and_stream(tup)
        reach = self.reach.get(get_source_stream(stream), frozenset())
        for ectx, i in zip(self.emitting, self.emitting_steps, strict=True):
            ectx.set_anchor(ref, i in reach)
        if self.timestamp_field is not None:
            self.set_event_timestamp(tup.get_value_by_field(self.timestamp_field))
        self.process(value, stream, tup.source_task)
        if ref.should_ack():
            self.collector.ack(tup)
            ref.set_acked()

    def process(self, value: Any, stream: str, source_task: int | None = None) -> None:
        """Hand ``value`` to the steps that take ``stream`` first; a punctuation (from task
        ``source_task`` upstream) to those whose window it ends."""
        if is_punctuation(value):
            source = get_source_stream(stream)
            for i in self.stream_to_initial.get(source, ()):
                if self._should_punctuate(i, source, source_task):
                    self.steps[i].processor.punctuate(None)
                    self.punctuation_state.pop(i, None)
        else:
            for i in self.stream_to_initial.get(stream, ()):
                self.steps[i].processor.execute(value, stream)

    def punctuate_window(self) -> None:
        """A window's end: punctuate each first step once (Storm's punctuates a step once per
        input stream it takes, so a join of two streams passed two punctuations on)."""
        seen: set[int] = set()
        for idxs in self.stream_to_initial.values():
            for i in idxs:
                if i not in seen:
                    seen.add(i)
                    self.steps[i].processor.punctuate(None)

    def set_event_timestamp(self, ts: int | None) -> None:
        """The event time the emits from now on carry."""
        for ectx in self.emitting:
            ectx.set_event_timestamp(ts)

    def _should_punctuate(self, i: int, stream: str, task: int | None) -> bool:
        """Whether a punctuation has now come from every task of every windowed parent stream
        of step ``i`` (a task's second one before the others' counts once: see the class
        docstring)."""
        expected = self.steps[i].windowed_parent_streams
        if not expected:
            return True
        seen = self.punctuation_state.setdefault(i, {})
        seen.setdefault(stream, set()).add(task)
        if set(seen) != set(expected):
            return False
        return all(seen[s] >= self.stream_input_tasks.get(s, frozenset()) for s in expected)

    def stateful_processors(self) -> list[StatefulProcessor]:
        """The steps' processors that keep their data in the bolt's state."""
        return [s.processor for s in self.steps if isinstance(s.processor, StatefulProcessor)]


def _input_tasks(context: Any, stream: str) -> frozenset[int]:
    """The tasks of the components ``stream`` comes from."""
    tasks: set[int] = set()
    for gsid in context.get_this_sources():
        sid = gsid.component_id + gsid.stream_id if is_spout_id(gsid.component_id) else gsid.stream_id
        if sid == stream:
            tasks.update(context.get_component_tasks(gsid.component_id))
    return frozenset(tasks)


class StreamBolt:
    """What the builder sets on each of its bolts (Storm's ``StreamBolt``)."""

    delegate: ProcessorBoltDelegate

    def get_id(self) -> str:
        """The bolt's component id."""
        return self.delegate.id

    def set_timestamp_field(self, field_name: str) -> None:
        """Carry the event time as the last field of every output (a window keeps event time)."""
        self.delegate.timestamp_field = field_name


class ProcessorBolt(Bolt, StreamBolt):
    """Runs fused processors on each input, then acks it (Storm's ``ProcessorBolt``)."""

    def __init__(self, bolt_id: str) -> None:
        self.delegate = ProcessorBoltDelegate(bolt_id)

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Link the processors."""
        super().prepare(conf, context, collector)
        self.delegate.prepare(conf, context, collector)

    @property
    def squall_holds_inputs(self) -> bool:
        """Whether it keeps inputs unacked until their window's punctuation (it aggregates the
        windows of a bolt before it): as a windowed bolt does, for squall's engine (the spouts'
        pending limit, the checkpoints in a stateful topology)."""
        return any(step.holds_inputs for step in self.delegate.steps)

    @property
    def squall_fail_fast(self) -> bool:
        """Whether an exception escaping ``execute`` crashes the worker (unless
        ``topology.bolt.fail.fast`` says otherwise): so for a bolt that holds its inputs, as for
        a windowed bolt. Its steps hold a window's inputs (anchored, counted in its
        aggregation's accumulators) and the punctuations of its upstream tasks; an exception,
        on a value or while the window's end runs through the steps, would leave them half
        done, and failing only the input that raised (a punctuation fails, through its anchors,
        the upstream window's spout tuples) had the replayed tuples counted again beside the
        accumulators that still held them, and the held inputs acked at the next window's end.
        The crash drops the whole window, whose inputs fail and are replayed, as in Storm."""
        return self.squall_holds_inputs

    def execute(self, tup: Tuple) -> None:
        """Process ``tup``; ack it (unless a window's aggregation holds it until its end)."""
        self.delegate.process_and_ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The processors' streams and their punctuation streams."""
        self.delegate.declare_output_fields(declarer)

    def __repr__(self) -> str:
        return f"ProcessorBolt({self.delegate.id})"


class WindowedProcessorBolt(BaseWindowedBolt, StreamBolt):
    """Runs fused processors on each window, then punctuates them (Storm's
    ``WindowedProcessorBolt``): configured with the stream's `Window`."""

    def __init__(self, bolt_id: str, window: Window) -> None:
        super().__init__()
        self.delegate = ProcessorBoltDelegate(bolt_id)
        self.window = window
        self.with_window(window.window_length, window.sliding_interval)
        if window.timestamp_field is not None:
            self.with_timestamp_field(window.timestamp_field)
        if window.lag is not None:
            self.with_lag(window.lag)
        if window.late_tuple_stream is not None:
            self.with_late_tuple_stream(window.late_tuple_stream)

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Link the processors (the collector anchors unanchored emits to the window)."""
        super().prepare(conf, context, collector)
        self.delegate.prepare(conf, context, collector)

    def execute(self, window: TupleWindow) -> None:
        """Every value of the window through the processors, then the window's end."""
        if self.delegate.timestamp_field is not None:
            self.delegate.set_event_timestamp(window.get_end_timestamp())
        for tup in window.get():
            value, stream = self.delegate.value_and_stream(tup)
            if not is_punctuation(value):  # an upstream window's end: this bolt's own window decides
                self.delegate.process(value, stream)
        self.delegate.punctuate_window()

    def squall_empty_window(self, end_ts: int) -> None:
        """A processing-time window that ended with no tuple (the `squall.windowing` executor
        calls it, not ``execute``): its end still goes downstream, a punctuation (unanchored),
        so that a merge after a regrouping does not wait on this task while the others' windows
        hold the spouts' tuples. Storm's sends none: its merge waited for this task's next window
        with a tuple, or for the message timeout to replay the held ones."""
        self.delegate.punctuate_window()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The processors' streams and their punctuation streams."""
        self.delegate.declare_output_fields(declarer)

    def __repr__(self) -> str:
        return f"WindowedProcessorBolt({self.delegate.id}, {self.window})"


class StatefulProcessorBolt(BaseStatefulBolt, StreamBolt):
    """Runs fused processors, one of them ``update_state_by_key`` or ``state_query``, with the
    bolt's checkpointed `squall.KeyValueState` (Storm's ``StatefulProcessorBolt``)."""

    def __init__(self, bolt_id: str) -> None:
        self.delegate = ProcessorBoltDelegate(bolt_id)

    def check(self) -> None:
        """Refuse a bolt with two ``update_state_by_key`` (they would share one state)."""
        updates = [p for p in self.delegate.stateful_processors() if isinstance(p, UpdateStateByKeyProcessor)]
        if len(updates) > 1:
            raise ValueError(f"Bolt {self.delegate.id}: cannot have more than one update_state_by_key "
                             "processor in a StatefulProcessorBolt")

    # A window's aggregation after its ``update_state_by_key`` (in the same bolt, as a stream
    # already grouped by key is not regrouped) holds the window's inputs as a `ProcessorBolt`'s
    # does: an exception must crash the worker, not be undone as one execute's (the savepoint
    # of a stateful bolt undoes the state's changes, not the accumulators' counts); so must the
    # spouts' pending limit know it holds them
    squall_holds_inputs = ProcessorBolt.squall_holds_inputs
    squall_fail_fast = ProcessorBolt.squall_fail_fast

    def init_state(self, state: Any) -> None:
        """Hand the state to the stateful processors."""
        for processor in self.delegate.stateful_processors():
            processor.init_state(state)

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Link the processors."""
        super().prepare(conf, context, collector)
        self.delegate.prepare(conf, context, collector)

    def execute(self, tup: Tuple) -> None:
        """Process ``tup``, then ack it (the ack takes effect at the next commit)."""
        self.delegate.process_and_ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The processors' streams and their punctuation streams."""
        self.delegate.declare_output_fields(declarer)

    def __repr__(self) -> str:
        return f"StatefulProcessorBolt({self.delegate.id})"
