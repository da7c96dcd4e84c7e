"""Which of the user's modules travel with a topology, as Storm ships the jar.

The user's code is every module that is neither the standard library, nor installed
(site-packages, dist-packages), nor squall: the modules beside FILE, a package of the user's,
a helper module that a bolt calls. A component needs not only the module that defines its
class but every user module that code reaches: ``from helpers import shout`` puts ``shout`` in
the component's module, ``import helpers2`` puts the module itself there, and ``helpers`` may in
turn import ``formats``. `user_modules` follows those references through the modules' globals
(functions, classes, modules, and the types of other values), transitively and once per
namespace, so cycles end, and through what the components hold: `USER_DEPTH` levels into a
user's objects (the helpers a bolt keeps, in lists and dicts too, and theirs), squall's own
objects and their containers at any depth (a Trident bolt of squall's holds the user's
operations in its plan), the first `USER_ITEMS` items of a container. It imports nothing: a module that is not
loaded in this process is not the user's code here (in the master, the classes that came by
value have no module to load).

What it cannot see: an ``import`` inside a function body that has not run yet, and modules
reached only through data (a module name in a string). Those must be importable where the
workers run.

`pickle_topology` pickles a topology with those modules by value, for the master's plan files
and for workers in other processes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import site
import sys
import sysconfig
import tempfile
import zipfile
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

import cloudpickle

from .._children import orphaned_dirs, process_start
from .._error_lines import cannot_serialize, exception_message
from .._errors import InvalidTopologyException
from .._topology import StormTopology
from ..engine import code_pickler

log = logging.getLogger("squall.client")

# Never the user's, wherever they are installed (squall runs from a checkout, editable).
_NOT_USER = frozenset(sys.stdlib_module_names) | {"builtins", "squall", "__mp_main__"}
_INSTALLED_DIRS = frozenset({"site-packages", "dist-packages"})


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.add(site.USER_SITE)
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


_LIBRARY_DIRS = _library_dirs()


def is_user_file(path: str) -> bool:
    """Whether ``path`` is Python source of the user's: a ``.py`` file outside the standard
    library and outside any site-packages or dist-packages directory."""
    if not path.endswith(".py"):
        return False  # an extension module, or a module without source: it cannot go by value
    real = os.path.realpath(path)
    if real.startswith(_LIBRARY_DIRS):
        return False
    return not _INSTALLED_DIRS.intersection(real.split(os.sep))


def _is_user_namespace(ns: dict[str, Any]) -> bool:
    """Whether a module's globals are the user's code (``__main__`` is, when it is FILE run as
    a script or a notebook: its classes go by value anyway, but what it imports must be found)."""
    name = ns.get("__name__")
    if not isinstance(name, str):
        return False
    path = ns.get("__file__")
    if name == "__main__":
        return not isinstance(path, str) or is_user_file(path)
    if name.partition(".")[0] in _NOT_USER:
        return False
    return isinstance(path, str) and is_user_file(path)


_ATOMS = frozenset({str, bytes, int, float, bool, complex, type(None)})
USER_DEPTH = 3  # levels the walk goes below a user's object (bolt -> its list -> a helper -> its helper)
USER_ITEMS = 1000  # items of a container looked at: data's types repeat
_CONTAINERS = (dict, list, tuple, set, frozenset, deque)


def _is_squalls(cls: type) -> bool:
    module = getattr(cls, "__module__", None)
    return isinstance(module, str) and module.partition(".")[0] == "squall"


def _held_by(obj: Any) -> list[Any]:
    """The objects ``obj`` holds: a container's items, a partial's function and arguments, a
    bound method's object, an instance's attributes (``__dict__`` and slots)."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, _CONTAINERS):
        return list(obj)
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *(obj.keywords or {}).values()]
    if isinstance(obj, MethodType):
        return [obj.__self__, obj.__func__]
    held = list(getattr(obj, "__dict__", {}).values())
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"  # a private slot's mangled name
            value = getattr(obj, name, None)  # an unset slot: None
            if value is not None:
                held.append(value)
    return held


class _Finder:
    """One search: the namespaces and held objects walked so far (by identity, so cycles end)
    and the top-level modules found."""

    def __init__(self) -> None:
        self.found: dict[str, ModuleType] = {}
        self._walked: set[int] = set()
        self._types: set[int] = set()
        self._todo: list[dict[str, Any]] = []
        self._held: list[tuple[Any, int | None]] = []
        self._held_seen: set[int] = set()

    def run(self, roots: Iterable[Any]) -> list[ModuleType]:
        self._held = [(obj, USER_DEPTH) for obj in roots]
        while self._held or self._todo:
            while self._held:
                self._safely(*self._held.pop())
            if self._todo:
                ns = self._todo.pop()
                for value in list(ns.values()):
                    self._safely(value)
        return list(self.found.values())

    def _into(self, obj: Any, depth: int | None) -> None:
        """What ``obj`` (a component, or what one holds) holds: each object's type, function or
        module is looked at. The walk goes on through squall's own objects and the containers
        they hold, to any depth (a Trident bolt of squall's keeps the user's operations in its
        plan's nodes), and ``depth`` more levels through the user's (the helpers a bolt keeps,
        in lists and dicts too, and theirs), looking at the first `USER_ITEMS` items of any
        container, not through all of a spout's data. A module's globals are walked for their code
        only (`_namespace`)."""
        if id(obj) in self._held_seen:
            return
        self._held_seen.add(id(obj))
        if _is_squalls(type(obj)) or (depth is None and isinstance(obj, _CONTAINERS)):
            below: int | None = None
        else:
            below = depth - 1 if depth is not None else None
        held = _held_by(obj)
        if isinstance(obj, _CONTAINERS):  # a plan's lists are short; a spout's data (squall's
            held = held[:USER_ITEMS]      # FixedBatchSpout's too) need not be walked whole
        self._held += [(value, below) for value in held if type(value) not in _ATOMS]

    def _safely(self, value: Any, depth: int | None = -1) -> None:
        # an odd object (a lazy proxy) is skipped, whatever it raises: the search is best effort
        with contextlib.suppress(Exception):
            self._value(value)
            if (depth is None or depth >= 0) and not isinstance(value, (ModuleType, type)):
                self._into(value, depth)

    def _value(self, value: Any) -> None:
        if isinstance(value, ModuleType):
            self._namespace(vars(value))
        elif isinstance(value, type):
            self._type(value)
        elif isinstance(value, (FunctionType, MethodType, staticmethod, classmethod)):
            self._function(value)
            if isinstance(value, MethodType):
                self._type(type(value.__self__))
        elif isinstance(value, functools.partial):  # a function kept with its arguments
            for part in (value.func, *value.args, *(value.keywords or {}).values()):
                self._value(part)
        else:
            self._type(type(value))

    def _function(self, fn: Any) -> None:
        fn = getattr(fn, "__func__", fn)
        if not isinstance(fn, FunctionType):
            return
        self._namespace(fn.__globals__)
        for cell in fn.__closure__ or ():
            try:
                self._value(cell.cell_contents)
            except ValueError:  # an empty cell
                pass

    def _type(self, cls: type) -> None:
        if id(cls) in self._types:
            return
        self._types.add(id(cls))
        for klass in cls.__mro__:
            name = getattr(klass, "__module__", None)
            if not isinstance(name, str) or name.partition(".")[0] in _NOT_USER:
                continue
            module = sys.modules.get(name)
            if module is not None:
                self._namespace(vars(module))
            for attr in list(vars(klass).values()):
                if isinstance(attr, property):
                    for fn in (attr.fget, attr.fset, attr.fdel):
                        self._function(fn)
                elif isinstance(attr, (FunctionType, staticmethod, classmethod)):
                    self._function(attr)

    def _namespace(self, ns: dict[str, Any]) -> None:
        if id(ns) in self._walked:
            return
        self._walked.add(id(ns))
        if not _is_user_namespace(ns):
            return
        self._todo.append(ns)
        name = ns["__name__"]
        module = sys.modules.get(name)
        if module is None or vars(module) is not ns or name == "__main__":
            return  # a script's or a by-value module's globals: walked, but nothing to register
        top = sys.modules.get(name.partition(".")[0])
        if top is None or not isinstance(getattr(top, "__file__", None), str):
            top = module  # a namespace package: only the module itself can be named
        if top.__name__ in self.found:
            return
        self.found[top.__name__] = top
        # the whole package goes by value, so whatever its loaded submodules reach must go too
        prefix = top.__name__ + "."
        for sub_name, sub in list(sys.modules.items()):
            if sub is not None and (sub is top or sub_name.startswith(prefix)):
                self._namespace(vars(sub))


def user_modules(roots: Iterable[Any]) -> list[ModuleType]:
    """The top-level modules and packages of the user's code that ``roots`` (a topology's
    spouts, bolts and custom groupings) reach, transitively (see the module docstring), in the
    order found. Each is in ``sys.modules``, so it can be registered with cloudpickle's
    ``register_pickle_by_value`` (a package's submodules then go by value too)."""
    return _Finder().run(roots)


def topology_modules(topology: StormTopology) -> list[Any]:
    """The user's own top-level modules and packages that a topology's components and custom
    groupings reach (`user_modules`)."""
    objs: list[Any] = []
    for spec in topology.components.values():
        objs.append(spec.obj)
        objs += [g.custom for g in spec.inputs.values() if g.custom is not None]
    return user_modules(objs)


def add_py_file(spark_context: Any, module: ModuleType, directory: str | os.PathLike) -> bool:
    """``spark_context.addPyFile`` the user's top-level ``module`` (its ``.py``) or package (zipped
    into ``directory``, which must last as long as the Spark application: executors fetch the
    file from the driver when a task first needs it), so that an executor's Python imports it:
    a class the driver pickled by reference, a module the code imports only inside a function,
    a value of the user's class in a tuple. False for a module with no file to ship (a namespace
    package), which the executors must then be able to import themselves."""
    file = getattr(module, "__file__", None)
    if not file:
        log.warning("module %s has no file to ship to Spark's executors; they must be able to import it",
                    module.__name__)
        return False
    path = Path(file)
    if path.name != "__init__.py":
        spark_context.addPyFile(str(path))
        return True
    package = path.parent
    archive = Path(directory) / f"{module.__name__}.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in package.rglob("*.py"):
            z.write(f, f.relative_to(package.parent))
    spark_context.addPyFile(str(archive))
    return True


def pickle_topology(topology: StormTopology, obj: Any = None) -> bytes:
    """Pickle a topology (or ``obj``, something that holds it, such as its plan) with the user's
    own modules by value, so workers need not import them (as Storm ships the jar).

    The by-value registration lasts only for this call, so nothing else in the process (a
    LocalCluster, say) is affected. If a module cannot go by value (its code refers to
    module-level state that cannot be pickled, such as a lock), it goes by reference instead,
    with a warning naming it, and the others still go by value: workers must then be able to
    import that module.

    Raises:
        InvalidTopologyException: the topology cannot be pickled either way.
    """
    target = topology if obj is None else obj
    modules = topology_modules(topology)
    try:
        return _dumps_by_value(target, modules)
    except Exception as e:  # noqa: BLE001 (the user's objects: kept, and raised if no other way pickles them)
        by_value_error = e
    # keep each module by value that still pickles with the ones kept before it
    kept: list[Any] = []
    for m in modules:
        with contextlib.suppress(Exception):
            _dumps_by_value(target, [*kept, m])
            kept.append(m)
    try:
        blob = _dumps_by_value(target, kept)
    except Exception as e:
        raise InvalidTopologyException(_unpicklable_component(topology, kept)
                                       or f"the topology cannot be serialized: {exception_message(e)}") from e
    log.warning("could not ship %s by value (%s); workers must be able to import them",
                ", ".join(m.__name__ for m in modules if m not in kept), by_value_error)
    return blob


def _unpicklable_component(topology: StormTopology, modules: list[Any]) -> str | None:
    """What `LocalCluster` says of the first component of ``topology`` that cannot be pickled
    (`squall.engine.worker.component_blobs`), or None if each pickles on its own: a submission
    to the process or Spark host said only "the topology cannot be serialized: cannot pickle
    '_thread.lock' object", not which of its components holds the lock."""
    for cid, spec in getattr(topology, "components", {}).items():
        try:
            _dumps_by_value(spec.obj, modules)
        except Exception as e:  # noqa: BLE001 (the user's object: named below)
            return cannot_serialize(cid, e)
    return None


def _dumps_by_value(target: Any, modules: list[Any]) -> bytes:
    registered = cloudpickle.list_registry_pickle_by_value()
    ours = [m for m in modules if m.__name__ not in registered]  # the user's own registrations stay
    for m in ours:
        cloudpickle.register_pickle_by_value(m)
    try:
        return code_pickler.dumps(target)
    finally:
        for m in ours:
            cloudpickle.unregister_pickle_by_value(m)


# --- the driver's directory of zipped packages ---------------------------------------------------
#
# A Spark driver zips the user's packages for ``addPyFile`` into a directory of its own in the
# temporary directory and removes it as it ends (`squall.cluster.spark.SparkCluster`). A driver
# SIGKILLed (a machine lost, `kill -9`, Spark's `--supervise` restarting it) cannot: a chaos run
# that killed and restarted the driver left one directory per kill. Each is named after the
# process that made it (pid, start time and pid namespace), so the next driver on the machine
# removes those whose maker is dead. A pid means nothing in another pid namespace (a container
# sharing the machine's temporary directory): there it names another process or none, and a
# live driver's directory was removed as its maker's; those are left to their own namespace.

SHIP_DIR_PREFIX = "squall-ship-"
_SHIP_DIR = re.compile(re.escape(SHIP_DIR_PREFIX) + r"(\d+)-(\d+)-(\d+)-[^-]+")


def _pid_namespace() -> str | None:
    """The inode of this process's pid namespace (``/proc/self/ns/pid`` reads ``pid:[N]``), or
    None without one."""
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    named = re.fullmatch(r"pid:\[(\d+)\]", link)
    return named[1] if named else None


def make_ship_dir(parent: str | None = None) -> tempfile.TemporaryDirectory[str]:
    """A new directory for this driver's zipped packages, in ``parent`` (the temporary
    directory), named after this process for `remove_orphaned_ship_dirs` (a plain name without
    ``/proc``, which nothing sweeps)."""
    started, namespace = process_start(os.getpid()), _pid_namespace()
    mark = f"{os.getpid()}-{started}-{namespace}-" if started is not None and namespace is not None else ""
    return tempfile.TemporaryDirectory(prefix=SHIP_DIR_PREFIX + mark, dir=parent)


def remove_orphaned_ship_dirs(parent: str | None = None) -> list[str]:
    """Remove the directories `make_ship_dir` made under ``parent`` for processes of this user
    now dead; one whose maker lives (another driver on this machine), one of another user, or
    anything not named so is left alone, and one made in another pid namespace, where its
    maker's pid names another process. The paths removed."""
    namespace = _pid_namespace()
    if namespace is None:  # none to compare a maker's with: none is judged
        return []
    removed = orphaned_dirs(_SHIP_DIR, parent, namespace)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed
