"""An error's text in one line, for the places that show one line of it: `squall list`'s last
error (`squall.engine.executor.ErrorRecord.describe`), `squall local`'s live figures, summary
and log lines (`squall.cli._local`). Whoever wants all of it reads ``squall get-errors``, the
UI or the worker's log."""

from __future__ import annotations

# what `traceback.format_exc()` gives outside an ``except``: pystorm's ``raise_exception(e, tup)``
# called after catching (or without raising) ends its report with it, which says nothing
NO_EXCEPTION = "NoneType: None"


STDERR_HEAD = "its stderr ended with:"
"""The line after which a shell subprocess's error (`squall.multilang.MultilangError`) gives the
last lines the subprocess wrote to stderr, indented: its own traceback, whose last line says
what went wrong."""


def exception_message(error: BaseException) -> str:
    """``str(error)``, which user code may break: an exception class of the user's whose
    ``__str__`` raises (or returns no str) gives ``<str() of ValueError raised RuntimeError>``
    instead. Every report of a user's exception goes through this: raised there, the report of a
    bolt's exception on one input crashed the worker instead of failing that input, and the
    topology's errors named the ``__str__``'s exception instead of the user's."""
    try:
        text = str(error)
    except Exception as e:  # noqa: BLE001 (any exception of the user's __str__)
        return f"<str() of {type(error).__name__} raised {type(e).__name__}>"
    return text


def telling_lines(text: str) -> list[str]:
    """The non-blank lines of ``text``, stripped, but `NO_EXCEPTION`'s."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() != NO_EXCEPTION]


def exception_line(text: str) -> str | None:
    """The line that names the exception of a Python traceback in ``text`` (the first one after
    the last frame's ``  File ...`` line and the indented lines under it), or None."""
    raw = text.splitlines()
    frames = [i for i, ln in enumerate(raw) if ln.startswith('  File "')]
    if not frames:
        return None
    for i, ln in enumerate(raw[frames[-1] + 1:], frames[-1] + 1):
        if ln.strip() and not ln.startswith(" "):
            # a shell subprocess's error: its first line says only that the subprocess exited,
            # the last line of its stderr (indented under `STDERR_HEAD`) what went wrong
            said = telling_lines("\n".join(raw[i + 1:])) if STDERR_HEAD in raw[i + 1:i + 2] else []
            return f"{ln.strip()}; {STDERR_HEAD} {said[-1]}" if len(said) > 1 else ln.strip()
    return None


def first_and_last(text: str) -> tuple[str, str | None]:
    """The first line of an error's text and the line that says what went wrong, if another:
    a report with a traceback (pystorm's ``Python ValueError raised while processing Tuple ...``
    and the traceback under it) gives its exception's line (``Type: message``, the first line
    after the last frame: an exception whose message runs over several lines, a database's
    ``relation "x" does not exist`` with ``LINE 1: ...`` and a caret under it, ends the text with
    one of those, not with itself); other text its last line (a shell subprocess's error ends
    with the last line of its stderr, the exception that ended it)."""
    lines = telling_lines(text)
    if len(lines) <= 1:
        return (lines[0] if lines else text.strip()), None
    last = exception_line(text) or lines[-1]
    return lines[0], (None if last == lines[0] else last)


def exception_text(error: BaseException) -> str:
    """``Type: message`` of ``error``, its message read by `exception_message`."""
    return f"{type(error).__name__}: {exception_message(error)}"


def cannot_serialize(component: str, error: BaseException) -> str:
    """What squall says of a component that cannot be pickled, on every host (LocalCluster's
    `squall.engine.worker.component_blobs`, the process and Spark hosts' shipping)."""
    return (f"Component [{component}] cannot be serialized ({exception_text(error)}); "
            f"squall copies each component per task, so it must be picklable by cloudpickle")
