"""``topology.metrics.consumer.register``: its entries checked at submit, and each made a bolt
of the system topology (Storm's ``metrics-consumer-bolt-specs``).

Every component then declares stream `METRICS_STREAM` (``task-info``, ``data-points``), and each
consumer bolt ``__metrics_<class>`` subscribes to it, shuffled, on every component. Without a
consumer nothing changes: no stream, no bolt, and the executors read no metric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .._collectors import StreamInfo
from .._config import Config
from .._errors import InvalidTopologyException
from .._fields import Fields, GlobalStreamId
from .._grouping import SHUFFLE, Grouping
from .._topology import ComponentSpec, StormTopology

CONSUMER_KEY = Config.TOPOLOGY_METRICS_CONSUMER_REGISTER
METRICS_STREAM = "__metrics"
METRICS_FIELDS = ("task-info", "data-points")
CONSUMER_PREFIX = "__metrics_"  # Storm 2's (1.x had "__metrics", no underscore)
# Storm's own consumer, as Storm's docs and storm.yaml examples name it: squall's twin
STORM_CONSUMERS = {"org.apache.storm.metric.LoggingMetricsConsumer": "squall.metric:LoggingMetricsConsumer",
                   "org.apache.storm.metrics.LoggingMetricsConsumer": "squall.metric:LoggingMetricsConsumer"}
_KNOWN = {"class", "parallelism.hint", "argument", "whitelist", "blacklist", "max.retain.metric.tuples",
          "expandMapType", "metricNameSeparator"}


@dataclass
class ConsumerSpec:
    """One checked entry of ``topology.metrics.consumer.register``."""

    class_name: str
    parallelism: int = 1
    argument: Any = None
    whitelist: list[str] = field(default_factory=list)
    blacklist: list[str] = field(default_factory=list)
    max_retain: int = 100
    expand_map_type: bool = False
    separator: str = "."


def consumer_specs(conf: dict[str, Any]) -> list[ConsumerSpec]:
    """The consumers ``conf`` registers, checked.

    Raises:
        InvalidTopologyException: naming the key, the entry's index and the field at fault.
    """
    entries = conf.get(CONSUMER_KEY)
    if entries is None:
        return []
    if not isinstance(entries, (list, tuple)):
        raise InvalidTopologyException(f"{CONSUMER_KEY} must be a list of maps, got {type(entries).__name__}")
    return [_spec(i, e) for i, e in enumerate(entries)]


def _spec(i: int, entry: Any) -> ConsumerSpec:
    where = f"{CONSUMER_KEY} entry {i}"
    if not isinstance(entry, dict):
        raise InvalidTopologyException(f"{where} must be a map with a \"class\", got {type(entry).__name__}")
    unknown = sorted(set(map(str, entry)) - _KNOWN)
    if unknown:
        raise InvalidTopologyException(f"{where}: unknown field(s) {unknown}; known: {sorted(_KNOWN)}")
    name = entry.get("class")
    name = STORM_CONSUMERS.get(name, name) if isinstance(name, str) else name
    if not isinstance(name, str) or not re.fullmatch(r"[\w.]+[:.][\w.]+", name):
        raise InvalidTopologyException(f"{where}: \"class\" must name a class as \"module:Class\", got {name!r}")
    if name.startswith(("org.apache.", "com.", "java.")):  # a worker would fail on it, and again on restart
        raise InvalidTopologyException(f"{where}: \"class\" {name!r} is a Java class; squall's consumers are Python "
                                       f"classes (\"module:Class\"; Storm's LoggingMetricsConsumer is "
                                       f"squall.metric:LoggingMetricsConsumer)")
    par = entry.get("parallelism.hint", 1)
    if type(par) is not int or par < 1:
        raise InvalidTopologyException(f"{where}: \"parallelism.hint\" must be a positive integer, got {par!r}")
    retain = entry.get("max.retain.metric.tuples", 100)
    if type(retain) is not int:
        raise InvalidTopologyException(
            f"{where}: \"max.retain.metric.tuples\" must be an integer (<= 0: unbounded), got {retain!r}")
    white, black = entry.get("whitelist"), entry.get("blacklist")
    if white is not None and black is not None:
        raise InvalidTopologyException(
            f"{where}: give \"whitelist\" or \"blacklist\", not both (Storm: \"You have to specify either "
            f"includes or excludes, or none.\")")
    lists = {}
    for key, value in (("whitelist", white), ("blacklist", black)):
        if value is None:
            continue
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
            raise InvalidTopologyException(f"{where}: \"{key}\" must be a list of regular expressions, got {value!r}")
        for p in value:
            try:
                re.compile(p)
            except re.error as e:
                raise InvalidTopologyException(f"{where}: \"{key}\" pattern {p!r} is not a regular expression: {e}") from e
        lists[key] = list(value)
    sep = entry.get("metricNameSeparator", ".")
    if not isinstance(sep, str):
        raise InvalidTopologyException(f"{where}: \"metricNameSeparator\" must be a string, got {sep!r}")
    expand = entry.get("expandMapType")
    if expand is not None and type(expand) is not bool:  # "false" is true to bool(); Storm refuses it too
        raise InvalidTopologyException(f"{where}: \"expandMapType\" must be true or false, got {expand!r}")
    return ConsumerSpec(name, par, entry.get("argument"), lists.get("whitelist", []), lists.get("blacklist", []),
                        retain, bool(expand), sep)


def consumer_ids(specs: list[ConsumerSpec]) -> list[str]:
    """Each consumer's component id: ``__metrics_<class>``, then ``#2``, ``#3`` for repeats."""
    seen: dict[str, int] = {}
    ids = []
    for s in specs:
        n = seen[s.class_name] = seen.get(s.class_name, 0) + 1
        ids.append(f"{CONSUMER_PREFIX}{s.class_name}" + (f"#{n}" if n > 1 else ""))
    return ids


def with_metrics_consumers(topology: StormTopology, conf: dict[str, Any]) -> StormTopology:
    """``topology`` with Storm's metrics wiring when ``conf`` registers consumers (else itself):
    every component declares `METRICS_STREAM` and each consumer is a bolt subscribed to it."""
    from ._bolt import MetricsConsumerBolt  # the bolt needs the API; the API need not load it

    specs = consumer_specs(conf)
    if not specs:
        return topology
    fields = Fields(list(METRICS_FIELDS))
    components: dict[str, ComponentSpec] = {}
    for cid, spec in topology.components.items():
        c = spec.copy()
        c.streams[METRICS_STREAM] = StreamInfo(fields)
        components[cid] = c
    sources = sorted(components)
    for cid, s in zip(consumer_ids(specs), specs):
        bolt = ComponentSpec(cid, MetricsConsumerBolt(s), "bolt", s.parallelism)
        bolt.conf[Config.TOPOLOGY_TASKS] = s.parallelism
        bolt.inputs = {GlobalStreamId(src, METRICS_STREAM): Grouping(SHUFFLE) for src in sources}
        components[cid] = bolt
    return StormTopology(components)
