"""Making the topology a Flux file describes (Storm's ``FluxBuilder``): its configuration, its
components in order (each may name those above it with ``ref``/``reflist``), then either the
spouts, bolts and streams, or the ``topologySource``'s topology. ``className`` is a Python
``module.Class``; Flux's Java wrapper classes name squall's equivalents (`JAVA_CLASSES`).
Every error names the file, line and key of the definition at fault."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._config import validate
from .._errors import InvalidTopologyException
from .._grouping import CustomStreamGrouping
from .._system import DEFAULT_STREAM
from .._topology import BoltDeclarer, StormTopology, TopologyBuilder, _Declarer
from ..multilang.resources import pack
from .model import BeanDef, FluxError, GroupingDef, ObjectDef, Ref, RefList, StreamDef, TopologyDef, VertexDef, Where

log = logging.getLogger(__name__)

# Flux's and Storm's Java class names a Flux file may use, and the squall classes they name.
JAVA_CLASSES = {
    "org.apache.storm.flux.wrappers.bolts.FluxShellBolt": "squall.flux.shell.FluxShellBolt",
    "org.apache.storm.flux.wrappers.spouts.FluxShellSpout": "squall.flux.shell.FluxShellSpout",
    "org.apache.storm.task.ShellBolt": "squall.flux.shell.FluxShellBolt",
    "org.apache.storm.spout.ShellSpout": "squall.flux.shell.FluxShellSpout",
    "org.apache.storm.flux.wrappers.bolts.LogInfoBolt": "squall.flux.wrappers.LogInfoBolt",
    "org.apache.storm.topology.base.BaseWindowedBolt$Count": "squall.windowing.Count",
    "org.apache.storm.topology.base.BaseWindowedBolt$Duration": "squall.windowing.Duration",
    "org.apache.storm.bolt.JoinBolt": "squall.windowing.JoinBolt",
    # storm-client's test components, which Storm's own flux-examples wire (simple_wordcount.yaml,
    # multilang.yaml, simple_windowing.yaml ...): squall.testing has each with Storm's behaviour
    **{f"org.apache.storm.testing.{name}": f"squall.testing.{name}"
       for name in ("TestWordSpout", "TestWordCounter", "TestGlobalCount", "TestAggregatesCounter",
                    "TestPlannerSpout", "TestPlannerBolt", "TestConfBolt", "AckEveryOtherBolt", "NGrouping")},
    # storm-kafka-client: its Builder's setters keep Storm's meaning over squall's KafkaSpoutConfig, and
    # a setter squall cannot honour is refused (squall.external.kafka_builder); flux-examples' translator
    "org.apache.storm.kafka.spout.KafkaSpout": "squall.external.kafka.KafkaSpout",
    **{f"org.apache.storm.kafka.spout.{name}": f"squall.external.kafka_builder.{name}"
       for name in ("KafkaSpoutConfig", "KafkaSpoutConfig$Builder", "KafkaSpoutRetryExponentialBackoff",
                    "KafkaSpoutRetryExponentialBackoff$TimeInterval")},
    "org.apache.storm.flux.examples.OnlyValueRecordTranslator": "squall.external.kafka_builder.OnlyValueRecordTranslator",
}

# What runs a streamparse (pystorm) Spout or Bolt that a className names, in process, as `squall
# sparse` runs it (Storm's Flux needed a FluxShellBolt running `streamparse_run module.Class`).
# Named, as JAVA_CLASSES' targets are, and found when a file needs it: squall.sparse is a sibling.
_STREAMPARSE_HOST = "squall.sparse.component.in_process"

# A streamparse project keeps its modules in src/ (Storm's streamparse_run runs in the jar's copy
# of it). A src/ directory beside a Flux file is on sys.path while the file's classes are found,
# and shipped with each streamparse class that comes from it, so that a module it imports in
# initialize() or later is found in every worker, as `squall sparse run` ships it
# (`squall.sparse.component.importable`); before, such a class was "no module 'bolts' on sys.path"
PROJECT_SRC = "src"
_shipped_src: ContextVar[dict[str, Any] | None] = ContextVar("squall_flux_shipped_src", default=None)


@dataclass(frozen=True)
class FluxTopology:
    """What a Flux file gives: the topology's name (None: the file has none), configuration
    (the file's ``config``) and topology, and the definition it was built from."""

    name: str | None
    conf: dict[str, Any]
    topology: StormTopology
    definition: TopologyDef


_directory: ContextVar[str] = ContextVar("squall_flux_directory", default=".")


def flux_directory() -> Path:
    """The directory of the Flux file being built (while `build` runs; else the current one):
    where a relative path the file gives starts, as a jar's resources are found in the jar."""
    return Path(_directory.get())


def build(definition: TopologyDef) -> FluxTopology:
    """Build ``definition``'s topology (Flux's ``buildConfig`` and ``buildTopology``)."""
    conf = _config(definition)
    token = _directory.set(definition.directory)
    shipped = _shipped_src.set({})  # the src/ packed once a build, for every class that comes from it
    try:
        with _project_src_on_path():
            components: dict[str, Any] = {}
            for bean in definition.components.values():
                components[bean.id] = make(bean, components)
            if definition.topology_source is not None:
                topology = _from_source(definition, conf, components)
            else:
                topology = _wire(definition, components)
    finally:
        _shipped_src.reset(shipped)
        _directory.reset(token)
    return FluxTopology(definition.name, conf, topology, definition)


@contextlib.contextmanager
def _project_src_on_path() -> Iterator[None]:
    """The `PROJECT_SRC` beside the file being built first on ``sys.path`` while it is built,
    if there is one and it is not there already."""
    src = str((flux_directory() / PROJECT_SRC).resolve())
    if not Path(src).is_dir() or src in sys.path:
        yield
        return
    sys.path.insert(0, src)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a module the build imported may have removed it
            sys.path.remove(src)


def _project_src(cls: type, vertex: VertexDef) -> Any:
    """The `PROJECT_SRC` beside the file, packed, if the class ``cls`` comes from it; else None."""
    src = (flux_directory() / PROJECT_SRC).resolve()
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if not (isinstance(file, str) and src.is_dir() and Path(file).resolve().is_relative_to(src)):
        return None
    shipped = _shipped_src.get()
    if shipped is not None and str(src) in shipped:
        return shipped[str(src)]
    try:
        packed = pack(src, f"{vertex.id!r}")
    except ValueError as e:  # more than a topology may carry
        raise FluxError(vertex.where, str(e)) from e
    if shipped is not None:
        shipped[str(src)] = packed
    return packed


def _config(definition: TopologyDef) -> dict[str, Any]:
    """The ``config`` section, each key checked by its rule (Flux validates it up front too)."""
    _check_config(definition.config, definition.config_where, Where(definition.file, 1, "config"))
    return dict(definition.config)


def _check_config(config: dict[str, Any], wheres: dict[str, Where], section: Where) -> None:
    """Each key of a ``config`` section (the topology's or a spout's or bolt's, as Flux's
    ``applyComponentConfig`` validates it at build) checked by its rule, the error at its line."""
    for key, value in config.items():
        where = wheres.get(key) or Where(section.file, section.line, f"{section.key}.{key}")
        try:
            validate({key: value}, section.key)
        except InvalidTopologyException as e:
            raise FluxError(where, str(e)) from e


# --- objects ------------------------------------------------------------------------------------------
def find_class(name: str, where: Where, named: str = "") -> Any:
    """The class (or any attribute) ``module.Name`` names, importing the longest module prefix;
    Java's ``Outer$Inner`` is read as ``Outer.Inner``. ``named``: what starts an error's message
    (the component's id, ``'count': ``)."""
    target = JAVA_CLASSES.get(name, name).replace("$", ".")
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
                continue  # this prefix is no module: try a shorter one
            raise FluxError(where, f"{named}importing {module_name} for {name!r} failed: {e}") from e
        except Exception as e:
            raise FluxError(where, f"{named}importing {module_name} for {name!r} raised {type(e).__name__}: {e}") from e
        obj: Any = module
        for i, attr in enumerate(parts[cut:]):
            if not hasattr(obj, attr):
                raise FluxError(where, f"{named}unknown class {name!r}: {'.'.join(parts[:cut + i])} has no {attr!r}")
            obj = getattr(obj, attr)
        return obj
    hint = (" (a Java class: in squall, className is a Python module.Class; docs/flux.md)"
            if target.startswith(("org.", "com.", "java.")) else "")
    raise FluxError(where, f"{named}unknown class {name!r}: no module {parts[0]!r} on sys.path{hint}"
                    if len(parts) > 1 else f"{named}unknown class {name!r}: expected module.Class")


def make(definition: ObjectDef, components: dict[str, Any]) -> Any:
    """The object ``definition`` describes (Flux's ``buildObject``): constructed with its
    ``constructorArgs``, or else by its ``factory`` with ``factoryArgs``; then its
    ``properties`` set and its ``configMethods`` called, in order."""
    where = definition.where
    # each error names the component it makes (its id, when it has one), as a user calls it
    named = f"{definition.id!r}: " if isinstance(definition, BeanDef) else ""
    cls = find_class(definition.class_name, where, named)
    args_where = definition.args_where or where
    if definition.constructor_args or not definition.factory:
        args = resolve(definition.constructor_args, components)
        obj = call(cls, args, args_where, f"{named}{definition.class_name}")
    else:
        factory = _member(cls, definition.factory)
        if factory is None:
            raise FluxError(where, f"{named}{definition.class_name} has no factory method {definition.factory!r}"
                                   f"{_snake_hint(definition.factory)}")
        obj = call(factory, resolve(definition.factory_args, components), args_where,
                   f"{named}{definition.class_name}.{definition.factory}")
    owner = f"{named}{type(obj).__name__}"
    for prop in definition.properties:
        _set_property(obj, prop.name, resolve([prop.value], components)[0], prop.where, owner)
    for method_def in definition.config_methods:
        method = _member(obj, method_def.name)
        if method is None or not callable(method):
            raise FluxError(method_def.where, f"{owner} has no method {method_def.name!r}"
                                              f"{_snake_hint(method_def.name)}")
        call(method, resolve(method_def.args, components), method_def.where, f"{owner}.{method_def.name}")
    built = getattr(obj, "_flux_built", None)  # squall's own wrappers finish what the file left out
    if callable(built):
        built()
    return obj


def resolve(args: Sequence[Any], components: dict[str, Any]) -> list[Any]:
    """``args`` with each `Ref` the component it names and each `RefList` the list of them."""
    def one(ref_id: str, where: Where) -> Any:
        if ref_id not in components:
            declared = ", ".join(components) or "none"
            raise FluxError(where, f"no component {ref_id!r} declared above (components declared: {declared})")
        return components[ref_id]

    out = []
    for arg in args:
        if isinstance(arg, Ref):
            out.append(one(arg.id, arg.where))
        elif isinstance(arg, RefList):
            out.append([one(i, arg.where) for i in arg.ids])
        else:
            out.append(arg)
    return out


def call(target: Callable[..., Any], args: Sequence[Any], where: Where, what: str) -> Any:
    """``target(*args)``, with a mismatch of arguments and what ``target`` raises named at ``where``."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        signature = None  # a builtin without one: let the call say
    if signature is not None:
        try:
            signature.bind(*args)
        except TypeError as e:
            raise FluxError(where, f"{what}{_shown(signature)} cannot take the {len(args)} argument(s) "
                                   f"{list(args)!r}: {e}") from e
    try:
        return target(*args)
    except FluxError:
        raise
    except Exception as e:
        raise FluxError(where, f"{what}(...) raised {type(e).__name__}: {e}") from e


class _Default:
    """A parameter's default as an error shows it: that there is one, not its value."""

    def __repr__(self) -> str:
        return "..."


def _shown(signature: inspect.Signature) -> str:
    """``signature`` as a Flux error shows it: the parameters' names, ``=...`` where there is a
    default. The whole text (annotations, each default's repr: a function's with its address, a
    retry policy's with its fields) made a squall class's error hundreds of characters long."""
    default = _Default()
    parameters = [p.replace(annotation=p.empty, default=p.empty if p.default is p.empty else default)
                  for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=signature.empty))


def snake_case(name: str) -> str:
    """``setNamedStream`` -> ``set_named_stream`` (Java's names of a Flux file, Python's methods)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _member(obj: Any, name: str) -> Any:
    """``obj.name``, else its snake_case spelling, else None."""
    for candidate in (name, snake_case(name)):
        if hasattr(obj, candidate):
            return getattr(obj, candidate)
    return None


def _snake_hint(name: str) -> str:
    snake = snake_case(name)
    return f" (nor {snake!r})" if snake != name else ""


def _set_property(obj: Any, name: str, value: Any, where: Where, owner: str) -> None:
    """Flux's ``applyProperties``: a setter (``set_name``, or Java's ``setName``) if there is one,
    else the attribute, which must exist (Flux refuses a field the class does not have)."""
    camel = "set" + name[:1].upper() + name[1:]
    for setter_name in (snake_case(camel), camel):
        setter = getattr(obj, setter_name, None)
        if callable(setter):
            call(setter, [value], where, f"{owner}.{setter_name}")
            return
    for attr in (name, snake_case(name)):
        if hasattr(obj, attr):
            try:
                setattr(obj, attr, value)
            except Exception as e:
                raise FluxError(where, f"setting {owner}.{attr} raised {type(e).__name__}: {e}") from e
            return
    raise FluxError(where, f"{owner} has no property {name!r}: no {snake_case(camel)}() or "
                           f"{camel}() setter and no attribute {name!r}{_snake_hint(name)}")


# --- the topology ---------------------------------------------------------------------------------------
def _from_source(definition: TopologyDef, conf: dict[str, Any], components: dict[str, Any]) -> StormTopology:
    source_def = definition.topology_source
    assert source_def is not None
    source = make(source_def, components)
    where = source_def.where
    method = _member(source, source_def.method_name)
    if method is None or not callable(method):
        raise FluxError(where, f"{source_def.class_name} has no method {source_def.method_name!r}"
                               f"{_snake_hint(source_def.method_name)} (topologySource.methodName)")
    topology = call(method, [dict(conf)], where, f"{source_def.class_name}.{source_def.method_name}")
    if not isinstance(topology, StormTopology):
        raise FluxError(where, f"{source_def.class_name}.{source_def.method_name}(config) returned "
                               f"{type(topology).__name__}, expected a StormTopology")
    return topology


def _wire(definition: TopologyDef, components: dict[str, Any]) -> StormTopology:
    if not definition.spouts:
        raise FluxError(Where(definition.file, 1, "spouts"),
                        "no spouts: a Flux file needs spouts, bolts and streams, or a topologySource")
    builder = TopologyBuilder()
    for spout in definition.spouts.values():
        _declare(spout, "spouts", lambda v, obj: builder.set_spout(v.id, obj, v.parallelism), components)
    declarers: dict[str, BoltDeclarer] = {}
    for bolt in definition.bolts.values():
        declarer = _declare(bolt, "bolts", lambda v, obj: builder.set_bolt(v.id, obj, v.parallelism), components)
        assert isinstance(declarer, BoltDeclarer)
        declarers[bolt.id] = declarer
    subscribed: dict[tuple[str, str, str], StreamDef] = {}
    for stream in definition.streams:
        _subscribe(stream, definition, declarers, components, subscribed)
    try:
        return builder.create_topology()
    except InvalidTopologyException as e:
        raise FluxError(_culprit(str(e), definition), f"the topology is not valid: {e}") from e


def _declare(vertex: VertexDef, section: str, add: Callable[[VertexDef, Any], _Declarer],
             components: dict[str, Any]) -> _Declarer:
    """``vertex``, a spout or a bolt (``section``: ``spouts`` or ``bolts``), made and added."""
    if vertex.resources:
        log.warning("%s: %s ignored: squall has no resource-aware scheduler", vertex.where.file,
                    ", ".join(f"{vertex.id}'s {k}" for k in vertex.resources))
    _check_config(vertex.config, vertex.config_where, Where(vertex.where.file, vertex.where.line, f"{vertex.id}'s config"))
    obj = _streamparse(vertex, section)
    if obj is None:
        obj = make(vertex, components)
    try:
        declarer = add(vertex, obj)
        if vertex.num_tasks is not None:
            declarer.set_num_tasks(vertex.num_tasks)
        if vertex.config:
            declarer.add_configurations(vertex.config)
    except InvalidTopologyException as e:
        raise FluxError(vertex.where, str(e)) from e
    return declarer


def _streamparse(vertex: VertexDef, section: str) -> Any:
    """The squall component running the streamparse (pystorm) Spout or Bolt ``vertex``'s
    className names, in process (`_STREAMPARSE_HOST`); None for any other class. Such a class is
    never made here: pystorm's constructor wraps this process's stdout and closes it when the
    object is collected (a refused one ended the command with ``ValueError: I/O operation on
    closed file``)."""
    named = f"{vertex.id!r}: "
    cls = find_class(vertex.class_name, vertex.where, named)
    pystorm = sys.modules.get("pystorm.component")  # imported already if cls subclasses it
    if pystorm is None or not (isinstance(cls, type) and issubclass(cls, pystorm.Component)):
        return None
    spout = sys.modules["pystorm.spout"].Spout
    kind = "Spout" if issubclass(cls, spout) else "Bolt" if issubclass(cls, sys.modules["pystorm.bolt"].Bolt) else None
    what = f"{named}{vertex.class_name} is a streamparse {kind or 'component, neither Spout nor Bolt'}"
    if kind is None or (kind == "Spout") != (section == "spouts"):
        raise FluxError(vertex.where, f"{what}, listed under {section}")
    given = [key for key, value in (("constructorArgs", vertex.constructor_args), ("factory", vertex.factory),
                                    ("properties", vertex.properties), ("configMethods", vertex.config_methods))
             if value]
    if given:
        raise FluxError(vertex.where, f"{what}, which squall makes as streamparse_run does, with no arguments: "
                                      f"remove {', '.join(given)} and set it up in its initialize(conf, context) "
                                      f"(the file's config reaches it there)")
    host = find_class(_STREAMPARSE_HOST, vertex.where, named)
    try:
        return host(cls, _project_src(cls, vertex))
    except TypeError as e:
        raise FluxError(vertex.where, f"{what}: {e}") from e


def _subscribe(stream: StreamDef, definition: TopologyDef, declarers: dict[str, BoltDeclarer],
               components: dict[str, Any], subscribed: dict[tuple[str, str, str], StreamDef]) -> None:
    """Subscribe ``stream``'s bolt; ``subscribed``: the entries so far, by (from, streamId, to)."""
    named = f"stream {stream.name!r}" if stream.name else "stream"
    if stream.source not in definition.spouts and stream.source not in definition.bolts:
        raise FluxError(stream.source_where, f"{named} is from {stream.source!r}, which is no spout or bolt "
                                                    f"of this file")
    declarer = declarers.get(stream.target)
    if declarer is None:
        what = "a spout (streams go to bolts)" if stream.target in definition.spouts else "no bolt of this file"
        raise FluxError(stream.target_where, f"{named} goes to {stream.target!r}, which is {what}")
    grouping = stream.grouping
    stream_id = grouping.stream_id or DEFAULT_STREAM
    # A bolt takes each stream once: Storm's declarer keeps the last grouping given, so a second
    # entry (a copied one whose streamId was not changed) replaced the first without a word, and
    # the stream the user meant to subscribe went nowhere, its tuples acked uncounted.
    first = subscribed.setdefault((stream.source, stream_id, stream.target), stream)
    if first is not stream:
        raise FluxError(stream.where,
                        f"{named} subscribes {stream.target!r} to stream {stream_id!r} of {stream.source!r}, as "
                        f"{_place(first.where, stream.where)} does already: a bolt takes a stream once (Storm "
                        f"keeps the last grouping, and the other entry's stream goes nowhere); give one of "
                        f"them the streamId it was meant to have")
    subscribe: dict[str, Callable[[], Any]] = {
        "SHUFFLE": lambda: declarer.shuffle_grouping(stream.source, stream_id),
        "FIELDS": lambda: declarer.fields_grouping(stream.source, list(grouping.args), stream_id),
        "ALL": lambda: declarer.all_grouping(stream.source, stream_id),
        "DIRECT": lambda: declarer.direct_grouping(stream.source, stream_id),
        "GLOBAL": lambda: declarer.global_grouping(stream.source, stream_id),
        "LOCAL_OR_SHUFFLE": lambda: declarer.local_or_shuffle_grouping(stream.source, stream_id),
        "NONE": lambda: declarer.none_grouping(stream.source, stream_id),
        "CUSTOM": lambda: declarer.custom_grouping(stream.source, _custom(grouping, components), stream_id),
    }
    try:
        subscribe[grouping.type]()
    except InvalidTopologyException as e:
        raise FluxError(grouping.where, str(e)) from e


def _custom(grouping: GroupingDef, components: dict[str, Any]) -> CustomStreamGrouping:
    assert grouping.custom_class is not None
    obj = make(grouping.custom_class, components)
    if not isinstance(obj, CustomStreamGrouping):
        raise FluxError(grouping.custom_class.where, f"{grouping.custom_class.class_name} is no "
                                                     f"squall.CustomStreamGrouping (got a {type(obj).__name__})")
    return obj


def _place(where: Where, here: Where) -> str:
    """``where`` for a message at ``here``: its key, with its line (and its file if another)."""
    file = f"{where.file}:" if where.file != here.file else "line "
    return f"{where.key} ({file}{where.line})"


def locate(message: str, definition: TopologyDef) -> Where:
    """Where in the file a submission's refusal (``message``: the master's, or a component's
    own check at submit) points: the ``config`` key it names, the component's own before the
    file's (the longest key named: ``topology.state.provider.config`` over
    ``topology.state.provider``), else the stream or component it names (`_culprit`)."""
    vertices = (*definition.spouts.values(), *definition.bolts.values())
    for wheres in [v.config_where for v in vertices if f"[{v.id}]" in message] + [definition.config_where]:
        # a key as a whole word: a short key of the user's ("a") is in most messages as letters
        named = [key for key in wheres if re.search(rf"(?<![\w.]){re.escape(key)}(?!\w|\.\w)", message)]
        if named:
            return wheres[max(named, key=len)]
    return _culprit(message, definition)


def _culprit(message: str, definition: TopologyDef) -> Where:
    """Where the definition ``create_topology``'s error names is: the stream entry between the
    two components it names, on the stream it names (two components may be joined by several
    named streams), else the component."""
    between = [s for s in definition.streams if f"[{s.target}]" in message and f"[{s.source}]" in message]
    for stream in between:
        if f"[{stream.grouping.stream_id or DEFAULT_STREAM}]" in message:
            return stream.where
    if between:
        return between[0].where
    for vertex in (*definition.spouts.values(), *definition.bolts.values()):
        if f"[{vertex.id}]" in message:
            return vertex.where
    return Where(definition.file, 1, "")
