"""A streamparse project on disk: its ``config.json``, the topology definitions in its
``topology_specs`` directory (``topologies/``), and its components' source in ``src/``.

Loading follows streamparse's ``sparse`` (``streamparse.util``): the project is the current
directory; the topology is the one file in ``topologies/`` or the one ``-n NAME`` names; the
file is imported with ``src/`` and ``topologies/`` on ``sys.path`` and its ``Topology``
subclass is the topology. Each failure says which file and which name is wrong.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import SquallError
from .._modules import import_file_as


class SparseProjectError(SquallError):
    """A streamparse project that cannot be loaded: the message names the file and the name."""


@dataclass(frozen=True)
class Project:
    """A streamparse project: its directory and its parsed ``config.json``."""

    root: Path
    config: dict[str, Any]

    @property
    def topology_specs(self) -> Path:
        """The directory of topology definitions (``topology_specs``, default ``topologies/``)."""
        return self.root / str(self.config.get("topology_specs") or "topologies").rstrip("/")

    @property
    def src(self) -> Path:
        """The components' source directory, ``src/`` beside ``topology_specs`` (streamparse's)."""
        return self.topology_specs.parent / "src"


@dataclass(frozen=True)
class Environment:
    """One of ``config.json``'s ``envs`` (None when it has none): its name and settings."""

    name: str | None
    settings: dict[str, Any] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """The Storm options this environment gives a topology: its ``options`` and its
        ``log.level`` as ``pystorm.log.level`` (the rest is about SSH, virtualenvs and Storm's
        own nodes, which squall has no use for)."""
        opts = dict(self.settings.get("options") or {})
        level = (self.settings.get("log") or {}).get("level")
        if isinstance(level, str) and level:
            opts.setdefault("pystorm.log.level", level.lower())
        return opts


def find_project(directory: str | Path = ".") -> Project:
    """The project in ``directory`` (its ``config.json``)."""
    root = Path(directory).resolve()
    path = root / "config.json"
    if not path.is_file():
        raise SparseProjectError(f"no config.json in {root}: run this in a streamparse project's directory "
                                 f"(one that `sparse quickstart NAME` made), or give --project DIR")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SparseProjectError(f"{path}: cannot read it as JSON: {e}") from e
    if not isinstance(config, dict):
        raise SparseProjectError(f"{path}: expected a JSON object, got {type(config).__name__}")
    return Project(root, config)


def project_of(topology_path: str | Path) -> Path | None:
    """The directory of the streamparse project whose topology definition ``topology_path``
    is (a ``config.json`` that names the file's directory as its ``topology_specs``, as
    ``sparse quickstart`` writes it), or None."""
    path = Path(topology_path).resolve()
    for root in (path.parent.parent, path.parent):
        config = root / "config.json"
        if not config.is_file():
            continue
        try:
            project = find_project(root)
        except SparseProjectError:
            return None
        named = "topology_specs" in project.config
        return root if named and project.topology_specs.resolve() == path.parent else None
    return None


def topology_file(project: Project, name: str | None) -> tuple[str, Path]:
    """The topology's name and definition file: ``topologies/NAME.py``, or the only one."""
    specs = project.topology_specs
    if not specs.is_dir():
        raise SparseProjectError(f"{specs} (config.json's topology_specs) is not a directory")
    found = sorted(p for p in specs.glob("*.py") if p.name != "__init__.py")
    if name is not None:
        path = specs / f"{name}.py"
        if not path.is_file():
            have = ", ".join(p.stem for p in found) or "none"
            raise SparseProjectError(f"topology definition file not found: {path} (topologies in "
                                     f"{specs}: {have})")
        return name, path
    if not found:
        raise SparseProjectError(f"no topology definitions in {specs}: add one (topologies/NAME.py)")
    if len(found) > 1:
        raise SparseProjectError(f"more than one topology definition in {specs} "
                                 f"({', '.join(p.stem for p in found)}): choose one with -n NAME")
    return found[0].stem, found[0]


def environment(project: Project, name: str | None) -> Environment:
    """``config.json``'s environment ``name``, or its only one (streamparse's ``-e``).

    Raises:
        SparseProjectError: no such env, or ``envs``, the env, its ``options`` or its ``log``
            not a JSON object (naming config.json and the key, e.g. ``envs.prod.options``).
    """
    envs = _json_object(project, project.config.get("envs"), "envs")
    if name is None:
        if len(envs) > 1:
            raise SparseProjectError(f"{project.root / 'config.json'} has several envs ({', '.join(envs)}): "
                                     f"choose one with -e ENV")
        if not envs:
            return Environment(None)
        name = next(iter(envs))
    if name not in envs:
        raise SparseProjectError(f"{project.root / 'config.json'} has no env {name!r} "
                                 f"(it has: {', '.join(envs) or 'none'})")
    settings = _json_object(project, envs[name], f"envs.{name}")
    for key in ("options", "log"):  # what `Environment.options` reads
        _json_object(project, settings.get(key), f"envs.{name}.{key}")
    return Environment(name, settings)


_JSON_TYPES = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


def _json_object(project: Project, value: Any, key: str) -> dict[str, Any]:
    """``value``, config.json's ``key``, as a dict (None: empty); else an error naming both
    (not the value: an env's settings hold passwords)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        raise SparseProjectError(f"{project.root / 'config.json'}: {key} must be a JSON object "
                                 f"({{\"KEY\": VALUE, ...}}), not {got}")
    return dict(value)


def load_topology(project: Project, path: Path) -> Any:
    """Import the topology definition ``path`` and return its ``Topology`` subclass.

    ``src/`` and the definitions' directory go first on ``sys.path`` (and stay: the components'
    modules import from there when tasks start). Modules of the same names loaded from another
    project before (a test that loads two projects) are dropped first, so this project's load.
    """
    from streamparse.dsl.topology import Topology, TopologyType

    for directory in (path.parent, project.src):
        _forget_modules_under_other_roots(directory)
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
    module_name = f"_squall_sparse_{path.stem}"
    try:
        module = import_file_as(path, module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        what = _unknown_stream(e) or f"{type(e).__name__}: {e}"
        raise SparseProjectError(f"error importing {path}{_line_in(path, e)}: {what}"
                                 f"{_src_hint(project, e)}") from e
    found = [v for v in vars(module).values()
             if isinstance(v, TopologyType) and v is not Topology and v.__module__ == module_name]
    if not found:
        raise SparseProjectError(f"{path} defines no streamparse Topology subclass "
                                 f"(class NAME(Topology) with Spout.spec() and Bolt.spec() attributes)")
    if len(found) > 1:
        raise SparseProjectError(f"{path} defines several Topology subclasses "
                                 f"({', '.join(t.__name__ for t in found)}): keep one per file")
    return found[0]


def _line_in(path: Path, error: BaseException) -> str:
    """``", line N"``: the line of ``path`` where ``error`` was raised (its last frame there)."""
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
    return f", line {lines[-1]}" if lines and lines[-1] is not None else ""


def _unknown_stream(error: BaseException) -> str | None:
    """What streamparse's ``KeyError: 'default'`` means, in words: its Topology metaclass looks
    each input's stream up in the declared streams of the component it names
    (``TopologyType.clean_spec_inputs``) and lets the KeyError out when there is none: an input
    given as a list (``inputs=[split_bolt]``), which subscribes to the ``default`` stream, of a
    component that declares only named ``Stream``s, or a misspelt ``split_bolt["wrods"]``.
    Read from that frame's ``spec``, ``specs`` and ``stream_id``; None for any other error."""
    if not isinstance(error, KeyError):
        return None
    frame = None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        pass  # the innermost frame: where the KeyError was raised
    if frame is None or frame.f_code.co_name != "clean_spec_inputs" or \
            not frame.f_globals.get("__name__", "").startswith("streamparse."):
        return None
    spec, specs, stream_id = (frame.f_locals.get(k) for k in ("spec", "specs", "stream_id"))
    if spec is None or specs is None or stream_id is None:
        return None
    source, stream = stream_id.componentId, stream_id.streamId
    if source not in specs:  # a spec made outside the class has no name (None)
        named = "" if source is None else f" ({source!r})"
        return (f"{spec.name}'s inputs name a spec that is not an attribute of this Topology class{named}: "
                f"make each spec it subscribes to one (split_bolt = SplitBolt.spec(...) in the class)")
    declared = sorted(specs[source].outputs)
    said = f"{spec.name} subscribes to the {stream!r} stream of {source}, which declares " + (
        f"only {', '.join(repr(d) for d in declared)}" if declared else "no stream (no outputs)")
    if stream == "default" and declared:
        said += (f": an input in a list subscribes to the default stream; name the stream, as "
                 f"inputs={{{source}[{declared[0]!r}]: Grouping.SHUFFLE}}")
    return said


def _src_hint(project: Project, error: BaseException) -> str:
    """What to do about ``from src.bolts import ...``: the modules of ``src/`` are top-level, as
    Storm's ``streamparse_run`` imports them in the jar's ``resources/`` (src's contents)."""
    name = getattr(error, "name", None)
    src = project.src.name
    if isinstance(error, ModuleNotFoundError) and name is not None and (name == src or name.startswith(src + ".")):
        return (f" ({src}/ is on sys.path, as sparse puts it, and its modules run at its top in Storm's jar: "
                f"import them without '{src}.', e.g. 'from bolts import ...' for {src}/bolts.py)")
    return ""


def _forget_modules_under_other_roots(directory: Path) -> None:
    """Drop from ``sys.modules`` the packages and modules named like those in ``directory``
    that were loaded from elsewhere."""
    if not directory.is_dir():
        return
    names = {p.stem for p in directory.glob("*.py")} | {p.name for p in directory.iterdir() if p.is_dir()}
    root = str(directory) + "/"
    for mod_name, module in list(sys.modules.items()):
        top = mod_name.partition(".")[0]
        if top not in names or top in sys.stdlib_module_names:
            continue
        file = str(getattr(module, "__file__", None) or "")
        if not file.startswith(root) and "site-packages" not in file:
            del sys.modules[mod_name]
