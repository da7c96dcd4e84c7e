"""A streamparse `Topology` class (its DSL: ``Spout.spec``, ``Bolt.spec``, ``Grouping``,
``Stream``, ``par``, ``config``, inputs as a list or a dict) as a squall `StormTopology`.

streamparse's metaclass has already checked the DSL and reduced it to Storm's Thrift shapes on
each spec: ``spec.inputs`` maps ``GlobalStreamId(componentId, streamId)`` to a Thrift grouping
(one of ``fields`` (empty: global), ``shuffle``, ``all``, ``none``, ``direct``,
``local_or_shuffle``, ``custom_object``, ``custom_serialized`` is set), ``spec.outputs`` maps
stream names to ``StreamInfo(output_fields, direct)``, ``spec.config`` is JSON. This module
reads those and calls `TopologyBuilder`, so squall's own checks run as for any topology.

Which object runs a spec:

- a Python component (``Bolt.spec``/``Spout.spec`` of a pystorm class: Storm would run
  ``streamparse_run module.Class``): `SparseBolt`/`SparseSpout`, in squall's workers; or,
  with ``multilang=True``, that same command as a subprocess over Storm's multilang protocol;
- a shell component (``ShellBolt.spec(command=..., script=...)``): multilang's `ShellBolt` or
  `ShellSpout` running ``command script``;
- a Java component (``JavaBolt.spec``/``JavaSpout.spec``): its ``full_class_name`` imported as a
  Python ``module.Class`` (found in ``src/`` or installed), made with ``args_list``, as Flux makes a
  ``className`` (a squall spout or bolt written in place of the Java class, say squall's
  ``KafkaSpout`` for storm-kafka's); a class that does not import is refused (squall runs no JVM).
"""

from __future__ import annotations

import importlib
import json
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from .._config import MULTILANG_SERIALIZERS, Config
from .._errors import InvalidTopologyException
from .._fields import Fields
from .._grouping import CustomStreamGrouping
from .._topology import BoltDeclarer, StormTopology, TopologyBuilder
from ..multilang.resources import Resources, pack
from .component import SparseBolt, SparseSpout, Streams, in_process_problem, missing_method_problem

STREAMPARSE_RUN = "streamparse_run"
"""The command streamparse's ``Bolt.spec``/``Spout.spec`` give a Python component."""

_PARTIAL_KEY_CLASSES = frozenset({"org.apache.storm.grouping.PartialKeyGrouping",
                                  "backtype.storm.grouping.PartialKeyGrouping"})


@dataclass(frozen=True)
class Translation:
    """A streamparse topology as squall's: the topology, and the configuration its class sets
    (``Topology.config``)."""

    topology: StormTopology
    conf: dict[str, Any]


def translate(topology_cls: Any, *, env_name: str | None = None, multilang: bool = False,
              serializer: str = "json", where: str | None = None, resources: str | None = None) -> Translation:
    """``topology_cls`` (a subclass of streamparse's ``Topology``) as a squall topology.

    ``env_name`` picks a component's ``par`` when it is a dict by environment (streamparse's
    ``-e``); ``multilang`` runs the Python components as ``streamparse_run`` subprocesses over
    Storm's multilang protocol (with ``serializer``), as Storm does, instead of in process.
    ``where`` names the topology file in errors; ``resources`` is a directory shipped with the
    components (the project's ``src/``: what streamparse puts in the jar's ``resources/``):
    a subprocess starts in its own copy, and an in-process component's worker puts a copy on
    ``sys.path`` before ``initialize`` (a module imported there or later is found); None: they
    start in the worker's directory, with its ``sys.path``.

    Raises:
        InvalidTopologyException: naming the file, the component and what is wrong.
    """
    where = where or topology_cls.__qualname__
    src = None
    if resources is not None and not multilang:  # the in-process components' src/, read once for all
        try:
            src = pack(resources, f"{where}: the project's src/")
        except (OSError, ValueError) as e:
            raise InvalidTopologyException(str(e) if isinstance(e, ValueError) else f"{where}: {e}") from e
    builder = TopologyBuilder()
    python_for_java: dict[str, Streams] = {}
    for spec in topology_cls.specs:
        streams = _add(builder, spec, _Run(env_name, multilang, serializer, where, resources, src))
        if streams is not None:
            python_for_java[spec.name] = streams
    try:
        topology = builder.create_topology()
    except InvalidTopologyException as e:
        raise InvalidTopologyException(f"{where}: {e}") from e
    for name, streams in python_for_java.items():
        _check_outputs(topology, name, streams, where)
    conf = dict(topology_cls.config or {})
    if multilang:
        conf = multilang_wire(conf, serializer, where)
    return Translation(topology, conf)


def multilang_wire(conf: dict[str, Any], serializer: str, where: str) -> dict[str, Any]:
    """``conf`` with ``topology.multilang.serializer`` speaking the wire ``serializer`` names
    (config.json's ``serializer``): the one the ``streamparse_run -s SERIALIZER`` subprocesses
    speak, so squall's side of each pipe speaks it too. Without it squall spoke JSON to a
    msgpack subprocess, which failed its handshake (pystorm read ``{`` as the msgpack int 123):
    every Python component crashed before its first tuple.

    Raises:
        InvalidTopologyException: ``serializer`` is no multilang serializer, or ``conf`` names
            the other wire (a subprocess would fail its handshake), naming both.
    """
    wire = MULTILANG_SERIALIZERS.get(serializer)
    if wire is None:
        raise InvalidTopologyException(
            f"{where}: config.json's serializer {serializer!r} is no multilang serializer: "
            f"{' or '.join(sorted(set(MULTILANG_SERIALIZERS.values())))} (streamparse_run's -s)")
    key = Config.TOPOLOGY_MULTILANG_SERIALIZER
    given = conf.get(key)
    if given is None:
        return {**conf, key: wire}
    if MULTILANG_SERIALIZERS.get(given) != wire:
        raise InvalidTopologyException(
            f"{where}: {key} is {given!r} and config.json's serializer is {serializer!r}: the Python "
            f"components run as 'streamparse_run -s {serializer}' would not understand the "
            f"{MULTILANG_SERIALIZERS.get(given, given)} squall sends them; make the two the same")
    return conf


def _check_outputs(topology: StormTopology, name: str, streams: Streams, where: str) -> None:
    """The Python class of a Java spec declares the streams the spec's ``outputs`` say: the
    topology file's subscribers were written against those."""
    declared = topology.components[name].streams
    for stream, (fields, direct) in streams.items():
        info = declared.get(stream)
        got = None if info is None else (list(info.fields), bool(info.direct))
        if got != (fields, direct):
            what = "does not declare it" if info is None else \
                f"declares {list(info.fields)}{' (direct)' if info.direct else ''}"
            raise InvalidTopologyException(
                f"{where}: component [{name}]: its spec's outputs give stream [{stream}] the fields "
                f"{fields}{' (direct)' if direct else ''}, and its class {what}")


@dataclass(frozen=True)
class _Run:
    """How `translate` was asked to run the components (its arguments)."""

    env_name: str | None
    multilang: bool
    serializer: str
    where: str
    resources: str | None
    src: Resources | None = None  # ``resources`` packed, for the in-process components


def _add(builder: TopologyBuilder, spec: Any, run: _Run) -> Streams | None:
    """Add ``spec``'s component and its subscriptions; for a Java spec (a Python class run in its
    place), the streams its ``outputs`` give, for `_check_outputs`."""
    from streamparse.dsl.component import JavaComponentSpec
    from streamparse.dsl.spout import JavaSpoutSpec, ShellSpoutSpec

    name, where = spec.name, run.where
    is_spout = isinstance(spec, (ShellSpoutSpec, JavaSpoutSpec))
    par = _parallelism(spec, run.env_name, where)
    streams: Streams = {s: (list(info.output_fields), bool(info.direct)) for s, info in spec.outputs.items()}
    if isinstance(spec, JavaComponentSpec):
        obj = _python_for_java(spec, is_spout, streams, run)
    else:
        obj = _component(spec, streams, is_spout, run)
    try:
        declarer = builder.set_spout(name, obj, par) if is_spout else builder.set_bolt(name, obj, par)
    except InvalidTopologyException as e:
        raise InvalidTopologyException(f"{where}: {e}") from e
    conf = json.loads(spec.config) if isinstance(spec.config, str) else dict(spec.config or {})
    if conf:
        declarer.add_configurations(conf)
    if isinstance(declarer, BoltDeclarer):
        for gsid, grouping in spec.inputs.items():
            _subscribe(declarer, gsid.componentId, gsid.streamId, grouping, f"{where}: component [{name}]")
    return streams if isinstance(spec, JavaComponentSpec) else None


def _python_for_java(spec: Any, is_spout: bool, streams: Streams, run: _Run) -> Any:
    """A Java component's object: its ``full_class_name`` as a Python ``module.Class``, made with
    ``args_list`` (as Flux reads a ``className``); refused when that is no importable class. A
    streamparse (pystorm) class runs as its ``Bolt.spec`` would (`_python_component`), never
    made here: pystorm's constructor wraps this process's stdout and closes it when the object
    is collected (the command then ended in ``ValueError: I/O operation on closed file``)."""
    from pystorm.component import Component as PystormComponent
    from streamparse.dsl.util import to_python_arg_list

    where = run.where
    kind = "spout" if is_spout else "bolt"
    java = spec.component_object.java_object
    if java is None:
        raise InvalidTopologyException(f"{where}: component [{spec.name}] is a serialized Java {kind}; squall "
                                       f"runs no JVM")
    cls_name = java.full_class_name
    module_name, _, attr = cls_name.rpartition(".")
    try:
        module = importlib.import_module(module_name) if module_name else None
    except ModuleNotFoundError as e:
        if e.name is None or not (module_name == e.name or module_name.startswith(e.name + ".")):
            raise InvalidTopologyException(f"{where}: component [{spec.name}]: importing {module_name} for "
                                           f"{cls_name} failed: {e}") from e
        shadow = _shadowing_module(module_name)
        if shadow is not None:
            raise InvalidTopologyException(
                f"{where}: component [{spec.name}]: {cls_name}: {shadow.__name__} is the module "
                f"{getattr(shadow, '__file__', '?')}, not a package, so there is no {module_name} (a topology file "
                f"named like the class's package hides it: rename the Python module that holds the class)") from e
        module = None  # no such Python module: a Java class
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise InvalidTopologyException(
            f"{where}: component [{spec.name}] is a Java {kind} ({cls_name}); squall runs no JVM: write it in "
            f"Python as a squall {'Spout' if is_spout else 'Bolt'} named {cls_name} (a module in src/), or as a "
            f"streamparse {'Spout' if is_spout else 'Bolt'}, or run it as a shell component "
            f"(ShellBolt.spec/ShellSpout.spec)")
    args = to_python_arg_list(java.args_list)
    if issubclass(cls, PystormComponent):
        if args:
            raise InvalidTopologyException(
                f"{where}: component [{spec.name}]: {cls_name} is a streamparse component, made with no arguments "
                f"(as streamparse_run makes it), and the spec gives args_list {args!r}: set it up in initialize()")
        return _python_component(spec.name, cls, cls_name, streams, is_spout, run)
    try:
        return cls(*args)
    except Exception as e:
        raise InvalidTopologyException(f"{where}: component [{spec.name}]: {cls_name}(*{args!r}) raised "
                                       f"{type(e).__name__}: {e}") from e


def _shadowing_module(module_name: str) -> Any:
    """The loaded plain module (not a package) that a prefix of ``module_name`` names, if any:
    ``pixelcount.spouts`` cannot import once ``topologies/pixelcount.py`` is ``pixelcount``."""
    parts = module_name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            return None if hasattr(module, "__path__") else module
    return None


def _parallelism(spec: Any, env_name: str | None, where: str) -> int:
    par = spec.par
    if isinstance(par, dict):
        if env_name not in par:
            envs = ", ".join(sorted(par))
            raise InvalidTopologyException(
                f"{where}: component [{spec.name}] gives par by environment ({envs}) and "
                + ("no environment was chosen (-e ENV)" if env_name is None else f"not for environment {env_name!r}"))
        par = par[env_name]
    return int(par)


def _component(spec: Any, streams: Streams, is_spout: bool, run: _Run) -> Any:
    shell = spec.component_object.shell
    if shell.execution_command == STREAMPARSE_RUN:
        return _python_component(spec.name, spec.component_cls, shell.script, streams, is_spout, run)
    command = [shell.execution_command, *shlex.split(shell.script)]
    return _shell_component(spec.name, command, streams, is_spout, run)


def _python_component(name: str, cls: Any, script: str, streams: Streams, is_spout: bool, run: _Run) -> Any:
    """The pystorm class ``cls`` (``script``: its ``module.Class``) in process, or, with
    ``multilang``, as Storm runs it: ``streamparse_run module.Class``, a subprocess."""
    from pystorm.bolt import Bolt as PystormBolt
    from pystorm.spout import Spout as PystormSpout

    if isinstance(cls, type) and issubclass(cls, (PystormSpout, PystormBolt)):
        problem = missing_method_problem(cls)  # in process or over multilang, it could do no work
        if problem is not None:
            raise InvalidTopologyException(f"{run.where}: component [{name}]: {problem}")
    if not run.multilang:
        base = PystormSpout if is_spout else PystormBolt
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise InvalidTopologyException(
                f"{run.where}: component [{name}]: {_qualname(cls)} is not a {base.__module__}.{base.__name__} "
                f"subclass (streamparse's {'Spout' if is_spout else 'Bolt'})")
        problem = in_process_problem(cls)
        if problem is not None:
            raise InvalidTopologyException(f"{run.where}: component [{name}]: {problem}")
        return (SparseSpout if is_spout else SparseBolt)(cls, streams, run.src)
    command = [sys.executable, "-m", "streamparse.run", "-s", run.serializer, script]
    return _shell_component(name, command, streams, is_spout, run)


def _shell_component(name: str, command: list[str], streams: Streams, is_spout: bool, run: _Run) -> Any:
    """multilang's ShellSpout/ShellBolt for ``command``, declaring ``streams``."""
    try:
        multilang = importlib.import_module("squall.multilang")
    except ImportError:
        multilang = None
    kind = "ShellSpout" if is_spout else "ShellBolt"
    base = getattr(multilang, kind, None)
    if base is None:
        raise InvalidTopologyException(
            f"{run.where}: component [{name}] runs {' '.join(command)!r} over Storm's multilang protocol, and "
            f"this squall has no squall.multilang.{kind}")
    return shell_component(base, command, streams, run.resources)


def shell_component(base: type, command: list[str], streams: Streams, resources: str | None = None) -> Any:
    """An instance of a subclass of multilang's ``base`` (ShellBolt or ShellSpout) running
    ``command`` that declares ``streams``, not only the default stream its constructor takes."""

    class Declared(base):  # type: ignore[valid-type,misc]
        def declare_output_fields(self, declarer: Any) -> None:
            for stream, (fields, direct) in streams.items():
                declarer.declare_stream(stream, Fields(fields), direct)

    return Declared(command, resources=resources)


def _subscribe(declarer: BoltDeclarer, source: str, stream: str, grouping: Any, where: str) -> None:
    """One input: the Thrift grouping streamparse made, as the declarer's grouping."""
    if grouping.fields is not None:
        if grouping.fields:
            declarer.fields_grouping(source, Fields(list(grouping.fields)), stream)
        else:  # streamparse's Grouping.GLOBAL is Storm's: fields grouping on no fields
            declarer.global_grouping(source, stream)
    elif grouping.shuffle is not None:
        declarer.shuffle_grouping(source, stream)
    elif grouping.all is not None:
        declarer.all_grouping(source, stream)
    elif grouping.none is not None:
        declarer.none_grouping(source, stream)
    elif grouping.direct is not None:
        declarer.direct_grouping(source, stream)
    elif grouping.local_or_shuffle is not None:
        declarer.local_or_shuffle_grouping(source, stream)
    elif grouping.custom_object is not None:
        _custom(declarer, source, stream, grouping.custom_object, where)
    else:
        raise InvalidTopologyException(f"{where}: the grouping of its input [{source}:{stream}] is a serialized "
                                       f"Java object, which squall cannot run")


def _custom(declarer: BoltDeclarer, source: str, stream: str, java_object: Any, where: str) -> None:
    """``Grouping.custom_object(class, args)``: Storm's PartialKeyGrouping (args: the fields),
    or a Python `CustomStreamGrouping` named ``module.Class`` (args: its constructor's)."""
    from streamparse.dsl.util import to_python_arg_list

    cls_name = java_object.full_class_name
    args = to_python_arg_list(java_object.args_list)
    if cls_name in _PARTIAL_KEY_CLASSES:
        declarer.partial_key_grouping(source, Fields(args), stream)
        return
    module_name, _, attr = cls_name.replace(":", ".").rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr) if module_name else None
    except ImportError:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, CustomStreamGrouping)):
        raise InvalidTopologyException(
            f"{where}: the grouping of its input [{source}:{stream}] is custom object {cls_name!r}, which is "
            f"neither Storm's PartialKeyGrouping nor an importable squall CustomStreamGrouping (module.Class)")
    declarer.custom_grouping(source, cls(*args), stream)


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else repr(obj)
