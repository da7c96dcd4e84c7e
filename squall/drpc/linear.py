"""Storm's ``LinearDRPCTopologyBuilder``: a DRPC topology as a chain of bolts, each request's
tuples tracked across the chain by `squall.coordination.CoordinatedBolt` (docs/drpc.md, "Linear
DRPC topologies").

The topology it builds, as Storm's::

    spout (DRPCSpout: args, return-info) --none--> prepare-request (PrepareRequest)
      prepare-request "default" [request, args] --(the first bolt's grouping, none by default)--> bolt0
      bolt<i-1> --(bolt i's grouping)--> bolt<i>, and bolt<i-1>'s counts --direct--> bolt<i>
      prepare-request "id" [request] --fields(request)--> the last bolt, if it is a FinishedCallback
      the last bolt's one stream [id, result] --fields(id)--> bolt<n> (JoinResult)
      prepare-request "ret" [request, return] --fields(request)--> bolt<n>
      bolt<n> [result, return-info] --none--> bolt<n+1> (ReturnResults)

Every tuple's first value is the request id (a random 64-bit integer `PrepareRequest` draws).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._components import BasicBolt, Bolt
from .._config import Config, conf_value
from .._errors import InvalidTopologyException
from .._failure import fail_because
from .._fields import Fields
from .._grouping import CustomStreamGrouping
from .._system import DEFAULT_STREAM
from .._topology import BoltDeclarer, StormTopology, TopologyBuilder
from ..coordination import (
    COORDINATED_STREAM_ID,
    BasicBoltExecutor,
    BatchBoltExecutor,
    CoordinatedBolt,
    FinishedCallback,
    IBatchBolt,
    IdStreamSpec,
    SourceArgs,
)
from ..engine.rotating_map import TimeCacheMap
from .components import DRPCSpout, ReturnResults
from .local import LocalDRPC

log = logging.getLogger("squall.drpc")

__all__ = ["JoinResult", "LinearDRPCInputDeclarer", "LinearDRPCTopologyBuilder", "PrepareRequest"]


class PrepareRequest(BasicBolt):
    """Gives each DRPC request a random id (Storm's ``PrepareRequest``): from the spout's
    ``[args, return-info]`` it emits ``[request, args]`` on the default stream (`ARGS_STREAM`),
    ``[request, return]`` on `RETURN_STREAM` and ``[request]`` on `ID_STREAM`."""

    ARGS_STREAM = DEFAULT_STREAM
    RETURN_STREAM = "ret"
    ID_STREAM = "id"

    def prepare(self, conf: dict, context: Any) -> None:
        super().prepare(conf, context)
        self._rand = random.Random()

    def execute(self, tup: Any, collector: Any) -> None:
        args, return_info = tup.get_value(0), tup.get_value(1)
        request_id = self._rand.getrandbits(64) - (1 << 63)  # Java's Random.nextLong: a signed long
        collector.emit([request_id, args], self.ARGS_STREAM)
        collector.emit([request_id, return_info], self.RETURN_STREAM)
        collector.emit([request_id], self.ID_STREAM)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(self.ARGS_STREAM, Fields(["request", "args"]))
        declarer.declare_stream(self.RETURN_STREAM, Fields(["request", "return"]))
        declarer.declare_stream(self.ID_STREAM, Fields(["request"]))


class JoinResult(Bolt):
    """Joins each request's result (``[id, result]`` from the last bolt) with its return info
    (``[request, return]`` from ``return_component``) and emits ``[result, return-info]``, the
    result as a string (Storm's ``"" + result``), anchored to both (Storm's ``JoinResult``)."""

    def __init__(self, return_component: str) -> None:
        self.return_component = return_component

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        # a half whose other half never comes (its request failed or timed out upstream) is
        # failed and dropped after the message timeout, when its tree has timed out anyway
        # (by the engine's timer, `squall_timers`, whether or not another tuple comes):
        # Storm's JoinResult holds it for ever, a leak of one tuple a failed request
        timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self._timeout = timeout
        self._task = (context.get_this_component_id(), context.get_this_task_id())
        self._returns = TimeCacheMap(timeout, self._expired)
        self._results = TimeCacheMap(timeout, self._expired)

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """Called by the bolt executor once this task is prepared: the halves' expiry on the
        engine's ``clock``, every half message timeout, on the task's thread."""
        self._returns.use_clock(clock.now)
        self._results.use_clock(clock.now)
        return [(self._returns.period, self.expire_due)]

    def expire_due(self) -> None:
        """Fail and drop the halves older than the message timeout (the engine's timer calls
        it, and so does each input)."""
        self._returns.expire_due()
        self._results.expire_due()

    def _expired(self, request_id: Any, tup: Any) -> None:
        half = "return info" if tup.source_component == self.return_component else "result"
        other = "result" if half == "return info" else "return info"
        fail_because(self.collector, tup, *self._task,
                     f"JoinResult: the {other} of request {request_id} did not come within "
                     f"topology.message.timeout.secs ({self._timeout:g} s) of its {half}")

    def execute(self, tup: Any) -> None:
        self.expire_due()
        request_id = tup.get_value(0)
        if tup.get_source_component() == self.return_component:
            self._returns.put(request_id, tup)
        else:
            self._results.put(request_id, tup)
        if request_id in self._returns and request_id in self._results:
            result = self._results.remove(request_id)
            returner = self._returns.remove(request_id)
            log.debug("%s", result.get_value(1))
            self.collector.emit([_java_string(result.get_value(1)), returner.get_value(1)], [result, returner])
            self.collector.ack(result)
            self.collector.ack(returner)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields(["result", "return-info"]))


def _java_string(value: Any) -> str:
    """``"" + value`` as Java writes it for the values a result usually is."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class LinearDRPCInputDeclarer:
    """How a bolt added to a `LinearDRPCTopologyBuilder` takes the previous bolt's tuples
    (Storm's ``LinearDRPCInputDeclarer``): the groupings of `squall.BoltDeclarer` without the
    component (always the previous one), and its configuration setters. Each method returns the
    declarer."""

    def __init__(self, component: _Component) -> None:
        self._component = component

    def _add(self, declare: Callable[[str, BoltDeclarer], Any]) -> LinearDRPCInputDeclarer:
        self._component.declarations.append(declare)
        return self

    def fields_grouping(self, fields: Fields | list[str], stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.fields_grouping(prev, fields, stream))

    def global_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.global_grouping(prev, stream))

    def shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.shuffle_grouping(prev, stream))

    def local_or_shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.local_or_shuffle_grouping(prev, stream))

    def none_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.none_grouping(prev, stream))

    def all_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.all_grouping(prev, stream))

    def direct_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.direct_grouping(prev, stream))

    def partial_key_grouping(self, fields: Fields | list[str], stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.partial_key_grouping(prev, fields, stream))

    def custom_grouping(self, grouping: CustomStreamGrouping, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._add(lambda prev, d: d.custom_grouping(prev, grouping, stream))

    def add_configuration(self, key: str, value: Any) -> LinearDRPCInputDeclarer:
        self._component.conf[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any] | None) -> LinearDRPCInputDeclarer:
        if conf is not None:
            self._component.conf.update(conf)
        return self

    def get_component_configuration(self) -> dict[str, Any]:
        """The configuration set so far (Storm's ``getComponentConfiguration``)."""
        return self._component.conf

    def set_num_tasks(self, n: int) -> LinearDRPCInputDeclarer:
        return self.add_configuration(Config.TOPOLOGY_TASKS, n)

    def set_max_spout_pending(self, n: int) -> LinearDRPCInputDeclarer:
        return self.add_configuration(Config.TOPOLOGY_MAX_SPOUT_PENDING, n)

    def set_max_task_parallelism(self, n: int) -> LinearDRPCInputDeclarer:
        return self.add_configuration(Config.TOPOLOGY_MAX_TASK_PARALLELISM, n)

    def set_debug(self, flag: bool) -> LinearDRPCInputDeclarer:
        return self.add_configuration(Config.TOPOLOGY_DEBUG, flag)


class _Component:
    def __init__(self, bolt: Bolt, parallelism: int) -> None:
        self.bolt = bolt
        self.parallelism = parallelism
        self.conf: dict[str, Any] = {}
        self.declarations: list[Callable[[str, BoltDeclarer], Any]] = []


def _bolt_id(index: int) -> str:
    return f"bolt{index}"


class LinearDRPCTopologyBuilder:
    """Builds a DRPC topology for ``function`` from a chain of bolts (Storm's
    ``LinearDRPCTopologyBuilder``)::

        builder = LinearDRPCTopologyBuilder("reach")
        builder.add_bolt(GetTweeters(), 4)
        builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
        builder.add_bolt(PartialUniquer(), 6).fields_grouping(Fields(["id", "follower"]))
        builder.add_bolt(CountAggregator(), 3).fields_grouping(Fields(["id"]))
        cluster.submit_topology("reach", conf, builder.create_local_topology(drpc))

    Each bolt's tuples start with the request id. The last bolt declares exactly one stream of
    two fields, ``[id, result]``; the result goes back to the caller as a string."""

    def __init__(self, function: str) -> None:
        self.function = function
        self._components: list[_Component] = []

    def add_bolt(self, bolt: Any, parallelism: int | None = None) -> LinearDRPCInputDeclarer:
        """Add the next bolt: an `squall.IBatchBolt` (run by a `BatchBoltExecutor`), a
        `squall.BasicBolt`, or a `squall.Bolt` (deprecated in Storm: it must ack every input and
        anchor its emits to them for the request to be coordinated). ``parallelism`` defaults to 1.
        The bolt takes the previous one's tuples with none grouping unless the returned declarer
        says otherwise."""
        if isinstance(bolt, IBatchBolt):
            bolt = BatchBoltExecutor(bolt)
        elif isinstance(bolt, BasicBolt):
            bolt = BasicBoltExecutor(bolt)
        elif not isinstance(bolt, Bolt):
            raise InvalidTopologyException(
                f"LinearDRPCTopologyBuilder({self.function!r}): add_bolt needs an IBatchBolt, a BasicBolt or a "
                f"Bolt, got {type(bolt).__name__}")
        if parallelism is None:
            parallelism = 1
        component = _Component(bolt, int(parallelism))
        self._components.append(component)
        return LinearDRPCInputDeclarer(component)

    def create_local_topology(self, drpc: LocalDRPC) -> StormTopology:
        """The topology, taking the calls of the `LocalDRPC` ``drpc`` (on a `LocalCluster`)."""
        return self._create_topology(DRPCSpout(self.function, drpc))

    def create_remote_topology(self) -> StormTopology:
        """The topology, taking the calls of the cluster's ``drpc.servers``."""
        return self._create_topology(DRPCSpout(self.function))

    def _create_topology(self, spout: DRPCSpout) -> StormTopology:
        spout_id, prepare_id = "spout", "prepare-request"
        if not self._components:
            raise InvalidTopologyException(f"LinearDRPCTopologyBuilder({self.function!r}) has no bolts: add_bolt one")
        builder = TopologyBuilder()
        builder.set_spout(spout_id, spout)
        builder.set_bolt(prepare_id, PrepareRequest()).none_grouping(spout_id)
        last = len(self._components) - 1
        for i, component in enumerate(self._components):
            source: dict[str, SourceArgs] = {}
            if i == 1:
                source[_bolt_id(i - 1)] = SourceArgs.single()
            elif i >= 2:
                source[_bolt_id(i - 1)] = SourceArgs.all()
            id_spec = None
            if i == last and isinstance(component.bolt, FinishedCallback):
                id_spec = IdStreamSpec.make_detect_spec(prepare_id, PrepareRequest.ID_STREAM)
            declarer = builder.set_bolt(_bolt_id(i), CoordinatedBolt(component.bolt, source, id_spec),
                                        component.parallelism)
            if component.conf:
                declarer.add_configurations(component.conf)
            if id_spec is not None:
                declarer.fields_grouping(id_spec.id.component_id, Fields(["request"]), PrepareRequest.ID_STREAM)
            if i == 0 and not component.declarations:
                declarer.none_grouping(prepare_id, PrepareRequest.ARGS_STREAM)
            else:
                prev = prepare_id if i == 0 else _bolt_id(i - 1)
                for declare in component.declarations:
                    declare(prev, declarer)
            if i > 0:
                declarer.direct_grouping(_bolt_id(i - 1), COORDINATED_STREAM_ID)
        last_bolt = self._components[last].bolt
        getter = OutputFieldsDeclarer(_bolt_id(last))
        last_bolt.declare_output_fields(getter)
        if len(getter.streams) != 1:
            raise InvalidTopologyException(
                f"Must declare exactly one stream from last bolt in LinearDRPCTopology (bolt [{_bolt_id(last)}], "
                f"{type(last_bolt).__name__}, declares {sorted(getter.streams)})")
        output_stream, info = next(iter(getter.streams.items()))
        fields = list(info.fields)
        if len(fields) != 2:
            raise InvalidTopologyException(
                f"Output stream of last component in LinearDRPCTopology must contain exactly two fields. The first "
                f"should be the request id, and the second should be the result. (bolt [{_bolt_id(last)}] stream "
                f"[{output_stream}] declares {fields})")
        n = len(self._components)
        builder.set_bolt(_bolt_id(n), JoinResult(prepare_id)) \
            .fields_grouping(_bolt_id(n - 1), Fields([fields[0]]), output_stream) \
            .fields_grouping(prepare_id, Fields(["request"]), PrepareRequest.RETURN_STREAM)
        builder.set_bolt(_bolt_id(n + 1), ReturnResults()).none_grouping(_bolt_id(n))
        return builder.create_topology()
