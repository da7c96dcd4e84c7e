"""Logs rotated by size, a worker's output kept for its error, and the supervisor restarted by
its master (`squall.cluster.logs`, `Supervisor`, `SupervisorKeeper`), without a master."""

import logging
import os

from squall._config import cluster_conf
from squall.cluster import process
from squall.cluster.logs import RotatingLog, log_limits, worker_log_handler
from squall.cluster.launcher import Launch
from squall.cluster.supervisor import process_supervisor

from ..conftest import wait_until


def test_a_log_is_rotated_before_it_passes_its_size_keeping_its_backups_and_whole_lines(tmp_path):
    path = tmp_path / "worker.log"
    log = RotatingLog(path, max_bytes=1000, backups=2)
    lines = [f"line {i:05d} {'x' * (i % 50)}\n".encode() for i in range(500)]
    for i in range(0, len(lines), 7):  # in chunks, as a pipe delivers them
        log.write(b"".join(lines[i:i + 7]))
    log.close()
    files = [path, path.with_name("worker.log.1"), path.with_name("worker.log.2")]
    assert all(f.exists() for f in files) and not path.with_name("worker.log.3").exists()
    assert all(0 < f.stat().st_size <= 1000 for f in files)
    kept = b"".join(f.read_bytes() for f in reversed(files))
    assert kept == b"".join(lines)[-len(kept):]  # the newest output, in order, nothing lost between files
    assert all(f.read_bytes().endswith(b"\n") for f in files)  # cut at line ends
    assert os.stat(path).st_mode & 0o077 == 0


def test_a_line_longer_than_the_file_is_split_and_zero_bytes_never_rotates(tmp_path):
    split = RotatingLog(tmp_path / "a.log", max_bytes=10, backups=1)
    split.write(b"0123456789abcdef\n")
    assert (tmp_path / "a.log.1").read_bytes() == b"0123456789" and (tmp_path / "a.log").read_bytes() == b"abcdef\n"
    never = RotatingLog(tmp_path / "b.log", max_bytes=0, backups=1)
    never.write(b"x" * 5000)
    assert (tmp_path / "b.log").stat().st_size == 5000 and not (tmp_path / "b.log.1").exists()


def test_a_log_deleted_or_not_made_again_loses_lines_not_its_pump(tmp_path, monkeypatch):
    """An admin deleted a slot's log to free a full disk: the next rotation raised, the pump's
    thread ended and closed the worker's pipe, and every later worker of the slot died of
    BrokenPipeError. Now the lines that cannot be written are lost, and the log comes back."""
    import subprocess
    import sys

    from squall.cluster.logs import OutputPump
    path = tmp_path / "worker.log"
    log = RotatingLog(path, max_bytes=100, backups=2)
    child = subprocess.Popen([sys.executable, "-c", "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pump = OutputPump(child.stdout.buffer if hasattr(child.stdout, "buffer") else child.stdout, log)
    try:
        child.stdin.write("a" * 60 + "\n")
        child.stdin.flush()
        assert wait_until(lambda: path.exists() and path.stat().st_size == 61)
        path.unlink()  # deleted under the writer
        real_open = RotatingLog._open
        failing = [True]

        def open_or_fail(self):
            if failing[0]:
                raise OSError(28, "No space left on device")
            return real_open(self)
        monkeypatch.setattr(RotatingLog, "_open", open_or_fail)
        child.stdin.write("b" * 60 + "\n")  # rotates: the file cannot be made again
        child.stdin.flush()
        assert wait_until(lambda: pump.lost > 0)
        failing[0] = False  # space came back
        child.stdin.write("c" * 10 + "\n")
        child.stdin.flush()
        assert wait_until(lambda: path.exists() and path.read_bytes() == b"c" * 10 + b"\n")
        assert child.poll() is None  # the child never saw a closed pipe
    finally:
        child.stdin.close()
        child.wait(10)
        pump.join(10)
        log.close()


def test_a_log_an_older_run_left_readable_by_others_becomes_owner_only_with_its_rotated_copies(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [7000],
                         "squall.log.max.bytes": 100, "squall.log.backup.count": 3})
    old = [tmp_path / "supervisor" / name for name in ("worker-7000.log", "worker-7000.log.1")]
    old[0].parent.mkdir(mode=0o755)
    for f in old:
        f.write_bytes(b"from an older run\n")
        os.chmod(f, 0o644)
    launcher = process_supervisor(conf).launcher
    launcher.logs[7000] = log = RotatingLog(old[0], *log_limits(conf))  # as start opens a slot's log
    log.write(b"x" * 99 + b"\n" + b"y" * 99 + b"\n")
    log.close()
    files = sorted((tmp_path / "supervisor").glob("worker-7000.log*"))
    assert [f.name for f in files] == ["worker-7000.log", *(f"worker-7000.log.{i}" for i in (1, 2, 3))]
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: "0o600" for f in files}


def test_a_workers_own_log_stays_owner_only_after_it_rotates(tmp_path):
    old = os.umask(0o022)
    path = tmp_path / "workers-artifacts" / "t-1" / "6700" / "worker.log"
    handler = worker_log_handler(path, {"squall.log.max.bytes": 2000, "squall.log.backup.count": 2})
    logger = logging.getLogger("test-worker-log-rotation")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for i in range(100):
            logger.info("a line a component logged, with its data %d %s", i, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
        os.umask(old)
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in path.parent.iterdir()}
    assert modes == {"worker.log": "0o600", "worker.log.1": "0o600", "worker.log.2": "0o600"}


def test_a_worker_that_dies_before_reaching_the_master_is_reported_with_its_output(tmp_path):
    """A bad configuration file: the worker's traceback goes to its log, and its last lines go
    with the exit the supervisor reports, so the master can show why."""
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [7000]})
    launcher = process_supervisor(conf).launcher
    launcher.conf_file.write_text("nimbus.thrift.port: abc\n")
    launcher.start(7000, Launch("t-1-1", "t", 1))
    exits = []
    assert wait_until(lambda: exits.extend(launcher.exits()) or exits, 30)
    (ex,) = exits
    assert ex.status == 1 and (ex.slot, ex.launch_id) == ("127.0.0.1:7000", 1)
    assert ex.output.splitlines()[-1].endswith(
        "cluster configuration: 'nimbus.thrift.port' must be a port number (0 to 65535; 0: any free port), got 'abc'")
    assert "Traceback" in (tmp_path / "supervisor" / "worker-7000.log").read_text()


def test_a_supervisor_that_keeps_dying_is_restarted_at_once_then_after_a_growing_delay(monkeypatch, tmp_path):
    now = [0.0]
    pids = iter(range(100, 200))
    alive: set[int] = set()

    def start(conf):
        pid = next(pids)
        alive.add(pid)
        return pid, False
    monkeypatch.setattr(process, "start_supervisor", start)
    monkeypatch.setattr(process, "running_supervisor", lambda local_dir: max(alive) if alive else None)
    keeper = process.SupervisorKeeper({"storm.local.dir": str(tmp_path)}, clock=lambda: now[0])
    keeper.check()
    assert keeper.pid == 100  # alive: left alone
    alive.clear()
    keeper.check()
    assert keeper.pid == 101  # died: started again at once
    alive.clear()
    now[0] += 1
    keeper.check()
    assert keeper.pid == 101  # died again at once: waits 1 s
    now[0] += 1
    keeper.check()
    assert keeper.pid == 102
    alive.clear()
    now[0] += 1
    keeper.check()
    now[0] += 1
    keeper.check()
    assert keeper.pid == 102  # a third quick death: waits 2 s
    now[0] += 1
    keeper.check()
    assert keeper.pid == 103
    now[0] += 120  # ran for two minutes before it died: at once again
    alive.clear()
    keeper.check()
    assert keeper.pid == 104


def test_a_workers_printed_credential_is_masked_in_its_log_even_cut_between_two_reads(tmp_path):
    """A worker's prints and tracebacks reach worker-<port>.log through its supervisor's pump,
    raw: a component that printed the URL it connects to left the password there."""
    from squall.cluster.logs import OutputPump
    path = tmp_path / "worker-6700.log"
    log = RotatingLog(path, max_bytes=1 << 20, backups=1)
    read, write = os.pipe()
    pump = OutputPump(os.fdopen(read, "rb", buffering=0), log)
    try:
        os.write(write, b"connecting to redis://:pw-")  # the rest of the line comes in another read
        assert wait_until(lambda: pump._held == b"connecting to redis://:pw-")
        os.write(write, b"8c1d@db:6379/0 with password=pw-77e2\nbytes \xff kept\nno newline at the end token=t-5")
    finally:
        os.close(write)
        assert pump.join(10)
        log.close()
    said = (b"connecting to redis://:***@db:6379/0 with password=***\nbytes \xff kept\n"
            b"no newline at the end token=***")
    assert path.read_bytes() == said
    assert pump.tail() == said.decode("utf-8", "replace")
