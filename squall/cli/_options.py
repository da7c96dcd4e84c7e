"""What every verb shares: the user error, ``-c KEY=VALUE`` and ``--config FILE`` turned into
configuration, and argparse types for seconds and counts."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._config import cluster_conf, is_daemon_key, misspelling_of
from .._redact import is_secret_key, redact_text


class UserError(Exception):
    """A mistake of the user's: shown as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def is_cluster_key(key: str) -> bool:
    """Keys the cluster reads: Storm's daemon keys, and squall's own ``squall.*`` keys
    (``squall.secret``, ``squall.worker.max.launch.attempts``)."""
    return is_daemon_key(key) or key.startswith("squall.")


def parse_overrides(items: list[str] | None, option: str = "-c",
                    value_of: Callable[[str, str], Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``-c key=value`` items as (topology conf, cluster conf); a value is read as JSON, else
    kept as its text, as Storm's ``readCommandLineOpts`` reads it (YAML read ``0123`` as 83,
    ``12:30`` as 750, ``on`` as true and a date as a date).

    ``option`` is the option the items came with, as errors and warnings name it (``squall
    sparse``'s ``-o``); ``value_of(item, text)``, when given, reads a value instead of JSON."""
    topology: dict[str, Any] = {}
    daemon: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(ch.isspace() for ch in key):
            raise UserError(f"{option} {item!r}: expected KEY=VALUE, e.g. {option} topology.workers=2", code=2)
        value = value_of(item, text) if value_of is not None else _json_or_text(text)
        _warn_if_misspelt(key, option)
        _warn_if_credential(key, text, value, option)
        (daemon if is_cluster_key(key) else topology)[key] = value
    return topology, daemon


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: the text as it is


def _warn_if_misspelt(key: str, option: str) -> None:
    # a topology key is warned about with FILE's own keys, where the topology is submitted (the
    # master's log, and `_ToMaster` prints it for a master elsewhere): once, not twice
    meant = misspelling_of(key) if is_daemon_key(key) else None
    if meant is not None:
        print(f"squall: warning: {option} {key}: unknown key; did you mean {meant}?", file=sys.stderr)


def _warn_if_credential(key: str, text: str, value: Any, option: str) -> None:
    # a process's command line is readable by every user of the machine (ps, /proc/PID/cmdline)
    # for as long as it runs, and the docs once showed `squall local -c squall.secret=...`: the
    # value is used all the same (refusing it would break scripts), but the user is told. A key
    # that names a credential and holds a switch or a number (drpc.http.secret.required=false)
    # carries none
    named = is_secret_key(key) and isinstance(value, (str, list, dict)) and bool(value)
    if named or redact_text(text) != text:
        print(f"squall: warning: {option} {key}: this credential is on the command line, which every user of "
              f"this machine can read (ps, /proc/PID/cmdline) while squall runs; put it in a squall.yaml "
              f"readable by you only (chmod 600) and give --config FILE", file=sys.stderr)


def conf_file(path: str | None) -> str | None:
    """``--config FILE``, checked to exist."""
    if path is not None and not Path(path).is_file():
        raise UserError(f"config file not found: {path}")
    return path


def cluster_conf_of(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster configuration ``args`` give (defaults, the ``squall.yaml``, ``-c`` cluster
    keys) and the ``-c`` topology keys."""
    topology_over, daemon_over = parse_overrides(args.overrides)
    return cluster_conf(daemon_over, conf_file(args.config)), topology_over


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number (0 to 65535), got {text!r}")
    return port


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    secs = _seconds(text)
    if not secs > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return secs


def wait_seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0 (``-w``)."""
    secs = _seconds(text)
    if not secs >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text!r}")
    return secs


def _seconds(text: str) -> float:
    try:
        secs = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if math.isinf(secs) or math.isnan(secs):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {text!r}")
    return secs


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n
