"""What ``sparse`` has and ``squall sparse`` does not: its other verbs and options, answered by name.

A streamparse user's commands and deploy scripts carry sparse's verbs (``sparse tail``,
``sparse stats``) and options (``sparse submit -e prod --timeout 30000 -r requirements.txt``).
argparse alone answered them with ``invalid choice: 'tail'`` or ``unrecognized arguments:
--timeout 30000``, which reads as a typo and says nothing of what to do. Here each one is
known: a verb says which squall command does its work; an option that only tunes what squall
does not do (build a jar or a virtualenv, wait on Nimbus's Thrift port) is taken, with a note
saying it is not used and why; an option that would change what runs (a jar to submit instead,
requirements to install on the workers) is refused, saying what to do instead, as ``-i`` is.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from ._options import UserError

_SHIPS = "squall ships the project's src/ with the topology"

# sparse's verbs that squall sparse has not, and the squall command that does their work
SPARSE_ONLY_VERBS = {
    "tail": "`squall logs NAME [-c COMPONENT] [-n LINES]` prints the last lines of its worker logs on this "
            "machine (docs/logs.md)",
    "stats": "`squall monitor NAME` prints its throughput every interval, `squall info NAME` its figures as "
             "JSON, and `squall ui` shows them (docs/cli.md, docs/ui.md)",
    "visualize": "`squall ui` draws it on its topology page, Topology Visualization (docs/ui.md)",
    "worker_uptime": "`squall ui`'s topology page lists each worker's uptime, Worker Resources (docs/ui.md); "
                     "`squall info NAME` their pids and restarts",
    "slot_usage": "`squall ui` shows the slots used and free, and each supervisor's (docs/ui.md)",
    "update_virtualenv": f"there is no virtualenv to build: {_SHIPS}; install what it needs where the "
                         f"workers run",
    "remove_logs": "each supervisor removes its old worker logs itself, as Storm's logviewer does "
                   "(docs/logs.md, Cleaning up)",
    "jar": f"there is no jar to build: {_SHIPS} (`squall sparse submit`)",
    "quickstart": "use streamparse's own `sparse quickstart NAME`: squall runs the project it makes",
}


@dataclasses.dataclass(frozen=True)
class SparseOption:
    """One of sparse's options that squall sparse has no use for.

    ``flags``: its spellings; ``verbs``: the sparse verbs that have it; ``nargs``: argparse's
    (0 for a switch); ``refused``: it would change what runs, so it stops the command, else a
    note says it is not used; ``why``: what the note or the error says after the flag."""

    flags: tuple[str, ...]
    verbs: tuple[str, ...]
    nargs: int | str
    refused: bool
    why: str


SPARSE_ONLY_OPTIONS = (
    SparseOption(("--timeout",), ("submit", "kill", "list"), 1, False,
                 "it is how long sparse waits for Nimbus's Thrift port; squall's client keeps its own timeouts"),
    SparseOption(("--pool_size",), ("submit",), 1, False,
                 f"it sizes sparse's SSH pool for building virtualenvs; squall builds none: {_SHIPS}"),
    SparseOption(("--overwrite_virtualenv",), ("submit",), 0, False,
                 f"squall builds no virtualenv: {_SHIPS}"),
    SparseOption(("--user",), ("submit",), 1, False,
                 f"it is the sudo user that builds virtualenvs; squall builds none: {_SHIPS}"),
    SparseOption(("-u", "--uber_jar"), ("submit",), 0, False,
                 f"squall builds no jar: {_SHIPS}"),
    SparseOption(("-r", "--requirements"), ("submit",), "*", True,
                 "squall installs no packages on the workers: install them where the workers run "
                 "(pip install -r FILE), then submit without -r"),
    SparseOption(("-j", "--local_jar_path"), ("submit",), 1, True,
                 f"squall runs no JVM and submits no jar: {_SHIPS}; submit without it"),
    SparseOption(("-R", "--remote_jar_path"), ("submit",), 1, True,
                 f"squall runs no JVM and submits no jar: {_SHIPS}; submit without it"),
)


class _Given(argparse.Action):
    """Records which sparse-only option was given (and how it was spelt) in ``args.sparse_only``."""

    def __init__(self, option_strings: Sequence[str], dest: str, option: SparseOption, **kwargs: Any) -> None:
        self.option = option
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = list(getattr(namespace, self.dest, None) or [])
        given.append((option_string or self.option.flags[-1], self.option))
        setattr(namespace, self.dest, given)


def add_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """Give ``parser`` (``squall sparse VERB``'s) the options of sparse's ``VERB`` that squall has no
    use for, so that they are answered by `answer` rather than argparse's "unrecognized arguments"."""
    for option in SPARSE_ONLY_OPTIONS:
        if verb in option.verbs:
            what = "refused" if option.refused else "not used"
            kwargs: dict[str, Any] = {"nargs": option.nargs, "metavar": "VALUE"} if option.nargs else {"nargs": 0}
            parser.add_argument(*option.flags, dest="sparse_only", action=_Given, option=option,
                                help=f"sparse's; {what} here: {option.why}", **kwargs)


def answer(args: argparse.Namespace, verb: str) -> None:
    """Say, once each, that the sparse-only options given are not used (on stderr, and go on);
    stop at the first one that is refused, naming it and what to do instead."""
    given = getattr(args, "sparse_only", None) or []
    for flag, option in given:
        if option.refused:
            raise UserError(f"{flag}: sparse {verb}'s {'/'.join(option.flags)} is refused: {option.why}", code=2)
    for flag, option in dict.fromkeys(given):
        print(f"squall sparse {verb}: {flag} is not used: {option.why}", file=sys.stderr, flush=True)


def add_verbs(sub: Any) -> None:
    """Add sparse's verbs that squall sparse has not to ``squall sparse``'s sub-verbs: each takes
    whatever follows and stops, naming the squall command that does its work (status 2)."""
    for verb, instead in SPARSE_ONLY_VERBS.items():
        # no option prefix: sparse's options (tail's -n NAME) are taken as words, not refused as unknown
        p = sub.add_parser(verb, help=f"sparse's {verb}: not here; says what to use", add_help=False,
                           prefix_chars="\0", description=f"sparse {verb} has no squall sparse verb: {instead}")
        p.add_argument("given", nargs="*", metavar="ARG", help="sparse's arguments (not read)")
        p.set_defaults(run=_refuse_verb(verb, instead), verb_parser=p, debug=False)


def _refuse_verb(verb: str, instead: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        raise UserError(f"sparse {verb} has no squall sparse verb: {instead}", code=2)
    return run
