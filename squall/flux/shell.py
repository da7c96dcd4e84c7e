"""Flux's shell wrappers (``flux-wrappers``' ``FluxShellBolt`` and ``FluxShellSpout``) over
`squall.multilang`: a shell component whose output streams and component configuration a Flux
file gives (``constructorArgs: [[command...], [fields...]]``, ``configMethods:
setNamedStream``, ``addComponentConfig``). Imported only when a Flux file names a shell class."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._fields import Fields
from .._system import DEFAULT_STREAM
from ..multilang import ShellBolt, ShellSpout
from ..multilang.resources import pack
from .builder import flux_directory

DEFAULT_RESOURCES = "resources"
"""The directory beside a Flux file that a shell component without a ``resources`` property runs in."""


class _FluxShell:
    """What both wrappers add: streams by name, and component configuration."""

    output_fields: Fields | None
    command: list[str]
    resources: Any

    def _flux_init(self) -> None:
        self.streams: dict[str, list[str]] = {}
        self.component_config: dict[str, Any] = {}
        if self.output_fields is not None:
            self.streams[DEFAULT_STREAM] = list(self.output_fields)

    def set_default_stream(self, output_fields: Sequence[str]) -> None:
        """Declare the default stream with ``output_fields`` (Flux's ``setDefaultStream``)."""
        self.set_named_stream(DEFAULT_STREAM, output_fields)

    def set_named_stream(self, name: str, output_fields: Sequence[str]) -> None:
        """Declare stream ``name`` with ``output_fields`` (Flux's ``setNamedStream``)."""
        self.streams[name] = list(output_fields)

    def set_resources(self, directory: str) -> None:
        """Carry ``directory`` (relative to the Flux file's directory) with the component; each
        task's subprocess runs in its own copy, as Storm runs it in the jar's ``resources/``
        (the ``resources`` property; `squall.multilang`'s ``resources=``)."""
        path = Path(directory)
        self.resources = pack(path if path.is_absolute() else flux_directory() / path,
                              f"{type(self).__name__} {self.command}")

    def _flux_built(self) -> None:
        """Called once the file's properties and config methods are applied: without a
        ``resources`` property, a ``resources`` directory beside the Flux file is the
        component's. That is Storm's layout: the Flux file in ``src/main/resources/``, the
        scripts in ``src/main/resources/resources/``, which the jar holds as ``resources/``
        and Storm runs every shell component in."""
        if self.resources is None and (flux_directory() / DEFAULT_RESOURCES).is_dir():
            self.set_resources(DEFAULT_RESOURCES)

    def add_component_config(self, key: str, value: Any) -> None:
        """Set ``key`` in this component's configuration (Flux's ``addComponentConfig``)."""
        self.component_config[key] = value

    def declare_output_fields(self, declarer: Any) -> None:
        """Declare each stream given."""
        for name, fields in self.streams.items():
            if name == DEFAULT_STREAM:
                declarer.declare(Fields(fields))
            else:
                declarer.declare_stream(name, Fields(fields))

    def _flux_configuration(self, own: dict[str, Any] | None) -> dict[str, Any]:
        return {**(own or {}), **self.component_config}


class FluxShellBolt(_FluxShell, ShellBolt):
    """``org.apache.storm.flux.wrappers.bolts.FluxShellBolt``: a `ShellBolt` running ``command``
    (a list: the program and its arguments), its default stream ``output_fields``."""

    def __init__(self, command: Sequence[str], output_fields: Sequence[str] | None = None) -> None:
        super().__init__(command, output_fields)
        self._flux_init()

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The shell bolt's own configuration, with what ``addComponentConfig`` set over it."""
        return self._flux_configuration(ShellBolt.get_component_configuration(self))


class FluxShellSpout(_FluxShell, ShellSpout):
    """``org.apache.storm.flux.wrappers.spouts.FluxShellSpout``: a `ShellSpout` running
    ``command``, its default stream ``output_fields``."""

    def __init__(self, command: Sequence[str], output_fields: Sequence[str] | None = None) -> None:
        super().__init__(command, output_fields)
        self._flux_init()

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The shell spout's own configuration, with what ``addComponentConfig`` set over it."""
        return self._flux_configuration(ShellSpout.get_component_configuration(self))
