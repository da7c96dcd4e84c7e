"""Reading a Flux file into the model (Storm's ``FluxParser``): filtering first (on the text,
line for line), then YAML composed to nodes, so that every definition keeps its line; unknown
keys are refused as Flux's bean loading refuses them. ``includes`` are read here too, one
level deep as in Flux (an included file's own includes are ignored)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .model import (
    GROUPING_TYPES,
    BeanDef,
    ConfigMethodDef,
    FluxError,
    GroupingDef,
    IncludeDef,
    ObjectDef,
    PropertyDef,
    Ref,
    RefList,
    StreamDef,
    TopologyDef,
    TopologySourceDef,
    VertexDef,
    Where,
)
from .substitution import substitute

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Filters:
    """What ``--filter FILE`` and ``-e`` give: the properties (None: no ``--filter``) and the
    environment (None: no ``-e``)."""

    properties: Mapping[str, str] | None = None
    env: Mapping[str, str] | None = None


def parse_file(path: Path, filters: Filters, *, includes: bool = True) -> TopologyDef:
    """The topology ``path`` defines, with its includes merged in (``includes=False``: not)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FluxError(str(path), f"cannot read the Flux file: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:  # Flux's reader would put U+FFFD into a value without a word
        line = data.count(b"\n", 0, e.start) + 1
        raise FluxError(Where(path.name, line, ""), f"not UTF-8: byte 0x{data[e.start]:02x} "
                        f"(save the file as UTF-8)") from e
    topology = dataclasses.replace(parse_text(text, path.name, filters), directory=str(path.parent))
    if not includes:
        return topology
    for include in topology.includes:
        found = find_include(include, path.parent)
        if found.resolve() == path.resolve():
            # merged into itself, a file's streams were all subscribed twice, and its
            # includes (itself) only warned of as an included file's ignored includes
            raise FluxError(include.where, f"{include.file!r} is this file itself: an include names "
                                           f"another Flux file, whose definitions are merged into this one")
        included = parse_file(found, filters, includes=False)
        if included.includes:
            log.warning("%s: the includes of %s (%s) are ignored: Flux reads includes one level deep",
                        include.where, include.file, ", ".join(i.file for i in included.includes))
        topology = merge(topology, included, include.override)
    return topology


def find_include(include: IncludeDef, here: Path) -> Path:
    """The included file: a resource is looked for under each ``sys.path`` entry (Flux's
    classpath); a file relative to the including file's directory, else the current directory."""
    if include.resource:
        found = find_resource(include.file)
        if found is None:
            raise FluxError(include.where, f"no resource {include.file!r} on sys.path")
        return found
    candidates = [Path(include.file)] if Path(include.file).is_absolute() else [here / include.file,
                                                                                  Path(include.file)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FluxError(include.where, f"file not found: {include.file!r} (looked in {here} and the current directory)")


def find_resource(name: str) -> Path | None:
    """``name`` (``/`` separated, leading ``/`` ignored) under the first ``sys.path`` entry that has it."""
    relative = name.lstrip("/")
    for entry in sys.path:
        candidate = Path(entry or ".") / relative
        if candidate.is_file():
            return candidate
    return None


def merge(topology: TopologyDef, included: TopologyDef, override: bool) -> TopologyDef:
    """Flux's include rules: the included name, config keys, components, spouts and bolts are
    taken where this file has none of that id (all of them with ``override``); streams are added."""
    def by_id(mine: dict, theirs: dict) -> dict:
        out = dict(mine)
        for key, value in theirs.items():
            if key not in out or override:
                out[key] = value  # a replaced id keeps its place, as in a LinkedHashMap
        return out

    name, name_where = topology.name, topology.name_where
    if included.name is not None and (name is None or override):
        name, name_where = included.name, included.name_where
    return dataclasses.replace(
        topology, name=name, name_where=name_where,
        config=by_id(topology.config, included.config),
        config_where=by_id(topology.config_where, included.config_where),
        components=by_id(topology.components, included.components),
        spouts=by_id(topology.spouts, included.spouts), bolts=by_id(topology.bolts, included.bolts),
        streams=topology.streams + included.streams)


def parse_text(text: str, file: str, filters: Filters) -> TopologyDef:
    """One Flux file's text (named ``file`` in errors), filtered, without its includes."""
    text = substitute(text, file, filters.properties, filters.env,
                      key_at=lambda line, column: key_at(text, line, column))
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise FluxError(Where(file, line, ""), f"not valid YAML: {e.problem or e}") from e
    reader = _Reader(file)
    if root is None:
        raise FluxError(Where(file, 1, ""), "the file is empty: a Flux file needs spouts, bolts and streams, "
                                             "or a topologySource")
    return reader.topology(root)


def key_at(text: str, line: int, column: int | None = None) -> str:
    """The path of the key whose value starts on ``line`` (1-based) at or before ``column``
    (0-based; the last one that starts on the line if None), or "" (not YAML). Of several values
    on one line (a flow list ``[a, "${b}"]``) it is the one the column is in. The ``${...}``
    references are masked first, keeping their length: one in a flow mapping is no YAML until
    replaced."""
    masked = re.sub(r"\$\{[^}]*\}", lambda m: "_" * len(m.group(0)), text)
    try:
        root = yaml.compose(masked, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return ""
    best, best_column = "", -1
    for path, node in _walk(root, ""):
        start = node.start_mark
        if start.line + 1 == line and path and (column is None or start.column <= column) \
                and start.column >= best_column:
            best, best_column = path, start.column
    return best


def _walk(node: Node | None, path: str) -> Iterator[tuple[str, Node]]:
    if node is None:
        return
    yield path, node
    if isinstance(node, MappingNode):
        for k, v in node.value:
            yield from _walk(v, f"{path}.{k.value}" if path else str(k.value))
    elif isinstance(node, SequenceNode):
        for i, v in enumerate(node.value):
            yield from _walk(v, f"{path}[{i}]")


_TOP = ("name", "config", "components", "spouts", "bolts", "streams", "includes", "topologySource", "workerHooks")
_OBJECT = ("className", "constructorArgs", "factory", "factoryArgs", "properties", "configMethods")
_BEAN = (*_OBJECT, "id")
_VERTEX = (*_BEAN, "parallelism", "numTasks", "config", "onHeapMemoryLoad", "offHeapMemoryLoad", "cpuLoad")
_MERGE = "tag:yaml.org,2002:merge"
_RESOURCES = ("onHeapMemoryLoad", "offHeapMemoryLoad", "cpuLoad")


class _Reader:
    """Turns the composed nodes of one file into model records."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._constructor = SafeConstructor()

    def where(self, node: Node, key: str) -> Where:
        return Where(self.file, node.start_mark.line + 1, key)

    def value(self, node: Node, key: str = "") -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as e:  # an unknown tag, a bad merge: named here, not deep in PyYAML
            raise FluxError(self.where(node, key), f"cannot read the value: {getattr(e, 'problem', None) or e}") from e

    def entries(self, node: MappingNode, key: str) -> list[tuple[Node, Node]]:
        """``node``'s key and value nodes with YAML's merge keys (``<<: *anchor``) resolved as
        SnakeYAML resolves them for Flux: a key written in the mapping wins over a merged one,
        an earlier merged mapping over a later one; a key written twice is an error."""
        if not any(k.tag == _MERGE for k, _v in node.value):
            flat = node.value
            own = {id(k) for k, _v in flat}
        else:  # PyYAML flattens in place (anchors too): a copy leaves each node as written
            node = copy.deepcopy(node)
            own = {id(k) for k, _v in node.value if k.tag != _MERGE}
            try:
                self._constructor.flatten_mapping(node)
            except yaml.YAMLError as e:
                raise FluxError(self.where(node, key), f"cannot merge: {getattr(e, 'problem', None) or e}") from e
            flat = node.value  # the merged entries first (the earliest mapping last), then its own
        chosen: dict[Any, tuple[Node, Node]] = {}
        for k, v in flat:
            name = self.value(k, key) if isinstance(k, ScalarNode) else id(k)
            if name in chosen and id(k) in own and id(chosen[name][0]) in own:
                raise FluxError(self.where(k, f"{key}.{name}" if key else str(name)), "given twice")
            chosen[name] = (k, v)
        return list(chosen.values())

    def mapping(self, node: Node, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
                ) -> dict[str, Node]:
        """``node``'s entries, checked: a mapping, only ``allowed`` keys, every ``required`` one."""
        if not isinstance(node, MappingNode):
            raise FluxError(self.where(node, key), f"expected a mapping, got {_kind(node)}")
        out: dict[str, Node] = {}
        for k, v in self.entries(node, key):
            name = k.value if isinstance(k, ScalarNode) else None
            if name not in allowed:
                raise FluxError(self.where(k, f"{key}.{name}" if key else str(name)),
                                f"unknown key (expected one of: {', '.join(allowed)})")
            out[name] = v
        for name in required:
            if name not in out:
                raise FluxError(self.where(node, key), f"missing required key {name!r}")
        return out

    def items(self, node: Node | None, key: str) -> list[tuple[str, Node]]:
        """A sequence's items with their paths (a null value: none)."""
        if node is None or _is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            raise FluxError(self.where(node, key), f"expected a list, got {_kind(node)}")
        return [(f"{key}[{i}]", item) for i, item in enumerate(node.value)]

    def string(self, node: Node, key: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value:
            raise FluxError(self.where(node, key), f"expected a non-empty string, got {value!r}")
        return value

    def integer(self, node: Node, key: str, minimum: int) -> int:
        value = self.value(node)
        if type(value) is not int or value < minimum:
            raise FluxError(self.where(node, key), f"expected an integer of at least {minimum}, got {value!r}")
        return value

    def boolean(self, node: Node, key: str) -> bool:
        value = self.value(node)
        if not isinstance(value, bool):
            raise FluxError(self.where(node, key), f"expected true or false, got {value!r}")
        return value

    def string_map(self, node: Node, key: str) -> tuple[dict[str, Any], dict[str, Where]]:
        """A ``config`` mapping: its values and where each key is."""
        if _is_null(node):
            return {}, {}
        if not isinstance(node, MappingNode):
            raise FluxError(self.where(node, key), f"expected a mapping, got {_kind(node)}")
        values: dict[str, Any] = {}
        wheres: dict[str, Where] = {}
        for k, v in self.entries(node, key):
            name = self.value(k, key)
            if not isinstance(name, str):
                raise FluxError(self.where(k, key), f"configuration keys are strings, got {name!r}")
            values[name] = self.value(v, f"{key}.{name}")
            wheres[name] = self.where(k, f"{key}.{name}")
        return values, wheres

    # --- the sections ---------------------------------------------------------------------------
    def topology(self, root: Node) -> TopologyDef:
        top = self.mapping(root, "", _TOP)
        key_lines = {k.value: k for k, _ in root.value} if isinstance(root, MappingNode) else {}
        if "workerHooks" in top and not _is_null(top["workerHooks"]):
            raise FluxError(self.where(key_lines["workerHooks"], "workerHooks"),
                            "worker hooks are not supported by squall (it has no IWorkerHook)")
        name = name_where = None
        if "name" in top:
            name = self.string(top["name"], "name")
            name_where = self.where(top["name"], "name")
        config, config_where = self.string_map(top["config"], "config") if "config" in top else ({}, {})
        components = self.keyed([self.bean(n, k) for k, n in self.items(top.get("components"), "components")])
        spouts = self.keyed([self.vertex(n, k) for k, n in self.items(top.get("spouts"), "spouts")])
        bolts = self.keyed([self.vertex(n, k) for k, n in self.items(top.get("bolts"), "bolts")])
        streams = tuple(self.stream(n, k) for k, n in self.items(top.get("streams"), "streams"))
        includes = tuple(self.include(n, k) for k, n in self.items(top.get("includes"), "includes"))
        source = None
        if "topologySource" in top:
            source = self.topology_source(top["topologySource"], "topologySource")
            wired = next((k for k in ("spouts", "bolts", "streams") if not _is_null(top.get(k))), None)
            if wired is not None:
                raise FluxError(self.where(key_lines[wired], wired),
                                "a topologySource and spouts, bolts or streams cannot be in the same file")
        return TopologyDef(file=self.file, name=name, name_where=name_where, config=config,
                           config_where=config_where, components=components, spouts=spouts, bolts=bolts,
                           streams=streams, includes=includes, topology_source=source)

    def keyed(self, beans: list[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for bean in beans:
            if bean.id in out:
                raise FluxError(bean.where, f"id {bean.id!r} is declared twice in this section")
            out[bean.id] = bean
        return out

    def object_fields(self, entries: dict[str, Node], node: Node, key: str) -> dict[str, Any]:
        """The `ObjectDef` fields of a mapping's entries."""
        fields: dict[str, Any] = {
            "class_name": self.string(entries["className"], f"{key}.className"),
            "where": self.where(entries["className"], f"{key}.className"),
        }
        if "factory" in entries:
            fields["factory"] = self.string(entries["factory"], f"{key}.factory")
        if "factoryArgs" in entries:
            fields["factory_args"] = self.args(entries["factoryArgs"], f"{key}.factoryArgs")
            fields["args_where"] = self.where(entries["factoryArgs"], f"{key}.factoryArgs")
        if "constructorArgs" in entries:
            fields["constructor_args"] = self.args(entries["constructorArgs"], f"{key}.constructorArgs")
            fields["args_where"] = self.where(entries["constructorArgs"], f"{key}.constructorArgs")
        if "properties" in entries:
            fields["properties"] = tuple(self.property(n, k)
                                         for k, n in self.items(entries["properties"], f"{key}.properties"))
        if "configMethods" in entries:
            fields["config_methods"] = tuple(
                self.config_method(n, k) for k, n in self.items(entries["configMethods"], f"{key}.configMethods"))
        return fields

    def object(self, node: Node, key: str, allowed: tuple[str, ...] = _OBJECT) -> ObjectDef:
        return ObjectDef(**self.object_fields(self.mapping(node, key, allowed, ("className",)), node, key))

    @staticmethod
    def _id_of(node: Node) -> str | None:
        """The ``id`` a component, spout or bolt entry gives, if it gives one as a string."""
        if isinstance(node, MappingNode):
            for k, v in node.value:
                if isinstance(k, ScalarNode) and k.value == "id" and isinstance(v, ScalarNode) and v.value:
                    return str(v.value)
        return None

    @contextlib.contextmanager
    def _of_entry(self, node: Node) -> Iterator[None]:
        """A mistake in the entry ``node`` named with its id too (`'count': unknown key`), as
        the mistakes found when its object is made are: `bolts[3].parallelizm` alone made the
        user count the entries of a long file to know which bolt it was."""
        try:
            yield
        except FluxError as e:
            ident = self._id_of(node)
            if ident is None or e.message.startswith(f"{ident!r}: "):
                raise
            raise FluxError(e.where, f"{ident!r}: {e.message}") from e

    def bean(self, node: Node, key: str) -> BeanDef:
        with self._of_entry(node):
            entries = self.mapping(node, key, _BEAN, ("id", "className"))
            return BeanDef(id=self.string(entries["id"], f"{key}.id"), **self.object_fields(entries, node, key))

    def vertex(self, node: Node, key: str) -> VertexDef:
        with self._of_entry(node):
            return self._vertex(node, key)

    def _vertex(self, node: Node, key: str) -> VertexDef:
        entries = self.mapping(node, key, _VERTEX, ("id", "className"))
        extra: dict[str, Any] = {}
        if "parallelism" in entries:
            extra["parallelism"] = self.integer(entries["parallelism"], f"{key}.parallelism", 1)
        if "numTasks" in entries:
            extra["num_tasks"] = self.integer(entries["numTasks"], f"{key}.numTasks", 1)
        if "config" in entries:
            extra["config"], extra["config_where"] = self.string_map(entries["config"], f"{key}.config")
        extra["resources"] = {k: self.value(entries[k]) for k in _RESOURCES if k in entries}
        return VertexDef(id=self.string(entries["id"], f"{key}.id"), **self.object_fields(entries, node, key),
                         **extra)

    def topology_source(self, node: Node, key: str) -> TopologySourceDef:
        entries = self.mapping(node, key, (*_OBJECT, "methodName"), ("className",))
        fields = self.object_fields(entries, node, key)
        if "methodName" in entries:
            fields["method_name"] = self.string(entries["methodName"], f"{key}.methodName")
        return TopologySourceDef(**fields)

    def args(self, node: Node, key: str) -> tuple[Any, ...]:
        """An argument list: ``{ref: ID}`` and ``{reflist: [IDs]}`` items become `Ref`/`RefList`."""
        out: list[Any] = []
        for path, item in self.items(node, key):
            if isinstance(item, MappingNode) and len(item.value) == 1 and item.value[0][0].value in ("ref", "reflist"):
                out.append(self.reference(item, path))
            else:
                out.append(self.value(item))
        return tuple(out)

    def reference(self, node: MappingNode, key: str) -> Ref | RefList:
        k, v = node.value[0]
        where = self.where(v, f"{key}.{k.value}")
        if k.value == "ref":
            return Ref(self.string(v, where.key), where)
        ids = self.value(v)
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise FluxError(where, f"expected a list of component ids, got {ids!r}")
        return RefList(tuple(ids), where)

    def property(self, node: Node, key: str) -> PropertyDef:
        entries = self.mapping(node, key, ("name", "value", "ref"), ("name",))
        name = self.string(entries["name"], f"{key}.name")
        where = self.where(entries["name"], f"{key}.name")
        if ("value" in entries) == ("ref" in entries):
            raise FluxError(self.where(node, key), f"property {name!r} needs a value or a ref (one of them)")
        if "ref" in entries:
            value: Any = Ref(self.string(entries["ref"], f"{key}.ref"), self.where(entries["ref"], f"{key}.ref"))
        else:
            value = self.value(entries["value"])
        return PropertyDef(name, value, where)

    def config_method(self, node: Node, key: str) -> ConfigMethodDef:
        entries = self.mapping(node, key, ("name", "args"), ("name",))
        args = self.args(entries["args"], f"{key}.args") if "args" in entries else ()
        return ConfigMethodDef(self.string(entries["name"], f"{key}.name"), args,
                               self.where(entries["name"], f"{key}.name"))

    def stream(self, node: Node, key: str) -> StreamDef:
        entries = self.mapping(node, key, ("name", "from", "to", "grouping"), ("from", "to", "grouping"))
        name = self.value(entries["name"]) if "name" in entries else None
        return StreamDef(None if name is None else str(name), self.string(entries["from"], f"{key}.from"),
                         self.string(entries["to"], f"{key}.to"), self.grouping(entries["grouping"], f"{key}.grouping"),
                         self.where(node, key), self.where(entries["from"], f"{key}.from"),
                         self.where(entries["to"], f"{key}.to"))

    def grouping(self, node: Node, key: str) -> GroupingDef:
        entries = self.mapping(node, key, ("type", "streamId", "args", "customClass"), ("type",))
        where = self.where(entries["type"], f"{key}.type")
        kind = self.value(entries["type"])
        if kind not in GROUPING_TYPES:
            raise FluxError(where, f"unknown grouping type {kind!r} (expected one of: {', '.join(GROUPING_TYPES)})")
        stream_id = self.string(entries["streamId"], f"{key}.streamId") if "streamId" in entries else None
        args: tuple[str, ...] = ()
        if "args" in entries:
            value = self.value(entries["args"])
            if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
                raise FluxError(self.where(entries["args"], f"{key}.args"),
                                f"expected a list of field names, got {value!r}")
            args = tuple(value)
        if kind == "FIELDS" and not args:
            raise FluxError(where, "a FIELDS grouping needs args: the list of fields to group by")
        custom = None
        if "customClass" in entries:
            custom = self.object(entries["customClass"], f"{key}.customClass")
        if kind == "CUSTOM" and custom is None:
            raise FluxError(where, "a CUSTOM grouping needs customClass (className, constructorArgs, ...)")
        return GroupingDef(kind, where, stream_id, args, custom)

    def include(self, node: Node, key: str) -> IncludeDef:
        entries = self.mapping(node, key, ("file", "resource", "override"), ("file",))
        return IncludeDef(self.string(entries["file"], f"{key}.file"),
                          self.boolean(entries["resource"], f"{key}.resource") if "resource" in entries else False,
                          self.boolean(entries["override"], f"{key}.override") if "override" in entries else False,
                          self.where(entries["file"], f"{key}.file"))


def _is_null(node: Node | None) -> bool:
    return node is None or (isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null")


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return f"{node.value!r}" if node.value else "nothing"

