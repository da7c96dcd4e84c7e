"""Wait strategies: what an executor loop does after a round in which nothing happened.

Storm's ``IWaitStrategy`` (``org.apache.storm.policy``) as small objects chosen by configuration:
``topology.spout.wait.strategy`` when the loop's spouts may emit but emitted nothing, and
``topology.backpressure.wait.strategy`` when its spouts are held back because an inbox is over its
bound. Each is ``"module:Class"`` (or Storm's class name, for the two Storm has), made with no
arguments and then given the topology's configuration and its situation through `prepare`, as
Storm does by reflection.

Storm's strategy parks or sleeps the thread itself. A squall loop must instead stay wakeable (an
arriving tuple, an ack, a change of the topology's state, or a timer ends its wait early), so
here `WaitStrategy.idle` only says how long the loop may wait, and the loop waits on its event
for at most that long (`squall.engine.loop.ExecutorLoop`): 0 means poll again at once, None means
until something wakes the loop or its next timer is due.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from .._config import Config, conf_value
from .._errors import InvalidTopologyException
from .serialize import resolve


class WaitSituation(enum.Enum):
    """Why a loop waits (Storm's ``IWaitStrategy.WaitSituation``); a strategy reads its settings by it."""

    SPOUT_WAIT = Config.TOPOLOGY_SPOUT_WAIT_STRATEGY
    BACK_PRESSURE_WAIT = Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY

    @property
    def key(self) -> str:
        """The configuration key that names this situation's strategy."""
        return self.value


class WaitStrategy:
    """Storm's ``IWaitStrategy``: made with no arguments, then `prepare`, then `idle` per idle round."""

    def prepare(self, conf: Mapping[str, Any], situation: WaitSituation) -> None:
        """Read this strategy's settings for ``situation`` from the topology's ``conf``."""

    def idle(self, idle_count: int) -> float | None:
        """Seconds the loop may wait after its ``idle_count``-th idle round in a row (1 for the
        first): 0 polls again at once, None waits until the loop is woken or a timer is due."""
        raise NotImplementedError


class WaitStrategyProgressive(WaitStrategy):
    """Storm's progressive wait: ``level1.count`` idle rounds poll again at once, the next
    ``level2.count`` yield the thread first (Storm parks 1 ns), then the loop waits
    ``level3.sleep.millis``. squall's: for spouts each further idle round doubles that wait, up
    to ``topology.spout.wait.progressive.max.sleep.millis``, so that an idle topology costs well
    under 2% of a core (a wake-up costs tens of microseconds of Python, and polling an idle spout
    every 1 ms measured 3% of a core per loop) while a busy spout never gets past the first wait.
    """

    # situation -> (level1 count, level2 count, level3 sleep ms, most sleep ms or None)
    _KEYS: ClassVar[dict[WaitSituation, tuple[str, str, str, str | None]]] = {
        WaitSituation.SPOUT_WAIT: (Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL1_COUNT,
                                   Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL2_COUNT,
                                   Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS,
                                   Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS),
        WaitSituation.BACK_PRESSURE_WAIT: (Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL1_COUNT,
                                           Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL2_COUNT,
                                           Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS,
                                           None),
    }

    def __init__(self, pause: Callable[[float], None] = time.sleep) -> None:
        self.pause = pause  # level 2's yield: pause(0)
        self.spin = self.yields = 0
        self.first_sleep = self.most_sleep = 0.001

    def prepare(self, conf: Mapping[str, Any], situation: WaitSituation) -> None:
        """Read the three levels (and, for spouts, the longest sleep) of ``situation``."""
        level1, level2, level3, most = self._KEYS[situation]
        self.spin = int(conf_value(conf, level1))
        self.yields = int(conf_value(conf, level2))
        self.first_sleep = float(conf_value(conf, level3)) / 1000.0
        self.most_sleep = max(self.first_sleep, float(conf_value(conf, most)) / 1000.0 if most else 0.0)

    def idle(self, idle_count: int) -> float:
        """0 for the spinning rounds, 0 after a yield for the next ones, then the doubling sleep."""
        if idle_count <= self.spin:
            return 0.0
        if idle_count <= self.spin + self.yields:
            self.pause(0)
            return 0.0
        level = idle_count - self.spin - self.yields - 1
        return min(self.first_sleep * (1 << min(level, 16)), self.most_sleep)


class WaitStrategyPark(WaitStrategy):
    """Storm's park wait: every idle round waits ``topology.spout.wait.park.microsec`` (or
    ``topology.backpressure.wait.park.microsec``); 0 polls again at once (a busy spin)."""

    _KEYS: ClassVar[dict[WaitSituation, str]] = {
        WaitSituation.SPOUT_WAIT: Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC,
        WaitSituation.BACK_PRESSURE_WAIT: Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC}

    def __init__(self) -> None:
        self.park_secs = 0.0001

    def prepare(self, conf: Mapping[str, Any], situation: WaitSituation) -> None:
        """Read the park time of ``situation``."""
        self.park_secs = float(conf_value(conf, self._KEYS[situation])) / 1_000_000.0

    def idle(self, idle_count: int) -> float:
        """The park time, whatever the count."""
        return self.park_secs


class WaitStrategyUntilWoken(WaitStrategy):
    """squall's: wait until the loop is woken (for backpressure: when no inbox is over its bound
    any more, `squall.engine.loop.Backpressure` wakes every loop) or its next timer is due. No
    polling at all, so held-back spouts cost nothing; the default for backpressure."""

    def idle(self, idle_count: int) -> None:
        """Always None: until woken."""


# Storm's names for the strategies it has, so that a Storm topology's configuration works as is
STORM_NAMES = {
    "org.apache.storm.policy.WaitStrategyProgressive": WaitStrategyProgressive,
    "org.apache.storm.policy.WaitStrategyPark": WaitStrategyPark,
}


def wait_strategy(conf: Mapping[str, Any], situation: WaitSituation) -> WaitStrategy:
    """The prepared strategy ``conf`` names for ``situation``.

    Raises:
        InvalidTopologyException: the name is not a string, does not resolve to a class, or the
            class is not a `WaitStrategy` (has no ``idle``); the message names the key.
    """
    key = situation.key
    name = conf_value(conf, key)
    cls: Any = STORM_NAMES.get(name) if isinstance(name, str) else None
    if cls is None:
        if not isinstance(name, str):
            raise InvalidTopologyException(f"{key!r} must be a \"module:Class\" string, got {name!r}")
        try:
            cls = resolve(name)
        except (ImportError, AttributeError, ValueError) as e:
            raise InvalidTopologyException(
                f"{key!r}: wait strategy {name!r} cannot be loaded ({type(e).__name__}: {e}); give \"module:Class\" "
                f"of a squall.engine.wait.WaitStrategy, e.g. \"squall.engine.wait:WaitStrategyPark\"") from e
    if not (isinstance(cls, type) and callable(getattr(cls, "idle", None)) and callable(getattr(cls, "prepare", None))):
        raise InvalidTopologyException(
            f"{key!r}: {name!r} is not a wait strategy class (one with prepare(conf, situation) and idle(count))")
    strategy = cls()
    strategy.prepare(conf, situation)
    return strategy
