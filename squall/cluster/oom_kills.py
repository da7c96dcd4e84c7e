"""How many processes the kernel's OOM killer has killed in this process's memory cgroup: read
before a worker starts and after it died by SIGKILL, a rise says that the OOM killer is the
likely killer, which a SIGKILL alone does not (a ``kill -9`` looks the same).

Linux counts every OOM kill, the system's and a cgroup limit's, in the victim's memory cgroup
and its ancestors: cgroup v2's ``memory.events`` and cgroup v1's ``memory.oom_control`` (since
Linux 4.13) have an ``oom_kill N`` line. The cgroup is the one ``/proc/self/cgroup`` names, under
``/sys/fs/cgroup`` (v2: the ``0::`` line, on a hybrid host under ``unified``; v1: the
``memory`` controller's); in a container whose cgroup namespace hides the path, its root. A
count that cannot be read (another OS, no memory controller, no permission) is None: the
worker's death is then described by its signal alone.
"""

from __future__ import annotations

from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def oom_kills(proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT) -> int | None:
    """The ``oom_kill`` count of this process's memory cgroup (see the module docstring), or
    None if it cannot be read. Reads two small files; never raises."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if hierarchy == "0" and not controllers:  # cgroup v2
            candidates = [base / relative / "memory.events" for base in (root, root / "unified")]
            candidates += [base / "memory.events" for base in (root, root / "unified")]
        elif "memory" in controllers.split(","):  # cgroup v1's memory controller
            candidates = [root / "memory" / relative / "memory.oom_control", root / "memory" / "memory.oom_control"]
        else:
            continue
        for candidate in candidates:
            count = _oom_kill_line(candidate)
            if count is not None:
                return count
    return None


def _oom_kill_line(path: Path) -> int | None:
    """The number on ``path``'s ``oom_kill N`` line; None if there is none or no file."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None
