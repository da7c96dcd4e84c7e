"""`ShellProcess`: one multilang subprocess and its pipes (Storm's ``ShellProcess``).

It starts the command, makes the handshake (configuration, context, pid directory; the answer
is the subprocess's pid), writes messages, reads them with an optional time limit, and kills
it. What the subprocess writes to stderr is logged line by line on ``squall.multilang`` and its
last lines go into every error, so that a Python traceback or a Node stack in the subprocess
is what the user reads in the UI, not squall's.

Reads go through ``os.read`` on the pipe and the serializer's framing, never a buffered file,
so that a read can wait with a time limit (``poll``) without data hiding in a buffer.
"""

from __future__ import annotations

import array
import atexit
import codecs
import collections
import fcntl
import logging
import math
import os
import select
import shutil
import signal
import subprocess
import tempfile
import termios
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._children import GROUP_FILE, SHELL_HOME_ENV, ShellGroup, die_with_parent, kill_group, leader_of
from .._error_lines import STDERR_HEAD, stderr_cause
from .messages import MultilangError, ProtocolError, ShellMsg, parse_shell_msg, setup_message
from .serializer import JsonSerializer, MsgpackSerializer, shown

if TYPE_CHECKING:
    from .._context import TopologyContext

log = logging.getLogger("squall.multilang")

STDERR_LINES = 20  # the last lines of the subprocess's stderr an error shows
# the most of one stderr line that is logged and kept for an error: a subprocess that wrote a
# multi-MB line (a value dumped whole) made a multi-MB log line, and an error record as large
STDERR_LINE_CHARS = 1000
STDERR_READ_BYTES = 1 << 16  # the most of a stderr line read at once: a line is never held whole
# a stderr line longer than this is logged in pieces of this many characters (each cut to
# STDERR_LINE_CHARS as a line is): one that never ends (a component writing without a newline)
# is still seen in the log, and costs no more memory than a read
STDERR_PIECE_CHARS = 16 << 20
CLOSE_WAIT_SECS = 2.0  # how long close() waits for a read in progress (it ends at the killed subprocess's EOF)
# how long a start whose handshake met a closed input waits for the subprocess's exit: the pipe's
# reader is gone once it has closed its files, a moment before it has exited (longer on a busy
# machine); one still there after this closed its input and lives on
INPUT_CLOSED_EXIT_SECS = 2.0
_READ_BYTES = 1 << 16


def _ready_within(fd: int, events: int, timeout: float) -> bool:
    """Whether ``fd`` is ready for ``events`` (``select.POLLIN``, ``select.POLLOUT``) within
    ``timeout`` seconds; its end (hang-up, error) counts as ready, for the read or write that
    follows to find. poll(), not select(): a worker holding many sockets and files gives a new
    subprocess's pipes descriptors past 1023, which select() refuses (ValueError)."""
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(max(0, math.ceil(timeout * 1000))))


def _write_within(fd: int, data: bytes, timeout: float, taken: Callable[[int], None]) -> None:
    """Write ``data`` to the pipe ``fd``, telling ``taken`` how many bytes each write put in it;
    `SubprocessTimeout` once nothing of it was taken for ``timeout`` seconds."""
    view = memoryview(data)
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while view:
            if not _ready_within(fd, select.POLLOUT, timeout):
                raise SubprocessTimeout(f"it took nothing of its input for {timeout:g} s")
            try:
                n = os.write(fd, view)
            except BlockingIOError:  # room for less than PIPE_BUF: wait again
                continue
            taken(n)
            view = view[n:]
    finally:
        os.set_blocking(fd, blocking)


def _write_all(fd: int, data: bytes, taken: Callable[[int], None]) -> None:
    """Write ``data`` to the blocking pipe ``fd``, telling ``taken`` how many bytes each write
    put in it (a write the subprocess's end interrupts put some of them there)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        taken(n)
        view = view[n:]


def task_directory(prefix: str) -> str:
    """A new directory for one shell task (its pid directory, its resources' copy, the
    record of its process group), named from ``prefix``: under its worker's shell home
    (`squall._children.SHELL_HOME_ENV`) where its restarter set one, so that a worker that dies
    without any cleanup (SIGKILL, the OOM killer) leaves nothing its restarter does not end
    (`squall._children.end_shell_tasks`); else in the temporary directory."""
    home = os.environ.get(SHELL_HOME_ENV) or None
    if home is not None:
        os.makedirs(home, mode=0o700, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=home)


class SubprocessTimeout(MultilangError):
    """The subprocess said nothing within the time limit of a read (or took nothing within the
    time limit of a write)."""


class ShellProcess:
    """A multilang subprocess of one task; see the module docstring.

    Args:
        command: the program and its arguments.
        serializer: the wire (`squall.multilang.serializer`).
        where: who runs it, for messages and logs (``ShellBolt [split] task 3``).
        cwd: its working directory (None: the worker's).
        env: variables added to the worker's environment (a ``PATH`` is appended to the
            worker's, as Storm's ``setEnv`` does).
        owned_dir: a directory made for this subprocess alone (`task_directory`: its
            resources), removed with it; its pid directory and the record of its process group
            go in it too (None: `launch` makes one).
    """

    def __init__(self, command: Sequence[str], serializer: JsonSerializer | MsgpackSerializer, where: str,
                 cwd: str | None = None, env: Mapping[str, str] | None = None, owned_dir: str | None = None) -> None:
        self.command = list(command)
        self.serializer = serializer
        self.where = where
        self.cwd = cwd
        self.env = dict(env or {})
        self.pid: int | None = None
        self._proc: subprocess.Popen | None = None
        self._ready: collections.deque[Any] = collections.deque()  # decoded, not yet read
        self._write_lock = threading.Lock()
        # held by a read of the pipe, so that close() never closes its descriptor under the read:
        # the number could be reused at once by another subprocess's pipe, and the read take its data
        self._read_lock = threading.Lock()
        self._closed = False
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._stderr_thread: threading.Thread | None = None
        self._dirs = [owned_dir] if owned_dir else []  # removed when it ends: its resources, its pid directory
        self._task_dir = owned_dir
        self._group: ShellGroup | None = None  # its process group, with its leader's start time (`_signal_group`)
        self._made_in = os.getpid()  # the process whose exit ends it (`_end_at_exit`), not a fork of it
        # its directories go when it is garbage collected, if nothing removed them before (a
        # component's thread that ended without a close, and dropped it)
        weakref.finalize(self, _remove_left, self._dirs, self._made_in)
        if owned_dir:
            _UNENDED.add(self)
        self._eof = False
        # bytes its input pipe took, counted as each write puts them there: what it read of them
        # is `sent` less what is still in the pipe (`unread_input`), which tells a tuple it never
        # read from the one it died on (`squall.multilang.bolt.ShellBolt._never_read`)
        self.sent = 0
        self.owner: threading.Thread | None = None  # the component's thread: the subprocess does not outlive it
        self.killed_because = ""  # set by `kill`: why squall ended it, for the error that follows

    # --- start ----------------------------------------------------------------------------------
    def launch(self, conf: dict[str, Any], context: TopologyContext, timeout: float | None) -> int:
        """Start the subprocess and make the handshake; its pid.

        Raises:
            MultilangError: it cannot be started, or it did not answer the handshake with its
                pid within ``timeout`` seconds (naming the command, with its stderr).
        """
        env = None
        if self.env:
            env = dict(os.environ)
            for k, v in self.env.items():
                env[k] = f"{env['PATH']}{os.pathsep}{v}" if k == "PATH" and env.get("PATH") else v
        if self._task_dir is None:
            self._task_dir = task_directory("squall-multilang-")
            self._dirs.append(self._task_dir)
        pid_dir = tempfile.mkdtemp(prefix="pids-", dir=self._task_dir)
        self._dirs.append(pid_dir)
        _UNENDED.add(self)
        try:
            # it dies with the thread that started it, the component's: a SIGKILLed worker left it
            # running; and it leads a process group of its own, which `kill` ends whole (`_signal_group`)
            self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, cwd=self.cwd, env=env, process_group=0,
                                          preexec_fn=die_with_parent)  # noqa: PLW1509 (one prctl call, resolved before the fork)
        except OSError as e:
            self._remove_dirs()
            raise MultilangError(f"{self.where}: cannot start {self.command} "
                                 f"(in {self.cwd or os.getcwd()}): {e.strerror or e}", without_frames=True) from None
        _REAPER.watch(self)
        self._record_group(self._proc.pid)
        self._stderr_thread = threading.Thread(target=self._log_stderr, name=f"{self.where} stderr", daemon=True)
        self._stderr_thread.start()
        try:
            # with the time limit too: a handshake larger than the pipe holds (a big configuration,
            # the context of a topology of thousands of tasks) waited for ever on a command that
            # never reads its input (the wrong program, one stuck before its loop), the
            # component's start with it
            handshake = self.serializer.encode(setup_message(conf, context, pid_dir))
            try:
                self._put(handshake, timeout)
            except SubprocessTimeout:
                self.kill("")
                raise self.failure(f"it took nothing of the handshake ({len(handshake)} bytes: the configuration "
                                   f"and context) for {timeout:g} s (it must read its input)") from None
            except (BrokenPipeError, ValueError, OSError):
                # it exited before it took the whole handshake (a usage line printed, a crash at
                # import). Whether this broken pipe or its stdout's end of file comes first is
                # the OS's timing (a command that exits at once, a handshake larger than the pipe,
                # a busy machine): the broken pipe said only "it stopped reading its input (it
                # exited)", where the end of file says what it wrote to its stdout and its exit
                # code. Once it has exited its answer is read as if the write had gone in: the
                # same error whichever came first
                if not self._exits_within(INPUT_CLOSED_EXIT_SECS):
                    raise self.failure(f"it closed its input before it took the whole handshake ({len(handshake)} "
                                       f"bytes) and did not exit within {INPUT_CLOSED_EXIT_SECS:g} s") from None
            answer = self.read_raw(timeout)
        except SubprocessTimeout:
            self.kill("")
            raise self.failure(f"no answer to the handshake within {timeout:g} s (it must write its pid, "
                               f"{{\"pid\": N}}, first){self._printed(self.serializer.pending())}") from None
        except ProtocolError as e:
            self.kill("")
            raise self.protocol_error(e, "the handshake: ") from None
        except MultilangError:
            self.kill("")
            raise
        pid = answer.get("pid") if isinstance(answer, dict) else None
        if type(pid) is not int:
            self.kill("")
            raise self.failure(f"the handshake's answer must be {{\"pid\": N}}, got {shown(repr(answer))}")
        self.pid = pid
        return pid

    @staticmethod
    def _printed(left: bytes) -> str:
        """What a subprocess that gave no handshake's answer wrote to its stdout, for its error
        (a usage line, a banner), or nothing."""
        return f"; it wrote to its stdout only {shown(left)}" if left else ""

    def _record_group(self, pid: int) -> None:
        """Write the subprocess's process group, with its leader's start time, in its task
        directory (`squall._children.GROUP_FILE`): if the worker dies without ending it, PDEATHSIG
        ends only the group's leader, and the worker's restarter kills the rest from this record."""
        group = self._group = leader_of(pid)
        if group is None or self._task_dir is None:
            return  # no /proc: nothing to record, nor to check a record against
        path = os.path.join(self._task_dir, GROUP_FILE)
        try:
            with open(path + ".tmp", "w") as f:
                f.write(group.text())
            os.replace(path + ".tmp", path)  # whole or absent, however the worker dies
        except OSError as e:
            log.warning("%s: cannot record the process group of subprocess %s in %s: %s", self.where, pid, path, e)

    # --- messages -------------------------------------------------------------------------------
    def write(self, message: Any, timeout: float | None = None) -> None:
        """Write one message (any thread); ``timeout``: see `write_bytes`.

        Raises:
            ProtocolError: the message holds a value the wire cannot carry.
            MultilangError: the subprocess no longer reads (it exited).
            SubprocessTimeout: it took nothing for ``timeout`` seconds.
        """
        self.write_bytes(self.serializer.encode(message), timeout)

    def write_bytes(self, data: bytes, timeout: float | None = None) -> None:
        """Write a message the serializer encoded already (`write`). With ``timeout``, raise
        `SubprocessTimeout` once the subprocess has taken nothing for that long: a caller that
        reads its output on the same thread (a ShellSpout) would otherwise wait for ever on a
        subprocess that writes without reading (its input pipe full, its output unread)."""
        try:
            self._put(data, timeout)
        except (BrokenPipeError, ValueError, OSError):
            self._eof = True  # it is exiting: the error waits a moment for its status
            raise self.failure("it stopped reading its input (it exited)") from None

    def _put(self, data: bytes, timeout: float | None) -> None:
        """`write_bytes`, whose closed pipe is the OSError (or ValueError) the write raised."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise self.failure("it is not running")
        with self._write_lock:
            proc.stdin.flush()
            if timeout is None:
                _write_all(proc.stdin.fileno(), data, self._took)
            else:
                _write_within(proc.stdin.fileno(), data, timeout, self._took)

    def _took(self, n: int) -> None:
        self.sent += n

    def unread_input(self) -> int | None:
        """Bytes written to its input that it has not read, still in the pipe (once it died:
        those it never took); None when the pipe cannot say (closed, or no ``FIONREAD``)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            return None
        try:
            count = array.array("i", [0])
            fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, count, True)
        except (OSError, ValueError):
            return None
        return count[0]

    def read(self, timeout: float | None = None) -> ShellMsg:
        """The next message from the subprocess, checked (`parse_shell_msg`).

        Raises:
            SubprocessTimeout: nothing came within ``timeout`` seconds.
            ProtocolError: what came is not a message of the protocol.
            MultilangError: the subprocess closed its output (it exited).
        """
        return parse_shell_msg(self.read_raw(timeout))

    def read_raw(self, timeout: float | None = None) -> Any:
        """The next decoded message, unchecked (`read`)."""
        if self._ready:
            return self._ready.popleft()
        with self._read_lock:
            return self._read_locked(timeout)

    def _read_locked(self, timeout: float | None) -> Any:
        proc = self._proc
        if self._closed:
            raise self.failure("it was closed (its component ended)")
        if proc is None or proc.stdout is None:
            raise self.failure("it is not running")
        fd = proc.stdout.fileno()
        while not self._ready:
            held = self.serializer.failed()  # what it wrote after the messages read already
            if held is not None:
                raise held
            if timeout is not None and not _ready_within(fd, select.POLLIN, timeout):
                raise SubprocessTimeout(f"{self.where}: nothing from the subprocess within {timeout:g} s")
            try:
                data = os.read(fd, _READ_BYTES)
            except (OSError, ValueError):
                data = b""
            if not data:
                self._eof = True
                left = self.serializer.pending()
                if self.pid is None:  # no message yet: what it printed is no message it broke off
                    raise self.failure("it exited before answering the handshake" + self._printed(left))
                raise self.failure("it exited" if not left else f"it exited in the middle of a message: {shown(left)}")
            self._ready.extend(self.serializer.feed(data))
        return self._ready.popleft()

    # --- end ------------------------------------------------------------------------------------
    def kill(self, because: str) -> None:
        """End the subprocess now (SIGKILL, to its process group: `_signal_group`) and remove
        its directories; ``because`` says why, in the error a read or write that fails next
        raises. Any thread; idempotent."""
        if because and not self.killed_because:
            self.killed_because = because
        proc = self._proc
        self._signal_group(signal.SIGKILL)
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.warning("%s: subprocess %s did not end after SIGKILL", self.where, proc.pid)
        self._remove_dirs()

    def _signal_group(self, sig: int) -> None:
        """Send ``sig`` to the subprocess's process group: the command and what it started in
        it. A command that is a wrapper (``sh -c "python3 bolt.py; ..."``, a script that
        activates a virtualenv) does not exec the program: the program is its child, the
        process that answered the handshake, and signalling the command alone left it running,
        blocked on its tuple for ever (Storm's supervisor kills the pid its ``pidDir`` lists).
        While the command's process is not reaped, its pid, the group's id, cannot be another
        process's. Once it is (a crash, whose status was read for its error), a SIGKILL goes to
        what is left of the group only as `squall._children.kill_group` checks it against the
        leader's recorded start time: the helpers a crashed subprocess started (a pool, a
        server) lived on otherwise, for ever."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is not None:
            if sig == signal.SIGKILL and self._group is not None:
                kill_group(self._group)
            return
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _exits_within(self, timeout: float) -> bool:
        """Whether the command's process ends within ``timeout`` seconds, waited for without
        reaping it (`_signal_group`)."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return True
        try:
            pidfd = os.pidfd_open(proc.pid)
        except OSError:  # no pidfd (a kernel before 5.3): reaped, then
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        try:
            return _ready_within(pidfd, select.POLLIN, timeout)
        finally:
            os.close(pidfd)

    def running(self) -> bool:
        """Whether the subprocess was started and has not ended."""
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """End the subprocess on a clean shutdown: close its input (a multilang library exits
        at end of input), SIGTERM its process group if it is still there a moment later, then
        SIGKILL (`kill`)."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        # waited for without reaping it, so that `kill` can still end what it started
        if not self._exits_within(1):
            self._signal_group(signal.SIGTERM)
            self._exits_within(2)
        self.kill("")
        # the pipes are closed once no thread reads them (a reader ends at the EOF the kill
        # made); one still read after CLOSE_WAIT_SECS (a child of the subprocess keeps the pipe
        # open) is left to the garbage collector rather than closed under its reader
        streams = []
        if self._read_lock.acquire(timeout=CLOSE_WAIT_SECS):
            self._closed = True
            streams.append(proc.stdout)
            self._read_lock.release()
        if self._stderr_thread is not None:
            self._stderr_thread.join(CLOSE_WAIT_SECS)
        if self._stderr_thread is None or not self._stderr_thread.is_alive():
            streams.append(proc.stderr)
        for stream in streams:
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def failure(self, what: str) -> MultilangError:
        """The error for ``what`` happened to the subprocess: who runs it, its pid and command,
        how it ended (if it did) and the last lines of its stderr."""
        if self.killed_because:
            what = f"{self.killed_because} (squall killed it); then {what}"
        proc = self._proc
        # before its handshake's answer the subprocess has said no pid: the one Popen started
        # (a wrapper script's, which answers with its child's, is the one squall kills anyway)
        pid = self.pid if self.pid is not None else proc.pid if proc is not None else "?"
        parts = [f"{self.where}: subprocess {self.command} (pid {pid}): {what}"]
        code = None
        if proc is not None:
            try:  # after end of file it is exiting: wait a moment for its status
                code = proc.wait(timeout=1) if self._eof else proc.poll()
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                parts.append(f"exit code {code}" if code >= 0 else f"killed by {_signal_name(-code)}")
        if self._stderr_thread is not None:
            # what it wrote just before it ended: once it has ended, its stderr's end of file
            # comes as soon as the thread has read the rest (a busy machine took more than half
            # a second, and the cause lost the line that said why)
            self._stderr_thread.join(CLOSE_WAIT_SECS if code is not None else 0.5)
        head = "; ".join(parts)
        last = stderr_cause(self._stderr)
        if not self._stderr:
            return MultilangError(head, without_frames=True)
        return MultilangError(head + f"\n{STDERR_HEAD}\n  " + "\n  ".join(self._stderr),
                              head + (f"; {STDERR_HEAD} {last}" if last else ""), without_frames=True)

    def protocol_error(self, error: ProtocolError, context: str = "") -> MultilangError:
        """`failure` for a message that broke the protocol."""
        return self.failure(f"broke the multilang protocol: {context}{error}")

    def _log_stderr(self) -> None:
        """Log the subprocess's stderr line by line, each line cut to `STDERR_LINE_CHARS`, and
        keep the last lines for its errors. A line is read `STDERR_READ_BYTES` at a time, of
        which only its first characters are kept: a whole line was read first, and a component
        that wrote 1 GB without a newline grew the worker by as much (and by that again as
        text), its task named nowhere until the line ended. A line longer than
        `STDERR_PIECE_CHARS` is logged in pieces of that size."""
        proc = self._proc
        if proc is None or proc.stderr is None:
            return
        piece = _StderrPiece()
        while chunk := proc.stderr.readline(STDERR_READ_BYTES):
            ended = chunk.endswith(b"\n")
            piece.add(chunk, ended)
            if ended:
                self._stderr_line(piece.line(ended=True))
                piece = _StderrPiece()
            elif piece.chars >= STDERR_PIECE_CHARS:
                self._stderr_line(piece.line(ended=False))
                piece = piece.next()
        if piece.chars:  # its last line, without a newline
            piece.add(b"", True)
            self._stderr_line(piece.line(ended=True))

    def _stderr_line(self, line: str) -> None:
        self._stderr.append(line)
        log.info("%s stderr: %s", self.where, line)

    def _remove_dirs(self) -> None:
        while self._dirs:
            shutil.rmtree(self._dirs.pop(), ignore_errors=True)
        _UNENDED.discard(self)


class _StderrPiece:
    """A stderr line, or a piece of a long one (`ShellProcess._log_stderr`), as it is read: its
    first `STDERR_LINE_CHARS` characters and how many it has, never the whole of it."""

    def __init__(self, decoder: codecs.IncrementalDecoder | None = None, continued: bool = False) -> None:
        self._decoder = decoder or codecs.getincrementaldecoder("utf-8")("replace")  # a character may span two reads
        self._head: list[str] = []
        self._kept = 0
        self.chars = 0
        self.continued = continued

    def add(self, data: bytes, last: bool) -> None:
        """Take the next bytes of the line (``last``: its end, the newline with them)."""
        text = self._decoder.decode(data, last)
        if last:
            text = text.rstrip("\r\n")
        self.chars += len(text)
        if self._kept <= STDERR_LINE_CHARS:
            self._head.append(text[:STDERR_LINE_CHARS + 1 - self._kept])
            self._kept += len(self._head[-1])

    def line(self, ended: bool) -> str:
        """What is logged for it (``ended``: the line ends with it, else it goes on)."""
        head = "".join(self._head)
        if ended and not self.continued and self.chars <= STDERR_LINE_CHARS:
            return head.rstrip()
        head = head[:STDERR_LINE_CHARS]
        return ("(continued) " if self.continued else "") + f"{head}... ({self.chars} characters" + \
            ("" if ended else "; the line goes on") + ")"

    def next(self) -> _StderrPiece:
        """The next piece of the same line."""
        return _StderrPiece(self._decoder, continued=True)


class _Reaper:
    """Kills the subprocesses whose component's thread ended without ending them: a worker that
    crashed on another component's error stops its threads without any close or cleanup, and
    its shell subprocesses must not outlive it (Storm's supervisor kills what a dead worker's
    pid directory lists). One thread for the process while any subprocess runs; it looks every
    second, and ends when none is left."""

    def __init__(self) -> None:
        self._watched: weakref.WeakSet[ShellProcess] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, process: ShellProcess) -> None:
        with self._lock:
            self._watched.add(process)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="squall-multilang-reaper", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(1.0)
            with self._lock:
                ended = [p for p in self._watched if not p.running()]
                for process in ended:
                    self._watched.discard(process)
                watched = list(self._watched)
            for process in ended:
                owner = process.owner
                if owner is not None and not owner.is_alive():
                    # it died with its thread (PDEATHSIG), which ended without a close (its worker
                    # crashed on another component's error): no one else removes its directories,
                    # nor kills what it started in its process group
                    process.kill("its worker stopped")
            with self._lock:
                if not self._watched:  # no subprocess left: no thread either, until the next one starts
                    self._thread = None
                    return
            for process in watched:
                owner = process.owner
                if owner is not None and not owner.is_alive() and process.running():
                    log.info("%s: its thread ended without closing it (its worker stopped): killing subprocess %s",
                             process.where, process.pid)
                    process.kill("its worker stopped")


_REAPER = _Reaper()


class _Unended:
    """The subprocesses whose directories are not removed yet, for `_end_at_exit`."""

    def __init__(self) -> None:
        self._processes: weakref.WeakSet[ShellProcess] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, process: ShellProcess) -> None:
        with self._lock:
            self._processes.add(process)

    def discard(self, process: ShellProcess) -> None:
        with self._lock:
            self._processes.discard(process)

    def take(self) -> list[ShellProcess]:
        with self._lock:
            out = list(self._processes)
            self._processes.clear()
            return out


_UNENDED = _Unended()


def _end_at_exit() -> None:
    """At this process's exit, end the subprocesses it started and remove their directories (pid
    directory, resources' copy). A crashing worker process exits through its atexit functions
    (`squall.cluster.worker_process.exit_process`) without any close or cleanup of its
    components: the subprocesses died with it (PDEATHSIG), but each task's directories stayed
    in the temporary directory for good, one more set at every restart of a crash-looping
    worker, as Storm's supervisor would remove a dead worker's. A fork of this process that
    exits ends nothing of its parent's."""
    me = os.getpid()
    for process in _UNENDED.take():
        if process._made_in == me:
            process.kill("its worker process exited")


atexit.register(_end_at_exit)


def _remove_left(dirs: list[str], made_in: int) -> None:
    """Remove the directories a garbage-collected `ShellProcess` left (its ``_dirs``), in the
    process that made them only."""
    if os.getpid() == made_in:
        while dirs:
            shutil.rmtree(dirs.pop(), ignore_errors=True)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
