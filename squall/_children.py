"""Child processes that die with the thread that started them (Linux's ``PR_SET_PDEATHSIG``):
a supervisor's workers, and a worker's multilang subprocesses, which a SIGKILL of their parent
would otherwise leave running."""

from __future__ import annotations

import ctypes
import signal
from typing import Any

_PR_SET_PDEATHSIG = 1


def _resolve_prctl() -> Any:
    try:  # resolved here, in the parent: loading a library in a child forked from threads may deadlock
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: the children watch their parent (squall.cluster.worker_process)


_prctl = _resolve_prctl()


def die_with_parent() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: in the child, before exec, ask for SIGKILL when
    the thread that started it ends (its process SIGKILLed, or that thread done)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
