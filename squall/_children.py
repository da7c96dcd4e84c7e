"""Child processes that die with the thread that started them (Linux's ``PR_SET_PDEATHSIG``):
a supervisor's workers, and a worker's multilang subprocesses, which a SIGKILL of their parent
would otherwise leave running; and what a dead worker's multilang subprocesses started and left,
which its restarter ends (`end_shell_tasks`)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass
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


# --- a worker's shell tasks, ended by whoever restarts a dead worker -----------------------------
#
# A shell component's subprocess leads a process group of its own, which a clean stop of its
# task kills whole (squall.multilang.process). PDEATHSIG reaches only the group's first process:
# when the worker is SIGKILLed, what that process started (the program under ``sh -c``, a
# virtualenv launcher's child) lives on, and each task's directories (its pid directory, its
# resources' copy) stay. Storm's supervisor kills the pids a dead worker's subprocesses listed
# and removes its directories; here every shell task of a worker gets a directory under the
# worker's `shell home` (SHELL_HOME_ENV, which its restarter chose and knows), holding its
# pid directory, its resources and a `GROUP_FILE` that names its process group, and the
# restarter ends them all (`end_shell_tasks`) once the worker is dead.

SHELL_HOME_ENV = "SQUALL_WORKER_SHELL_DIR"
"""The environment variable that gives a worker process its shell home: the directory under
which its shell tasks' directories are made (unset: the temporary directory, cleaned only by a
clean exit)."""

GROUP_FILE = "group"
"""The file of a shell task's directory naming its subprocess's process group (`ShellGroup`)."""


@dataclass(frozen=True)
class ShellGroup:
    """A shell subprocess's process group: its id (the pid of its first process, its leader),
    that leader's start time (clock ticks after boot, ``/proc/<pid>/stat``), which tells the
    leader from a later process that got its pid, and the boot it was recorded in (`boot_id`):
    a start time counts from its boot, and a record kept under ``storm.local.dir`` outlives a
    reboot, after which the same pid started at the same tick is another process."""

    pgid: int
    leader_start: int
    boot: str

    def text(self) -> str:
        """How it is written in `GROUP_FILE`."""
        return f"{self.pgid} {self.leader_start} {self.boot}\n"

    @classmethod
    def parse(cls, text: str) -> ShellGroup | None:
        """A group from `text`'s output; None for anything else (a file cut short by the death,
        a record that does not say its boot, a group no shell subprocess leads: 0, which to
        ``killpg`` is the caller's own, or init's 1)."""
        parts = text.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts[:2]) or int(parts[0]) <= 1:
            return None
        return cls(int(parts[0]), int(parts[1]), parts[2])


def _read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


_BOOT_ID = _read_boot_id()


def boot_id() -> str:
    """This boot's id (Linux's ``/proc/sys/kernel/random/boot_id``, new at every boot); empty
    where it cannot be read, and then no group is ever killed from a record (`kill_group`)."""
    return _BOOT_ID


@dataclass(frozen=True)
class _ProcStat:
    """What ``/proc/<pid>/stat`` says of a process that matters here."""

    pid: int
    pgrp: int
    start: int
    zombie: bool  # ended, not reaped by its parent yet


def _proc_stat(pid: int) -> _ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses; field 22 is starttime
    fields = text[text.rfind(")") + 2:].split()
    try:
        return _ProcStat(pid, int(fields[2]), int(fields[19]), fields[0] == "Z")
    except (IndexError, ValueError):
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), which tells it from a later process
    given its pid; None if there is none, or only a zombie its parent has not reaped yet, or no
    ``/proc``."""
    stat = _proc_stat(pid)
    return None if stat is None or stat.zombie else stat.start


def leader_of(pid: int) -> ShellGroup | None:
    """The process group ``pid`` leads, with its start time (None: no such process, or no
    ``/proc``)."""
    stat = _proc_stat(pid)
    return None if stat is None else ShellGroup(pid, stat.start, boot_id())


def _members(pgid: int) -> list[_ProcStat]:
    out: list[_ProcStat] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            stat = _proc_stat(int(name))
            if stat is not None and stat.pgrp == pgid:
                out.append(stat)
    return out


def kill_group(group: ShellGroup) -> list[int]:
    """SIGKILL what is left of ``group``; the pids it found in it.

    A pid reused is never killed: while any process of the group lives, its id is no other
    process's pid nor group's; once the group is empty, the id may be a new process's, which
    then leads a group of that id itself, and its start time is not the leader's recorded
    (such a group is left alone). Every member must also have started after the leader. A group
    recorded in another boot (or where the boot is unknown) is left alone too: its start time
    counted from that boot, and says nothing of the process that has its pid now."""
    if not group.boot or group.boot != boot_id() or group.pgid <= 1:
        return []  # killpg(0) would be this process's own group; kernel threads have group 0
    members = _members(group.pgid)
    leader = next((m for m in members if m.pid == group.pgid), None) or _proc_stat(group.pgid)
    if leader is not None and leader.start != group.leader_start:
        return []  # the pid is another process's now: the group ended
    ours = [m.pid for m in members if m.start >= group.leader_start]
    if not ours or len(ours) != len(members):
        return []
    try:
        os.killpg(group.pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return []
    return ours


def end_shell_tasks(home: str | os.PathLike) -> list[int]:
    """End what the shell tasks of a dead worker left under its shell home ``home``: SIGKILL
    each task's recorded process group (`kill_group`) and remove its directory. Call it only
    when that worker is dead (its live tasks' would go too). The pids killed."""
    killed: list[int] = []
    try:
        tasks = list(os.scandir(os.fspath(home)))
    except OSError:
        return killed
    for task in tasks:
        if not task.is_dir(follow_symlinks=False):
            continue
        try:
            with open(os.path.join(task.path, GROUP_FILE)) as f:
                group = ShellGroup.parse(f.read(64))
        except OSError:
            group = None  # it died before its subprocess started
        if group is not None:
            killed += kill_group(group)
        shutil.rmtree(task.path, ignore_errors=True)
    return killed


# --- the shell homes of workers run inside Spark tasks -------------------------------------------
#
# A Spark task's process makes its worker's shell home in the temporary directory and ends it when
# the worker ends (squall.cluster.spark_task). When the task's process itself is SIGKILLed (Spark
# killing its Python worker, an executor stopped), that home stays, and with it the programs its
# shell tasks started under a wrapper. Each home is named after the process that made it (pid and
# start time), so that the next task's process on the machine can tell one whose maker is dead and
# end it, as the process host's supervisor does its predecessors' at its start.

_SPARK_SHELL_HOME_PREFIX = "squall-worker-shells-"
_SPARK_SHELL_HOME = re.compile(re.escape(_SPARK_SHELL_HOME_PREFIX) + r"(\d+)-(\d+)-[^-]+")


def make_watched_shell_home(parent: str | None = None) -> str:
    """A new shell home (`SHELL_HOME_ENV`) for a worker this process watches, in ``parent`` (the
    temporary directory), named after this process so that `end_orphaned_shell_homes` can tell
    whether its maker is alive. Without ``/proc`` it gets a plain name, which nothing sweeps."""
    me = leader_of(os.getpid())
    mark = f"{me.pgid}-{me.leader_start}-" if me is not None else ""
    return tempfile.mkdtemp(prefix=_SPARK_SHELL_HOME_PREFIX + mark, dir=parent)


def orphaned_dirs(pattern: re.Pattern[str], parent: str | None = None, namespace: str | None = None) -> list[str]:
    """The directories under ``parent`` (the temporary directory) named by ``pattern`` for a
    process of this user now dead: its groups 1 and 2 are the maker's pid and start time
    (`process_start`); with a ``namespace``, group 3 is the maker's pid namespace, and only
    those of that one are judged (elsewhere its pid names another process). One whose maker
    lives, one of another user, a symlink or anything else is left out."""
    try:
        entries = list(os.scandir(parent or tempfile.gettempdir()))
    except OSError:
        return []
    dead = []
    for entry in entries:
        named = pattern.fullmatch(entry.name)
        if named is None or (namespace is not None and named[3] != namespace):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if process_start(int(named[1])) != int(named[2]):
            dead.append(entry.path)
    return dead


def end_orphaned_shell_homes(parent: str | None = None) -> list[int]:
    """End the shell homes under ``parent`` (the temporary directory) that `make_watched_shell_home`
    made for processes of this user now dead: the process groups their shell tasks recorded
    (`end_shell_tasks`) and the directories. A home whose maker lives, one of another user, or
    anything not named as those homes are is left alone. The pids killed."""
    killed: list[int] = []
    for path in orphaned_dirs(_SPARK_SHELL_HOME, parent):
        killed += end_shell_tasks(path)
        shutil.rmtree(path, ignore_errors=True)
    return killed
