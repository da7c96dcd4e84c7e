"""The master side: the topology state machine, schedulers, and the hosts (LocalCluster first).

Every host, and so every process that plans or runs a topology, imports this package: it loads
the features that register on the builder's and the engine's extension points, which ``import
squall`` no longer loads (its names load at their first use): the metrics' consumers, timers and
records, the stateful and windowed bolts' executors.
"""

from .. import metric as metric
from .. import state as state
from .. import windowing as windowing
