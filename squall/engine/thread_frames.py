"""Other threads' current frames, read without CPython 3.11's deadlock.

The worker's watchdog (`squall.engine.worker.Worker.find_stalls` and ``report_stuck``) reads
the stack of each loop's thread a few times a second, and `LocalCluster` reads a starting
worker's to say what it is doing. Python gives one way to do that: ``sys._current_frames()``.

On CPython up to 3.11 that call can freeze the whole process (python/cpython#106883, #116969):
it holds the runtime's list-of-threads lock (``HEAD_LOCK``) while it makes a frame object per
thread, and an allocation there may run the garbage collector, whose finalizers (``__del__``,
weakref callbacks) are Python code that hands the GIL to another thread. A thread that starts or
ends at that moment takes ``HEAD_LOCK`` while holding the GIL: each waits for the other for
ever, and every thread of the process with them, ``time.sleep`` and signal handlers included
(pytest-timeout's alarm never runs). Stop 77's CI hang was that shape: the main thread in
`LocalCluster`'s wait for its workers, long past its own deadline and pytest-timeout's, and a
worker's agent thread in ``find_stalls``. 3.12 runs the collector only between bytecodes.

`current_frames` keeps the collector off for the length of the call, as CPython 3.11.9's own
fix does in C, and turns it back on only if it was on. A collection that was due runs at the next
allocation after the call, outside the lock. It is `squall._native.current_frames`: compiled,
the three steps (collector off, the frames, collector back on) are one, made holding the GIL, as
CPython's are. Written in Python they were three calls that another thread could run between: a
``gc.disable()`` a user's thread made meanwhile (a bolt tuning its worker, ``timeit``) was undone
by the ``gc.enable()`` after it, and a ``gc.enable()`` made meanwhile let a collection run inside
the call again (measured with a watchdog reading frames in a loop: 16 of 1,771 ``gc.disable()``
calls undone in 30 s; with threads switched every microsecond, 76 of 1,344 in 5 s). The pure-Python
twin (``SQUALL_PURE_PYTHON=1``, or no compiler at install) keeps those three calls, one caller at
a time.
"""

from __future__ import annotations

from types import FrameType

from .._native import current_frames


def frames_of(idents: set[int]) -> dict[int, FrameType]:
    """The current frame of each thread of ``idents`` that runs, and of no other thread.

    ``sys._current_frames()`` holds every thread's frame, the caller's own too, whose locals
    would then hold that dict: a reference cycle, made at every look of the watchdog, that kept
    every thread's frame of that moment alive, and everything their locals held (tuples,
    batches, locks), until the garbage collector's next pass, which a worker's raised thresholds
    (``topology.worker.gc.thresholds``) put tens of minutes away: a worker's memory grew by
    megabytes a minute meanwhile. The dict is emptied here before it is let go."""
    every = current_frames()
    try:
        return {ident: every[ident] for ident in idents if ident in every}
    finally:
        every.clear()


def entry_from(frame: FrameType | None, own_files: str | tuple[str, ...]) -> FrameType | None:
    """The outermost of the frames, from ``frame`` (a thread's innermost) outwards, that are in
    no file under ``own_files`` (path prefixes): where the caller's own code called into other
    code (a component's ``execute``, an object's ``__setstate__``); None if ``frame`` is in its
    own code."""
    entry = None
    while frame is not None and not frame.f_code.co_filename.startswith(own_files):
        entry, frame = frame, frame.f_back
    return entry
