"""`dumps`: cloudpickle for the user's code, where modules that go by value may refer to each
other.

cloudpickle pickles a module by value (one registered with ``register_pickle_by_value``, or one
that came by value and is in no ``sys.modules``) as ``dynamic_subimport(name, its globals)``: the
globals are arguments of the call that creates the module, so pickle can only memoize the
module after saving them. A helper module that imports another which imports it back (``a``
imports ``b``, ``b`` imports ``a``), as user code often does, then recurses until pickle gives up
("excessively deep recursion"). Here such a module is created empty first and its globals are
filled in afterwards (pickle's state), so each module is saved once and a cycle refers back to it.
"""

from __future__ import annotations

import builtins
import io
import sys
from types import ModuleType
from typing import Any

import cloudpickle


def _by_value(module: ModuleType) -> bool:
    """cloudpickle's rule: by value if registered (or under a registered package), or if this
    module object is not what ``sys.modules`` holds under its name (it came by value)."""
    registered = cloudpickle.list_registry_pickle_by_value()
    name = module.__name__
    parts = name.split(".")
    if any(".".join(parts[:i]) in registered for i in range(1, len(parts) + 1)):
        return True
    return sys.modules.get(name) is not module


def _empty_module(name: str) -> ModuleType:
    return ModuleType(name)


def _fill_module(module: ModuleType, state: dict[str, Any]) -> ModuleType:
    module.__dict__.update(state)
    module.__dict__["__builtins__"] = builtins.__dict__
    return module


class _Pickler(cloudpickle.CloudPickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, ModuleType) and _by_value(obj):
            # some libraries put unpicklable things in __builtins__; the loader sets its own
            state = {k: v for k, v in vars(obj).items() if k != "__builtins__"}
            return _empty_module, (obj.__name__,), state, None, None, _fill_module
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj)``, with modules by value saved once each (see the docstring);
    ``cloudpickle.loads`` reads the result."""
    with io.BytesIO() as f:
        _Pickler(f).dump(obj)
        return f.getvalue()
