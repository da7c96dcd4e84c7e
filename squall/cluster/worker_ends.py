"""How a worker ended, in words: the errors the master records for a worker that died
without saying why (it exited, a signal killed it), fell silent, or whose machine was taken for
lost; and `exit_text` / `killed_by`, the words the hosts use for an exit status.

Pure functions of what the master knows of the end (an exit status, a signal, the last lines of
the worker's output, the components it ran): no state, no clock read, no I/O, so each text can be
checked on its own. The master (`squall.cluster.master`) decides when a worker's end is an error;
this module only says what the error reads.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping

from .._nimbus import EXIT_LOST, SPARK_HOST, WorkerExit
from ..engine.executor import ErrorRecord
from .logs import is_logged_record


def master_error(component: str, task: int, text: str, now: float, traceback: str = "") -> ErrorRecord:
    """An error the master itself records, at wall time ``now``."""
    return ErrorRecord(component, task, now, text, traceback)


def silent_error(slot: str, components: list[str], starting: bool, limit: float, wall: float) -> ErrorRecord:
    """The error of a worker restarted because it fell silent (``starting``: it never beat):
    which ``components`` it ran (sorted), and where to look (Storm's Nimbus only logs it). A
    worker whose user code holds the interpreter (a long call into C, a busy loop in an
    extension) stops beating: the process host's worker then wrote every thread's stack to its
    output."""
    what = (f"did not report within nimbus.task.launch.secs ({limit:g} s)" if starting
            else f"missed heartbeats for nimbus.task.timeout.secs ({limit:g} s)")
    rec = master_error("__master", -1, f"worker on {slot} (components {', '.join(components)}) {what}: restarted it "
                                 f"({_silent_cause(slot)})", wall)
    rec.host, rec.worker = slot_address(slot)
    return rec


def _silent_cause(slot: str) -> str:
    """What most likely silenced the worker of ``slot``, and where to look, by its host. Only a
    process host's supervisor watches its workers run Python and dumps a stalled one's stacks
    (`stall_watch`). On Spark nothing does, and the usual cause is not user code: an executor or
    a Spark worker lost when no task slot was free for the task Spark runs again on its own,
    which then waits unheard (docs/spark.md, Failures): after such kills in `scripts/chaos.py
    --host spark` each error pointed at a supervisor's log that the Spark host has not."""
    if slot_address(slot)[0] == SPARK_HOST:
        return ("its executor or Spark worker lost, with no free task slot for the task Spark runs again? or user "
                "code holding the interpreter: no stacks are taken on Spark; see the worker's worker.log and its "
                "executor's stderr")
    return "user code holding the interpreter? its output, worker-<port>.log of its supervisor, has the threads' stacks"


def lost_error(slot: str, components: list[str], silent: str, wall: float) -> ErrorRecord:
    """The error of a worker whose machine the master took for lost (``silent``: what was
    unheard, for how long; ``components``: what it ran, sorted): its executors move, nothing is
    restarted there."""
    rec = master_error("__master", -1, f"worker on {slot} (components {', '.join(components)}): {silent}; its machine is "
                                 f"taken for lost (it died, hangs, or lost its link to the master): its executors go "
                                 f"to the other machines' free slots (a worker still running there stops once it reaches "
                                 f"the master again)", wall)
    rec.host, rec.worker = slot_address(slot)
    return rec

def exit_text(status: int) -> str:
    """How a process with exit status ``status`` ended: ``exit status 7``, or, for a negative
    status (Popen's), ``killed by SIGKILL``; `EXIT_LOST`: ``lost by its host``."""
    if status == EXIT_LOST:
        return "lost by its host"
    if status >= 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


# What a signal that killed a worker which left no traceback usually means: where to look
_SIGNAL_HINTS: dict[int, str] = {
    signal.SIGKILL: "the kernel's OOM killer, or a kill -9",
    signal.SIGSEGV: "a crash in native code: an extension module or a library's C code",
    signal.SIGBUS: "a crash in native code, or a memory-mapped file cut short",
    signal.SIGILL: "a crash in native code, or a library built for another CPU",
    signal.SIGFPE: "a crash in native code: an integer division by zero",
    signal.SIGABRT: "abort() in native code: a failed assertion, a corrupted heap",
}


def killed_by(signum: int) -> str:
    """``killed by SIGKILL (the kernel's OOM killer, or a kill -9)``: the signal, and what it
    usually means when nothing else said why (`_SIGNAL_HINTS`)."""
    hint = _SIGNAL_HINTS.get(signum)
    return exit_text(-signum) + (f" ({hint})" if hint else "")


def _ended(status: int) -> str:
    """How a worker with exit status ``status`` ended, for its error: ``exited with status 3``,
    ``was killed by SIGSEGV (a crash in native code: ...)``, ``was lost by its host`` (its host
    knows no exit status of its own: what it knows of why, an executor's, is the error's text)."""
    if status == EXIT_LOST:
        return "was lost by its host"
    if status >= 0:
        return f"exited with status {status}"
    return f"was {killed_by(-status)}"


def executing_text(tasks: Mapping[int, str], executing: tuple[tuple[int, int], ...]) -> str:
    """`` while [check] task 4 executed a tuple``: the bolt tasks of the dead worker's slot
    (``tasks``: task -> its bolt) that its board named (what it said is hostile: a task not a
    bolt of the slot is left out); empty if none."""
    named = sorted({t for t, _root in executing if type(t) is int and t in tasks})
    return f" while {' and '.join(f'[{tasks[t]}] task {t}' for t in named)} executed a tuple" if named else ""


# The components the master's own error records name (`master_error`), not a worker's report
_MASTERS_RECORDS = ("__worker", "__master")


def reported_ends(errors: list[ErrorRecord]) -> frozenset[str]:
    """The last line of each traceback the workers reported in ``errors``: what a worker's output
    ends with when the last thing it wrote was its log of an error it reported
    (`Executor.report_error` logs each with its traceback). Not the master's own records, whose
    traceback is a dead worker's output."""
    return frozenset(lines[-1].strip() for e in errors
                     if e.component not in _MASTERS_RECORDS and (lines := e.traceback.rstrip().splitlines()))


def _ends_a_traceback(lines: list[str]) -> bool:
    """Whether the last of ``lines`` is the exception line of a Python traceback: the one
    unindented line after the last ``Traceback (most recent call last):``, every line between
    indented (the frames)."""
    for i in range(len(lines) - 2, -1, -1):
        if lines[i].strip() == "Traceback (most recent call last):":
            return all(line[:1] in (" ", "\t") for line in lines[i + 1:-1]) and lines[-1][:1] not in (" ", "\t")
    return False


# What a worker's error says when the last line of its output is an exception it lived through
_LIVED_THROUGH = "no word of why; the last it wrote was an exception it went on from (its output is in the details)"
# ... and when it is an error the worker logged (and so went on from: logging returns)
_LOGGED_THROUGH = "no word of why; the last it wrote was an error it logged and went on from (its output is in the details)"


def exit_error(slot: str, ex: WorkerExit, now: float, started: bool = False, doing: str = "",
                reported: frozenset[str] = frozenset()) -> ErrorRecord:
    """The error of a worker that died before it reported anything (``started``: one that ran,
    and exited though nobody asked it to): how it ended (its exit status, or the signal that
    killed it and what that usually means), what it was executing (``doing``,
    `executing_text`), and the last line of its output (the whole tail goes in the
    traceback), unless that line ends an exception the worker lived through: an error the
    topology reported already (``reported``, `reported_ends`), or any traceback when a signal
    killed it; nor, when a signal killed it, an error it logged (`is_logged_record`)."""
    output = ex.output.rstrip()
    lines = output.splitlines()
    last = lines[-1].strip() if output else "no output"
    # A bolt's exception fails its input and the worker goes on, its log of it (a traceback)
    # the last it wrote: quoted, a SIGKILLed worker read "...without being asked to stop:
    # json.decoder.JSONDecodeError: Expecting property name ...", as if one malformed record had
    # killed it. A signal is no Python exception, so no traceback says why one came; an exit
    # status may be a traceback's, unless the worker reported that error and went on.
    signalled = ex.status < 0 and ex.status != EXIT_LOST
    if started and output and (last in reported or signalled and _ends_a_traceback(lines)):
        last = _LIVED_THROUGH
    elif started and signalled and is_logged_record(last):
        # Nor is an error it logged: a worker's stderr has only its logged errors (a spout's
        # record given up to the dead letters, a store that is down), each one it went on
        # from. Quoted, a SIGKILLed spout's worker read "...without being asked to stop: ...
        # ERROR events-0: entry ... to dead-letter stream 'events:dead': ... FailedException:
        # amount '12,5x' is not a number", as if a bad record had killed it. An exit status is
        # the worker's own doing, so after one its last logged error is still quoted.
        last = _LOGGED_THROUGH
    when = "without being asked to stop" if started else "before it started"
    rec = master_error("__worker", -1, f"worker on {slot} {_ended(ex.status)} {when}{doing}: {last}", now, output)
    rec.host, rec.worker = slot_address(slot)
    return rec


def slot_address(slot: str) -> tuple[str, int]:
    """``(host, port)`` of a slot's name ``host:port``."""
    host, _, port = slot.rpartition(":")
    return host, int(port) if port.isdigit() else 0
