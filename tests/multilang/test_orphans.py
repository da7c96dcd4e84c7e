"""A shell component's subprocess dies with the worker that started it, even a SIGKILLed one
(Storm's supervisor kills the pids a dead worker's subprocesses registered)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import wait_until

PARENT = textwrap.dedent("""
    import subprocess, sys, threading, time
    from squall._children import die_with_parent

    def component():  # starts its subprocess, as ShellProcess.launch does, and lives on
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=die_with_parent)
        print(proc.pid, flush=True)
        time.sleep(600)
    threading.Thread(target=component, daemon=True).start()
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_subprocess_dies_with_its_sigkilled_worker():
    from squall.multilang import process
    assert "preexec_fn=die_with_parent" in open(process.__file__).read()  # what ShellProcess.launch starts it with
    worker = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        child = int(worker.stdout.readline())
        assert _alive(child)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        assert wait_until(lambda: not _alive(child), 10), f"subprocess {child} outlived its SIGKILLed worker"
    finally:
        worker.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


CRASHING_WORKER = textwrap.dedent("""
    import json, sys
    from squall.multilang import process
    from squall.multilang.process import ShellProcess
    from squall.multilang.resources import pack, unpack
    from squall.multilang.serializer import JsonSerializer
    from squall.cluster.worker_process import exit_process

    bare = sys.argv[1]
    process.setup_message = lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}}
    owned = unpack(pack(bare, "ShellBolt [t]"), "squall-multilang-t-")  # its resources' copy, as _launch makes it
    p = ShellProcess([sys.executable, "silent.py"], JsonSerializer(), "ShellBolt [t] task 1", cwd=owned, owned_dir=owned)
    p.launch({}, None, 30)
    print(json.dumps({"dirs": list(p._dirs), "pid": p.pid}), flush=True)
    exit_process(1)  # the worker crashes (another component's error): its atexit functions, then os._exit
""")


def test_a_crashed_workers_shell_subprocess_leaves_no_directories_behind():
    """A worker process that crashes ends through `exit_process` (its atexit functions, then
    os._exit): no close or cleanup of its components runs, and each shell task's pid
    directory and copy of its resources stayed in the temporary directory for good, one more
    set at every restart of a crash-looping worker (Storm's supervisor removes a dead worker's
    directories)."""
    import json
    from pathlib import Path
    bare = Path(__file__).parent / "bare"
    worker = subprocess.run([sys.executable, "-c", CRASHING_WORKER, str(bare)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert worker.returncode == 1, worker.stderr
    made = json.loads(worker.stdout.splitlines()[0])
    assert len(made["dirs"]) == 2  # the resources' copy and the pid directory
    left = [d for d in made["dirs"] if Path(d).exists()]
    for d in left:
        shutil.rmtree(d, ignore_errors=True)
    assert not left, f"left behind by the crashed worker: {left}"
    assert wait_until(lambda: not _alive(made["pid"]), 10)


def test_a_dead_workers_shell_group_is_killed_only_if_its_leader_is_the_one_recorded():
    """`end_shell_tasks` kills the process group a dead worker's shell task recorded, with the
    program its wrapper started, but never a group whose leader is not the process recorded
    (a pid reused: another start time)."""
    from squall._children import GROUP_FILE, end_shell_tasks, kill_group, leader_of

    wrapper = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(600)'; exit $?"],
                               process_group=0)
    try:
        group = leader_of(wrapper.pid)
        assert group is not None and group.pgid == wrapper.pid
        assert wait_until(lambda: len(_group(wrapper.pid)) == 2, 10)  # the wrapper and its program
        program = next(pid for pid in _group(wrapper.pid) if pid != wrapper.pid)
        assert kill_group(dataclasses.replace(group, leader_start=group.leader_start + 1)) == []  # another process's pid
        assert _alive(wrapper.pid) and _alive(program)
        wrapper.kill()  # as PDEATHSIG ends the wrapper: its program, under it, lives on
        wrapper.wait(10)
        assert _alive(program)
        import tempfile
        with tempfile.TemporaryDirectory() as home:
            task = os.path.join(home, "squall-multilang-t-1")
            os.makedirs(os.path.join(task, "pids"))
            with open(os.path.join(task, GROUP_FILE), "w") as f:
                f.write(group.text())
            assert end_shell_tasks(home) == [program]
            assert os.listdir(home) == []
        assert wait_until(lambda: not _alive(program), 10)
    finally:
        for pid in _group(wrapper.pid):
            os.kill(pid, signal.SIGKILL)
        wrapper.kill()
        wrapper.wait(10)



def test_a_group_recorded_in_another_boot_or_without_one_is_never_killed(tmp_path):
    """A shell task's record outlives a reboot (it is under ``storm.local.dir``), and a start
    time counts from its boot: after a reboot the same pid started at the same tick is another
    process, whose group `end_shell_tasks` killed whole on a record that matched it. A record
    now names its boot, and one of another boot, or of none (the form written before), is
    only removed."""
    from squall._children import GROUP_FILE, end_shell_tasks, leader_of

    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], process_group=0)
    try:
        group = leader_of(leader.pid)
        assert group is not None

        def ended(name: str, text: str) -> list[int]:
            task = tmp_path / "home" / f"squall-multilang-{name}"
            task.mkdir(parents=True)
            (task / GROUP_FILE).write_text(text)
            killed = end_shell_tasks(tmp_path / "home")
            assert list((tmp_path / "home").iterdir()) == []  # the directory goes all the same
            return killed

        # the group and its leader's start match, but nothing says they are of this boot
        assert ended("no-boot", f"{group.pgid} {group.leader_start}\n") == []
        assert leader.poll() is None, "a process matched by a record that names no boot was killed"
        assert group.boot  # this boot's id, read on Linux
        another = dataclasses.replace(group, boot="0" * 8 + group.boot[8:])
        assert ended("another-boot", another.text()) == []
        assert leader.poll() is None, "a process matched by a record of another boot was killed"
    finally:
        leader.kill()
        leader.wait(10)

def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if name.isdigit() and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(name))
    return out


HELPER_THEN_CRASH = textwrap.dedent("""
    import json, os, subprocess, sys
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],  # in its process group
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.stdin.readline(); sys.stdin.readline()  # the handshake: one line of JSON, then end
    sys.stdout.write(json.dumps({"pid": os.getpid(), "helper": helper.pid}) + "\\nend\\n")
    sys.stdout.flush()
    sys.stdin.readline()
    os._exit(3)  # it crashes (a native call, the OOM killer), its helper left behind
""")


def test_a_record_naming_group_0_or_1_is_never_killed(tmp_path, monkeypatch):
    """A record under ``storm.local.dir`` is not to be trusted to name a shell's group: group 0
    is, to ``killpg``, the supervisor's own (and the kernel threads' group, whose start times
    match any leader's), and 1 is init's. Such a record is removed, and nothing is signalled."""
    from squall._children import GROUP_FILE, ShellGroup, boot_id, end_shell_tasks, kill_group

    def never(pgid, sig):
        raise AssertionError(f"killpg({pgid}) on a forged record")

    monkeypatch.setattr(os, "killpg", never)
    for pgid in (0, 1):
        assert ShellGroup.parse(f"{pgid} 0 {boot_id()}\n") is None
        assert kill_group(ShellGroup(pgid, 0, boot_id())) == []
        task = tmp_path / "home" / f"squall-multilang-forged-{pgid}"
        task.mkdir(parents=True)
        (task / GROUP_FILE).write_text(f"{pgid} 0 {boot_id()}\n")
        assert end_shell_tasks(tmp_path / "home") == []
        assert list((tmp_path / "home").iterdir()) == []


def test_a_crashed_subprocess_s_helpers_are_killed_with_its_group(monkeypatch):
    """A subprocess that started helpers (a pool, a server it talks to) and crashed: its
    status was read (the error that says how it ended reaps it), after which its kill no
    longer signalled its process group (the group's id could have been another's), and its
    helpers lived on, for ever. The group is now killed while its recorded leader's start time
    says it is still the one squall started."""
    from squall.multilang import process as process_module
    from squall.multilang.messages import MultilangError
    from squall.multilang.process import ShellProcess
    from squall.multilang.serializer import JsonSerializer

    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})
    p = ShellProcess([sys.executable, "-c", HELPER_THEN_CRASH], JsonSerializer(), "ShellBolt [t] task 1")
    p.launch({}, None, 30)
    [helper] = [pid for pid in _group(p.pid) if pid != p.pid]
    try:
        p.write({"id": "1", "comp": "c", "stream": "default", "task": 1, "tuple": [1]})
        with pytest.raises(MultilangError, match="exit code 3"):  # its status read: it was reaped
            p.read(30)
        assert _alive(helper)
        p.kill("it crashed")
        assert wait_until(lambda: not _alive(helper), 10), f"its helper {helper} outlived it"
    finally:
        p.kill("")
        if _alive(helper):
            os.kill(helper, signal.SIGKILL)


def test_a_supervisor_ends_what_the_shell_tasks_of_its_predecessors_workers_left(tmp_path):
    """A supervisor SIGKILLed takes its workers with it (PDEATHSIG), and they their shell
    subprocesses, but not the programs those started under a wrapper: the next supervisor
    ended them only when it started a worker on the same port again, which may never happen
    (the master moved the topology). It ends them when it starts."""
    from squall._children import GROUP_FILE, leader_of
    from squall.cluster.process_launcher import ProcessLauncher

    wrapper = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(600)'; exit $?"],
                               process_group=0)
    try:
        group = leader_of(wrapper.pid)
        assert wait_until(lambda: len(_group(wrapper.pid)) == 2, 10)
        [program] = [pid for pid in _group(wrapper.pid) if pid != wrapper.pid]
        wrapper.kill()  # PDEATHSIG, when the old worker died
        wrapper.wait(10)
        task = tmp_path / "supervisor" / "shell-6701" / "squall-multilang-split-abc"
        (task / "pids").mkdir(parents=True)
        (task / GROUP_FILE).write_text(group.text())
        conf = {"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700, 6701]}
        ProcessLauncher(conf, "127.0.0.1", ("127.0.0.1", 1), tmp_path / "supervisor", secret=b"s" * 32)
        assert wait_until(lambda: not _alive(program), 10), f"program {program} outlived its supervisor's restart"
        assert list((tmp_path / "supervisor" / "shell-6701").iterdir()) == []
    finally:
        for pid in _group(wrapper.pid):
            os.kill(pid, signal.SIGKILL)


def test_a_spark_task_ends_what_the_shell_tasks_of_killed_tasks_workers_left(tmp_path):
    """A Spark task's process SIGKILLed (Spark killing its Python worker, an executor stopped)
    takes its worker with it, but left the worker's shell home in the temporary directory, one
    more at every such kill, and the programs its shell tasks started under a wrapper running.
    The next task's process ends the homes whose makers are dead, and only those."""
    from squall._children import GROUP_FILE, end_orphaned_shell_homes, leader_of, make_watched_shell_home

    maker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    wrapper = subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(600)'; exit $?"],
                               process_group=0)
    try:
        made = leader_of(maker.pid)
        group = leader_of(wrapper.pid)
        assert wait_until(lambda: len(_group(wrapper.pid)) == 2, 10)
        [program] = [pid for pid in _group(wrapper.pid) if pid != wrapper.pid]
        wrapper.kill()  # PDEATHSIG, when the killed task's worker died
        wrapper.wait(10)
        maker.kill()  # the task's process, SIGKILLed
        maker.wait(10)
        dead = tmp_path / f"squall-worker-shells-{made.pgid}-{made.leader_start}-x1y2"
        (dead / "squall-multilang-split-abc" / "pids").mkdir(parents=True)
        (dead / "squall-multilang-split-abc" / GROUP_FILE).write_text(group.text())
        live = Path(make_watched_shell_home(str(tmp_path)))  # this process's, in use
        (live / "squall-multilang-count-def").mkdir()
        unnamed = tmp_path / "squall-worker-shells-abcd1234"  # made before homes were named: never swept
        unnamed.mkdir()
        assert end_orphaned_shell_homes(str(tmp_path)) == [program]
        assert wait_until(lambda: not _alive(program), 10), f"program {program} outlived the killed task"
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, unnamed.name])
        assert [p.name for p in live.iterdir()] == ["squall-multilang-count-def"]
    finally:
        for pid in _group(wrapper.pid):
            os.kill(pid, signal.SIGKILL)
        wrapper.kill()
        maker.kill()
