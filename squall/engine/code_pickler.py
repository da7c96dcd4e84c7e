"""`dumps`: cloudpickle for the user's code, where modules that go by value may refer to each
other.

cloudpickle pickles a module by value (one registered with ``register_pickle_by_value``, or one
that came by value and is in no ``sys.modules``) as ``dynamic_subimport(name, its globals)``: the
globals are arguments of the call that creates the module, so pickle can only memoize the
module after saving them. A helper module that imports another which imports it back (``a``
imports ``b``, ``b`` imports ``a``), as user code often does, then recurses until pickle gives up
("excessively deep recursion"). Here such a module is created empty first and its globals are
filled in afterwards (pickle's state), so each module is saved once and a cycle refers back to it.

Classes by value (every class of a module that goes by value) are cloudpickle's, with what it
gets wrong for the kinds of class users write (cloudpickle 2.1 to 3.1, Python 3.11):

- a ``typing.NamedTuple`` was rebuilt through ``NamedTupleMeta`` without ``__module__`` in the
  class body: ``KeyError: '__module__'`` wherever it was loaded. It is rebuilt as the plain tuple
  subclass it is, and its state brings back the fields, ``__new__`` and the accessors.
- a dataclass's fields are told from its pseudo-fields by sentinels compared by identity
  (``dataclasses._FIELD``); pickled by value they were copies, so ``fields()`` and ``asdict()``
  of a rebuilt dataclass were empty, silently. The sentinels (and ``MISSING``) go by name.
- ``__module__`` is dropped by cloudpickle 2.x when a base has the same (a subclass of the
  user's own base class), so the class took its metaclass's module (``abc.Sub``); 3.x drops
  ``__slots__``, so a slotted class gained a ``__dict__``; ``__qualname__`` of a nested class was
  lost (``Inner`` for ``Outer.Inner``). All three go with the class.
- a generic NamedTuple holds ``Generic.__class_getitem__``'s function, which pickle cannot find
  by name; the loader takes its own.

A class that still cannot be pickled, or rebuilt where it is loaded, fails naming its module and
qualified name (`ShippedClassError`), not with the bare error of whatever inside it failed.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import sys
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Any

import cloudpickle

from .._errors import SerializationError


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


class ShippedClassError(SerializationError):
    """A class of the user's that goes by value cannot be pickled, or cannot be rebuilt where it
    was loaded (the master, a worker); the message names its module and qualified name."""

    def __init__(self, module: str, qualname: str, doing: str, cause: BaseException) -> None:
        super().__init__(f"class {qualname} of module {module}, which goes by value with the user's code, "
                         f"cannot be {doing}: {type(cause).__name__}: {cause}")
        self.module = module
        self.qualname = qualname


# the class of dataclasses' field sentinels (_FIELD, _FIELD_CLASSVAR, _FIELD_INITVAR); no class
# (an empty tuple) if a later Python has none
_DATACLASS_SENTINEL: Any = getattr(dataclasses, "_FIELD_BASE", ())


def _dataclasses_attr(name: str) -> Any:
    return getattr(dataclasses, name)


# Python 3.11's NamedTupleMeta puts this function (lru-cached: pickle cannot find it by name) on a
# generic NamedTuple; later versions put a module-level function there, which pickles by name.
_GENERIC_CLASS_GETITEM = getattr(typing.Generic.__class_getitem__, "__func__", None)


def _generic_class_getitem() -> Any:
    return _GENERIC_CLASS_GETITEM


def _make_class(module: str, qualname: str, make: Callable[..., type], args: tuple[Any, ...]) -> type:
    """cloudpickle's ``make(*args)`` (an empty class, filled by `_fill_class`), naming the class
    if it fails."""
    try:
        return make(*args)
    except Exception as e:
        raise ShippedClassError(module, qualname, "rebuilt", e) from e


def _fill_class(cls: type, state: tuple[Callable[[type, Any], type], str, str, Any]) -> type:
    setstate, module, qualname, cls_state = state
    try:
        return setstate(cls, cls_state)
    except Exception as e:
        raise ShippedClassError(module, qualname, "rebuilt", e) from e


def _class_by_value(cls: type, reduced: tuple[Any, ...]) -> tuple[Any, ...]:
    """cloudpickle's reduction of ``cls`` (a class by value), corrected (see the docstring) and
    wrapped so that a failure to rebuild it names it."""
    make, args, (cls_dict, slot_state), _, _, setstate = reduced
    cls_dict = {**cls_dict, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    if getattr(make, "__name__", "") == "_make_skeleton_class":
        metaclass, name, bases, type_kwargs, tracker_id, extra = args
        type_kwargs = {**type_kwargs, "__module__": cls.__module__}  # a metaclass may read it
        if "__slots__" in vars(cls):
            type_kwargs["__slots__"] = vars(cls)["__slots__"]
        bases = tuple(tuple if b is typing.NamedTuple else b for b in bases)
        args = (metaclass, name, bases, type_kwargs, tracker_id, extra)
    state = (setstate, cls.__module__, cls.__qualname__, (cls_dict, slot_state))
    return _make_class, (cls.__module__, cls.__qualname__, make, args), state, None, None, _fill_class


def _is_class_by_value(reduced: Any) -> bool:
    """Whether ``reduced`` is cloudpickle's reduction of a class by value, as `_class_by_value`
    reads it: ``(make, args, (class dict, slot state), None, None, setstate)``."""
    return (isinstance(reduced, tuple) and len(reduced) == 6 and isinstance(reduced[2], tuple)
            and len(reduced[2]) == 2 and isinstance(reduced[2][0], dict))


class _Pickler(cloudpickle.CloudPickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.classes: list[type] = []  # by value, in the order their pickling began

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, ModuleType) and _by_value(obj):
            # some libraries put unpicklable things in __builtins__; the loader sets its own
            state = {k: v for k, v in vars(obj).items() if k != "__builtins__"}
            return _empty_module, (obj.__name__,), state, None, None, _fill_module
        if isinstance(obj, _DATACLASS_SENTINEL):
            return _dataclasses_attr, (obj.name,)
        if obj is dataclasses.MISSING:
            return _dataclasses_attr, ("MISSING",)
        if obj is _GENERIC_CLASS_GETITEM and obj is not None:
            return _generic_class_getitem, ()
        reduced = super().reducer_override(obj)
        if isinstance(obj, type) and _is_class_by_value(reduced):
            self.classes.append(obj)
            return _class_by_value(obj, reduced)
        return reduced


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj)``, with modules by value saved once each and classes by value
    that load wherever squall is installed (see the docstring); ``cloudpickle.loads`` reads the
    result.

    Raises:
        ShippedClassError: a class by value cannot be pickled (naming the innermost one whose
            pickling failed); anything else that cannot be pickled raises as pickle raises it.
    """
    with io.BytesIO() as f:
        pickler = _Pickler(f)
        try:
            pickler.dump(obj)
            return f.getvalue()
        except ShippedClassError:
            raise
        except Exception as e:
            # the classes begun after the one that failed are inside it, so the last begun that
            # fails alone is the innermost (one that failed only with the rest is not the culprit)
            culprit = next((cls for cls in reversed(pickler.classes) if not _pickles(cls)), None)
            if culprit is None:
                raise
            raise ShippedClassError(culprit.__module__, culprit.__qualname__, "pickled", e) from e


def _pickles(cls: type) -> bool:
    with io.BytesIO() as f:
        try:
            _Pickler(f).dump(cls)
        except Exception:  # noqa: BLE001 - whatever it raises, this class is where it failed
            return False
    return True
