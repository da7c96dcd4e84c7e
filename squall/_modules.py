"""Importing a user's file as a module of a given name (a topology file, a streamparse project's
topology definition)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_file_as(path: Path, name: str) -> ModuleType:
    """Import ``path`` as the module ``name`` and return it. It stays in ``sys.modules`` so that
    its classes pickle by reference and dataclasses work; if running it raises, the half-made
    module is removed again and the exception propagates as it was."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException:
        del sys.modules[name]
        raise
    return module
