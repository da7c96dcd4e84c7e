"""An error's text in one line, for the places that show one line of it: `squall list`'s last
error (`squall.engine.executor.ErrorRecord.describe`), `squall local`'s live figures, summary
and log lines (`squall.cli._local`). Whoever wants all of it reads ``squall get-errors``, the
UI or the worker's log."""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable

# what `traceback.format_exc()` gives outside an ``except``: pystorm's ``raise_exception(e, tup)``
# called after catching (or without raising) ends its report with it, which says nothing
NO_EXCEPTION = "NoneType: None"


STDERR_HEAD = "its stderr ended with:"
"""The line after which a shell subprocess's error (`squall.multilang.MultilangError`) gives the
last lines the subprocess wrote to stderr, indented: its own traceback, whose last line says
what went wrong."""


# Node.js (12 and later) ends an uncaught exception's report with its version, after the stack:
# the last line of such a subprocess's stderr says nothing of what went wrong
_NODE_VERSION = re.compile(r"^Node\.js v\d+(\.\d+)*$")
# a frame of a Node.js/JavaScript (`    at f (file.js:1:2)`, `    at file.js:1:2`) or Java
# (`\tat pkg.C.m(C.java:1)`, and the `\t... 3 more` that ends a `Caused by:` block) stack: a
# frame's location ends it, so that a message of the program's own that starts with "at" (`at
# offset 42: bad record`) is still its stderr's last word
_STACK_FRAME = re.compile(r"^(at\s.*(\)|:\d+:\d+)|\.\.\. \d+ more)$")


def stderr_cause(lines: Iterable[str]) -> str | None:
    """The line of a shell subprocess's last stderr lines that says what went wrong, or None if
    they are blank: the last line, but for a stack trace that ends them (a Node.js or Java one),
    the line above its frames (`Error: poison record`, `Error: Cannot find module '/w/split.js'`:
    past the `{ code: ... }` block Node adds after the frames), and never Node's closing
    `Node.js v20.1.0` line, which was all a Node component's death said of itself in its
    one-line error."""
    lines = list(lines)
    said = [ln.strip() for ln in lines if ln.strip() and not _NODE_VERSION.match(ln.strip())]
    if not said:
        return next((ln.strip() for ln in reversed(lines) if ln.strip()), None)
    if said[-1] == "}":  # a Node error's own properties after its stack: `    at f (x.js:1:2) {`, `code: ...`, `}`
        opener = next((i for i in range(len(said) - 1, -1, -1) if said[i].endswith(" {")), None)
        if opener is not None:
            said = [*said[:opener], said[opener][:-2]]
    end = len(said)
    while end > 0 and _STACK_FRAME.match(said[end - 1]):
        end -= 1
    if end == 0:  # a stack whose message line the tail cut off: its innermost frame, the first
        return said[0]
    return said[end - 1]


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


WITHOUT_FRAMES = "squall_without_frames"
"""The attribute (true) of an exception whose message says all a user needs, where its frames
are squall's own insides (`error_traceback`): a shell subprocess's death
(`squall.multilang.MultilangError`) names its component, task, command, pid, how it ended and
what the subprocess wrote to stderr, its own traceback included."""


def error_traceback(error: BaseException) -> str:
    """The traceback an error's record keeps (the topology's errors, the worker log's line of a
    crash or a report): Python's, but for an error marked `WITHOUT_FRAMES` only its own text.
    A shell spout's crash carried a dozen frames of the executor loop down to a pipe's read above
    what its subprocess said, and a shell bolt's those of its reader thread: neither is the
    user's code, whose traceback is the subprocess's own, in the message."""
    if getattr(error, WITHOUT_FRAMES, False):
        return "".join(traceback.format_exception_only(type(error), error))
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def telling_lines(text: str) -> list[str]:
    """The non-blank lines of ``text``, stripped, but `NO_EXCEPTION`'s."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() != NO_EXCEPTION]


def exception_line(text: str) -> str | None:
    """The line that names the exception of a Python traceback in ``text`` (the first one after
    the last frame's ``  File ...`` line and the indented lines under it, or, for one shown
    without its frames, the line above `STDERR_HEAD`), or None."""
    raw = text.splitlines()
    frames = [i for i, ln in enumerate(raw) if ln.startswith('  File "')]
    if frames:
        start = frames[-1] + 1
    else:
        # a shell subprocess's error shown without squall's frames (`error_traceback`) under a
        # log line's words ("worker 1024 crashed in component [bad] task 2:"): its line is the
        # one above its stderr's. As an error's own text (its first line), there is none to tell
        start = next((i - 1 for i, ln in enumerate(raw) if ln == STDERR_HEAD), -1)
        if start < 1 or not raw[start].strip() or raw[start].startswith(" "):
            return None
    for i, ln in enumerate(raw[start:], start):
        if ln.strip() and not ln.startswith(" "):
            # a shell subprocess's error: its first line says only that the subprocess exited,
            # the last line of its stderr (indented under `STDERR_HEAD`) what went wrong
            said = telling_lines("\n".join(raw[i + 1:])) if STDERR_HEAD in raw[i + 1:i + 2] else []
            cause = stderr_cause(said)
            return f"{ln.strip()}; {STDERR_HEAD} {cause}" if len(said) > 1 and cause else ln.strip()
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
    last = exception_line(text) or _stderr_or_last(text, lines)
    return lines[0], (None if last == lines[0] else last)


def cause_line(text: str, last: str) -> str:
    """``last``, the line of ``text`` that says what went wrong (`first_and_last`), as it is
    shown on its own: a shell subprocess's stderr line named as its stderr's (`STDERR_HEAD`),
    which after the error's first line read as part of it ("no answer ...; killed by SIGKILL
    waiting")."""
    if STDERR_HEAD in telling_lines(text) and STDERR_HEAD not in last:
        return f"{STDERR_HEAD} {last}"
    return last


def _stderr_or_last(text: str, lines: list[str]) -> str:
    """The last of ``lines``, or for a shell subprocess's error (`STDERR_HEAD` on a line of its
    own, its stderr under it) the stderr's `stderr_cause`."""
    raw = text.splitlines()
    heads = [i for i, ln in enumerate(raw) if ln.strip() == STDERR_HEAD]
    cause = stderr_cause(raw[heads[-1] + 1:]) if heads else None
    return cause or lines[-1]


def exception_text(error: BaseException) -> str:
    """``Type: message`` of ``error``, its message read by `exception_message`."""
    return f"{type(error).__name__}: {exception_message(error)}"


def cannot_serialize(component: str, error: BaseException) -> str:
    """What squall says of a component that cannot be pickled, on every host (LocalCluster's
    `squall.engine.worker.component_blobs`, the process and Spark hosts' shipping)."""
    return (f"Component [{component}] cannot be serialized ({exception_text(error)}); "
            f"squall copies each component per task, so it must be picklable by cloudpickle")
