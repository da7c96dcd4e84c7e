"""Storm's Streams API (``org.apache.storm.streams``): a typed, functional way to write a
topology as operations on streams of values, which `StreamBuilder` turns into spouts and bolts.
See docs/streams.md.

>>> from squall.streams import StreamBuilder, TumblingWindows, Pair
>>> from squall.streams.operations.mappers import ValueMapper
>>> from squall import Duration

``StreamBuilder().new_stream(spout, ValueMapper(0))`` starts a `Stream`; ``map``, ``flat_map``,
``filter``, ``peek``, ``branch``, ``window``, ``aggregate``, ``reduce``, ``repartition`` go on
with it, ``for_each``, ``print`` and ``to(bolt)`` end it; ``map_to_pair`` makes a `PairStream`,
with the by-key operations (``count_by_key``, ``reduce_by_key``, ``aggregate_by_key``,
``group_by_key``, ``join`` and the outer joins, ``co_group_by_key``, ``update_state_by_key``).
``build()`` returns the `squall.StormTopology` to submit.
"""

from .builder import StreamBuilder as StreamBuilder
from .operations import CombinerAggregator as CombinerAggregator
from .operations import StateUpdater as StateUpdater
from .operations.mappers import PairValueMapper as PairValueMapper
from .operations.mappers import TupleValueMappers as TupleValueMappers
from .operations.mappers import ValueMapper as ValueMapper
from .operations.mappers import ValuesMapper as ValuesMapper
from .pair import Pair as Pair
from .stream import PairStream as PairStream
from .stream import Stream as Stream
from .stream import StreamState as StreamState
from .util import StreamUtil as StreamUtil
from .windowing import SlidingWindows as SlidingWindows
from .windowing import TumblingWindows as TumblingWindows
from .windowing import Window as Window

__all__ = [
    "CombinerAggregator", "Pair", "PairStream", "PairValueMapper", "SlidingWindows", "StateUpdater", "Stream",
    "StreamBuilder", "StreamState", "StreamUtil", "TumblingWindows", "TupleValueMappers", "ValueMapper",
    "ValuesMapper", "Window",
]
