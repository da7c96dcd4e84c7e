"""Storm's tracked topologies and the rest of ``Testing``: `TrackedTopology` and `tracked_wait`,
`with_tracked_cluster`, `with_simulated_time_local_cluster`, `capture_topology`,
`multiset`/`multiseteq` and `test_tuple`.

A tracked topology's workers count what they do (`squall.engine.tracking`): every spout emit,
every item put into an inbox and every item run, and, when a worker dies, the items it held,
which can no longer be run (``lost``). `TrackedTopology.tracked_wait` waits, without polling,
until that many more spout emits were made and every item transferred was processed or lost,
as Storm's ``trackedWait`` waits for ``spout-emitted`` to reach its target and ``processed`` to
equal ``transferred``. Storm's never sees a worker die (its counts stay apart for good, and it
waits out its timeout): after a crash, squall's returns once what the topology still can do is
done, and a spout's replays are spout emits like any other, to wait for with ``amt``.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._config import Config
from .._fields import Fields
from .._system import DEFAULT_STREAM
from .._topology import StormTopology
from .._tuple import Source, Tuple
from ..engine.clock import SimulatedClock
from ..engine.tracking import TRACKED_KEY, TupleCounts
from ._complete import capture_spec, errors_reported
from ._helpers import TupleCaptureBolt

TEST_TIMEOUT_SECS = 10.0
"""How long `tracked_wait` waits by default (Storm's ``Testing.TEST_TIMEOUT_MS``, 10 s)."""


class TrackedTopology:
    """A topology whose tuples are counted, so that a test can wait until they are all processed
    (Storm's ``TrackedTopology``).

    Make it for the `LocalCluster` it will run on, and submit it there as a topology:
    ``cluster.submit_topology(name, conf, tracked)``. Then `tracked_wait` returns once the
    spouts have made that many more emits and every tuple (and every ack, and every reply to a
    spout) in the topology has been processed.

    Args:
        topology: from `TopologyBuilder.create_topology` (or `capture_topology`).
        cluster: the `LocalCluster` it is submitted to. Tracking counts in this process: it
            works where the workers are threads of the test (a `LocalCluster`), as Storm's.
    """

    def __init__(self, topology: StormTopology, cluster: Any) -> None:
        if not isinstance(topology, StormTopology):
            raise TypeError(f"TrackedTopology takes a StormTopology (TopologyBuilder.create_topology()), "
                            f"got {type(topology).__name__}")
        self.topology = topology
        self.cluster = cluster
        self.counts = TupleCounts()
        self.last_spout_commit = 0
        self.names: list[str] = []  # the names it was submitted under

    def get_topology(self) -> StormTopology:
        """The topology (Storm's ``getTopology``)."""
        return self.topology

    def get_cluster(self) -> Any:
        """The cluster it is tracked on (Storm's ``getCluster``)."""
        return self.cluster

    def squall_tracking(self, cluster: Any, name: str, conf: Mapping[str, Any]) -> tuple[StormTopology, dict[str, Any]]:
        """What `LocalCluster.submit_topology` submits for it under ``name``: the topology, and
        ``conf`` naming the counts its workers add to.

        Raises:
            ValueError: ``cluster`` is not the cluster it was made for.
        """
        if cluster is not self.cluster:
            raise ValueError("this TrackedTopology was made for another cluster: make it with the cluster it is "
                             "submitted to, TrackedTopology(topology, cluster)")
        self.names.append(name)
        return self.topology, {**conf, TRACKED_KEY: self.counts.id}

    def tracked_wait(self, amt: int = 1, timeout_secs: float = TEST_TIMEOUT_SECS) -> None:
        """Wait until the spouts have made ``amt`` more emits than at the last return (or than
        none, the first time) and the topology has processed everything it was given: no tuple,
        ack or spout reply waits in an inbox, crosses between workers, or is being executed.

        It waits on the counts (each processed batch wakes it), never sleeps, and does not move
        a simulated clock (move it with ``cluster.advance_cluster_time``). More emits than
        ``amt`` are allowed (they count towards the next wait). A worker that died (a crash, a
        rebalance) took the items it held with it: they count as ``lost``, not as waited for,
        so the wait ends once the rest is done; what a spout replays for them are new emits,
        which ``amt`` may include to wait for them too.

        Raises:
            AssertionError: not done within ``timeout_secs`` ("Test timed out"), naming what is
                missing: spout emits, and per component the items not processed yet.
        """
        if type(amt) is not int or amt < 0:
            raise ValueError(f"tracked_wait: amt must be an int >= 0, got {amt!r}")
        target = self.last_spout_commit + amt
        if not self.counts.wait_for(target, time.monotonic() + timeout_secs):
            raise AssertionError(self._not_done(amt, target, timeout_secs))
        self.last_spout_commit = target

    def _not_done(self, amt: int, target: int, timeout_secs: float) -> str:
        amounts = self.counts.amounts()
        emitted = amounts["spout-emitted"]
        waiting = []
        if emitted < target:
            waiting.append(f"the spouts emitted {emitted - self.last_spout_commit} of the {amt} tuples waited "
                           f"for ({emitted} in all)")
        unprocessed = self.counts.unprocessed()
        if unprocessed:
            where = ", ".join(f"[{c}] {n}" for c, n in unprocessed.items())
            waiting.append(f"{sum(unprocessed.values())} of {amounts['transferred']} items "
                           f"transferred are not processed yet ({where})")
        if amounts["lost"]:
            waiting.append(f"{amounts['lost']} items were lost with {self.counts.workers_died} worker(s) that "
                           f"died or the transport dropped")
        if not self.names:
            waiting.append("it was never submitted: cluster.submit_topology(name, conf, tracked)")
        return f"Test timed out ({timeout_secs}s) in tracked_wait({amt}): " + "; ".join(waiting) + self._errors()

    def _errors(self) -> str:
        """The errors its topology reported (a worker that crashes in ``prepare`` emits nothing,
        which is all the counts can tell)."""
        get = getattr(self.cluster, "get_topology_info", None)
        if not self.names or not callable(get):
            return ""
        try:
            info = get(self.names[-1])
        except Exception:  # killed since: nothing to add  # noqa: BLE001
            return ""
        return errors_reported(info)

    def global_amt(self, key: str) -> int:
        """One count of this topology: ``"spout-emitted"``, ``"transferred"`` or ``"processed"``
        (Storm's ``globalAmt``, whose counts are the whole cluster's), or ``"lost"`` (squall's:
        items transferred that a worker's death, or the transport, dropped).

        Raises:
            KeyError: another key.
        """
        amounts = self.counts.amounts()
        if key not in amounts:
            raise KeyError(f"global_amt: {key!r} is not one of {sorted(amounts)}")
        return amounts[key]


class CapturedTopology:
    """A topology with a `TupleCaptureBolt` added (Storm's ``CapturedTopology``): ``topology``
    (a `StormTopology`, or a `TrackedTopology` from `track_and_capture_topology`) and
    ``capturer``, whose ``get_results()`` `read_tuples` reads."""

    def __init__(self, topology: Any, capturer: TupleCaptureBolt) -> None:
        self.topology = topology
        self.capturer = capturer

    def __iter__(self) -> Iterator[Any]:  # topology, capturer = capture_topology(...)
        return iter((self.topology, self.capturer))


def capture_topology(topology: StormTopology) -> CapturedTopology:
    """A copy of ``topology`` with a `TupleCaptureBolt` that records every tuple every component
    emits, on every stream it declares (Storm's ``captureTopology``); ``topology`` itself is
    left as it was. Read what it captured with ``read_tuples(captured.capturer.get_results(),
    component, stream)``."""
    capture_id, spec, capturer = capture_spec(topology)
    return CapturedTopology(topology.with_components({capture_id: spec}), capturer)


def track_and_capture_topology(cluster: Any, topology: StormTopology) -> CapturedTopology:
    """`capture_topology`, tracked on ``cluster`` (Storm's ``trackAndCaptureTopology``): its
    ``topology`` is a `TrackedTopology`."""
    captured = capture_topology(topology)
    return CapturedTopology(TrackedTopology(captured.topology, cluster), captured.capturer)


def tracked_wait(topology: TrackedTopology | CapturedTopology, amt: int = 1,
                 timeout_secs: float = TEST_TIMEOUT_SECS) -> None:
    """`TrackedTopology.tracked_wait` of ``topology`` (or of a tracked `CapturedTopology`'s),
    Storm's ``Testing.trackedWait``."""
    tracked = topology.topology if isinstance(topology, CapturedTopology) else topology
    if not isinstance(tracked, TrackedTopology):
        raise TypeError(f"tracked_wait needs a TrackedTopology (or track_and_capture_topology's result), "
                        f"got {type(tracked).__name__}")
    tracked.tracked_wait(amt, timeout_secs)


@contextlib.contextmanager
def with_tracked_cluster(daemon_conf: Mapping[str, Any] | None = None, simulated: bool = True,
                         **kwargs: Any) -> Iterator[Any]:
    """A `LocalCluster` for tracked topologies, shut down at the end of the block (Storm's
    ``Testing.withTrackedCluster``, which also runs on simulated time: ``simulated=False`` for
    real time). Any `LocalCluster` can run a `TrackedTopology`; ``kwargs`` go to it.

    As Storm's (a ``LocalCluster.Builder`` cluster), its topologies' tuples never time out
    unless ``daemon_conf`` sets ``topology.enable.message.timeouts`` (`storm_testing_conf`)."""
    from ..cluster.local import LocalCluster  # the testing layer sits above the cluster

    if simulated and "clock" not in kwargs:
        kwargs["clock"] = SimulatedClock()
    with LocalCluster(storm_testing_conf(daemon_conf), **kwargs) as cluster:
        yield cluster


@contextlib.contextmanager
def with_simulated_time_local_cluster(daemon_conf: Mapping[str, Any] | None = None,
                                      **kwargs: Any) -> Iterator[Any]:
    """A `LocalCluster` on a `SimulatedClock`, shut down at the end of the block (Storm's
    ``Testing.withSimulatedTimeLocalCluster``): time moves only with
    ``cluster.advance_cluster_time(secs)``. As Storm's (a ``LocalCluster.Builder`` cluster), its
    topologies' tuples never time out unless ``daemon_conf`` sets
    ``topology.enable.message.timeouts`` (`storm_testing_conf`); otherwise the same as
    ``LocalCluster(daemon_conf, clock=SimulatedClock())``. ``kwargs`` go to the `LocalCluster`."""
    from ..cluster.local import LocalCluster  # the testing layer sits above the cluster

    kwargs.setdefault("clock", SimulatedClock())
    with LocalCluster(storm_testing_conf(daemon_conf), **kwargs) as cluster:
        yield cluster


def storm_testing_conf(daemon_conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """``daemon_conf`` with message timeouts off unless it says otherwise, as Storm's testing
    clusters have them: ``Testing.withTrackedCluster`` and ``withSimulatedTimeLocalCluster``
    build a ``LocalCluster.Builder`` cluster, which sets ``topology.enable.message.timeouts``
    false under the daemon configuration (only ``new LocalCluster()`` turns them on). Storm's
    tests that want timeouts say so (``testTimeout``: ``withDaemonConf(
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, true)``); with them on here, a ported test's tuple held
    past 30 s of simulated time failed, and a window longer than the timeout was refused."""
    return {Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False, **(daemon_conf or {})}


def multiset(items: Iterable[Any]) -> Counter:
    """How many times each item occurs (Storm's ``Testing.multiset``); lists (a tuple's values)
    are counted as tuples, so that they can be."""
    return Counter(_hashable(x) for x in items)


def multiseteq(a: Iterable[Any], b: Iterable[Any]) -> bool:
    """Whether ``a`` and ``b`` hold the same items the same number of times, in any order
    (Storm's ``Testing.multiseteq``): ``multiseteq(read_tuples(result, "split"), [["a"], ["b"]])``."""
    return multiset(a) == multiset(b)


def _hashable(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, dict):
        return ("__dict__", frozenset((_hashable(k), _hashable(v)) for k, v in x.items()))
    if isinstance(x, set):
        return frozenset(_hashable(v) for v in x)
    return x


def test_tuple(values: list | tuple, component: str = "component", stream: str = DEFAULT_STREAM,
               fields: Fields | Iterable[str] | None = None, task: int = 1) -> Tuple:
    """A `Tuple` with ``values``, as if ``component``'s task ``task`` emitted it on ``stream``,
    to pass to a bolt's ``execute`` in a unit test (Storm's ``Testing.testTuple``, with its
    defaults: component ``"component"``, stream ``"default"``, fields ``field1``, ``field2``, ...).
    It belongs to no tuple tree: acking or failing it through a real collector does nothing.

    Raises:
        TypeError: ``values`` is not a list or tuple.
        ValueError: ``fields`` does not name one field per value.
    """
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"test_tuple takes a list of values, got {type(values).__name__} {values!r}")
    if fields is None:
        names = [f"field{i}" for i in range(1, len(values) + 1)]
    elif isinstance(fields, Fields):
        names = list(fields)
    elif isinstance(fields, str):
        names = [fields]
    else:
        names = list(fields)
    if len(names) != len(values):
        raise ValueError(f"test_tuple: Tuple created with wrong number of fields. Expected {len(names)} fields "
                         f"{names} but got {len(values)} values {list(values)!r}")
    return Tuple(list(values), Source(component, stream, task, Fields(names)))


test_tuple.__test__ = False  # type: ignore[attr-defined]  # pytest must not collect it where a test imports it
