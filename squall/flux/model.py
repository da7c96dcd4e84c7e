"""Flux's model (Storm's ``org.apache.storm.flux.model``) as small records, each with the place
in the YAML file it was read from, so that the builder's errors can name file, line and key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._errors import SquallError
from .._redact import redact_text


@dataclass(frozen=True)
class Where:
    """A place in a Flux file: the file's name, the line (1-based) and the key's path in it
    (``bolts[1].className``)."""

    file: str
    line: int
    key: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}" if self.key else f"{self.file}:{self.line}"


class FluxError(SquallError):
    """A mistake in a Flux file (or its include, properties file or classes), naming where.
    Credentials in it are masked: it shows the arguments a call could not take and what a
    constructor raised, values a file often takes from ``${ENV-...}`` (a Redis URL with its
    password), and it goes to stderr and CI logs."""

    def __init__(self, where: Where | str, message: str) -> None:
        super().__init__(redact_text(f"{where}: {message}"))
        self.where = where
        self.message = message  # what is wrong, without where: an entry's id is put before it


@dataclass(frozen=True)
class Ref:
    """``{ref: ID}``: the component ``ID`` declared above."""

    id: str
    where: Where


@dataclass(frozen=True)
class RefList:
    """``{reflist: [ID, ...]}``: a list of the components ``ID, ...``."""

    ids: tuple[str, ...]
    where: Where


@dataclass(frozen=True)
class PropertyDef:
    """``properties: - name: N, value: V`` (or ``ref: ID``): set after construction."""

    name: str
    value: Any
    where: Where


@dataclass(frozen=True)
class ConfigMethodDef:
    """``configMethods: - name: M, args: [...]``: a method called after the properties."""

    name: str
    args: tuple[Any, ...]
    where: Where


@dataclass(frozen=True, kw_only=True)
class ObjectDef:
    """How to make an object: ``className`` with ``constructorArgs``, or its ``factory`` with
    ``factoryArgs``; then ``properties`` and ``configMethods``. Arguments may be `Ref`/`RefList`."""

    class_name: str
    where: Where
    constructor_args: tuple[Any, ...] = ()
    args_where: Where | None = None  # of constructorArgs, else of factoryArgs
    factory: str | None = None
    factory_args: tuple[Any, ...] = ()
    properties: tuple[PropertyDef, ...] = ()
    config_methods: tuple[ConfigMethodDef, ...] = ()


@dataclass(frozen=True, kw_only=True)
class BeanDef(ObjectDef):
    """A named object: a ``components`` entry."""

    id: str


@dataclass(frozen=True, kw_only=True)
class VertexDef(BeanDef):
    """A spout or bolt: a named object with its parallelism, task count and own configuration.
    ``cpuLoad`` and the memory loads (Storm's resource-aware scheduler) are read and kept."""

    parallelism: int = 1
    num_tasks: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_where: dict[str, Where] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class TopologySourceDef(ObjectDef):
    """``topologySource``: an object whose ``methodName`` (default ``getTopology``) returns the
    topology, given the topology's configuration."""

    method_name: str = "getTopology"


GROUPING_TYPES = ("ALL", "CUSTOM", "DIRECT", "SHUFFLE", "LOCAL_OR_SHUFFLE", "FIELDS", "GLOBAL", "NONE")


@dataclass(frozen=True)
class GroupingDef:
    """A stream's grouping: one of `GROUPING_TYPES`, the stream id (None: the default stream),
    the fields of ``FIELDS`` and the object of ``CUSTOM``."""

    type: str
    where: Where
    stream_id: str | None = None
    args: tuple[str, ...] = ()
    custom_class: ObjectDef | None = None


@dataclass(frozen=True)
class StreamDef:
    """A ``streams`` entry: ``from`` one component ``to`` a bolt, with a grouping; ``name`` is
    shown, not used (as in Flux)."""

    name: str | None
    source: str
    target: str
    grouping: GroupingDef
    where: Where
    source_where: Where
    target_where: Where


@dataclass(frozen=True)
class IncludeDef:
    """An ``includes`` entry: another Flux ``file`` (a resource found on ``sys.path`` when
    ``resource``), whose definitions replace this file's when ``override``."""

    file: str
    resource: bool
    override: bool
    where: Where


@dataclass(frozen=True)
class TopologyDef:
    """A whole Flux file: Storm's ``TopologyDef``. ``spouts``, ``bolts`` and ``components`` are
    keyed by id in the order they were declared (an include that overrides one keeps its place)."""

    file: str
    directory: str = "."  # the file's directory: where relative paths in it start (a shell component's resources)
    name: str | None = None
    name_where: Where | None = None
    config: dict[str, Any] = field(default_factory=dict)
    config_where: dict[str, Where] = field(default_factory=dict)
    components: dict[str, BeanDef] = field(default_factory=dict)
    spouts: dict[str, VertexDef] = field(default_factory=dict)
    bolts: dict[str, VertexDef] = field(default_factory=dict)
    streams: tuple[StreamDef, ...] = ()
    includes: tuple[IncludeDef, ...] = ()
    topology_source: TopologySourceDef | None = None

    @property
    def is_dsl(self) -> bool:
        """Whether the topology is wired here (spouts, bolts, streams), not by a ``topologySource``."""
        return self.topology_source is None
