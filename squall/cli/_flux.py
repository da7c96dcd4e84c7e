"""``squall local|jar FILE.yaml``: Storm's Flux options, and a Flux file's topology built,
shown (Flux's topology details) and submitted. The Flux package is `squall.flux`; docs/flux.md."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._options import UserError

# Flux's options (Storm's ``org.apache.storm.flux.Flux``): (short, long, takes a value, help).
_OPTIONS = (
    ("-f", "--filter", "FILE", "Flux file: replace ${key} with the key's value in this Java properties file"),
    ("-e", "--env-filter", None, "Flux file: replace ${ENV-NAME} (or ${ENV.NAME}) with the environment variable NAME"),
    ("-d", "--dry-run", None, "Flux file: build, check and print the topology; do not run it"),
    ("-q", "--no-detail", None, "Flux file: do not print the topology's details"),
    ("-n", "--no-splash", None, "Flux file: accepted for Flux's command lines (squall prints no splash)"),
    ("-i", "--inactive", None, "Flux file: submit the topology inactive (squall local)"),
    ("-R", "--resource", None, "Flux file: FILE is a resource, found under the sys.path entries"),
    ("-l", "--local", None, "Flux file: ignored, as by Storm 2's Flux (squall local runs locally)"),
    ("-r", "--remote", None, "Flux file: ignored, as by Storm 2's Flux (squall jar submits)"),
    ("-s", "--sleep", "MS", "Flux file: with squall local, stop after MS milliseconds (as --ttl)"),
    ("-z", "--zookeeper", "HOST:PORT", "Flux file: ignored, as by Storm 2's Flux"),
)


def add_options(parser: argparse.ArgumentParser) -> None:
    """Declare Flux's options on ``squall local`` or ``squall jar``."""
    group = parser.add_argument_group("Flux (FILE.yaml; docs/flux.md)")
    for short, long, value, text in _OPTIONS:
        dest = "flux_" + long[2:].replace("-", "_")
        if value is None:
            group.add_argument(short, long, dest=dest, action="store_true", help=text)
        else:
            group.add_argument(short, long, dest=dest, metavar=value, help=text)


@dataclass(frozen=True)
class FluxOptions:
    """Flux's options as given (see `_OPTIONS`)."""

    filter: str | None = None
    env_filter: bool = False
    dry_run: bool = False
    no_detail: bool = False
    no_splash: bool = False
    inactive: bool = False
    resource: bool = False
    local: bool = False
    remote: bool = False
    sleep: str | None = None
    zookeeper: str | None = None

    def given(self) -> list[str]:
        """The long names of the options given."""
        return [f"--{name.replace('_', '-')}" for name, value in vars(self).items() if value not in (None, False)]


def options_of(args: argparse.Namespace, rest: list[str]) -> FluxOptions:
    """The Flux options of ``args``, and those in ``rest`` (``squall jar``'s arguments after
    FILE, which for a Flux file are Flux's options)."""
    values = {name: getattr(args, "flux_" + name, None) for name in FluxOptions.__dataclass_fields__}
    if rest:
        parser = argparse.ArgumentParser(prog="squall jar FILE.yaml", add_help=False, exit_on_error=False)
        add_options(parser)
        try:
            parsed, unknown = parser.parse_known_args(rest)
        except argparse.ArgumentError as e:
            raise UserError(f"{e}", code=2) from e
        if unknown:
            # a Storm user puts `--config` after the file, where `storm jar`'s Flux arguments go: say
            # where it goes instead of only that it is refused
            first = unknown[0]
            where = (f"; squall's own options go before FILE: squall jar {first} ... FILE.yaml --filter ..."
                     if first.startswith("-") else "")
            raise UserError(f"a Flux file takes Flux's options after it, not {' '.join(unknown)!r}{where} "
                            f"(docs/flux.md)", code=2)
        for name in values:
            more = getattr(parsed, "flux_" + name)
            if more not in (None, False):
                values[name] = more
    return FluxOptions(**{k: v for k, v in values.items() if v is not None})


def filter_path(options: FluxOptions) -> str | Path | None:
    """``--filter FILE``: with ``-R`` a resource too, as Flux loads it from the classpath (a
    file of that path if no ``sys.path`` entry has it)."""
    if options.filter is None or not options.resource:
        return options.filter
    from ..flux.parser import find_resource
    return find_resource(options.filter) or options.filter


def flux_path(arg: str, options: FluxOptions) -> Path:
    """FILE, or with ``-R`` the resource FILE names."""
    if not options.resource:
        return Path(arg)
    from ..flux import resource_path
    return resource_path(arg)


@dataclass(frozen=True)
class FluxRun:
    """A Flux file's topology, built, with the options it was given."""

    path: Path
    options: FluxOptions
    flux: Any  # squall.flux.FluxTopology

    def name(self, rename: str | None) -> str:
        """``--name``, else the file's ``name``, else the file's stem."""
        from ._topology_file import topology_name
        return rename or self.flux.name or topology_name(self.path)

    def submit(self, target: Any, topology_over: dict[str, Any], rename: str | None) -> list[str]:
        """Submit the topology to ``target`` with ``-c``'s keys over the file's ``config``."""
        name = self.name(rename)
        conf = {**self.flux.conf, **topology_over}
        with self.located():
            if self.options.inactive:
                target.submit_topology(name, conf, self.flux.topology, initial_status="INACTIVE")
            else:
                target.submit_topology(name, conf, self.flux.topology)
        return [name]

    def check(self, cluster: dict[str, Any], topology_over: dict[str, Any], rename: str | None) -> None:
        """``--dry-run``: the checks a submission of the topology to a master of the ``cluster``
        configuration would make, submitting nothing: the configuration merged as the master merges
        it, the components' own checks at submit (a stateful bolt's ``topology.state.provider``, a
        window against ``topology.max.spout.pending`` or the message timeout) and each component
        picklable. Building the topology makes none of them, so a dry run passed a file that
        ``squall local`` and ``squall jar`` then refused."""
        from .._config import Config, topology_conf
        from ..engine.plan import make_plan
        from ..engine.worker import component_blobs
        name = self.name(rename)
        conf = {**self.flux.conf, **topology_over}
        with self.located():
            merged = topology_conf(cluster, conf)
            merged[Config.TOPOLOGY_NAME] = conf[Config.TOPOLOGY_NAME] = name  # as the master sets it
            component_blobs(make_plan(name, f"{name}-dry-run", self.flux.topology, merged, conf))

    @contextlib.contextmanager
    def located(self) -> Iterator[None]:
        """A submission's refusal (`InvalidTopologyException`) as a `FluxError` naming the file,
        line and key it points at, as the file's own mistakes are named."""
        from .._errors import InvalidTopologyException
        from ..flux import FluxError
        from ..flux.builder import locate
        try:
            yield
        except InvalidTopologyException as e:
            raise FluxError(locate(str(e), self.flux.definition), f"the topology is refused at submit: {e}") from e


def prepare(path: Path, options: FluxOptions, rename: str | None, verb: str) -> FluxRun:
    """Build the Flux file's topology and print its details (unless ``-q``)."""
    from ..flux import describe, load
    for ignored in ("local", "remote", "zookeeper"):
        if getattr(options, ignored):
            print(f"squall: warning: --{ignored} is ignored, as Storm 2's Flux ignores it "
                  f"(squall local runs a Flux file here, squall jar submits it)", file=sys.stderr)
    if options.inactive and verb != "local":
        raise UserError("-i/--inactive: squall jar submits active; run `squall deactivate NAME` after it", code=2)
    if options.sleep is not None and verb != "local":
        print("squall: warning: --sleep is ignored by squall jar (it is squall local's --ttl)", file=sys.stderr)
    with _load_warnings():
        run = FluxRun(path, options, load(path, filter_file=filter_path(options), env_filter=options.env_filter))
    if not options.no_detail or options.dry_run:
        print(describe(run.flux, run.name(rename)), flush=True)
    if options.dry_run:  # what submitting would warn of (it does, to a master's log too)
        from .._config import submit_warnings
        for warning in submit_warnings(run.flux.conf, run.flux.topology, run.name(rename)):
            print(f"squall: warning: {warning}", file=sys.stderr)
    return run


@contextlib.contextmanager
def _load_warnings() -> Iterator[None]:
    """What the Flux package warns of while it reads a file (an included file's own includes
    ignored, a ``cpuLoad`` ignored), shown as the command's other warnings are: ``squall:
    warning: ...`` on stderr. The command sets up no logging before it reads the file, so they
    came out bare, through Python's last-resort handler, and read as errors (or, under a
    logging configuration of the caller's, went wherever that sent them)."""
    logger = logging.getLogger("squall.flux")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("squall: warning: %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # shown once, here
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def sleep_seconds(options: FluxOptions) -> float | None:
    """``-s MS`` as seconds (squall local's ``--ttl``)."""
    if options.sleep is None:
        return None
    try:
        ms = float(options.sleep)
    except ValueError:
        ms = -1.0
    if not ms > 0:
        raise UserError(f"--sleep: expected a positive number of milliseconds, got {options.sleep!r}", code=2)
    return ms / 1000.0


def refuse_options(options: FluxOptions, file: str) -> None:
    """A Python FILE takes no Flux option."""
    given = options.given()
    if given:
        raise UserError(f"{', '.join(given)}: Flux's options go with a Flux FILE.yaml, not {file}", code=2)


def from_args(args: argparse.Namespace, rest: list[str], verb: str) -> FluxRun | None:
    """For a Flux FILE (``.yaml``/``.yml``), its topology built and shown; None for a Python
    FILE (which takes no Flux option). ``rest``: ``squall jar``'s arguments after FILE."""
    from ..flux import is_flux_file
    from ._topology_file import check_file, on_sys_path
    if not is_flux_file(args.file):
        refuse_options(options_of(args, []), args.file)
        return None
    options = options_of(args, rest)
    path = check_file(str(flux_path(args.file, options)))
    with on_sys_path(path.parent):  # its classes are found beside it, as a Python FILE's imports are
        run = prepare(path, options, args.name, verb)
        if options.dry_run:
            from ._options import cluster_conf_of
            cluster, topology_over = cluster_conf_of(args)
            run.check(cluster, topology_over, args.name)
        return run
