"""Windowed bolts (Storm's ``org.apache.storm.windowing`` and ``BaseWindowedBolt``).

The public names (`BaseWindowedBolt`, `Count`, `Duration`, `TupleWindow`, and `JoinBolt`,
Storm's ``org.apache.storm.bolt.JoinBolt``, a windowed bolt that joins streams: `join`) are
re-exported from ``squall``. Inside: a pure core, with time handed in (`manager.WindowManager`, the
eviction and trigger `policies`, `watermark.WatermarkGenerator`), the settings and Storm's
checks (`config`), and the `executor.WindowedBoltExecutor` bolt that runs a windowed bolt on
the engine. Semantics and costs: docs/windows.md.
"""

from .._topology import register_bolt_kind
from ._api import BaseWindowedBolt as BaseWindowedBolt
from ._api import Count as Count
from ._api import Duration as Duration
from ._api import TupleWindow as TupleWindow
from .executor import WindowedBoltExecutor
from .join import JoinBolt as JoinBolt
from .join import Selector as Selector

# set_bolt runs a windowed bolt inside the executor (docs/architecture.md, "Extension points")
register_bolt_kind(BaseWindowedBolt, WindowedBoltExecutor)

__all__ = ["BaseWindowedBolt", "Count", "Duration", "JoinBolt", "Selector", "TupleWindow"]
