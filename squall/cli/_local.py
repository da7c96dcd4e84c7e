"""``squall local FILE``: run FILE's topology on an in-process `LocalCluster` with live
figures (one plain line a second when stdout is not a terminal), then print a summary."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Self

from .._config import Config
from .._error_lines import cause_line, exception_line, first_and_last, telling_lines
from .._errors import NotAliveException
from .._redact import RedactingFilter
from .._system import is_system_id
from ..cluster.local import LocalCluster
from ..worker.stats_history import ALL_TIME
from ._flux import from_args, sleep_seconds
from ._options import UserError, conf_file, parse_overrides
from ._topology_file import check_file, on_sys_path, submit_file


def cmd_local(args: argparse.Namespace) -> int:
    """``squall local FILE [--ttl SECONDS] [--name NAME]``."""
    topology_over, daemon_over = parse_overrides(args.overrides)
    config = conf_file(args.config)
    flux = from_args(args, [], "local")
    if flux is not None and args.args:
        raise UserError(f"unrecognized arguments: {' '.join(args.args)} (a Flux file takes Flux's options only)",
                        code=2)
    if flux is not None and flux.options.dry_run:
        return 0
    path = flux.path if flux is not None else check_file(args.file)
    ttl = args.ttl if args.ttl is not None or flux is None else sleep_seconds(flux.options)
    with on_sys_path(path.parent), _squall_logging(args.debug), _sigterm_stops():
        cluster = LocalCluster(daemon_over, conf_file=config, ui_port=_ui_port(args.ui, daemon_over, config))
        if cluster.ui_port is not None:
            print(f"squall UI at http://127.0.0.1:{cluster.ui_port}/api/v1/topology/summary", file=sys.stderr)
        try:
            names = submit_file(path, cluster, topology_over, args.name, args.args, flux)
            if not names:  # FILE's __main__ ended cleanly without one (its --help, say)
                return 0
            view = _LiveView() if sys.stdout.isatty() else _PlainView()
            final, reason = _watch(cluster, names, ttl, view)
            for name in names:
                with contextlib.suppress(NotAliveException):
                    cluster.kill_topology(name, wait_secs=0)
        finally:
            cluster.shutdown()
    _print_summary(final, reason, args.debug)
    crashed = crashes(final)
    if crashed:  # Storm's local run ends with status 1 when a worker dies of an error
        print(f"squall: error: a worker crashed {crashed} time(s) (the errors above)", file=sys.stderr)
        return 1
    return 0


def _ui_port(asked: int | None, daemon_over: dict[str, Any], config: str | None) -> int | None:
    """The port ``--ui [PORT]`` asks for: PORT, else (``--ui`` alone, given as -1) ``ui.port``."""
    if asked is None or asked >= 0:
        return asked
    from .._config import cluster_conf, setting
    return int(setting(cluster_conf(daemon_over, config), Config.UI_PORT))


def one_line(text: str) -> str:
    """An error's text on one line, as the live figures and the summary show it: its first line
    and the line that says what went wrong (`squall._error_lines.first_and_last`).
    ``--debug``, the worker's log and ``squall get-errors`` have all of it."""
    first, last = first_and_last(text)
    if last is None:
        return first
    said = cause_line(text, last)
    # a shell subprocess's stderr line, named as such, goes after a semicolon
    return f"{first}{'; ' if said != last else ' '}{said} (--debug shows the traceback)"


class _OneLine(logging.Filter):
    """Without --debug, a log record keeps its first line and the exception's line (`one_line`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        lines = telling_lines(message)
        exc_given = bool(record.exc_info and record.exc_info[1] is not None)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            said = telling_lines(str(exc))
            lines.append(f"{type(exc).__name__}: {said[0] if said else ''}".rstrip())
            record.exc_info = None
            record.exc_text = None
        if len(lines) > 1:
            last = lines[-1] if exc_given else (exception_line(message) or lines[-1])
            record.msg, record.args = f"{lines[0]} {last} (--debug shows the traceback)", None
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
    """Show squall's warnings and errors on stderr, and the records of what logs tuples for the
    user to see: topology.debug's emit log, Flux's LogInfoBolt (whose whole purpose is its
    INFO lines, which Storm's local mode shows) and what the components log themselves."""
    root = logging.getLogger("squall")
    emits = logging.getLogger("squall.debug")
    tuples = logging.getLogger("squall.flux.wrappers")
    # a streamparse component's own records, which Storm's local mode shows (pystorm sends them
    # to Storm's log as ShellLog lines): its ``self.logger`` (at pystorm.log.level, which
    # `squall.sparse.component` sets on it) and its ``self.log(...)`` (at the level it gives)
    sparse = logging.getLogger("squall.sparse")
    pystorm = logging.getLogger("pystorm.component")
    # and a shell component's ``log`` commands (so a streamparse one's over --multilang), which
    # Storm's local mode shows as ShellLog lines at INFO (squall.multilang.component.shell_log)
    shell_log = logging.getLogger("squall.multilang.shell_log")
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    if not debug:
        handler.addFilter(_OneLine())
    saved = (root.level, root.propagate, emits.level, tuples.level, sparse.level, pystorm.propagate, shell_log.level)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    emits.setLevel(logging.INFO)
    tuples.setLevel(logging.INFO)
    sparse.setLevel(logging.DEBUG if debug else logging.INFO)
    shell_log.setLevel(logging.DEBUG if debug else logging.INFO)
    root.propagate = False
    pystorm.propagate = False  # shown here once, not again by the root logger's handlers
    root.addHandler(handler)
    pystorm.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        pystorm.removeHandler(handler)
        root.setLevel(saved[0])
        root.propagate = saved[1]
        emits.setLevel(saved[2])
        tuples.setLevel(saved[3])
        sparse.setLevel(saved[4])
        pystorm.propagate = saved[5]
        shell_log.setLevel(saved[6])


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


@dataclass(frozen=True, slots=True)
class _TaskReading:
    """What one task had counted at a reading: its tuples emitted on the streams the pages show
    (system streams left out) and, at a spout, its trees acked with their complete latencies'
    sum (seconds), in the worker ``launch``: its slot and launch id (its counts start from zero
    with each; a slot numbers its own launches, so a task a rebalance moved may come back with
    the same launch id in another slot)."""

    launch: tuple[Any, Any]
    emitted: int
    latency_sum: float
    latency_n: int

    def since(self, before: _TaskReading | None) -> _TaskReading:
        """What the task counted since ``before``: all of this reading when there was none, or
        when its worker restarted or moved since (another launch, or a count that went down)."""
        if (before is None or self.launch != before.launch or self.emitted < before.emitted
                or self.latency_n < before.latency_n):
            return self
        return _TaskReading(self.launch, self.emitted - before.emitted, self.latency_sum - before.latency_sum,
                            self.latency_n - before.latency_n)


def _task_readings(component: dict[str, Any]) -> dict[str, _TaskReading]:
    """Task id -> its `_TaskReading`, for the tasks of ``component`` (of `get_topology_info`)
    whose worker reported."""
    out = {}
    for task, st in component.get("task_stats", {}).items():
        emitted = sum(int(n) for stream, n in (st.get("emitted") or {}).items() if not is_system_id(stream))
        out[str(task)] = _TaskReading((st.get("slot"), st.get("launch_id")), emitted,
                                      float(st.get("complete_latency_sum") or 0.0),
                                      int(st.get("complete_latency_count") or 0))
    return out


class _Sampler:
    """Reads `get_topology_info` and works out per-second rates since the previous reading.

    The rates add up each task's change, as ``squall monitor`` does: a task whose worker
    restarted (another launch) counts from zero again, and is counted from zero, while the other
    tasks count on (the component's totals would go down: a negative emit rate, and no latency;
    or, when the new launch had already counted more than the old one, too few)."""

    def __init__(self, start: float) -> None:
        self._start = start
        # (topology, component) -> time of the previous reading, and each task's reading then
        self._prev: dict[tuple[str, str], tuple[float, dict[str, _TaskReading]]] = {}

    def sample(self, cluster: LocalCluster, names: list[str], last: dict[str, dict[str, Any]]
               ) -> list[tuple[dict[str, Any], dict[str, tuple[float, float | None]]]]:
        """``[(info, {component: (emit rate /s, latency ms of the last second)})]``; updates ``last``."""
        out = []
        for name in names:
            try:
                info = cluster.get_topology_info(name)
            except NotAliveException:
                continue
            readings = {cid: _task_readings(c) for cid, c in user_components(info)}
            try:
                with_statistics(info, cluster.get_topology_page(name))
            except NotAliveException:
                continue
            now = time.monotonic()
            last[name] = info
            rates = {}
            for cid, c in user_components(info):
                t0, before = self._prev.get((name, cid), (self._start, {}))
                added = [r.since(before.get(task)) for task, r in readings[cid].items()]
                emitted = sum(a.emitted for a in added)
                rate = emitted / (now - t0) if now > t0 else 0.0
                lat_n = sum(a.latency_n for a in added) if c["type"] == "spout" else 0
                latency = 1000.0 * sum(a.latency_sum for a in added) / lat_n if lat_n else None
                rates[cid] = (rate, latency)
                self._prev[(name, cid)] = (now, readings[cid])
            out.append((info, rates))
        return out


TOTAL_DEAD_LETTERED = "dead_lettered"
"""The key `with_statistics` puts the topology's dead letters under in its ``info`` (the topology
page's, all time): a Trident topology's are at its spouts' emitter bolts, not at its spout."""


def with_statistics(info: dict[str, Any], page: dict[str, Any]) -> None:
    """Put Storm's statistics (all time, as the UI shows them: sampled at
    ``topology.stats.sample.rate``) in place of the engine's exact counters of each component
    of ``info``, so the live table, the summary and the UI show the same figures."""
    for row in page.get("topologyStats", ()):
        if row["window"] == ALL_TIME and "deadLettered" in row:  # absent: a master from before dead-letter counts
            info[TOTAL_DEAD_LETTERED] = row["deadLettered"]
    for row in page["spouts"]:
        c = info["components"].get(row["spoutId"])
        if c is not None:
            c.update(emitted=row["emitted"], acked=row["acked"], failed=row["failed"],
                     dead_lettered=row.get("deadLettered", 0),  # 0: a master from before dead-letter counts
                     complete_latency_ms=float(row["completeLatency"]))
    for row in page["bolts"]:
        c = info["components"].get(row["boltId"])
        if c is not None:
            c.update(emitted=row["emitted"], acked=row["acked"], failed=row["failed"], executed=row["executed"],
                     dead_lettered=row.get("deadLettered", 0))


def user_components(info: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Spouts first, then bolts, each sorted by id; system components (``__*``) left out."""
    comps = [(cid, c) for cid, c in info["components"].items() if not cid.startswith("__")]
    return sorted(comps, key=lambda kv: (kv[1]["type"] != "spout", kv[0]))


def _last_error(info: dict[str, Any]) -> str | None:
    if not info["errors"]:
        return None
    e = max(info["errors"], key=last_time)
    ago = max(0.0, time.time() - last_time(e))
    return f"[{e['component']}] task {e['task']}: {one_line(e['error'])}{times(e)} ({_duration(ago)} ago)"


def crashes(final: dict[str, dict[str, Any]]) -> int:
    """How many times a worker of the topologies in ``final`` (their `get_topology_info`) died of
    an error: a fatal record counts each crash folded into it (`add_error`)."""
    return sum(e.get("count", 1) for info in final.values() for e in info["errors"] if e["fatal"])


def last_time(error: dict[str, Any]) -> float:
    """When an error record (a dict of `get_topology_info`) last happened."""
    return error.get("last_time") or error["time"]


def times(error: dict[str, Any]) -> str:
    """`` (xN)`` for an error record that happened N > 1 times (repeats folded by `add_error`),
    else nothing."""
    count = error.get("count", 1)
    return f" (x{count})" if count > 1 else ""


def _duration(secs: float) -> str:
    s = int(secs)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m {s % 60:02d}s"


class _PlainView:
    """One line per topology per second, for logs and pipes."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def show(self, samples) -> None:
        for info, rates in samples:
            parts = [f"[{_duration(info['uptime_secs'])}] {info['name']} {info['status']}"]
            for cid, c in user_components(info):
                rate, latency = rates.get(cid, (0.0, None))
                fields = [f"{cid} ({c['type']}): emitted={c['emitted']} ({rate:.0f}/s)",
                          f"acked={c['acked']}", f"failed={c['failed']}"]
                if c.get("dead_lettered"):  # a spout's given up, a bolt's failed last: only once there are some
                    fields.append(f"dead-lettered={c['dead_lettered']}")
                if c["type"] == "spout":  # "-": nothing acked in the last second to measure
                    fields.append("latency=-" if latency is None else f"latency={latency:.2f}ms")
                else:
                    fields.append(f"executed={c['executed']}")
                parts.append(" ".join(fields))
            error = _last_error(info)
            if error:
                parts.append(f"last error: {error}")
            print(" | ".join(parts), flush=True)


class _LiveView:
    """A table per topology, redrawn once a second (rich's Live)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=console or Console(), auto_refresh=False, transient=False)

    def __enter__(self) -> Self:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def show(self, samples) -> None:
        from rich.console import Group
        from rich.markup import escape
        from rich.table import Table

        # rich reads [...] in strings as markup: the error's "[split] task 3" would lose "[split]"
        tables = []
        for info, rates in samples:
            title = f"[b]{escape(info['name'])}[/b]  {info['status']}  up {_duration(info['uptime_secs'])}"
            error = _last_error(info)
            table = Table(title=title, title_justify="left",
                          caption=f"[red]last error: {escape(error)}[/red]" if error else None,
                          caption_justify="left")
            for col in ("component", "type"):
                table.add_column(col)
            # dead-lettered last: the columns before it are where they were before it came
            for col in ("executors", "tasks", "emitted", "acked", "failed", "executed", "emit/s", "latency ms",
                        "dead-lettered"):
                table.add_column(col, justify="right")
            for cid, c in user_components(info):
                rate, latency = rates.get(cid, (0.0, None))
                if c["type"] == "spout":
                    lat = "-" if latency is None else f"{latency:.2f}"
                else:
                    lat = ""
                table.add_row(escape(cid), c["type"], str(c["executors"]), str(c["tasks"]), f"{c['emitted']:,}",
                              f"{c['acked']:,}", f"{c['failed']:,}", f"{c['executed']:,}", f"{rate:,.0f}", lat,
                              f"{c.get('dead_lettered', 0):,}")
            tables.append(table)
        self._live.update(Group(*tables), refresh=True)


# --- the summary ---------------------------------------------------------------------------------------
# dead-lettered last, so that a script reading the columns before it by position reads what it did
_SUMMARY_COLUMNS = ("component", "type", "executors", "tasks", "emitted", "acked", "failed", "executed", "tuples/s",
                    "dead-lettered")


def _summary_rows(info: dict[str, Any]) -> list[list[str]]:
    secs = max(info["uptime_secs"], 1e-9)
    rows = []
    for cid, c in user_components(info):
        done = c["emitted"] if c["type"] == "spout" else c["executed"]
        rows.append([cid, c["type"], str(c["executors"]), str(c["tasks"]), str(c["emitted"]), str(c["acked"]),
                     str(c["failed"]), str(c["executed"]), f"{done / secs:.1f}", str(c.get("dead_lettered", 0))])
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
        spouts = [c for _cid, c in user_components(info) if c["type"] == "spout"]
        emitted = sum(c["emitted"] for c in spouts)
        acked = sum(c["acked"] for c in spouts)
        failed = sum(c["failed"] for c in spouts)
        # the topology's: the spouts' and the Trident spouts' emitter bolts' (a Trident topology's
        # only spout is its master batch coordinator), each record once
        dead = info.get(TOTAL_DEAD_LETTERED, sum(c.get("dead_lettered", 0) for c in spouts))
        latency = sum(c["complete_latency_ms"] * c["acked"] for c in spouts) / acked if acked else 0.0
        # No acked tuple, or none of them sampled, is "no figure", as the live lines show it: a 0.00 would
        # read as a measured latency.
        shown_latency = f"{latency:.2f} ms" if latency > 0 else "- (no acked tuple sampled)"
        print(f"  spouts: {emitted / secs:.1f} tuples/s emitted, {acked / secs:.1f}/s acked, "
              f"{failed} failed, {dead} dead-lettered; mean complete latency {shown_latency}")
        # by when each last happened: a record counts every repeat of its error (`add_error`),
        # so its first time can be long before a repeat that ended the run
        errors = sorted(info["errors"], key=last_time)
        if not errors:
            print("  errors: none")
            continue
        shown = errors[-_ERRORS_SHOWN:]
        print(f"  errors: {len(errors)}" + (f" (the latest {len(shown)} below)" if len(shown) < len(errors) else ""))
        for e in shown:
            fatal = " (worker crashed)" if e["fatal"] else ""
            print(f"    [{e['component']}] task {e['task']}: {one_line(e['error'])}{times(e)}{fatal}")
            # an exception's traceback, else a reported error's own lines (pystorm's has its traceback)
            full = e["traceback"] or (e["error"] if "\n" in e["error"].strip() else "")
            if debug and full:
                print("      " + full.rstrip().replace("\n", "\n      "))
    sys.stdout.flush()


_ERRORS_SHOWN = 10
