"""Loopback ports for the servers and workers the tests start.

A port found free with ``bind(0)`` is only free at that moment, and it comes from the kernel's
ephemeral range, the same range every outgoing connection of every process takes its own port
from: a test that starts its server a second later (a JVM, a worker process, a sender that
connects first on purpose) can find the port taken by another process's connection
(EADDRINUSE; seen once in ``tests/worker/test_tcp.py`` in a whole-suite run). Ports below the
ephemeral range, as Storm's slot ports 6700-6703 are, are never handed out that way: only an
explicit bind can take one, so here they are drawn at random below it, each checked free.

A port checked free is still only free until its test binds it, seconds later (a worker binds
its slot's port once it has started), and again whenever its test leaves it unbound for a while
(a SIGKILLed worker until its restart). Every process that runs tests draws from the same
ports: the other pytest-xdist worker of a run, and other runs on the machine. Two draws of one
port, one in each, leave one test's worker unable to bind its slot, and its master gives the
slot up after ``squall.worker.max.launch.attempts`` (2 in tests) such starts: a topology that
never starts (as one did in a whole-suite run at load 10, its master up and its submit done in
1.3 s). So each drawn port is also *claimed*, machine-wide:
a file named after it in `CLAIMS`, made only if absent (``O_EXCL``), holding the drawing
process's pid; no process draws a claimed port. A claim lasts while that process lives, for at
most `CLAIM_SECS`, and the process removes its own when it exits (and the directory, left
empty)."""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import socket
import time
from collections.abc import Iterable
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_SPAN = 8192  # ports below the ephemeral range to draw from
_TRIES = 200

CLAIMS = Path("/tmp") / "squall-test-ports"
"""Where the tests' processes claim the ports they drew: a file per port (`free_ports`). Ports
are the machine's, so this is too: not under the temporary directory, which each run of
``scripts/test`` makes its own."""

CLAIM_SECS = 1200.0
"""The longest a claim holds, if its process lives that long: the whole suite's budget (a
module's cluster keeps its ports for all of the module's tests). A claim older than that, or
whose process is gone, is taken over."""

_mine: set[Path] = set()  # the claims this process made, removed at its exit


def _ephemeral_low() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _holds(claim: Path) -> bool:
    """Whether ``claim`` (a file in `CLAIMS`) still holds its port: its process lives (one being
    written, empty yet, holds) and it is younger than `CLAIM_SECS`."""
    try:
        text = claim.read_text()
        mtime = claim.stat().st_mtime
    except FileNotFoundError:
        return False
    age = time.time() - mtime
    if age > CLAIM_SECS:
        return False
    try:
        return _alive(int(text))
    except ValueError:  # made, not yet written
        return age < 10


def _claim(port: int) -> bool:
    """Claim ``port`` for this process (False: another process holds it)."""
    claim = CLAIMS / str(port)
    for _ in range(3):
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # no directory yet, or the last claimer's exit just removed it
            CLAIMS.mkdir(exist_ok=True)
            continue
        except FileExistsError:
            if _holds(claim):
                return False
            # a dead process's or an expired claim: moved aside, then looked at again, as another
            # process may have taken it over meanwhile (then it is put back, and the port left)
            aside = claim.with_name(f"{port}.{os.getpid()}.{random.getrandbits(32):x}.aside")
            try:
                os.rename(claim, aside)
            except FileNotFoundError:
                continue  # moved by another process: the O_EXCL decides between us
            if _holds(aside):
                with contextlib.suppress(OSError):
                    os.link(aside, claim)
                aside.unlink()
                return False
            aside.unlink()
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        _mine.add(claim)
        return True
    return False


@atexit.register
def _release() -> None:
    """Remove this process's claims: its tests are over, and their servers with them; and the
    directory, if no other process's claim is left in it."""
    for claim in _mine:
        with contextlib.suppress(OSError):
            if claim.read_text() == str(os.getpid()):  # not one taken over after it expired
                claim.unlink()
    _mine.clear()
    with contextlib.suppress(OSError):
        CLAIMS.rmdir()


def free_ports(n: int, avoid: Iterable[int] = ()) -> list[int]:
    """``n`` distinct loopback TCP ports free now, below the ephemeral range (``bind(0)``'s
    where there is no room below it), none of ``avoid`` (ports chosen already but not yet
    bound) and none that any process running tests drew and claimed (`CLAIMS`); each is
    claimed for this process."""
    low = _ephemeral_low()
    first = max(1024, low - _SPAN)
    rng = random.Random()
    taken = set(avoid)
    ports: list[int] = []
    for _ in range(_TRIES if low - first >= 64 else 0):
        if len(ports) == n:
            break
        port = rng.randrange(first, low)
        if port in ports or port in taken:
            continue
        if not _claim(port):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # bound by something else: the claim stays, as harmless as the port is busy
        ports.append(port)
    while len(ports) < n:  # no room below the range: the kernel's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in ports and port not in taken:
            ports.append(port)
    return ports


def free_port() -> int:
    """One loopback TCP port free now (`free_ports`)."""
    return free_ports(1)[0]
