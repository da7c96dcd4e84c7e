"""Ends a squall worker process at its last atexit hook, without the interpreter's teardown.

Not part of squall: `bench.instructions` puts this directory on the PYTHONPATH of the runs it
counts under Valgrind, and Python imports ``sitecustomize`` at start-up in every process of
the run. A worker's teardown (clearing its modules, the last collection) is about 60 million
instructions under Valgrind, and in some runs the process ended part way through it (on a
signal, as Valgrind still wrote its file: both workers of a run lost their module clearing
together, in 2 of 8 runs), so a run's count held all of it or only some: up to 5,000 a
sentence between two runs of the same code. Registered before anything else, the hook runs
after every other atexit hook (the logs are flushed by then, and the loops and the components'
cleanup ended before atexit), and leaves with the exit status the worker would have had.
Processes other than ``python -m squall.worker`` end as they would (``sys.exit`` and
``sys.excepthook`` are wrapped in every process, only to note the status).
"""

import atexit
import os
import sys

_status: list[int] = []


def _exit(code: object = None) -> None:
    # the status `sys.exit` would give: None 0, an int itself, anything else (printed) 1
    _status.append(0 if code is None else code if isinstance(code, int) else 1)
    _real_exit(code)


def _excepthook(*args: object) -> None:
    _status.append(1)  # an uncaught exception ends the process with 1
    _real_excepthook(*args)


def _leave() -> None:
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) != "squall.worker.__main__":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_status[-1] if _status else 0)


_real_exit, _real_excepthook = sys.exit, sys.excepthook
sys.exit, sys.excepthook = _exit, _excepthook
atexit.register(_leave)
