"""How long a host waits before it starts again something that failed: a worker that could not
start, a worker that crashed soon after it started, a supervisor that died. Pure functions, so
the master, `LocalCluster` and the master's supervisor keeper hold one rule between them."""

from __future__ import annotations

STEADY_SECS = 60.0  # a process that ran this long before it crashed is restarted at once


def launch_backoff(failures: int, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds to wait before the next start after ``failures`` failures in a row: 1, 2, 4, ...
    up to ``cap``, so a slot (or a supervisor) that cannot start does not spin.

    >>> [launch_backoff(n) for n in (1, 2, 3, 6, 7)]
    [1.0, 2.0, 4.0, 30.0, 30.0]
    """
    return min(cap, base * 2 ** max(0, failures - 1))


def crash_backoff(quick_crashes: int, ran_secs: float, steady_secs: float = STEADY_SECS,
                  base: float = 1.0) -> tuple[int, float]:
    """After a crash of something that had run ``ran_secs``, with ``quick_crashes`` crashes in a
    row before it that each came within ``steady_secs`` of their start: the new count, and the
    seconds to wait before starting it again.

    A crash after a steady run (or the first one) restarts at once, so that one lost process
    (a ``kill -9``, a rare bug) costs no time; each further quick crash in a row waits ``base``
    (1 s), twice that, four times ... up to 30 s, so that a value that crashes its worker every
    time it is replayed does not spin.

    >>> crash_backoff(0, 5.0), crash_backoff(1, 5.0), crash_backoff(3, 5.0), crash_backoff(9, 5.0)
    ((1, 0.0), (2, 1.0), (4, 4.0), (10, 30.0))
    >>> crash_backoff(9, 61.0)  # it had run long enough: the count starts again
    (1, 0.0)
    """
    crashes = 1 if ran_secs >= steady_secs else quick_crashes + 1
    return crashes, (0.0 if crashes == 1 else launch_backoff(crashes - 1, base))
