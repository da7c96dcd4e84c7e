"""Finding the topology in the user's FILE, for ``squall local`` and ``squall jar``.

A ``.yaml``/``.yml`` FILE is Storm's Flux file (`squall.cli._flux`, docs/flux.md). For a Python
FILE, in this order:

a. a module-level ``build()`` that returns a `StormTopology` (or a `TridentTopology`, which is
   built: the file ``squall trident`` runs); a module-level ``conf`` (a dict or `Config`), if
   present, is the topology's configuration;
b. a module-level ``topology`` that is a `StormTopology` or `TridentTopology` (``conf`` as in a);
c. Storm's way: the file's ``if __name__ == "__main__":`` code calls
   ``StormSubmitter.submit_topology(name, conf, topology)``.

FILE runs once. Which case applies is read from its source first (`binds_topology`): if its
module-level code, outside ``if __name__ == "__main__":`` blocks, binds ``build`` or
``topology`` (a ``def``, an assignment, an import), FILE is imported under a module name of its
own (so its ``__main__`` block does not run) and the verb submits the topology. Otherwise FILE
runs as ``__main__`` with `StormSubmitter` pointed at a `FileSubmitter`. Only a file whose
source binds one of the names but whose import did not (``build`` defined under a condition that
was false) runs a second time, as ``__main__``. Each way of failing has a message of its own
(bytewax's ``_locate_dataflow``).
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import runpy
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._errors import InvalidTopologyException, SquallError
from .._modules import import_file_as
from .._submitter import StormSubmitter
from .._topology import StormTopology, TopologyBuilder
from ..sparse import load, project_of
from ._options import UserError

if TYPE_CHECKING:
    from ._flux import FluxRun


def check_file(arg: str) -> Path:
    """FILE as an absolute path, or a `UserError` saying what is wrong with it."""
    path = Path(arg)
    if not path.exists():
        raise UserError(f"file not found: {arg}")
    if not path.is_file():
        raise UserError(f"not a file: {arg}")
    if path.suffix != ".py" and path.suffix.lower() not in (".yaml", ".yml"):
        raise UserError(f"{arg} is neither a Python file nor a Flux file (expected FILE.py or FILE.yaml)")
    return path.resolve()


@contextlib.contextmanager
def on_sys_path(directory: Path) -> Iterator[None]:
    """FILE's directory first on ``sys.path``, as ``python FILE`` has it."""
    saved = list(sys.path)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path[:] = saved


def _module_name(path: Path) -> str:
    """FILE's stem made an identifier (`_identifier`), unless another module already has that
    name (as ``json.py`` would) or the standard library does (``calendar.py``: its classes would
    be shipped as the library's)."""
    stem = _identifier(path.stem)
    candidates = itertools.chain([stem], (f"_squall_local_{stem}_{i}" for i in itertools.count(1)))
    for name in candidates:
        if not name.isidentifier() or name in sys.stdlib_module_names:
            continue
        existing = sys.modules.get(name)
        if existing is None or getattr(existing, "__file__", None) == str(path):
            return name
    raise AssertionError("unreachable")


def _identifier(stem: str) -> str:
    """``stem`` as a name Python can import: each character an identifier cannot hold an
    underscore, and an underscore first where it starts with a digit (``word-count`` ->
    ``word_count``, ``2nd topology`` -> ``_2nd_topology``). The names tried after it
    (`_module_name`) are built on it, so they are identifiers too: built on a stem that was
    none, none of them was, and the search for a free one never ended."""
    name = "".join(c if ("a" + c).isidentifier() else "_" for c in stem) or "_"
    return name if name.isidentifier() else "_" + name


def import_file(path: Path) -> ModuleType:
    """Import FILE as a module of its own name (its ``__main__`` block does not run)."""
    try:
        return import_file_as(path, _module_name(path))
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise UserError(f"error importing {path.name}: {type(e).__name__}: {e}") from e


def topology_in(module: ModuleType, path: Path) -> tuple[StormTopology, dict[str, Any]] | None:
    """Cases a and b of the module docstring; None if FILE defines neither."""
    where = path.name
    if hasattr(module, "build"):
        build = module.build
        if not callable(build):
            raise UserError(f"{where}: build is {_a(build)}, expected a function returning a StormTopology")
        try:
            topology = _built(build())
        except Exception as e:
            raise UserError(f"{where}: build() raised {type(e).__name__}: {e}") from e
        if not isinstance(topology, StormTopology):
            raise UserError(f"{where}: build() returned {_a(topology)}, expected a StormTopology"
                            f"{_builder_hint(topology)}")
    elif hasattr(module, "topology"):
        try:
            topology = _built(module.topology)
        except Exception as e:
            raise UserError(f"{where}: topology.build() raised {type(e).__name__}: {e}") from e
        if not isinstance(topology, StormTopology):
            raise UserError(f"{where}: topology is {_a(topology)}, expected a StormTopology"
                            f"{_builder_hint(topology)}")
    else:
        return None
    conf = getattr(module, "conf", None)
    if conf is not None and not isinstance(conf, Mapping):
        raise UserError(f"{where}: conf is {_a(conf)}, expected a dict or Config")
    return topology, dict(conf or {})


def _built(topology: Any) -> Any:
    """``topology``, or the `StormTopology` it builds if it is a `TridentTopology`: the file
    that ``squall trident`` runs on Spark's engine (a ``build()`` returning a TridentTopology)
    runs on squall's engine unchanged, as Storm's ``topology.build()`` would have it. Before,
    it was refused as "not a StormTopology"."""
    if type(topology).__name__ != "TridentTopology":  # squall.trident imported only for one
        return topology
    from ..trident import TridentTopology
    return topology.build() if isinstance(topology, TridentTopology) else topology


def _a(obj: object) -> str:
    if obj is None:
        return "None"
    name = type(obj).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _builder_hint(obj: object) -> str:
    if isinstance(obj, TopologyBuilder):
        return " (call .create_topology() on the builder)"
    return " (from TopologyBuilder.create_topology())"


def topology_name(path: Path) -> str:
    """The default topology name: FILE's stem with ``/ . : \\`` made ``_``."""
    return "".join("_" if ch in "/.:\\" else ch for ch in path.stem)


class FileSubmitter:
    """Where `StormSubmitter` sends FILE's submissions (case c): ``target`` (a LocalCluster, or
    anything with its ``submit_topology``), with the ``-c`` overrides merged over the file's conf
    and ``--name`` applied."""

    def __init__(self, target: Any, overrides: dict[str, Any], rename: str | None) -> None:
        self.target = target
        self.overrides = overrides
        self.rename = rename
        self.names: list[str] = []
        self.error: BaseException | None = None

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: Any) -> None:
        try:
            if self.rename is not None:
                if self.names:
                    raise UserError("--name was given, but the file submits more than one topology")
                name = self.rename
            if conf is not None and not isinstance(conf, Mapping):
                raise InvalidTopologyException(f"submit_topology: conf must be a dict or Config, got {_a(conf)}")
            self.target.submit_topology(name, {**(conf or {}), **self.overrides}, topology)
        except BaseException as e:
            self.error = e
            raise
        self.names.append(name)


_NAMES = frozenset({"build", "topology"})


def binds_topology(source: str | bytes) -> bool:
    """Whether FILE's module-level code, outside its ``if __name__ == "__main__":`` blocks, may
    bind ``build`` or ``topology`` (a ``def``, a ``class``, an assignment, an import, or
    ``from ... import *``). A file that does not parse says yes: importing it reports the error."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True
    return not _NAMES.isdisjoint(_bound_names(tree.body))


def _bound_names(body: list[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield "build" if alias.name == "*" else alias.asname or alias.name.partition(".")[0]
        elif isinstance(node, ast.If):
            if not _is_main_guard(node.test):
                yield from _bound_names(node.body)
            yield from _bound_names(node.orelse)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            yield from _bound_names(node.body)
            for handler in node.handlers:
                yield from _bound_names(handler.body)
            yield from _bound_names(node.orelse)
            yield from _bound_names(node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            if isinstance(node, (ast.For, ast.AsyncFor)):
                yield from (n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
            yield from _bound_names(node.body)
            yield from _bound_names(getattr(node, "orelse", []))


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {_text(test.left), _text(test.comparators[0])}
    return sides == {"name:__name__", "str:__main__"}


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return f"name:{node.id}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return f"str:{node.value}"
    return ""


def _main_guard_lines(source: str | bytes) -> list[range]:
    """The lines of FILE's module-level ``if __name__ == "__main__":`` blocks."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [range(node.lineno, (node.end_lineno or node.lineno) + 1) for node in tree.body
            if isinstance(node, ast.If) and _is_main_guard(node.test)]


def _raised_in_main_block(error: BaseException, path: Path, source: str | bytes) -> bool:
    """Whether FILE's module-level frame was in a ``__main__`` block when ``error`` was raised
    (else it was FILE's other module-level code: an error of importing it)."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and code.co_filename == str(path):
            return any(tb.tb_lineno in lines for lines in _main_guard_lines(source))
        tb = tb.tb_next
    return True


def run_as_main(path: Path, argv: list[str], submitter: FileSubmitter) -> list[str]:
    """Case c: run FILE as ``__main__`` with ``sys.argv = argv``; return the names it submitted."""
    saved = sys.argv
    sys.argv = argv
    exited = False
    try:
        with StormSubmitter.submitting_to(submitter):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise UserError(f"{path.name} exited with status {e.code!r} while running as __main__") from e
        exited = True  # its own --help, say: what it printed is the answer, as `storm jar` gives it
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        if e is submitter.error and isinstance(e, (SquallError, UserError)):
            raise
        if not _raised_in_main_block(e, path, path.read_bytes()):
            raise UserError(f"error importing {path.name}: {type(e).__name__}: {e}") from e
        raise UserError(f"{path.name}: its __main__ code raised {type(e).__name__}: {e}") from e
    finally:
        sys.argv = saved
    if not submitter.names and exited:
        return []
    if not submitter.names:
        if _main_makes_a_local_cluster(path.read_bytes()):
            raise UserError(
                f"{path.name} submitted nothing to squall: its __main__ code ran a LocalCluster of its own "
                f"(as `python {path.name}` would) instead of calling StormSubmitter.submit_topology. Give it "
                f"a build() function returning its StormTopology, which squall local and squall jar run "
                f"(see docs/cli.md)")
        raise UserError(
            f"{path.name} defines no topology: give it a build() function returning a StormTopology, "
            f"a module-level topology, or call StormSubmitter.submit_topology(name, conf, topology) "
            f"under if __name__ == '__main__' (see docs/cli.md)")
    return submitter.names


def _main_makes_a_local_cluster(source: str | bytes) -> bool:
    """Whether FILE's ``__main__`` blocks call ``LocalCluster(...)`` (storm-starter's main: its own
    cluster unless given a name to submit under)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for block in (n for n in tree.body if isinstance(n, ast.If) and _is_main_guard(n.test)):
        for node in ast.walk(block):
            if isinstance(node, ast.Call):
                f = node.func
                if (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "") == "LocalCluster":
                    return True
    return False


def submit_file(path: Path, target: Any, topology_over: dict[str, Any], name: str | None,
                args: list[str], flux: FluxRun | None = None) -> list[str]:
    """Submit what FILE defines (``build()`` or ``topology``) or submits (run as ``__main__``
    with ``args``) to ``target``, each topology's conf under ``topology_over``; return the names
    submitted. ``name`` (--name) overrides the topology's name. ``flux``: FILE is a Flux file,
    whose topology `squall.cli._flux.from_args` built."""
    if flux is not None:
        return flux.submit(target, topology_over, name)
    project = project_of(path)
    if project is not None:  # a streamparse project's topologies/NAME.py: as `squall sparse run -n NAME`
        loaded = load(project, path.stem, options=topology_over)
        target.submit_topology(name or loaded.name, loaded.conf, loaded.topology)
        return [name or loaded.name]
    found = topology_in(import_file(path), path) if binds_topology(path.read_bytes()) else None
    if found is not None:
        if args:  # nothing reads them: `squall jar FILE --name NAME` submitted FILE's stem, unnamed
            raise UserError(
                f"{path.name} defines its topology (build() or topology), which takes no arguments, but "
                f"{' '.join(args)!r} follow it, which nothing would read: squall's options go before FILE "
                f"(squall jar --name NAME {path.name}); a FILE reads arguments (sys.argv) only in the "
                f"`if __name__ == \"__main__\":` code that submits its topology", code=2)
        topology, conf = found
        name = name or topology_name(path)
        target.submit_topology(name, {**conf, **topology_over}, topology)
        return [name]
    return run_as_main(path, [str(path), *args], FileSubmitter(target, topology_over, name))
