"""Where a processor's results go (Storm's ``ProcessorContext`` and its kinds, and
``RefCountedTuple``).

A `ForwardingProcessorContext` runs the next processors in the same bolt; an
`EmittingProcessorContext` emits on the processor's output stream, anchored to the input being
processed, or, for a batch processor in a window, to every input of the window so far, which it
then acks when it emits the punctuation. A `ChainedProcessorContext` does both, for a
processor with children inside the bolt and outside it.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from .._fields import Fields
from .._tuple import Tuple
from .processors import Processor
from .util import PUNCTUATION, get_punctuation_stream, is_punctuation


@dataclass
class Step:
    """One processor of a stream bolt, as the bolt runs it: what the builder knew of its node
    (its output streams, whether it emits pairs, whether it is windowed and from which windowed
    parent streams), the processors after it in the same bolt by the stream they take, and
    whether anything outside the bolt takes its output.

    ``holds_inputs``: a windowed batch processor is at or before it in the bolt, so what it
    emits comes of a whole window, and the window's inputs are held (anchored, not acked) until
    the window's punctuation passes it. Storm's holds them only at the batch processor itself,
    so a ``for_each`` after a windowed aggregation in the same bolt had the inputs acked before
    their window's result existed; squall holds them there too."""

    processor: Any
    output_streams: list[str]
    output_fields: Fields
    emits_pair: bool
    windowed: bool
    batch: bool
    windowed_parent_streams: frozenset[str] = frozenset()
    children: dict[str, list[int]] = field(default_factory=dict)
    outgoing: bool = False
    holds_inputs: bool = False


class RefCountedTuple:
    """An input with the number of window emits still holding it (Storm's
    ``RefCountedTuple``): acked once nothing holds it."""

    __slots__ = ("acked", "count", "tuple")

    def __init__(self, tup: Tuple) -> None:
        self.tuple = tup
        self.count = 0
        self.acked = False

    def should_ack(self) -> bool:
        """Nothing holds it and it is not acked yet."""
        return self.count == 0 and not self.acked

    def increment(self) -> None:
        """One more holder."""
        self.count += 1

    def decrement(self) -> None:
        """One holder less."""
        self.count -= 1

    def set_acked(self) -> None:
        """Mark it acked."""
        self.acked = True


class ProcessorContext(abc.ABC):
    """Where a processor forwards its results (Storm's ``ProcessorContext``)."""

    @abc.abstractmethod
    def forward(self, input: Any, stream: str | None = None) -> None:
        """Hand on ``input`` (on ``stream`` only, if given: a branch's)."""

    @abc.abstractmethod
    def is_windowed(self) -> bool:
        """Whether the processor runs on windows."""

    @abc.abstractmethod
    def get_windowed_parent_streams(self) -> frozenset[str]:
        """The windowed streams the processor takes from other bolts."""


class _StepContext(ProcessorContext):
    def __init__(self, step: Step) -> None:
        self.step = step

    def is_windowed(self) -> bool:
        return self.step.windowed

    def get_windowed_parent_streams(self) -> frozenset[str]:
        return self.step.windowed_parent_streams


class ForwardingProcessorContext(_StepContext):
    """Runs the processors after this one in the same bolt: ``execute`` with a value,
    ``punctuate`` with the punctuation."""

    def __init__(self, step: Step, stream_to_children: dict[str, list[Processor]]) -> None:
        super().__init__(step)
        self.stream_to_children = stream_to_children

    def forward(self, input: Any, stream: str | None = None) -> None:
        streams = self.stream_to_children if stream is None else (stream,)
        punctuation = isinstance(input, str) and input == PUNCTUATION
        for s in streams:
            for processor in self.stream_to_children.get(s, ()):
                if punctuation:
                    processor.punctuate(s)
                else:
                    processor.execute(input, s)


class ChainedProcessorContext(_StepContext):
    """Forwards to several contexts, in order."""

    def __init__(self, step: Step, contexts: list[ProcessorContext]) -> None:
        super().__init__(step)
        self.contexts = contexts

    def forward(self, input: Any, stream: str | None = None) -> None:
        for ctx in self.contexts:
            ctx.forward(input, stream)


class EmittingProcessorContext(_StepContext):
    """Emits on one output stream of the processor (its values, or a pair as key and value,
    plus the event time when the stream carries one), anchored (see the module docstring)."""

    def __init__(self, step: Step, collector: Any, output_stream: str) -> None:
        super().__init__(step)
        self.collector = collector
        self.output_stream = output_stream
        self.punctuation_stream = get_punctuation_stream(output_stream)
        self.anchors: list[RefCountedTuple] = []
        self.waiting: list[RefCountedTuple] = []  # acked when the punctuation passes
        self.timestamp_field: str | None = None
        self.event_timestamp: int | None = None

    def set_anchor(self, anchor: RefCountedTuple, reached: bool = True) -> None:
        """The input now processed (``reached``: it flows to this step, from the input stream
        it came on): a step that holds its window's inputs keeps every one until the window's
        punctuation passes it; any other emits anchored to the current one only, and keeps a
        punctuation input until it passes the punctuation on."""
        if self.step.holds_inputs:
            if reached:
                anchor.increment()
                self.anchors.append(anchor)
                self.waiting.append(anchor)
        else:
            self.anchors[:] = [anchor]
            # (`is_punctuation`: a value's own ``==`` may answer no bool, as a numpy array's)
            if reached and is_punctuation(anchor.tuple.get_value(0)):
                # kept until the punctuation passes here. Storm's kept only the last one, so
                # when one had to come from each upstream task the ones before it, anchored to
                # their windows' inputs, were never acked; and it kept it in every emitting step
                # of the bolt, also one (a state query's) the punctuation never reaches
                anchor.increment()
                self.waiting.append(anchor)

    def set_event_timestamp(self, ts: int | None) -> None:
        """The event time the emits carry."""
        self.event_timestamp = ts

    def forward(self, input: Any, stream: str | None = None) -> None:
        if stream is not None and stream != self.output_stream:
            return
        if isinstance(input, str) and input == PUNCTUATION:
            self._emit([PUNCTUATION], self.punctuation_stream)
            self._may_be_ack()
        elif self.step.emits_pair:
            self._emit([input[0], input[1]], self.output_stream)
        else:
            self._emit([input], self.output_stream)

    def _emit(self, values: list[Any], stream: str) -> None:
        if self.timestamp_field is not None:
            values.append(self.event_timestamp)
        if self.anchors:
            self.collector.emit(values, [a.tuple for a in self.anchors], stream)
        else:  # in a windowed bolt: the window's collector anchors to the window
            self.collector.emit(values, None, stream)

    def _may_be_ack(self) -> None:
        for anchor in self.waiting:
            anchor.decrement()
            if anchor.should_ack():
                self.collector.ack(anchor.tuple)
                anchor.set_acked()
        self.waiting.clear()
        if self.step.holds_inputs:
            self.anchors.clear()
