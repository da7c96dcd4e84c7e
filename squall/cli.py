"""The ``squall`` command, after Storm's ``storm`` (``bin/storm.py``).

Verbs are named after ``storm``'s. Implemented so far: ``local`` (run a topology file on an
in-process `LocalCluster`, with live figures) and ``version``. Every verb shares ``--config FILE``
(a ``squall.yaml`` to use as the cluster configuration), ``-c key=value`` (repeatable; the value
is read as YAML, so ``-c topology.workers=2`` is the integer 2) and ``--debug`` (tracebacks).

How ``squall local FILE`` finds the topology in FILE, in this order:

a. a module-level ``build()`` that returns a `StormTopology`; a module-level ``conf`` (a dict or
   `Config`), if present, is the topology's configuration;
b. a module-level ``topology`` that is a `StormTopology` (``conf`` as in a);
c. Storm's way: the file's ``if __name__ == "__main__":`` code calls
   ``StormSubmitter.submit_topology(name, conf, topology)``.

For a and b, FILE is imported under a module name of its own (so its ``__main__`` block does not
run) and the topology is submitted as ``--name`` or FILE's stem. Only if neither is defined is
FILE run again as ``__main__`` (``sys.argv == [FILE]``) with `StormSubmitter` pointed at the
local cluster; ``--name`` then renames the one topology it submits. FILE's directory is put at
the front of ``sys.path``, as ``python FILE`` does. ``-c`` keys override the file's conf; daemon
keys (``storm.``, ``nimbus.``, ``supervisor.``, ``worker.``, ``ui.`` ...) configure the cluster.

User errors print one line, ``squall: error: ...``, and exit 1 (2 for command-line syntax);
tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import itertools
import logging
import math
import runpy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from . import __version__
from ._config import COMPONENT_KEYS, Config, default_conf, is_daemon_key
from ._errors import InvalidTopologyException, NotAliveException, SquallError
from ._submitter import StormSubmitter
from ._topology import StormTopology, TopologyBuilder
from .cluster.local import LocalCluster


class _UserError(Exception):
    """A mistake of the user's: shown as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def main(argv: list[str] | None = None) -> int:
    """Run the ``squall`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _create_arg_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse has printed
        return e.code if isinstance(e.code, int) else 1
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except _UserError as e:
        return _fail(str(e), e, args.debug, e.code)
    except SquallError as e:
        return _fail(str(e), e, args.debug, 1)
    except Exception as e:
        hint = "" if args.debug else " (run with --debug for the traceback)"
        return _fail(f"unexpected {type(e).__name__}: {e}{hint}", e, args.debug, 1)


def _fail(message: str, error: BaseException, debug: bool, code: int) -> int:
    if debug:
        shown = error.__cause__ if isinstance(error, _UserError) and error.__cause__ else error
        traceback.print_exception(type(shown), shown, shown.__traceback__, file=sys.stderr)
    print(f"squall: error: {message}", file=sys.stderr)
    return code


def _create_arg_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE",
                        help="a squall.yaml to use as the cluster configuration "
                             "(default: $SQUALL_CONF_DIR/squall.yaml, then ./squall.yaml)")
    common.add_argument("-c", dest="overrides", action="append", metavar="KEY=VALUE",
                        help="override a configuration key; VALUE is read as YAML (repeatable)")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    parser = argparse.ArgumentParser(
        prog="squall", description="Apache Storm's model in Python. See docs/cli.md.")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    local = verbs.add_parser(
        "local", parents=[common], help="run a topology file on an in-process LocalCluster",
        description="Run the topology that FILE defines on an in-process LocalCluster, showing live "
                    "figures, until --ttl seconds pass or Ctrl-C. FILE defines build() (and "
                    "optionally conf), or topology, or submits with StormSubmitter under "
                    "if __name__ == '__main__' (see docs/cli.md).")
    local.add_argument("file", metavar="FILE", help="a .py file that defines a topology")
    local.add_argument("--ttl", type=_positive_seconds, metavar="SECONDS",
                       help="stop after this many seconds (default: run until Ctrl-C)")
    local.add_argument("--name", help="the topology's name (default: FILE's stem)")
    local.set_defaults(run=_cmd_local)

    version = verbs.add_parser("version", parents=[common], help="print squall's version")
    version.set_defaults(run=_cmd_version)
    return parser


def _positive_seconds(text: str) -> float:
    try:
        secs = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not secs > 0 or math.isinf(secs):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return secs


# --- version ----------------------------------------------------------------------------------------
def _cmd_version(args: argparse.Namespace) -> int:
    _parse_overrides(args.overrides)
    print(f"squall {__version__} (Python {sys.version.split()[0]})")
    return 0


# --- configuration from the command line -------------------------------------------------------------
def _parse_overrides(items: list[str] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-c key=value`` items as (topology conf, daemon conf); values are read as YAML."""
    topology: dict[str, Any] = {}
    daemon: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(ch.isspace() for ch in key):
            raise _UserError(f"-c {item!r}: expected KEY=VALUE, e.g. -c topology.workers=2", code=2)
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text  # not YAML: keep the text as it is
        _warn_if_misspelt(key)
        (daemon if is_daemon_key(key) else topology)[key] = value
    return topology, daemon


def _warn_if_misspelt(key: str) -> None:
    known = set(default_conf()) | COMPONENT_KEYS | {
        v for k, v in vars(Config).items() if k.isupper() and isinstance(v, str)}
    if key in known or not (key.startswith("topology.") or is_daemon_key(key)):
        return
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
    if close:
        print(f"squall: warning: -c {key}: unknown key; did you mean {close[0]}?", file=sys.stderr)


def _conf_file(path: str | None) -> str | None:
    if path is not None and not Path(path).is_file():
        raise _UserError(f"config file not found: {path}")
    return path


# --- finding the topology in FILE ----------------------------------------------------------------------
def _check_file(arg: str) -> Path:
    path = Path(arg)
    if not path.exists():
        raise _UserError(f"file not found: {arg}")
    if not path.is_file():
        raise _UserError(f"not a file: {arg}")
    if path.suffix != ".py":
        raise _UserError(f"{arg} is not a Python file (expected FILE.py)")
    return path.resolve()


def _module_name(path: Path) -> str:
    """FILE's stem, unless another module already has that name (as ``json.py`` would)."""
    candidates = itertools.chain([path.stem], (f"_squall_local_{path.stem}_{i}" for i in itertools.count(1)))
    for name in candidates:
        if not name.isidentifier():
            continue
        existing = sys.modules.get(name)
        if existing is None or getattr(existing, "__file__", None) == str(path):
            return name
    raise AssertionError("unreachable")


def _import(path: Path) -> ModuleType:
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so its classes pickle by reference, and dataclasses work
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        del sys.modules[name]
        raise _UserError(f"error importing {path.name}: {type(e).__name__}: {e}") from e
    return module


def _topology_in(module: ModuleType, path: Path) -> tuple[StormTopology, dict[str, Any]] | None:
    """Cases a and b of the module docstring; None if FILE defines neither."""
    where = path.name
    if hasattr(module, "build"):
        build = module.build
        if not callable(build):
            raise _UserError(f"{where}: build is {_a(build)}, expected a function returning a StormTopology")
        try:
            topology = build()
        except Exception as e:
            raise _UserError(f"{where}: build() raised {type(e).__name__}: {e}") from e
        if not isinstance(topology, StormTopology):
            raise _UserError(f"{where}: build() returned {_a(topology)}, expected a StormTopology"
                             f"{_builder_hint(topology)}")
    elif hasattr(module, "topology"):
        topology = module.topology
        if not isinstance(topology, StormTopology):
            raise _UserError(f"{where}: topology is {_a(topology)}, expected a StormTopology"
                             f"{_builder_hint(topology)}")
    else:
        return None
    conf = getattr(module, "conf", None)
    if conf is not None and not isinstance(conf, Mapping):
        raise _UserError(f"{where}: conf is {_a(conf)}, expected a dict or Config")
    return topology, dict(conf or {})


def _a(obj: object) -> str:
    if obj is None:
        return "None"
    name = type(obj).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _builder_hint(obj: object) -> str:
    if isinstance(obj, TopologyBuilder):
        return " (call .create_topology() on the builder)"
    return " (from TopologyBuilder.create_topology())"


class _LocalSubmitter:
    """Where `StormSubmitter` sends FILE's submissions (case c): the LocalCluster, with the
    ``-c`` overrides merged over the file's conf and ``--name`` applied."""

    def __init__(self, cluster: LocalCluster, overrides: dict[str, Any], rename: str | None) -> None:
        self.cluster = cluster
        self.overrides = overrides
        self.rename = rename
        self.names: list[str] = []
        self.error: BaseException | None = None

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: Any) -> None:
        try:
            if self.rename is not None:
                if self.names:
                    raise _UserError("--name was given, but the file submits more than one topology")
                name = self.rename
            if conf is not None and not isinstance(conf, Mapping):
                raise InvalidTopologyException(f"submit_topology: conf must be a dict or Config, got {_a(conf)}")
            self.cluster.submit_topology(name, {**(conf or {}), **self.overrides}, topology)
        except BaseException as e:
            self.error = e
            raise
        self.names.append(name)


def _run_as_main(path: Path, submitter: _LocalSubmitter) -> list[str]:
    """Case c: run FILE as ``__main__`` and return the names it submitted."""
    argv = sys.argv
    sys.argv = [str(path)]
    try:
        with StormSubmitter.submitting_to(submitter):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise _UserError(f"{path.name} exited with status {e.code!r} while running as __main__") from e
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        if e is submitter.error and isinstance(e, (SquallError, _UserError)):
            raise
        raise _UserError(f"{path.name}: its __main__ code raised {type(e).__name__}: {e}") from e
    finally:
        sys.argv = argv
    if not submitter.names:
        raise _UserError(
            f"{path.name} defines no topology: give it a build() function returning a StormTopology, "
            f"a module-level topology, or call StormSubmitter.submit_topology(name, conf, topology) "
            f"under if __name__ == '__main__' (see docs/cli.md)")
    return submitter.names


def _topology_name(path: Path) -> str:
    return "".join("_" if ch in "/.:\\" else ch for ch in path.stem)


# --- local --------------------------------------------------------------------------------------------
def _cmd_local(args: argparse.Namespace) -> int:
    topology_over, daemon_over = _parse_overrides(args.overrides)
    conf_file = _conf_file(args.config)
    path = _check_file(args.file)
    with _on_sys_path(path.parent), _squall_logging(args.debug), _sigterm_stops():
        cluster = LocalCluster(daemon_over, conf_file=conf_file)
        try:
            module = _import(path)
            found = _topology_in(module, path)
            if found is not None:
                topology, conf = found
                name = args.name or _topology_name(path)
                cluster.submit_topology(name, {**conf, **topology_over}, topology)
                names = [name]
            else:
                names = _run_as_main(path, _LocalSubmitter(cluster, topology_over, args.name))
            view = _LiveView() if sys.stdout.isatty() else _PlainView()
            final, reason = _watch(cluster, names, args.ttl, view)
            for name in names:
                with contextlib.suppress(NotAliveException):
                    cluster.kill_topology(name, wait_secs=0)
        finally:
            cluster.shutdown()
    _print_summary(final, reason, args.debug)
    return 0


@contextlib.contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    saved = list(sys.path)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path[:] = saved


class _OneLine(logging.Filter):
    """Without --debug, a log record keeps its first line and the exception's last line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        lines = [ln for ln in message.splitlines() if ln.strip()]
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            lines.append(f"{type(exc).__name__}: {exc}")
            record.exc_info = None
            record.exc_text = None
        if len(lines) > 1:
            record.msg, record.args = f"{lines[0]} {lines[-1].strip()} (--debug shows the traceback)", None
        return True


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (rich's Live redirects it above the display)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


@contextlib.contextmanager
def _squall_logging(debug: bool) -> Iterator[None]:
    """Show squall's warnings and errors (and topology.debug's emit log) on stderr."""
    root = logging.getLogger("squall")
    emits = logging.getLogger("squall.debug")
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if not debug:
        handler.addFilter(_OneLine())
    saved = (root.level, root.propagate, emits.level)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    emits.setLevel(logging.INFO)
    root.propagate = False
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        root.propagate = saved[1]
        emits.setLevel(saved[2])


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM stops the run as Ctrl-C does (summary included)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- watching ------------------------------------------------------------------------------------------
def _watch(cluster: LocalCluster, names: list[str], ttl: float | None, view: Any
           ) -> tuple[dict[str, dict[str, Any]], str]:
    """Show the figures of ``names`` once a second until ``ttl``, Ctrl-C, or they are gone.

    Returns the last information of each topology and why the run stopped.
    """
    last: dict[str, dict[str, Any]] = {}
    start = time.monotonic()
    end = start + ttl if ttl else math.inf
    sampler = _Sampler(start)
    reason = f"--ttl {ttl:g} s reached" if ttl else ""
    try:
        with view:
            for tick in itertools.count(1):
                wake = min(start + tick, end)
                delay = wake - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                samples = sampler.sample(cluster, names, last)
                if not samples:
                    reason = "the topology was removed"
                    break
                view.show(samples)
                if time.monotonic() >= end:
                    break
    except KeyboardInterrupt:
        reason = "interrupted"
        with contextlib.suppress(KeyboardInterrupt):
            sampler.sample(cluster, names, last)  # the totals up to now, for the summary
    return last, reason


class _Sampler:
    """Reads `get_topology_info` and works out per-second rates since the previous reading."""

    def __init__(self, start: float) -> None:
        self._start = start
        # (topology, component) -> (time, emitted, latency sum, latency count)
        self._prev: dict[tuple[str, str], tuple[float, int, float, int]] = {}

    def sample(self, cluster: LocalCluster, names: list[str], last: dict[str, dict[str, Any]]
               ) -> list[tuple[dict[str, Any], dict[str, tuple[float, float | None]]]]:
        """``[(info, {component: (emit rate /s, latency ms of the last second)})]``; updates ``last``."""
        out = []
        for name in names:
            try:
                info = cluster.get_topology_info(name)
            except NotAliveException:
                continue
            now = time.monotonic()
            last[name] = info
            rates = {}
            for cid, c in _user_components(info):
                lat_sum = sum(s["complete_latency_sum"] for s in c["task_stats"].values())
                lat_n = sum(s["complete_latency_count"] for s in c["task_stats"].values())
                t0, emitted0, sum0, n0 = self._prev.get((name, cid), (self._start, 0, 0.0, 0))
                rate = (c["emitted"] - emitted0) / (now - t0) if now > t0 else 0.0
                latency = 1000.0 * (lat_sum - sum0) / (lat_n - n0) if lat_n > n0 else None
                rates[cid] = (rate, latency)
                self._prev[(name, cid)] = (now, c["emitted"], lat_sum, lat_n)
            out.append((info, rates))
        return out


def _user_components(info: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Spouts first, then bolts, each sorted by id; system components (``__*``) left out."""
    comps = [(cid, c) for cid, c in info["components"].items() if not cid.startswith("__")]
    return sorted(comps, key=lambda kv: (kv[1]["type"] != "spout", kv[0]))


def _last_error(info: dict[str, Any]) -> str | None:
    if not info["errors"]:
        return None
    e = max(info["errors"], key=lambda e: e["time"])
    ago = max(0.0, time.time() - e["time"])
    return f"[{e['component']}] task {e['task']}: {e['error']} ({_duration(ago)} ago)"


def _duration(secs: float) -> str:
    s = int(secs)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m {s % 60:02d}s"


class _PlainView:
    """One line per topology per second, for logs and pipes."""

    def __enter__(self) -> _PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def show(self, samples) -> None:
        for info, rates in samples:
            parts = [f"[{_duration(info['uptime_secs'])}] {info['name']} {info['status']}"]
            for cid, c in _user_components(info):
                rate, latency = rates.get(cid, (0.0, None))
                fields = [f"{cid} ({c['type']}): emitted={c['emitted']} ({rate:.0f}/s)",
                          f"acked={c['acked']}", f"failed={c['failed']}"]
                if c["type"] == "spout":
                    shown = c["complete_latency_ms"] if latency is None else latency
                    fields.append(f"latency={shown:.2f}ms")
                else:
                    fields.append(f"executed={c['executed']}")
                parts.append(" ".join(fields))
            error = _last_error(info)
            if error:
                parts.append(f"last error: {error}")
            print(" | ".join(parts), flush=True)


class _LiveView:
    """A table per topology, redrawn once a second (rich's Live)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(), auto_refresh=False, transient=False)

    def __enter__(self) -> _LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def show(self, samples) -> None:
        from rich.console import Group
        from rich.table import Table

        tables = []
        for info, rates in samples:
            title = f"[b]{info['name']}[/b]  {info['status']}  up {_duration(info['uptime_secs'])}"
            error = _last_error(info)
            table = Table(title=title, title_justify="left",
                          caption=f"[red]last error: {error}[/red]" if error else None,
                          caption_justify="left")
            for col in ("component", "type"):
                table.add_column(col)
            for col in ("executors", "tasks", "emitted", "acked", "failed", "executed", "emit/s",
                        "latency ms"):
                table.add_column(col, justify="right")
            for cid, c in _user_components(info):
                rate, latency = rates.get(cid, (0.0, None))
                if c["type"] == "spout":
                    lat = f"{c['complete_latency_ms'] if latency is None else latency:.2f}"
                else:
                    lat = ""
                table.add_row(cid, c["type"], str(c["executors"]), str(c["tasks"]), f"{c['emitted']:,}",
                              f"{c['acked']:,}", f"{c['failed']:,}", f"{c['executed']:,}", f"{rate:,.0f}", lat)
            tables.append(table)
        self._live.update(Group(*tables), refresh=True)


# --- the summary ---------------------------------------------------------------------------------------
_SUMMARY_COLUMNS = ("component", "type", "executors", "tasks", "emitted", "acked", "failed", "executed",
                    "tuples/s")


def _summary_rows(info: dict[str, Any]) -> list[list[str]]:
    secs = max(info["uptime_secs"], 1e-9)
    rows = []
    for cid, c in _user_components(info):
        done = c["emitted"] if c["type"] == "spout" else c["executed"]
        rows.append([cid, c["type"], str(c["executors"]), str(c["tasks"]), str(c["emitted"]), str(c["acked"]),
                     str(c["failed"]), str(c["executed"]), f"{done / secs:.1f}"])
    return rows


def _print_summary(final: dict[str, dict[str, Any]], reason: str, debug: bool) -> None:
    """Totals per component, throughput and errors of each topology, as plain text."""
    for name, info in final.items():
        secs = max(info["uptime_secs"], 1e-9)
        print(f"\nSummary of topology {name}: ran {secs:.1f} s, {reason}")
        rows = [list(_SUMMARY_COLUMNS)] + _summary_rows(info)
        widths = [max(len(r[i]) for r in rows) for i in range(len(_SUMMARY_COLUMNS))]
        for r in rows:
            cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])]
            cells += [v.rjust(w) for v, w in zip(r[2:], widths[2:])]
            print("  " + "  ".join(cells).rstrip())
        spouts = [c for _cid, c in _user_components(info) if c["type"] == "spout"]
        emitted = sum(c["emitted"] for c in spouts)
        acked = sum(c["acked"] for c in spouts)
        failed = sum(c["failed"] for c in spouts)
        stats = [s for c in spouts for s in c["task_stats"].values()]
        lat_n = sum(s["complete_latency_count"] for s in stats)
        latency = 1000.0 * sum(s["complete_latency_sum"] for s in stats) / lat_n if lat_n else 0.0
        print(f"  spouts: {emitted / secs:.1f} tuples/s emitted, {acked / secs:.1f}/s acked, "
              f"{failed} failed; mean complete latency {latency:.2f} ms")
        errors = sorted(info["errors"], key=lambda e: e["time"])
        if not errors:
            print("  errors: none")
            continue
        shown = errors[-_ERRORS_SHOWN:]
        print(f"  errors: {len(errors)}" + (f" (the latest {len(shown)} below)" if len(shown) < len(errors) else ""))
        for e in shown:
            fatal = " (worker crashed)" if e["fatal"] else ""
            print(f"    [{e['component']}] task {e['task']}: {e['error']}{fatal}")
            if debug and e["traceback"]:
                print("      " + e["traceback"].rstrip().replace("\n", "\n      "))
    sys.stdout.flush()


_ERRORS_SHOWN = 10
