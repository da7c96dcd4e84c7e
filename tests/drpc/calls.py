"""What the DRPC tests share: a request that cannot hang the suite, and concurrent callers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

HANG_GUARD = 180
"""Seconds: only so that a broken build fails instead of hanging the suite, never a timing."""


def guarded(execute: Callable[[str, str], str], function: str, args: str) -> tuple[str | None, Exception | None]:
    """(result, error) of ``execute(function, args)``, run on a thread."""
    out: list = []

    def run():
        try:
            out.append((execute(function, args), None))
        except Exception as e:
            out.append((None, e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_GUARD)
    assert out, f"execute({function!r}, {args!r}) did not return"
    return out[0]


def client_execute(conf: dict[str, Any], function: str, args: str) -> tuple[str | None, Exception | None]:
    """(result, error) of one request through a `DRPCClient` of its own on ``conf``, `guarded`."""
    from squall import DRPCClient

    def call(function: str, args: str) -> str:
        with DRPCClient(conf) as client:
            return client.execute(function, args)
    return guarded(call, function, args)


def concurrent_answers(caller: Callable[[], Callable[[str, str], str]], function: str, threads: int,
                       n: int) -> dict[str, str]:
    """args -> result of ``threads`` threads each sending ``n`` requests of distinct args, each
    thread through the execute ``caller()`` gives it."""
    answers: dict[str, str] = {}
    lock = threading.Lock()

    def run(t):
        execute = caller()
        for i in range(n):
            args = f"t{t}-{i}"
            result = execute(function, args)
            with lock:
                answers[args] = result
    workers = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(HANG_GUARD)
    return answers
