"""Flux's filtering, done on the file's text before it is read as YAML, line by line (so the
YAML's line numbers stay the file's): ``${ENV-NAME}`` (and ``${ENV.NAME}``) from the
environment with ``-e/--env-filter``; ``${key}`` and ``${key[i]}`` from a Java properties file
with ``--filter FILE``. Pure functions: the environment is passed in."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from .model import FluxError, Where

_REFERENCE = re.compile(r"\$\{([^}]+)\}")
_ENV = re.compile(r"ENV[-.](.+)")
_LIST_ITEM = re.compile(r"(.+)\[(\d+)\]")


def substitute(text: str, file: str, properties: Mapping[str, str] | None,
               env: Mapping[str, str] | None, key_at: Callable[[int, int], str] = lambda line, column: "") -> str:
    """``text`` with each ``${...}`` replaced; ``env`` is None unless ``--env-filter`` was given,
    ``properties`` None unless ``--filter`` was. Comment lines are left as they are. An error
    names the key ``key_at`` gives for its line and the reference's column (0-based).

    Raises:
        FluxError: a reference that is not defined (naming the file, line and reference).
    """
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if "${" not in line or line.lstrip().startswith("#"):
            continue
        try:
            lines[number - 1] = _REFERENCE.sub(lambda m: _value(m.group(1), properties, env, m.start()), line)
        except _Undefined as e:
            key = key_at(number, e.column)
            raise FluxError(Where(file, number, f"{key}: {e.reference}" if key else e.reference), e.reason) from None
    return "\n".join(lines)


class _Undefined(Exception):
    """A reference that cannot be replaced, at ``column`` (0-based) of its line."""

    def __init__(self, reference: str, reason: str, column: int) -> None:
        super().__init__(reason)
        self.reference = "${" + reference + "}"
        self.reason = reason
        self.column = column


def _value(name: str, properties: Mapping[str, str] | None, env: Mapping[str, str] | None, column: int) -> str:
    env_name = _ENV.fullmatch(name)
    if env_name is not None:
        if env is None:
            raise _Undefined(name, "environment substitution is off: give -e/--env-filter to replace it", column)
        value = env.get(env_name.group(1))
        if value is None:
            raise _Undefined(name, f"environment variable {env_name.group(1)} is not set", column)
        return value
    if properties is None:
        raise _Undefined(name, "no properties file to replace it from: give --filter FILE", column)
    if name in properties:
        return properties[name]
    item = _LIST_ITEM.fullmatch(name)
    if item is not None and item.group(1) in properties:
        return _list_item(name, properties[item.group(1)], int(item.group(2)), column)
    raise _Undefined(name, f"{name!r} is not defined in the properties file", column)


def _list_item(name: str, text: str, index: int, column: int) -> str:
    """Item ``index`` of a property written ``["a", "b"]``, as Flux reads it (split at commas,
    spaces and the quotes around each item dropped)."""
    items = [t.strip() for t in text.strip()[1:-1].split(",")]
    if index >= len(items):
        raise _Undefined(name, f"the property has {len(items)} items, no item {index}", column)
    item = items[index]
    return item[1:-1] if len(item) >= 2 and item[0] == item[-1] and item[0] in "\"'" else item


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` file's keys and values (``java.util.Properties.load``): ``key=value``,
    ``key: value`` or ``key value``; ``#``/``!`` comments; a line ending in ``\\`` continues on
    the next; ``\\t \\n \\uXXXX`` escapes."""
    out: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def _split(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key = line[:i]
    while i < n and line[i] in " \t\f":
        i += 1
    if i < n and line[i] in "=:":
        i += 1
    while i < n and line[i] in " \t\f":
        i += 1
    return key, line[i:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
