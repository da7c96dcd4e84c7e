"""streamparse projects on squall, unchanged (docs/streamparse.md).

`load` reads a streamparse project (`squall.sparse.project`: ``config.json``, the topology
file, its ``Topology`` subclass), `translate` turns the topology's DSL into a squall topology
(`squall.sparse.translate`), and its Python components run inside squall's workers through
`SparseSpout`/`SparseBolt` (`squall.sparse.component`), which adapt pystorm's I/O to squall's
collectors. ``squall sparse run`` and ``squall sparse submit`` (`squall.cli._sparse`) use these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._config import UNAPPLIED_STORM_KEYS, Config, is_daemon_key, validate
from .._errors import InvalidTopologyException
from .component import SparseBolt, SparseComponentError, SparseSpout
from .project import (
    Environment,
    Project,
    SparseProjectError,
    environment,
    find_project,
    load_topology,
    project_of,
    topology_file,
)
from .translate import Translation, multilang_wire, translate

__all__ = [
    "Environment", "LoadedTopology", "Project", "SparseBolt", "SparseComponentError", "SparseProjectError",
    "SparseSpout", "Translation", "environment", "find_project", "load", "load_topology", "project_of",
    "topology_file", "translate",
]


@dataclass(frozen=True)
class LoadedTopology:
    """A streamparse project's topology, ready to submit: its name, the squall topology and its
    configuration (config.json's env options, then the Topology's ``config``, then ``options``;
    ``pystorm.log.level`` debug when ``topology.debug`` is set, as sparse sets it)."""

    name: str
    topology: Any
    conf: dict[str, Any]
    path: Path


def load(directory: str | Path = ".", name: str | None = None, *, env_name: str | None = None,
         options: dict[str, Any] | None = None, multilang: bool = False) -> LoadedTopology:
    """The topology ``name`` (default: the only one) of the streamparse project in
    ``directory``, for environment ``env_name`` (default: the only one), with ``options``
    (streamparse's ``-o``) over its configuration; Python components in process unless
    ``multilang``.

    Raises:
        SparseProjectError: no project, no such topology, a file that does not import or
            defines no Topology (naming the file and the name).
        InvalidTopologyException: a component squall cannot run, or bad wiring (naming the
            file and the component); with ``multilang``, a ``topology.multilang.serializer``
            other than config.json's ``serializer`` (the subprocesses' wire).
    """
    try:
        import streamparse  # noqa: F401 (its DSL and pystorm's components are what is loaded)
    except ImportError as e:
        raise SparseProjectError(f"a streamparse project needs streamparse: pip install 'squall[streamparse]' "
                                 f"({e})") from e
    project = find_project(directory)
    topology_name, path = topology_file(project, name)
    env = environment(project, env_name)
    topology_cls = load_topology(project, path)
    serializer = str(env.settings.get("serializer") or project.config.get("serializer") or "json")
    where = str(path.relative_to(project.root)) if path.is_relative_to(project.root) else str(path)
    translation = translate(topology_cls, env_name=env.name, multilang=multilang, serializer=serializer,
                            where=where, resources=str(project.src) if project.src.is_dir() else None)
    _check_sources(((f"{project.root / 'config.json'}: envs.{env.name}.options", env.options()),
                    (f"{where}: {topology_cls.__name__}.config", translation.conf)))
    conf = {**env.options(), **translation.conf, **(options or {})}
    if multilang:  # an env option or -o may name the multilang wire too: it must be the subprocesses'
        multilang_wire({**env.options(), **(options or {})}, serializer, where)
    if conf.get(Config.TOPOLOGY_DEBUG):  # as sparse's resolve_options: pystorm logs at debug level too
        conf["pystorm.log.level"] = "debug"
    return LoadedTopology(topology_name, translation.topology, conf, path)


def _check_sources(sources: tuple[tuple[str, dict[str, Any]], ...]) -> None:
    """The files a streamparse topology's configuration comes from (config.json's env options,
    the Topology's ``config``), each checked on its own so the error names it: the merged
    configuration's said only "topology configuration", and the user had those and the command
    line to look through. ``options`` (the command line's, which the user has before them) are
    checked with the rest at submission, where ``sparse submit -f`` says that nothing was killed.

    Raises:
        InvalidTopologyException: a value breaks its key's rule, or a daemon setting is given,
            naming the place, the key and the value.
    """
    for source, conf in sources:
        for key in conf:
            if isinstance(key, str) and is_daemon_key(key) and key not in UNAPPLIED_STORM_KEYS:
                raise InvalidTopologyException(f"{source}: topology configuration may not set daemon setting {key!r}; "
                                               f"set it in the cluster's squall.yaml instead")
        validate(conf, where=source)
