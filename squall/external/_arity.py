"""What a spout's translator returned, checked against the fields the spout declared.

A translator is the user's code. If it returns three values for two fields (a CSV line with an
extra comma), the collector's emit raises; in a spout that kills the worker, whose restart reads
the same record first and dies again: a crash loop that no later record gets past. So each
spout checks the values before it emits them and treats a wrong shape as a record the
translator could not read (a dead letter), as it does a translator that raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def arity_error(values: Any, fields: Sequence[str]) -> str | None:
    """Why ``values`` (a translator's result) cannot be a tuple of ``fields``, or None.

    Only a list or a tuple is taken: a string or bytes would be split into characters, and a
    generator would be used up by the check."""
    names = ", ".join(fields)
    if not isinstance(values, (list, tuple)):
        return (f"the translator returned a {type(values).__name__}, not a list or tuple of "
                f"{len(fields)} value(s) for the fields ({names})")
    if len(values) != len(fields):
        return (f"the translator returned {len(values)} value(s) for {len(fields)} field(s) ({names})")
    return None
