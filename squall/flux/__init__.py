"""Storm's Flux for squall: a topology described in a YAML file (``squall local|jar FILE.yaml``).

The pieces, after Storm's ``flux-core``: `squall.flux.model` (the definitions, as records that
keep their file, line and key), `squall.flux.substitution` (``--filter`` properties and ``-e``
environment filtering), `squall.flux.parser` (YAML to the model, includes),
`squall.flux.builder` (the model to a `StormTopology`; ``className`` is a Python
``module.Class``), `squall.flux.details` (what ``--dry-run`` prints), and the wrappers
(`squall.flux.shell` for Flux's shell spout and bolt, `squall.flux.wrappers`). docs/flux.md
is the user's guide.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .builder import FluxTopology, build
from .details import describe
from .model import FluxError, TopologyDef
from .parser import Filters, find_resource, parse_file
from .substitution import read_properties

__all__ = ["FluxError", "FluxTopology", "TopologyDef", "build", "describe", "is_flux_file", "load", "read",
           "resource_path"]

SUFFIXES = (".yaml", ".yml")


def is_flux_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a Flux file (``.yaml`` or ``.yml``)."""
    return Path(path).suffix.lower() in SUFFIXES


def read(path: str | os.PathLike[str], *, filter_file: str | os.PathLike[str] | None = None,
         env_filter: bool = False, environ: Mapping[str, str] | None = None) -> TopologyDef:
    """The definition in the Flux file ``path``, filtered (``--filter FILE``: a Java properties
    file; ``env_filter``: ``-e``, from ``environ``, default ``os.environ``) and with its includes."""
    properties = None
    if filter_file is not None:
        try:
            data = Path(filter_file).read_bytes()
        except OSError as e:
            raise FluxError(str(filter_file), f"cannot read the properties file (--filter): {e.strerror or e}") from e
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # Java's Properties.load(InputStream) reads ISO-8859-1
            text = data.decode("latin-1")
        properties = read_properties(text)
    env = dict(os.environ if environ is None else environ) if env_filter else None
    return parse_file(Path(path), Filters(properties, env))


def load(path: str | os.PathLike[str], *, filter_file: str | os.PathLike[str] | None = None,
         env_filter: bool = False, environ: Mapping[str, str] | None = None) -> FluxTopology:
    """The topology the Flux file ``path`` describes, built (see `read` for the filters).

    Raises:
        FluxError: naming the file, line and key at fault.
    """
    return build(read(path, filter_file=filter_file, env_filter=env_filter, environ=environ))


def resource_path(name: str) -> Path:
    """``-R``: the Flux file ``name`` found under the ``sys.path`` entries (Flux's classpath resource)."""
    found = find_resource(name)
    if found is None:
        raise FluxError(name, "no such resource on sys.path (-R/--resource)")
    return found
