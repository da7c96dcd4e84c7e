"""`squall.cluster.spark_task.run_watched`: the Spark task's worker runs in a child of the task's
process, which reads the worker's board after it died (`squall.engine.executing`), as the process
host's supervisor does. Real processes (fork), no Spark."""

import contextlib
import os
import signal

from squall.cluster import spark_task
from squall.cluster.oom_kills import oom_kills
from squall.cluster.spark_task import EXIT_CRASHED, WatchedEnd, run_watched
from squall.engine.executing import ExecutingBoard

STORM, LAUNCH = "t-1-1", 5


def executing(task, root, then):
    """A worker whose bolt on ``task`` is executing ``root`` when ``then(board)`` runs."""
    def work(memory):
        board = ExecutingBoard(STORM, LAUNCH, 2, memory)
        board.entry(0, 9)  # a second bolt executor, idle
        board.entry(1, task).root = root
        return then(board)
    return work


def test_a_worker_that_ends_its_process_names_the_input_it_was_executing():
    assert run_watched(executing(4, 77, lambda b: os._exit(7)), STORM, LAUNCH) == WatchedEnd(7, "", ((4, 77),))


def test_a_worker_sigkilled_names_the_input_it_was_executing(monkeypatch):
    monkeypatch.setattr(spark_task, "oom_kills", lambda: 0)  # no OOM kill meanwhile in this cgroup
    end = run_watched(executing(4, 1 << 63, lambda b: os.kill(os.getpid(), signal.SIGKILL)), STORM, LAUNCH)
    assert end == WatchedEnd(-signal.SIGKILL, "", ((4, 1 << 63),))


def test_a_worker_that_ends_on_its_own_names_nothing():
    def stopped(board):
        board.end()
        return 0
    assert run_watched(executing(4, 77, stopped), STORM, LAUNCH) == WatchedEnd(0, "", ())


def test_another_launchs_board_names_nothing():
    assert run_watched(executing(4, 77, lambda b: os._exit(7)), STORM, LAUNCH + 1) == WatchedEnd(7, "", ())


def test_what_the_workers_start_raises_is_its_error():
    def broken(memory):
        raise ImportError("no module named 'yaml' (simulated)")
    end = run_watched(broken, STORM, LAUNCH)
    assert end.status == EXIT_CRASHED and end.executing == ()
    assert end.error.startswith("Traceback (most recent call last):")
    assert end.error.rstrip().endswith("ImportError: no module named 'yaml' (simulated)")


def test_the_worker_runs_in_a_process_of_its_own():
    parent = os.getpid()
    assert run_watched(lambda memory: 3 if os.getpid() != parent and os.getppid() == parent else 9,
                       STORM, LAUNCH) == WatchedEnd(3, "", ())


def test_a_worker_whose_run_returns_no_status_ends_as_crashed_and_never_returns_into_the_task():
    parent = os.getpid()
    end = run_watched(lambda memory: None, STORM, LAUNCH)
    assert os.getpid() == parent  # (a child that came back here would run the rest of this test too)
    assert end.status == EXIT_CRASHED and end.error.rstrip().endswith(
        "TypeError: int() argument must be a string, a bytes-like object or a real number, not 'NoneType'"), end


def test_a_fork_that_fails_leaves_no_descriptor_of_the_watch_open(monkeypatch):
    """``os.fork`` failing (EAGAIN at the process limit, ENOMEM) raised out of `run_watched`
    with the errors pipe's two descriptors still open: the task reports the crash and Spark's
    Python worker, reused, keeps them, two more at each launch the master retries there."""
    import errno

    import pytest

    def no_fork():
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    before = sorted(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", no_fork)
    for _ in range(3):
        with pytest.raises(OSError, match="Resource temporarily unavailable"):
            run_watched(lambda memory: 0, STORM, LAUNCH)
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_killed_workers_wrapped_shell_program_and_directories_do_not_outlive_it(tmp_path, monkeypatch):
    """A worker whose shell bolt runs through a wrapper (``sh -c "python3 ...; exit $?"``), and
    which is SIGKILLed: PDEATHSIG ends the wrapper, and the program under it lived on (for ever,
    were it stuck or writing to a sink), with the task's directories in the temporary directory.
    The task's process ends both once the worker's process is dead."""
    import sys
    import tempfile
    from pathlib import Path

    from squall.multilang import process
    from squall.multilang.process import ShellProcess
    from squall.multilang.serializer import JsonSerializer

    from ..conftest import wait_until

    bare = Path(__file__).parent.parent / "multilang" / "bare"
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    out.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    def worker(memory):
        process.setup_message = lambda conf, context, pid_dir: {"conf": {"test.out.dir": str(out)},
                                                                 "pidDir": pid_dir, "context": {}}
        shell = ShellProcess(["sh", "-c", f"{sys.executable} lingers.py; exit $?"], JsonSerializer(),
                             "ShellBolt [t] task 1", cwd=str(bare))
        shell.launch({}, None, 30)
        os.kill(os.getpid(), signal.SIGKILL)

    def lingering(pid):
        try:
            return b"lingers.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    end = run_watched(worker, STORM, LAUNCH)
    [program] = [int(p.name.split("-")[1]) for p in out.glob("lingers-*")]  # it started, and wrote its pid
    try:
        assert end.status == -signal.SIGKILL
        assert wait_until(lambda: not lingering(program), 10), f"shell program {program} outlived its worker"
        assert list(tmp.iterdir()) == []
    finally:
        if lingering(program):
            os.kill(program, signal.SIGKILL)


def test_a_worker_sigkilled_while_its_cgroup_counted_an_oom_kill_is_said_to_be_the_oom_killers(monkeypatch):
    """A worker the kernel's OOM killer ended (a record that grew it past the executor's memory)
    read "exited with status -9 ...: no output", like a kill -9: its memory cgroup's count of
    OOM kills, read before the start and after the death, says which (squall.cluster.oom_kills)."""
    counts = iter([3, 4])
    monkeypatch.setattr(spark_task, "oom_kills", lambda: next(counts))
    end = run_watched(executing(4, 77, lambda b: os.kill(os.getpid(), signal.SIGKILL)), STORM, LAUNCH)
    assert (end.status, end.error, end.executing) == (-signal.SIGKILL, "", ((4, 77),))
    assert end.why.startswith("the kernel's OOM killer, likely: its memory cgroup counted 1 OOM kill while it ran; "
                              "give the executor more memory outside the JVM (spark.executor.memoryOverhead"), end
    counts = iter([3, 4])  # an OOM kill in the cgroup, but the worker exited on its own: not the killer's
    assert run_watched(executing(4, 77, lambda b: os._exit(7)), STORM, LAUNCH).why == ""
    monkeypatch.setattr(spark_task, "oom_kills", lambda: None)  # no count to read: the signal alone
    assert run_watched(lambda b: os.kill(os.getpid(), signal.SIGKILL), STORM, LAUNCH).why == ""


def test_the_oom_kill_count_is_read_from_the_memory_cgroup_v1_or_v2(tmp_path):
    def host(proc, files):
        (tmp_path / "proc").write_text(proc)
        for name, text in files.items():
            (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "fs" / name).write_text(text)
        return oom_kills(tmp_path / "proc", tmp_path / "fs")

    v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
    v2 = "low 0\nhigh 0\nmax 5\noom 1\noom_kill 7\noom_group_kill 0\n"
    # cgroup v1 (a hybrid host: its v2 line names no memory controller)
    assert host("4:memory:/yarn/container_1\n1:cpu:/yarn\n0::/\n",
                {"memory/yarn/container_1/memory.oom_control": v1}) == 2
    # cgroup v2 (a Kubernetes pod)
    assert host("0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/memory.events": v2}) == 7
    # a cgroup namespace: the path /proc names is not under this mount, whose root is the cgroup
    assert host("0::/../../outer/c2\n", {"memory.events": v2.replace("oom_kill 7", "oom_kill 9")}) == 9
    assert host("0::/nowhere\n", {}) == 9
    (tmp_path / "fs" / "memory.events").unlink()
    assert host("0::/nowhere\n", {}) is None  # nothing to read: None, never an error
    assert oom_kills(tmp_path / "missing", tmp_path / "fs") is None


def test_a_process_the_worker_forks_holds_no_socket_of_the_spark_task(tmp_path):
    """The Spark task's connection to its executor JVM (here one end of a socket pair, the JVM's
    end this test's) reaches EOF when the task's process dies, even while a process the
    worker's user code forked (multiprocessing's fork, a helper) lives on. Before, the worker
    inherited that socket and passed it on to such a helper, so the JVM never saw the task's
    Python process die: on local[3] with nimbus.task.timeout.secs 5, the slot was restarted
    6.7-8.3 s after the task's process was SIGKILLed (the master's heartbeat timeout, its error
    "missed heartbeats"), against 1.9 s without the helper; 30 s and more with the default."""
    import socket
    import subprocess
    import sys

    from ..conftest import wait_until

    helper_file = tmp_path / "helper"
    jvm, task = socket.socketpair()
    script = (
        "import os, time\n"
        "from squall.cluster.spark_task import run_watched\n"
        "def work(memory):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:  # a helper the worker's user code forks, which outlives the worker\n"
        "        time.sleep(120)\n"
        "        os._exit(0)\n"
        f"    open({str(helper_file)!r}, 'w').write(str(pid))\n"
        "    time.sleep(120)\n"
        "    return 0\n"
        "run_watched(work, 't-1-1', 1)\n")
    watcher = subprocess.Popen([sys.executable, "-c", script], pass_fds=[task.fileno()])
    task.close()
    helper = None
    try:
        assert wait_until(lambda: helper_file.exists() and helper_file.read_text(), 30), "the worker never forked"
        helper = int(helper_file.read_text())
        watcher.kill()  # the Spark task's process: its worker dies with it (PR_SET_PDEATHSIG)
        watcher.wait()
        jvm.settimeout(60)  # the helper sleeps for 120 s: an EOF before then is not its doing
        assert jvm.recv(1) == b"", "the task's socket is still held open"
    finally:
        watcher.kill()
        watcher.wait()
        if helper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper, signal.SIGKILL)
        jvm.close()
