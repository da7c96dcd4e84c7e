"""The names a package re-exports, each imported at its first use (PEP 562's module
``__getattr__`` and ``__dir__``): a process imports only the modules of the names it asks for.
`squall`, `squall.trident` and `squall.drpc` use it; it imports nothing of squall."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, lazy: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``lazy`` maps each to the
    module (relative to the package, ``".core"``) it is imported from at its first use."""

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later uses find it without this call
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(lazy))

    return __getattr__, __dir__
