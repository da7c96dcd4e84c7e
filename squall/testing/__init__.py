"""Storm's testing API (``org.apache.storm.Testing`` and ``testing/*``), for tests of topologies.

`complete_topology` runs a topology on mocked data until every tuple is processed and returns
what each component emitted; `read_tuples` reads it. Storm's test components are here too
(`TestWordSpout`, `TestWordCounter`, `TestGlobalCount`, `TestAggregatesCounter`, the planner
spout and bolt, `TestConfBolt`, `AckEveryOtherBolt`, `NGrouping`). `FeederSpout` emits what a test feeds it;
`AckTracker` and `AckFailMapTracker` observe acks and fails. `TupleCaptureBolt` records what it
receives. ``LocalCluster(clock=SimulatedClock())`` with `LocalCluster.advance_cluster_time` moves
message timeouts and ticks without waiting for them. All of them keep working although
squall copies components per task; made inside `shared_state_dir`, they also work when the
workers are other processes (the process host, Spark).
"""

from ..engine.clock import SimulatedClock as SimulatedClock
from ._complete import CompleteTopologyResult as CompleteTopologyResult
from ._complete import MockedSources as MockedSources
from ._complete import complete_topology as complete_topology
from ._complete import read_tuples as read_tuples
from ._helpers import AckFailMapTracker as AckFailMapTracker
from ._helpers import AckTracker as AckTracker
from ._helpers import FeederSpout as FeederSpout
from ._helpers import FixedTupleSpout as FixedTupleSpout
from ._helpers import TupleCaptureBolt as TupleCaptureBolt
from ._registry import shared_state_dir as shared_state_dir
from ._storm_components import AckEveryOtherBolt as AckEveryOtherBolt
from ._storm_components import NGrouping as NGrouping
from ._storm_components import TestAggregatesCounter as TestAggregatesCounter
from ._storm_components import TestConfBolt as TestConfBolt
from ._storm_components import TestGlobalCount as TestGlobalCount
from ._storm_components import TestPlannerBolt as TestPlannerBolt
from ._storm_components import TestPlannerSpout as TestPlannerSpout
from ._storm_components import TestWordCounter as TestWordCounter
from ._storm_components import TestWordSpout as TestWordSpout

__all__ = [
    "AckEveryOtherBolt", "AckFailMapTracker", "AckTracker", "CompleteTopologyResult", "FeederSpout",
    "FixedTupleSpout", "MockedSources", "NGrouping", "SimulatedClock", "TestAggregatesCounter", "TestConfBolt",
    "TestGlobalCount", "TestPlannerBolt", "TestPlannerSpout", "TestWordCounter", "TestWordSpout",
    "TupleCaptureBolt", "complete_topology", "read_tuples", "shared_state_dir",
]
