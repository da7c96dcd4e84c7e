"""Storm's testing API (``org.apache.storm.Testing`` and ``testing/*``), for tests of topologies.

`complete_topology` runs a topology on mocked data until every tuple is processed and returns
what each component emitted; `read_tuples` reads it. Storm's test components are here too
(`TestWordSpout`, `TestWordCounter`, `TestGlobalCount`, `TestAggregatesCounter`, the planner
spout and bolt, `TestConfBolt`, `AckEveryOtherBolt`, `NGrouping`). `FeederSpout` emits what a test feeds it;
`AckTracker` and `AckFailMapTracker` observe acks and fails. `TupleCaptureBolt` records what it
receives. ``LocalCluster(clock=SimulatedClock())`` (or `with_simulated_time_local_cluster`) with `LocalCluster.advance_cluster_time` moves
message timeouts and ticks without waiting for them. All of them keep working although
squall copies components per task; made inside `shared_state_dir`, they also work when the
workers are other processes (the process host, Spark). `TrackedTopology` with `tracked_wait`
waits until a topology has processed what its spouts emitted (on a `LocalCluster`);
`capture_topology` records every tuple emitted; `test_tuple` makes a Tuple for a bolt's unit
test; `multiseteq` compares without order.
"""

from ..engine.clock import SimulatedClock as SimulatedClock
from ._complete import CompleteTopologyResult as CompleteTopologyResult
from ._complete import MockedSources as MockedSources
from ._complete import complete_topology as complete_topology
from ._complete import read_tuples as read_tuples
from ._helpers import AckFailMapTracker as AckFailMapTracker
from ._helpers import AckTracker as AckTracker
from ._helpers import FeederSpout as FeederSpout
from ._helpers import FixedTuple as FixedTuple
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
from ._tracked import TEST_TIMEOUT_SECS as TEST_TIMEOUT_SECS
from ._tracked import CapturedTopology as CapturedTopology
from ._tracked import TrackedTopology as TrackedTopology
from ._tracked import capture_topology as capture_topology
from ._tracked import multiset as multiset
from ._tracked import multiseteq as multiseteq
from ._tracked import test_tuple as test_tuple
from ._tracked import track_and_capture_topology as track_and_capture_topology
from ._tracked import tracked_wait as tracked_wait
from ._tracked import with_simulated_time_local_cluster as with_simulated_time_local_cluster
from ._tracked import with_tracked_cluster as with_tracked_cluster

__all__ = [
    "TEST_TIMEOUT_SECS", "AckEveryOtherBolt", "AckFailMapTracker", "AckTracker", "CapturedTopology",
    "CompleteTopologyResult", "FeederSpout", "FixedTuple", "FixedTupleSpout", "MockedSources", "NGrouping",
    "SimulatedClock",
    "TestAggregatesCounter", "TestConfBolt", "TestGlobalCount", "TestPlannerBolt", "TestPlannerSpout",
    "TestWordCounter", "TestWordSpout", "TrackedTopology", "TupleCaptureBolt", "capture_topology",
    "complete_topology", "multiset", "multiseteq", "read_tuples", "shared_state_dir", "test_tuple",
    "track_and_capture_topology", "tracked_wait", "with_simulated_time_local_cluster", "with_tracked_cluster",
]
