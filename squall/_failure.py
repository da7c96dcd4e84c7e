"""Why a spout tuple failed: the `FailureCause` the acker passes on to the spout (`Spout.fail_with`).

Storm tells a spout only ``fail(msg_id)``, so a spout that counts retries cannot tell a record
that a bolt rejected from one that was merely in a worker that died: a crash-looping worker then
uses up the retry budget of every record in flight, and good records reach the dead letters. In
squall the failure carries its cause, from where it happened to the spout:

- `EXPLICIT`: a bolt called ``collector.fail(tuple)`` (or a `BasicBolt` raised `FailedException`);
- `EXCEPTION`: a bolt's ``execute`` raised while processing the tuple;
- `TIMEOUT`: the tuple tree did not complete within ``topology.message.timeout.secs``;
- `WORKER_LOST`: a worker the tuple may have been in died (the spout was told so), or a
  process that held it in a worker that lives on did: a shell bolt's subprocess that died
  while another tuple was the one it was processing, a streamparse instance replaced after
  another tuple's exception (`FailureCause.lost_in` names which);
- `ROLLED_BACK`: a stateful bolt or window had processed the tuple, and its state rolled back to its
  last commit (a checkpoint that failed: a worker died, a state hook raised), dropping what the
  tuple changed, so it must replay;
- `UNAVAILABLE`: a store a bolt writes the tuple to or looks it up in did not take it for a
  reason of the store's, not the tuple's: a Redis server that does not answer, is loading or out
  of memory; a disk that is full, read-only or gone; a batch that could not be committed.

- `WORKER_DIED`: a bolt task was executing the tuple when its worker process died on its own
  (it ended without the worker choosing to: ``os._exit`` in a library, a segfault, the kernel's
  OOM killer), as that worker's host read after the death (`squall.engine.executing`).

`EXPLICIT`, `EXCEPTION` and `WORKER_DIED` are caused by the record (`FailureCause.record_caused`):
the connectors charge only those to a record's retry budget. The other tuples lost with a dead
worker fail as `WORKER_LOST`, uncharged: so a record that kills a worker each time it is
executed reaches its dead letters after ``max_retries``, where it used to be replayed for ever. A store that is down is not the record's doing: charged, an
outage of a few seconds used up the budgets of every record that reached the sink meanwhile,
retried milliseconds apart, and sent good records to the dead letters. A rollback is not either: it fails every tuple a state took since its
last commit, whatever caused it, so charging it let one bad record (or a worker that died a few
times) use up the budgets of every good record in flight and send them to the dead letters. A cause crosses workers inside acker messages as a plain tuple
(`FailureCause.wire`), which the serializer carries without registration.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ._error_lines import exception_message
from ._redact import MASK, is_secret_key, shown_text

EXPLICIT = "fail"
EXCEPTION = "exception"
TIMEOUT = "timeout"
WORKER_LOST = "worker-lost"
ROLLED_BACK = "rollback"
UNAVAILABLE = "unavailable"
WORKER_DIED = "worker-died"
KINDS = (EXPLICIT, EXCEPTION, TIMEOUT, WORKER_LOST, ROLLED_BACK, UNAVAILABLE, WORKER_DIED)

_RECORD_CAUSED = frozenset((EXPLICIT, EXCEPTION, WORKER_DIED))

# an exception's message travels with the failure up to this many characters (a message that
# quotes a whole record must not make every acker message of its tree that large)
MAX_MESSAGE_CHARS = 1000
# what of a message is masked before it is cut to MAX_MESSAGE_CHARS: masking reads all it is
# given, so a multi-MB message (a subprocess's error, a value quoted whole) made every failure
# it caused cost seconds; a credential that starts in the part kept ends well within this
SCANNED_CHARS = 16 * MAX_MESSAGE_CHARS


class FailureCause(NamedTuple):
    """Why a spout tuple failed (see the module docstring).

    ``kind`` is one of `EXPLICIT`, `EXCEPTION`, `TIMEOUT`, `WORKER_LOST`, `ROLLED_BACK`,
    `UNAVAILABLE` or `WORKER_DIED`. For the
    first two, ``component`` and ``task`` name the bolt task that failed the tuple, and ``error``
    and ``message`` the exception's type name and message (for `EXPLICIT`, those of the
    `FailedException` a `BasicBolt` raised, if it did; else empty). A `WORKER_LOST` made by
    `lost_in` names the bolt task whose process died with the tuple in it, and why. For
    `ROLLED_BACK`, they name the task whose state rolled back, and ``message`` says why; for
    `UNAVAILABLE`, the bolt task whose store did not take the tuple, and ``message`` the store
    and its error. For `WORKER_DIED`, the bolt task that was executing the tuple when its worker
    died, and ``message`` how the worker ended (``exit status 7``, ``killed by SIGSEGV``).
    """

    kind: str
    component: str = ""
    task: int = -1
    error: str = ""
    message: str = ""

    @property
    def record_caused(self) -> bool:
        """Whether the record itself caused the failure (an explicit fail, an exception while
        processing it, or its worker's death while a bolt executed it), not a worker that died
        with it in flight, a timeout, a state's rollback or a store that was down under it: what a
        retry budget counts."""
        return self.kind in _RECORD_CAUSED

    def describe(self) -> str:
        """One line for a log or a dead-letter entry, e.g. ``exception in [parse] task 3:
        JSONDecodeError: Expecting value: line 1 column 1 (char 0)``."""
        if self.kind == TIMEOUT:
            return "timed out (topology.message.timeout.secs)"
        if self.kind == WORKER_DIED:
            return (f"its worker died while [{self.component}] task {self.task} executed it"
                    + (f": {self.message}" if self.message else ""))
        if self.kind == WORKER_LOST:
            if not self.component:
                return "a worker it was in died"
            what = ": ".join(part for part in (self.error, self.message) if part)
            return f"lost in [{self.component}] task {self.task}" + (f": {what}" if what else "")
        where = f" in [{self.component}] task {self.task}" if self.component else ""
        what = ": ".join(part for part in (self.error, self.message) if part)
        label = {EXCEPTION: "exception", ROLLED_BACK: "rolled back",
                 UNAVAILABLE: "store unavailable"}.get(self.kind, "failed")
        return f"{label}{where}" + (f": {what}" if what else "")

    def reason_suffix(self) -> str:
        """``"; last: <describe()>"``, to end a dead-letter reason with; "" for a cause that says
        nothing (`UNKNOWN`: a plain ``fail`` from a spout's caller that gave none)."""
        return "" if self == UNKNOWN else f"; last: {self.describe()}"

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form, for a dead-letter record (JSON)."""
        return self._asdict()

    def wire(self) -> tuple:
        """The plain tuple that travels in acker messages (a NamedTuple would need registering)."""
        return tuple(self)

    @classmethod
    def of_exception(cls, kind: str, component: str, task: int, error: BaseException) -> FailureCause:
        """The cause for ``error``, raised in ``component`` task ``task`` (message cut to
        `MAX_MESSAGE_CHARS`, credentials in it masked: it reaches dead-letter entries and logs).
        An error with a ``failure_message`` (a subprocess's failure, whose message holds the last
        lines of its stderr) gives that one line instead of its whole message."""
        return cls(kind, component, task, type(error).__name__,
                   shown_message(getattr(error, "failure_message", None) or exception_message(error)))

    @classmethod
    def lost_in(cls, component: str, task: int, error: BaseException | str) -> FailureCause:
        """A `WORKER_LOST` cause (not `record_caused`: no retry budget counts it) for a tuple
        that was in ``component`` task ``task`` when a process of its own died or was replaced
        because of ``error`` (a shell bolt's subprocess, a streamparse instance) while the
        worker lived on: the tuple was not the one that caused it. ``error`` is told as
        `of_exception` tells it (an exception) or `of_reason` (a reason)."""
        if isinstance(error, BaseException):
            return cls(WORKER_LOST, component, task, type(error).__name__,
                       shown_message(getattr(error, "failure_message", None) or exception_message(error)))
        return cls(WORKER_LOST, component, task, "", shown_message(error))

    @classmethod
    def of_reason(cls, component: str, task: int, reason: str, kind: str = EXPLICIT) -> FailureCause:
        """A fail by ``component`` task ``task`` that says why (``reason``: what a dead-letter
        entry and its ``cause`` then carry; cut and masked as an exception's message is). For
        squall's own bolts, which fail a tuple for a reason they know (a window's timestamp
        that is not a number, a sink's write refused for the tuple: `EXPLICIT`; a state's
        rollback: `ROLLED_BACK`; a sink's store that is down: `UNAVAILABLE`)."""
        return cls(kind, component, task, "", shown_message(reason))

    @classmethod
    def from_wire(cls, value: Any) -> FailureCause:
        """The cause `wire` made of ``value``; anything else (a failure from a sender that gave no
        cause) counts as an explicit fail, as every failure did before causes."""
        if type(value) is tuple and len(value) == 5 and value[0] in KINDS:
            return cls(*value)
        return UNKNOWN


def shown_message(text: str) -> str:
    """``text`` as a failure's ``message`` carries it: credentials masked (`shown_text`), cut to
    `MAX_MESSAGE_CHARS` (then ending ``...``). Only its first `SCANNED_CHARS` are masked, so a
    failure costs the same whatever the size of the text it was given."""
    message = shown_text(text[:SCANNED_CHARS] if len(text) > SCANNED_CHARS else text)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    return message


def fail_all_because(collector: Any, tuples: Iterable[Any], component: str, task: int, reason: str,
                     kind: str = EXPLICIT) -> None:
    """`fail_because` of each of ``tuples`` for one ``reason`` (a batch a sink could not write,
    ``kind`` `UNAVAILABLE`; a state's rollback, `ROLLED_BACK`): the cause is made once, where masking and cutting the
    reason for each tuple cost some 25 us a tuple, a quarter of a second for a batch of 10,000."""
    cause = FailureCause.of_reason(component, task, reason, kind)
    for tup in tuples:
        fail_for(collector, tup, cause)


def shown_value(value: Any, limit: int = 200) -> str:
    """``repr(value)`` for a reason that quotes a value (a key, a field), cut to ``limit``
    characters and saying how long it was: the reason is also reported, and a report is logged
    whole, so a multi-MB value would make a multi-MB log line and error record."""
    return cut_text(repr(value), limit)


def cut_text(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (`shown_value`'s cut, for a
    text a reason quotes that may hold a value: a library's error message)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def shown_values(fields: Iterable[str], values: Sequence[Any], limit: int = 200) -> str:
    """``[...]``: a record's values for an error (a Trident input's, a sink's dropped row), each
    as its ``repr``, credentials masked (`squall._redact.shown_text`; a field whose name names a
    credential, ``password``, shows `MASK`), then cut to ``limit`` characters saying how long it
    was. Masked before it is cut, so that a cut never leaves half a credential that masking no
    longer recognises."""
    names = list(fields)
    shown = []
    for i, value in enumerate(values):
        if i < len(names) and is_secret_key(names[i]):
            shown.append(repr(MASK))
            continue
        try:
            text = repr(value)
        except Exception as e:  # noqa: BLE001 (a value whose repr raises is still shown as something)
            text = f"<{type(value).__name__} whose repr raised {type(e).__name__}>"
        shown.append(cut_text(shown_text(text[:16 * limit]), limit))
    return f"[{', '.join(shown)}]"


UNKNOWN = FailureCause(EXPLICIT)
"""The cause of a failure whose sender gave none: an explicit fail, which a retry budget counts."""


def fail_for(collector: Any, tup: Any, cause: FailureCause | None) -> None:
    """Fail ``tup`` on ``collector`` for ``cause``, where the collector carries a cause (the
    engine's, and the collectors squall wraps around a bolt's: ``fail_with``), else plainly."""
    fail_with = getattr(collector, "fail_with", None)
    if cause is not None and fail_with is not None:
        fail_with(tup, cause)
    else:
        collector.fail(tup)


def fail_because(collector: Any, tup: Any, component: str, task: int, reason: str,
                 kind: str = EXPLICIT) -> None:
    """Fail ``tup`` on ``collector`` as ``component`` task ``task`` for ``reason`` (what the
    spout's dead letter and log then say: `FailureCause.of_reason`), of ``kind`` (`UNAVAILABLE`
    where the store was at fault, not the tuple). For squall's own bolts, which know why they
    fail a tuple: the reason names what was wrong and where (field, stream, file, key), never
    only a traceback."""
    fail_for(collector, tup, FailureCause.of_reason(component, task, reason, kind))


UNREADABLE = "unreadable"
"""The reason of a dead letter its spout wrote without a failure: it could not make a tuple of
the record (a translator that raised, values not matching the output fields, a record too
large or undecodable), so the record was never emitted."""

BAD_ROW = "bad-row"
"""The reason of a dead letter a sink wrote without a failure: a row that does not fit its
schema (or an id that cannot be one), put on the sink's ``dead_letter`` stream and acked
(``on_bad_row="dead_letter"``); counted by the sink's task, failed by the sink."""

DEAD_LETTERED = "dead_lettered"
"""The statistic a spout task counts its dead letters in (`DeadLetterCounts`), keyed
``(DEAD_LETTERED, component, reason)``: the component that failed the record last ("" when
none did: a timeout, a worker lost, `UNREADABLE`) and the reason, a failure's kind or
`UNREADABLE`."""


class DeadLetterCounts:
    """A spout task's dead letters since it started, by the component that failed each record
    last and why (Storm has no dead letters; counted as its emitted/acked/failed are, so every
    view shows them in Storm's windows: the spout reports them as ``component_statistics``).

    One count per dead letter, on the spout's thread; `figures` is read on the worker's
    heartbeat thread, and copies first. A spout makes a new one in ``open``: the counts start
    with each launch of its worker, as the engine's do."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def count(self, cause: FailureCause | None) -> None:
        """A record went to the dead letters after failing last for ``cause``, or (None) as
        `UNREADABLE`."""
        key = ("", UNREADABLE) if cause is None else (cause.component, cause.kind)
        self._counts[key] = self._counts.get(key, 0) + 1

    def refused(self, component: str, reason: str) -> None:
        """A record went to the dead letters without a failure, refused by ``component`` for
        ``reason`` (a sink's `BAD_ROW`)."""
        key = (component, reason)
        self._counts[key] = self._counts.get(key, 0) + 1

    @property
    def total(self) -> int:
        """Dead letters counted."""
        return sum(self._counts.copy().values())

    def by_cause(self) -> dict[tuple[str, str], int]:
        """The counts so far, ``{(component, reason): n}`` (a copy): what a Trident spout's
        emitter bolt reads before and after each batch it has the emitter emit
        (`squall.trident.stats.BatchDeadLetters`)."""
        return self._counts.copy()

    def figures(self) -> dict[tuple[str, str, str], float]:
        """The counts as a task's statistics (``squall.engine.stats.component_figures``)."""
        counts = self._counts.copy()  # one C call: the spout's thread may add a key meanwhile
        return {(DEAD_LETTERED, component, reason): n for (component, reason), n in counts.items()}


class CountsDeadLetters:
    """Mixed into a spout that dead-letters records (the connectors' spouts): its
    `DeadLetterCounts`, made anew by `start_dead_letter_counts` in its ``open``, reported as its
    statistics (the engine reads a spout's ``component_statistics`` with each heartbeat)."""

    dead_letter_counts: DeadLetterCounts | None = None

    def start_dead_letter_counts(self) -> DeadLetterCounts:
        """New counts for this launch of the task (they start from zero with it)."""
        self.dead_letter_counts = counts = DeadLetterCounts()
        return counts

    def count_dead_letter(self, cause: FailureCause | None) -> None:
        """One record dead-lettered (`DeadLetterCounts.count`)."""
        counts = self.dead_letter_counts
        if counts is None:  # dead-lettered before open (a unit test driving the spout by hand)
            counts = self.start_dead_letter_counts()
        counts.count(cause)

    def count_refused(self, component: str, reason: str) -> None:
        """One record dead-lettered without a failure (`DeadLetterCounts.refused`)."""
        counts = self.dead_letter_counts
        if counts is None:
            counts = self.start_dead_letter_counts()
        counts.refused(component, reason)

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The dead letters counted, as the task's statistics."""
        counts = self.dead_letter_counts
        return {} if counts is None else counts.figures()
