"""Storm's metrics API v1 (``org.apache.storm.metric.api``): the metric types, reducers and
combiners, and the records a consumer receives.

A metric is read once per time bucket by its task's executor (`IMetric.get_value_and_reset`); a
None value means "nothing this bucket" and is not reported. Metrics are read on the task's own
loop, between its calls to ``execute``/``next_tuple``, so they need no locking unless the
component updates them from threads of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class IMetric:
    """A value a task reports every time bucket (Storm's ``IMetric``)."""

    def get_value_and_reset(self) -> Any:
        """The value of the bucket that ends now, and start the next; None reports nothing."""
        raise NotImplementedError


class CountMetric(IMetric):
    """A count, reset to 0 every bucket."""

    def __init__(self) -> None:
        self.value = 0

    def incr(self) -> None:
        """Add one."""
        self.value += 1

    def incr_by(self, n: int) -> None:
        """Add ``n`` (may be negative)."""
        self.value += n

    def get_value_and_reset(self) -> int:
        value, self.value = self.value, 0
        return value


class MultiCountMetric(IMetric):
    """Counts by key: ``scope(key)`` is that key's `CountMetric`; the value is ``{key: n}`` with
    every key ever scoped, 0 included (as Storm's)."""

    def __init__(self) -> None:
        self._counts: dict[Any, CountMetric] = {}

    def scope(self, key: Any) -> CountMetric:
        """The count of ``key``, made at first use."""
        c = self._counts.get(key)
        if c is None:
            c = self._counts[key] = CountMetric()
        return c

    def get_value_and_reset(self) -> dict[Any, int]:
        return {k: c.get_value_and_reset() for k, c in self._counts.items()}


class IReducer:
    """How a `ReducedMetric` folds its updates: ``init() -> acc``, ``reduce(acc, v) -> acc``,
    ``extract_result(acc) -> value``."""

    def init(self) -> Any:
        """A fresh accumulator."""
        raise NotImplementedError

    def reduce(self, accumulator: Any, value: Any) -> Any:
        """The accumulator after ``value``."""
        raise NotImplementedError

    def extract_result(self, accumulator: Any) -> Any:
        """The bucket's value (None: nothing to report)."""
        raise NotImplementedError

    def squall_as_metric(self) -> ReducedMetric:
        """What `TopologyContext.register_metric` registers for this reducer: a `ReducedMetric`
        folding with it (Storm's ``registerMetric(name, IReducer, secs)``)."""
        return ReducedMetric(self)


class MeanReducer(IReducer):
    """The mean of the numbers given; None when none were (Storm's ``MeanReducer``)."""

    def init(self) -> list:
        return [0, 0.0]  # count, sum

    def reduce(self, accumulator: list, value: Any) -> list:
        if type(value) not in (int, float):  # Storm's accepts Double, Long and Integer only (not bool)
            raise TypeError(f"MeanReducer::reduce called with unsupported input type "
                            f"`{type(value).__name__}`. Supported types are int and float.")
        accumulator[0] += 1
        accumulator[1] += value
        return accumulator

    def extract_result(self, accumulator: list) -> float | None:
        count, total = accumulator
        return total / count if count else None


class ReducedMetric(IMetric):
    """A metric whose updates are folded by an `IReducer`; reset to ``reducer.init()``."""

    def __init__(self, reducer: IReducer) -> None:
        self.reducer = reducer
        self._acc = reducer.init()

    def update(self, value: Any) -> None:
        """Fold ``value`` into this bucket's accumulator."""
        self._acc = self.reducer.reduce(self._acc, value)

    def get_value_and_reset(self) -> Any:
        result = self.reducer.extract_result(self._acc)
        self._acc = self.reducer.init()
        return result


class MultiReducedMetric(IMetric):
    """`ReducedMetric`s by key: the value is ``{key: result}`` of the keys whose result is not None."""

    def __init__(self, reducer: IReducer) -> None:
        self.reducer = reducer
        self._metrics: dict[Any, ReducedMetric] = {}

    def scope(self, key: Any) -> ReducedMetric:
        """The metric of ``key``, made at first use."""
        m = self._metrics.get(key)
        if m is None:
            m = self._metrics[key] = ReducedMetric(self.reducer)
        return m

    def get_value_and_reset(self) -> dict[Any, Any]:
        out = {}
        for k, m in self._metrics.items():
            v = m.get_value_and_reset()
            if v is not None:
                out[k] = v
        return out


class ICombiner:
    """How a `CombinedMetric` folds its updates: ``identity()``, ``combine(a, b)``."""

    def identity(self) -> Any:
        """The value of an empty bucket."""
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        """``a`` and ``b`` combined."""
        raise NotImplementedError

    def squall_as_metric(self) -> CombinedMetric:
        """What `TopologyContext.register_metric` registers for this combiner: a
        `CombinedMetric` combining with it (Storm's ``registerMetric(name, ICombiner, secs)``)."""
        return CombinedMetric(self)


class CombinedMetric(IMetric):
    """A metric whose updates are combined by an `ICombiner`; reset to ``combiner.identity()``."""

    def __init__(self, combiner: ICombiner) -> None:
        self.combiner = combiner
        self._value = combiner.identity()

    def update(self, value: Any) -> None:
        """Combine ``value`` into this bucket's value."""
        self._value = self.combiner.combine(self._value, value)

    def get_value_and_reset(self) -> Any:
        value, self._value = self._value, self.combiner.identity()
        return value


class AssignableMetric(IMetric):
    """A value set with `set_value`; reading it does not reset it (as Storm's)."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def set_value(self, value: Any) -> None:
        """The value every later bucket reports."""
        self.value = value

    def get_value_and_reset(self) -> Any:
        return self.value


# Frozen dataclasses, not NamedTuples: between workers they travel as registered classes
# (their __dict__), which a tuple subclass has not.
@dataclass(frozen=True)
class TaskInfo:
    """Where and when a batch of data points was read (Storm's ``IMetricsConsumer.TaskInfo``)."""

    src_worker_host: str
    src_worker_port: int
    src_component_id: str
    src_task_id: int
    timestamp: int          # epoch seconds (the cluster's clock: simulated in tests)
    update_interval_secs: int


@dataclass(frozen=True)
class DataPoint:
    """One metric's value for one bucket (Storm's ``IMetricsConsumer.DataPoint``)."""

    name: str
    value: Any

    def __str__(self) -> str:
        return f"[{self.name} = {self.value}]"


class IMetricsConsumer:
    """Receives every task's data points (Storm's ``IMetricsConsumer``); listed in
    ``topology.metrics.consumer.register``, it runs in its own bolt ``__metrics_<class>``.

    ``handle_data_points`` runs on a thread of its own, so a slow consumer holds back no tuple.
    """

    def prepare(self, conf: dict, registration_argument: Any, context: Any, error_reporter: Any) -> None:
        """Called once per consumer task; ``error_reporter.report_error(e)`` shows an error in the UI."""

    def handle_data_points(self, task_info: TaskInfo, data_points: list[DataPoint]) -> None:
        """One task's data points of one bucket (never empty)."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Called when the consumer's task shuts down cleanly."""
