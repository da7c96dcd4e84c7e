"""The cluster verbs for real: ``squall nimbus --host process`` as a subprocess on free ports with
its own ``storm.local.dir``, driven by ``squall jar``, ``list``, ``info``, ``monitor``,
``deactivate``, ``activate``, ``rebalance`` and ``kill``, each a subprocess too; then the
mistakes a user makes (a wrong or missing secret, no master, a bad ``-e``), one line each."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from squall import SquallError
from squall.cli import main
from squall.cluster.client import MasterClient

from .conftest import processes_mentioning, wait_until
from .ports import free_ports
from .process.conftest import FAST_SYNC
from .test_cli import NUMBERS_TOPOLOGY, write

N = 2000

STORM_STYLE = f'''
import os
import sys

from squall import Bolt, Config, Fields, Spout, StormSubmitter, TopologyBuilder

N = {N}


class Gated(Spout):
    """N numbered tuples with message ids, sent once the file ``go`` exists: the test creates it
    once squall monitor has taken its first counts, so that monitor sees them flow however late
    its process starts (paced by the clock instead, they were all sent before it started on a
    loaded machine)."""

    def __init__(self, go):
        self.go = go

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n = 0

    def next_tuple(self):
        if self.n < N and os.path.exists(self.go):
            while self.n < N:
                self.n += 1
                self.collector.emit([self.n], self.n)


class Sink(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


if __name__ == "__main__":
    builder = TopologyBuilder()
    builder.set_spout("numbers", Gated(sys.argv[2]), 1)
    builder.set_bolt("sink", Sink(), 2).shuffle_grouping("numbers")
    conf = Config()
    conf.set_num_workers(2)
    StormSubmitter.submit_topology(sys.argv[1], conf, builder.create_topology())
'''

# ``squall ARGS`` started with SIGINT ignored, as ``&`` in a shell without job control starts it
SIGINT_IGNORED = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                  "os.execv(sys.executable, [sys.executable, '-m', 'squall', *sys.argv[1:]])")

BUILD_STYLE = NUMBERS_TOPOLOGY + '''
conf = {"topology.workers": 1, "topology.max.spout.pending": 100}
'''


def squall(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "squall", *args], capture_output=True, text=True,
                          timeout=timeout)


class Nimbus:
    """``squall nimbus --host process`` in a subprocess, with the commands that talk to it."""

    def __init__(self, tmp: Path, extra: dict | None = None, num_slots: int = 2) -> None:
        # not a port `extra` chose for a server of its own (drpc.port, drpc.invocations.port)
        chosen = [v for k, v in (extra or {}).items() if k.endswith(".port") and isinstance(v, int)]
        port, *slots = free_ports(1 + num_slots, avoid=chosen)
        self.port = port
        self.dir = tmp / "storm-local"
        self.conf = {"storm.local.dir": str(self.dir), "nimbus.thrift.port": port, "supervisor.slots.ports": slots,
                     **FAST_SYNC, **(extra or {})}  # `extra`: more cluster keys (tests/drpc's drpc.servers)
        self.config = tmp / "squall.yaml"
        self.config.write_text(yaml.safe_dump(self.conf))
        self.log = tmp / "nimbus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "squall", "nimbus", "--host", "process", "--config", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT)
        # Up means its supervisor has registered both slots too: `list` answers before that, and a
        # topology submitted in between waits for slots (a note on jar's output) on a loaded machine.
        up = wait_until(lambda: self.proc.poll() is not None or self.slots_total() == len(slots), 30, 0.1)
        assert up and self.proc.poll() is None, f"squall nimbus did not come up:\n{self.log.read_text()}"

    def slots_total(self) -> int | None:
        """The slots registered with the master, or None while it does not answer."""
        try:
            with MasterClient(self.conf) as master:
                return master.get_cluster_info()["slots_total"]
        except (SquallError, OSError):  # not up yet, or its secret file half written
            return None

    def run(self, verb: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return squall(verb, "--config", str(self.config), *args, timeout=timeout)

    def ok(self, verb: str, *args: str, timeout: float = 30) -> str:
        """The command's stdout; it must succeed."""
        proc = self.run(verb, *args, timeout=timeout)
        assert proc.returncode == 0, f"squall {verb} {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def info(self, name: str) -> dict:
        return json.loads(self.ok("info", name))

    def polled(self, name: str) -> dict:
        """What `info` prints (`get_topology_info`), read in this process: for the polls of a
        wait, where a `squall info` process per poll cost a second or more on a loaded machine
        (the verb itself is run as a process once the wait is over)."""
        with MasterClient(self.conf) as master:
            return master.get_topology_info(name)

    def listed(self) -> list[str]:
        """The names of the topologies the master runs, read in this process (for polls)."""
        with MasterClient(self.conf) as master:
            return [t["name"] for t in master.list_topologies()]

    def verb(self, capsys, verb: str, *args: str) -> subprocess.CompletedProcess:
        """``squall VERB ARGS`` run in this process (`main`), as `run` runs it in a process of
        its own: what the verb prints is the same, without a Python start and squall's imports
        (about a second each on a loaded machine). For the verbs that run no user code; one
        verb of a test at least stays a process, as a user runs it."""
        capsys.readouterr()
        status = main([verb, "--config", str(self.config), *args])
        out = capsys.readouterr()
        return subprocess.CompletedProcess([verb, *args], status, out.out, out.err)

    def status(self, name: str, capsys=None) -> str:
        """``name``'s status in `squall list`'s table (with ``capsys``: list run in this process, `verb`)."""
        listed = self.ok("list") if capsys is None else self.verb(capsys, "list").stdout
        table = listed.split("\n\n")[0]  # notes, if any, follow a blank line
        rows = [ln.split() for ln in table.splitlines()[2:]]
        return {row[0]: row[1] for row in rows}[name]

    def processes(self) -> dict[int, str]:
        """pid -> command line of the processes that mention our storm.local.dir (the supervisor
        and the workers; nimbus's own command line names only the squall.yaml beside it)."""
        return processes_mentioning(str(self.dir))

    def workers(self) -> dict[int, str]:
        return {pid: cmd for pid, cmd in self.processes().items() if "squall.worker" in cmd}

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def clean_up(self) -> None:
        """After a failed test: no process of ours outlives the module."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def nimbus(tmp_path_factory):
    n = Nimbus(tmp_path_factory.mktemp("nimbus"))
    try:
        yield n
        assert n.stop() == 0
    finally:
        n.clean_up()


def test_a_topology_submitted_with_jar_is_listed_monitored_rebalanced_and_killed(nimbus, tmp_path, capsys):
    """Storm's way: FILE's __main__ code submits (its name comes from FILE's ARGS), on 2 workers.
    Every later verb prints Storm's line; after ``rebalance -n 1`` the topology runs on one
    worker and its (restarted) spout gets all its tuples acked."""
    path, go = write(tmp_path, "paced.py", STORM_STYLE), tmp_path / "go"
    assert nimbus.ok("jar", path, "paced", str(go)) == "Submitted topology: paced\n"

    try:  # a failure leaves no topology holding the slots the later tests of the module need
        table = nimbus.ok("list").splitlines()
        assert table[0].split() == ["Topology_name", "Status", "Num_tasks", "Num_workers", "Uptime_secs",
                                    "Topology_Id", "Owner"]
        assert table[1] == "-" * 85
        row = table[2].split()
        assert row[:2] == ["paced", "ACTIVE"] and row[3] == "2" and row[5].startswith("paced-")

        # monitor's rows count from its first poll: the spout sends once a row is out, and monitor
        # (ended by Ctrl-C, as a user ends it) must show the numbers flowing within 30 intervals.
        # It starts with SIGINT ignored, as a command a script starts with `&` does (and every test's
        # child when the suite was started so: what failed in two runs): Ctrl-C must end it all the same.
        monitor = subprocess.Popen([sys.executable, "-c", SIGINT_IGNORED, "monitor", "--config", str(nimbus.config),
                                    "paced", "-i", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watchdog = threading.Timer(60, monitor.kill)  # a monitor that hangs fails the test, not the run
        watchdog.start()
        try:
            lines = [monitor.stdout.readline()]
            assert lines[0] == "topology\tcomponent\tparallelism\tstream\ttime-diff ms\temitted\tthroughput (Kt/s)\n"
            rows = []
            while len(rows) < 60 and not any(int(r[5]) > 0 and float(r[6]) > 0 for r in rows if r[1] == "numbers"):
                lines += [monitor.stdout.readline(), monitor.stdout.readline()]
                assert all(lines[-2:]), f"squall monitor ended: {monitor.stderr.read()}"
                rows += [ln.rstrip("\n").split("\t") for ln in lines[-2:]]
                go.touch()
            monitor.send_signal(signal.SIGINT)
            assert monitor.wait(30) == 0, monitor.stderr.read()
        finally:
            watchdog.cancel()
            monitor.kill()
        assert [r[:4] for r in rows] == [["paced", "numbers", "1", "default"], ["paced", "sink", "2", "default"]] * (
            len(rows) // 2), lines
        assert any(int(r[5]) > 0 and float(r[6]) > 0 for r in rows if r[1] == "numbers"), lines

        # each verb as a process once in the module; list and rebalance, run so above and below,
        # here in this process (`Nimbus.verb`)
        assert nimbus.ok("deactivate", "paced") == "Deactivated topology: paced\n"
        assert nimbus.status("paced", capsys) == "INACTIVE"
        assert nimbus.ok("activate", "paced") == "Activated topology: paced\n"
        assert nimbus.status("paced", capsys) == "ACTIVE"

        assert nimbus.verb(capsys, "rebalance", "paced", "-w", "0", "-n", "1").stdout == \
            "Topology paced is rebalancing\n"

        def rebalanced_and_all_acked(info):
            spout = info["components"]["numbers"]
            return (info["status"] == "ACTIVE" and [w["alive"] for w in info["workers"]] == [True]
                    and spout["acked"] == N and len(nimbus.workers()) == 1)
        assert wait_until(lambda: rebalanced_and_all_acked(nimbus.polled("paced")), 30, 0.2), nimbus.info("paced")
        info = nimbus.info("paced")
        assert rebalanced_and_all_acked(info) and info["components"]["numbers"]["failed"] == 0

        assert nimbus.ok("kill", "paced", "-w", "0") == "Killed topology: paced\n"
        assert wait_until(lambda: not nimbus.listed(), 10, 0.1)
        assert nimbus.verb(capsys, "list").stdout == "No topologies running.\n"
        assert wait_until(lambda: not nimbus.workers(), 10, 0.1), nimbus.workers()
        proc = nimbus.verb(capsys, "kill", "paced")
        assert (proc.returncode, proc.stderr) == (1, "squall: error: Topology 'paced' is not alive\n")
    finally:
        nimbus.verb(capsys, "kill", "paced", "-w", "0")


def test_a_wrong_secret_is_a_one_line_authentication_error(nimbus, tmp_path):
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({**nimbus.conf, "squall.secret": "wrong-but-long-enough"}))
    proc = squall("list", "--config", str(wrong))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"squall: error: authentication failed: the master at 127.0.0.1:{nimbus.port} refused our secret "
        f"(from squall.secret); it must be the master's"]


def test_a_client_without_the_secret_says_so_and_creates_none(nimbus, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "elsewhere.yaml"
    config.write_text(yaml.safe_dump({**nimbus.conf, "storm.local.dir": str(elsewhere)}))
    proc = squall("list", "--config", str(config))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"squall: error: authentication failed: no cluster secret here (squall.secret is not set and "
        f"{elsewhere / 'secret'} does not exist); use the master's squall.yaml (--config), "
        f"or -c storm.local.dir=DIR with the master's storm.local.dir, which holds its secret"]
    assert not (elsewhere / "secret").exists()


def test_monitor_names_the_components_when_m_is_wrong(nimbus, tmp_path, capsys):
    path = write(tmp_path, "endless.py", BUILD_STYLE)
    assert nimbus.ok("jar", "--name", "watched", path) == "Submitted topology: watched\n"
    try:  # monitor as a process once; the other verbs in this one (`Nimbus.verb`)
        proc = nimbus.run("monitor", "watched", "-m", "nope")
        assert proc.returncode == 1
        assert proc.stderr == ("squall: error: topology 'watched' has no component 'nope' "
                               "(its components: numbers, sink)\n")
        acker = nimbus.verb(capsys, "monitor", "watched", "-m", "__acker")  # as docs/cli.md says
        assert acker.returncode == 1
        assert acker.stderr == ("squall: error: the acker is not a component in squall, so monitor cannot watch "
                                "it; `squall info watched` shows its tasks and executed count under \"acker\" "
                                "(the components of 'watched': numbers, sink)\n")
        info = nimbus.verb(capsys, "info", "watched")
        assert info.returncode == 0 and set(json.loads(info.stdout)["acker"]) == {"tasks", "executed"}
    finally:
        assert nimbus.verb(capsys, "kill", "watched", "-w", "0").stdout == "Killed topology: watched\n"


def test_rebalance_to_more_executors_than_tasks_warns(nimbus, tmp_path, capsys):
    path = write(tmp_path, "endless.py", BUILD_STYLE)
    assert nimbus.ok("jar", "--name", "capped", path) == "Submitted topology: capped\n"
    try:
        proc = nimbus.run("rebalance", "capped", "-w", "0", "-e", "sink=5", "-e", "numbers=1")
        assert (proc.returncode, proc.stdout) == (0, "Topology capped is rebalancing\n"), proc.stderr
        assert proc.stderr == ("squall: warning: -e sink=5: sink has 2 tasks, and an executor runs at least "
                               "one, so it gets 2 executors (a component's tasks are fixed at submit: "
                               "set_num_tasks)\n")
    finally:
        assert nimbus.verb(capsys, "kill", "capped", "-w", "0").stdout == "Killed topology: capped\n"


def test_a_topology_waiting_for_slots_says_so_and_starts_once_a_kill_frees_them(nimbus, tmp_path, capsys):
    path = write(tmp_path, "endless.py", BUILD_STYLE)
    assert nimbus.ok("jar", "--name", "hog", "-c", "topology.workers=2", path) == "Submitted topology: hog\n"
    waiting = ("late: waiting for 1 slot (topology.workers): every slot is taken; it starts once a topology "
               "is killed or a supervisor adds slots")
    try:  # jar and list as processes; the other verbs in this one (`Nimbus.verb`)
        assert nimbus.ok("jar", "--name", "late", path) == f"Submitted topology: late\n{waiting}\n"
        assert nimbus.ok("list").endswith(f"\n\n{waiting}\n") and nimbus.status("late", capsys) == "ACTIVE"
        assert nimbus.verb(capsys, "kill", "hog", "-w", "0").stdout == "Killed topology: hog\n"
        assert wait_until(lambda: nimbus.polled("late")["components"]["sink"]["executed"] > 0, 20, 0.2), \
            nimbus.info("late")
        assert "waiting" not in nimbus.verb(capsys, "list").stdout
    finally:
        nimbus.verb(capsys, "kill", "hog", "-w", "0")
        assert nimbus.verb(capsys, "kill", "late", "-w", "0").stdout == "Killed topology: late\n"


BROKEN = NUMBERS_TOPOLOGY.replace("class Sink(Bolt):", '''class Sink(Bolt):
    def prepare(self, conf, context, collector):
        raise ConnectionError("no database at db:5432")
''')


def test_a_worker_that_cannot_start_shows_its_error_in_list_monitor_and_get_errors(nimbus, tmp_path, capsys):
    path = write(tmp_path, "broken.py", BROKEN)
    assert nimbus.ok("jar", "--name", "broken", path) == "Submitted topology: broken\n"
    try:  # list and get-errors as processes; the polls and the other verbs in this one
        assert wait_until(lambda: "no database" in nimbus.verb(capsys, "list").stdout, 30, 0.2), nimbus.ok("list")
        note = nimbus.ok("list").split("\n\n")[1]
        assert note.startswith("broken: 1 error; last: [sink] ") and "ConnectionError: no database at db:5432" in note
        assert note.endswith(" (squall info broken)\n")
        proc = nimbus.verb(capsys, "monitor", "broken", "-i", "0.2", "--count", "1")
        assert proc.returncode == 0 and "squall: broken: error in [sink]: " in proc.stderr
        # Storm's get-errors: the last error of each component that has one (the master's own,
        # once it gives up starting the worker, under __master)
        reply = json.loads(nimbus.ok("get-errors", "broken"))
        assert reply["Topology Name"] == "broken" and set(reply["Comp-Errors"]) <= {"sink", "__master"}
        assert "ConnectionError: no database at db:5432" in reply["Comp-Errors"]["sink"]
        proc = nimbus.verb(capsys, "get_errors", "nosuch")
        assert (proc.returncode, json.loads(proc.stdout)) == (1, {"Failure": "No topologies running with name nosuch"})
    finally:
        assert nimbus.verb(capsys, "kill", "broken", "-w", "0").stdout == "Killed topology: broken\n"


REPORTING = '''
from squall import Bolt, Fields, Spout, TopologyBuilder

M = 200


class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n = 0

    def next_tuple(self):
        if self.n < M:
            self.n += 1
            self.collector.emit([self.n], self.n)


class Check(Bolt):
    def execute(self, tup):
        self.collector.report_error(f"bad record {tup[0]}")
        self.collector.ack(tup)


def build():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("check", Check()).shuffle_grouping("numbers")
    return builder.create_topology()


conf = {"topology.workers": 1, "topology.max.error.report.per.interval": 100000}
'''
"""A file whose bolt reports a different error for each of 200 tuples (the throttle raised)."""


def test_list_counts_every_error_and_says_how_many_are_kept(nimbus, tmp_path, capsys):
    """`squall list` said "10 errors" for a topology that had 200 (the records the master keeps:
    each component's newest 10). It says 200, and that 10 of them are kept."""
    path = write(tmp_path, "reporting.py", REPORTING)
    assert nimbus.ok("jar", "--name", "reporting", path) == "Submitted topology: reporting\n"
    try:
        def counted():
            with MasterClient(nimbus.conf) as master:
                return next(t for t in master.list_topologies() if t["name"] == "reporting")["errors"]
        assert wait_until(lambda: nimbus.polled("reporting")["components"]["numbers"]["acked"] == 200, 30, 0.2)
        assert wait_until(lambda: counted() == 200, 30, 0.2), counted()
        assert nimbus.polled("reporting")["components"]["check"]["executed"] == 200
        note = nimbus.ok("list").split("\n\n")[1]
        assert note == ("reporting: 200 errors, 10 of them kept (each component's newest 10; reports over "
                        "topology.max.error.report.per.interval are counted only); last: [check] bad record 200 "
                        "(squall info reporting)\n")
        assert len(nimbus.polled("reporting")["errors"]) == 10
    finally:
        assert nimbus.verb(capsys, "kill", "reporting", "-w", "0").stdout == "Killed topology: reporting\n"


def test_list_lines_up_a_rebalancing_topology_with_a_long_name(nimbus, tmp_path, capsys):
    """`squall list` of a real cluster: a topology whose name is past Storm's 20 characters,
    REBALANCING (past Storm's 10) during its wait, and one INACTIVE: each row's fields start
    under their headers (before, the long name's row and the rebalancing one's were pushed
    right, under the wrong headers)."""
    from .test_cli import _columns_line_up

    path = write(tmp_path, "tiny.py", BUILD_STYLE)
    long_name = "a_topology_named_past_twenty_characters"
    for name in (long_name, "paused"):
        assert nimbus.ok("jar", "--name", name, path) == f"Submitted topology: {name}\n"
    try:
        nimbus.verb(capsys, "rebalance", long_name, "-w", "60")
        nimbus.verb(capsys, "deactivate", "paused")
        table = nimbus.ok("list").split("\n\n")[0].splitlines()
        assert {row.split()[0]: row.split()[1] for row in table[2:]} == {long_name: "REBALANCING", "paused": "INACTIVE"}
        assert _columns_line_up(table), "\n".join(table)
    finally:
        for name in (long_name, "paused"):
            assert nimbus.verb(capsys, "kill", name, "-w", "0").stdout == f"Killed topology: {name}\n"


CHATTY = '''
import logging
import time

from squall import Bolt, Fields, Spout, TopologyBuilder


class Paced(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n, self.due = 0, 0.0

    def next_tuple(self):
        if time.monotonic() >= self.due:  # 20 a second: the DEBUG lines stay few
            self.due = time.monotonic() + 0.05
            self.n += 1
            self.collector.emit([self.n], self.n)


class Chat(Bolt):
    def execute(self, tup):
        logging.getLogger("lg37.chat").debug("chat %s", tup[0])
        self.collector.ack(tup)


def build():
    builder = TopologyBuilder()
    builder.set_spout("paced", Paced())
    builder.set_bolt("chat", Chat()).shuffle_grouping("paced")
    return builder.create_topology()


conf = {"topology.workers": 1}
'''
"""A file whose bolt logs each tuple at DEBUG under the logger ``lg37.chat``."""


def test_set_log_level_sets_a_loggers_level_in_the_workers_until_it_is_removed(nimbus, tmp_path, capsys):
    """Storm's syntax: the worker (a process of its own) logs the bolt's DEBUG lines once
    ``-l lg37.chat=debug:60`` reached it, and says it restored the logger after ``-r``; a bad level
    or an unknown topology is one line. (One verb as a process; the rest in this one, quicker.)"""
    assert nimbus.ok("jar", "--name", "chatty", write(tmp_path, "chatty.py", CHATTY)) == "Submitted topology: chatty\n"
    with MasterClient(nimbus.conf) as master:  # in this process: a squall info per poll costs seconds
        try:
            assert wait_until(lambda: master.get_topology_info("chatty")["components"]["chat"]["executed"] > 0, 30, 0.1)
            storm_id = master.get_topology_info("chatty")["id"]

            def worker_log() -> str:
                return "".join(p.read_text() for p in nimbus.dir.glob(f"logs/workers-artifacts/{storm_id}/*/worker.log"))
            assert "chat " not in worker_log()
            assert nimbus.ok("set_log_level", "-l", "lg37.chat=debug:60", "chatty") == (
                "Log config sent for topology chatty; its levels now: lg37.chat=DEBUG for 60 s\n")
            assert wait_until(lambda: "chat " in worker_log(), 20, 0.1), worker_log()[-2000:]

            def verb(*args: str) -> tuple[int, str, str]:
                status = main([args[0], "--config", str(nimbus.config), *args[1:]])
                out = capsys.readouterr()
                return status, out.out, out.err
            assert verb("set-log-level", "-r", "lg37.chat", "chatty") == (
                0, "Log config sent for topology chatty; its levels now: none (every logger at its own level)\n", "")
            assert wait_until(lambda: "logger lg37.chat: level back to NOTSET (removed)" in worker_log(), 20, 0.1)
            assert verb("set_log_level", "-l", "lg37.chat=LOUD", "chatty") == (
                2, "", "squall: error: -l 'lg37.chat=LOUD': logger lg37.chat: 'LOUD' is not a log level (one of "
                       "ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)\n")
            assert verb("set_log_level", "-l", "ROOT=INFO", "nosuch") == (
                1, "", "squall: error: Topology 'nosuch' is not alive\n")
        finally:
            master.kill_topology("chatty", 0)


@pytest.mark.parametrize("verb, item, message", [
    ("nimbus", "nimbus.thrift.port=abc",
     "'nimbus.thrift.port' must be a port number (0 to 65535; 0: any free port), got 'abc'"),
    ("supervisor", 'supervisor.slots.ports="x"',
     "'supervisor.slots.ports' must be a list of port numbers (1 to 65535), e.g. [6700, 6701], got 'x'"),
])
def test_a_bad_daemon_setting_is_one_line_naming_the_key_and_starts_nothing(tmp_path, capsys, verb, item, message):
    local = tmp_path / "storm-local"
    assert main([verb, "-c", f"storm.local.dir={local}", "-c", item]) == 1
    assert capsys.readouterr().err == f"squall: error: cluster configuration: {message}\n"
    assert not local.exists()


def test_sigterm_stops_nimbus_its_supervisor_and_every_worker(tmp_path):
    """A build() file, renamed with --name, its conf's 1 worker overridden by -c to 2; once both
    workers run, SIGTERM on nimbus leaves no supervisor or worker process behind, and its log's
    last lines say it stopped."""
    nimbus = Nimbus(tmp_path)
    try:
        path = write(tmp_path, "endless.py", BUILD_STYLE)
        assert nimbus.ok("jar", "--name", "forever", "-c", "topology.workers=2", path) == \
            "Submitted topology: forever\n"

        def both_workers_process():
            info = nimbus.polled("forever")
            return ([w["alive"] for w in info["workers"]] == [True, True]
                    and info["components"]["sink"]["executed"] > 0)
        assert wait_until(both_workers_process, 20, 0.2), nimbus.info("forever")
        assert len(nimbus.workers()) == 2
        assert nimbus.stop() == 0
        assert nimbus.processes() == {}  # nimbus waited for its supervisor, which stopped its workers
        log = nimbus.log.read_text()  # and its log says so, last
        assert "squall nimbus stopping (signal received), with the supervisor it started and its workers" in log
        assert log.rstrip().endswith("squall nimbus stopped")
    finally:
        nimbus.clean_up()


def test_nimbus_prints_a_ready_line_with_its_address_that_scripts_can_wait_for(tmp_path):
    """With nimbus.thrift.port 0 the master takes a free port: the ready line says which, and a
    client reaches the master there as soon as the line is out."""
    config = write_conf(tmp_path, **{"nimbus.thrift.port": 0})
    proc = start_nimbus(tmp_path, "--no-supervisor", "--config", config)
    try:
        line = proc.stdout.readline()
        assert line.startswith("squall nimbus ready at 127.0.0.1:"), line
        port = int(line.rstrip().rpartition(":")[2])
        assert port > 0
        listed = squall("list", "--config", config, "-c", f"nimbus.thrift.port={port}")
        assert (listed.returncode, listed.stdout) == (0, "No topologies running.\n"), listed.stderr
    finally:
        assert stop_nimbus(proc, tmp_path) == 0


def test_with_port_zero_the_supervisor_nimbus_starts_reaches_it_on_the_port_it_took(tmp_path, capsys):
    """The supervisor is told the port the master took, not the configured 0; a topology
    submitted before it registered says it waits for a supervisor, not for a busy slot."""
    config = write_conf(tmp_path, **{"nimbus.thrift.port": 0, "supervisor.slots.ports": free_ports(1)})
    proc = start_nimbus(tmp_path, "--config", config)
    try:
        port = int(proc.stdout.readline().rstrip().rpartition(":")[2])
        at = ("--config", config, "-c", f"nimbus.thrift.port={port}")
        submitted = squall("jar", *at, "--name", "numbers", write(tmp_path, "endless.py", BUILD_STYLE))
        assert submitted.returncode == 0, submitted.stderr
        assert submitted.stdout.startswith("Submitted topology: numbers\n")
        assert "every slot is taken" not in submitted.stdout  # either placed, or no supervisor yet

        def workers(listed: str):
            rows = [line.split() for line in listed.splitlines()]
            return next((int(r[3]) for r in rows if r and r[0] == "numbers"), None)

        def listed_here() -> str:  # polled in this process: a squall list process per poll cost seconds
            main(["list", *at])
            return capsys.readouterr().out
        assert wait_until(lambda: workers(listed_here()) == 1, 20, 0.2), squall("list", *at).stdout
        assert workers(squall("list", *at).stdout) == 1
    finally:
        assert stop_nimbus(proc, tmp_path) == 0
    assert wait_until(lambda: not processes_mentioning(str(tmp_path / "storm-local")), 15)


def start_nimbus(tmp_path: Path, *args: str) -> subprocess.Popen:
    """``squall nimbus ARGS``, its ready line on a pipe, its log in ``tmp_path/nimbus.log``."""
    with open(tmp_path / "nimbus.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "squall", "nimbus", *args],
                                stdout=subprocess.PIPE, stderr=log, text=True)


def stop_nimbus(proc: subprocess.Popen, tmp_path: Path, timeout: float = 30) -> int:
    """SIGTERM ``proc`` and return its exit status. One that has not exited within ``timeout``
    fails the test with what it was doing (py-spy's dump of its threads) and its and its
    supervisor's logs, then is killed with every process under ``tmp_path``."""
    proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        dump = subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)], capture_output=True, text=True)
        logs = {p.name: p.read_text(errors="replace")[-4000:]
                for p in [tmp_path / "nimbus.log", *tmp_path.glob("storm-local/supervisor/*.log")] if p.exists()}
        proc.kill()
        proc.wait()
        for pid in processes_mentioning(str(tmp_path)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"squall nimbus did not stop within {timeout:g} s of SIGTERM:\n{dump.stdout}{dump.stderr}\n"
                    + "\n".join(f"--- {name}\n{text}" for name, text in logs.items()))


def write_conf(tmp_path: Path, **conf) -> str:
    path = tmp_path / "squall.yaml"
    path.write_text(yaml.safe_dump({"storm.local.dir": str(tmp_path / "storm-local"), **conf}))
    return str(path)


@pytest.mark.parametrize("verb", [["list"], ["kill", "x"], ["jar"]])
def test_an_unreachable_master_is_one_line(tmp_path, capsys, verb):
    (port,) = free_ports(1)
    config = write_conf(tmp_path, **{"nimbus.thrift.port": port})
    if verb == ["jar"]:
        verb = ["jar", write(tmp_path, "endless.py", BUILD_STYLE)]
    assert main([verb[0], "--config", config, *verb[1:]]) == 1
    assert capsys.readouterr().err == (f"squall: error: cannot reach the master at 127.0.0.1:{port}: "
                                       f"Connection refused\n")


@pytest.mark.parametrize("verb", [["list"], ["kill", "x"]])
def test_a_client_given_the_masters_port_0_is_told_it_names_no_port(tmp_path, capsys, verb):
    """A user whose squall.yaml had ``nimbus.thrift.port: 0`` (a master, here ``squall jar
    --host spark``, on any free port) ran ``squall list`` with it: ``cannot reach the master at
    127.0.0.1:0: Connection refused``, as if the master were down."""
    config = write_conf(tmp_path, **{"nimbus.thrift.port": 0})
    assert main([verb[0], "--config", config, *verb[1:]]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"squall: error: cannot reach the master at 127.0.0.1:0: nimbus.thrift.port is 0 "
                          f"(read {config}), which lets a master listen on any free port"), err
    assert "-c nimbus.thrift.port=PORT" in err and "Connection refused" not in err, err
    assert main([verb[0], "-c", f"storm.local.dir={tmp_path / 'storm-local'}", "-c", "nimbus.thrift.port=0",
                 *verb[1:]]) == 1
    assert "nimbus.thrift.port is 0" in capsys.readouterr().err


def test_list_from_a_directory_without_squall_yaml_says_how_to_point_at_the_cluster(tmp_path, capsys, monkeypatch):
    (port,) = free_ports(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQUALL_CONF_DIR", raising=False)
    assert main(["list", "-c", f"nimbus.thrift.port={port}"]) == 1
    assert capsys.readouterr().err == (
        f"squall: error: cannot reach the master at 127.0.0.1:{port}: Connection refused (no squall.yaml "
        f"here or in $SQUALL_CONF_DIR, so this is the default address); point at the cluster with --config "
        f"PATH/squall.yaml (the master's), or with -c nimbus.seeds=[HOST] -c nimbus.thrift.port=PORT "
        f"-c storm.local.dir=DIR\n")


def test_jar_with_squalls_options_after_file_says_they_went_to_file(tmp_path, capsys, monkeypatch):
    """``squall jar FILE --config X``: FILE gets ``--config X`` (its own ARGS, as Storm's jar
    passes them), squall its defaults; the error says so instead of only "cannot reach"."""
    (port,) = free_ports(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQUALL_CONF_DIR", raising=False)
    (tmp_path / "elsewhere").mkdir()  # not the current directory, where squall would find it
    config = write_conf(tmp_path / "elsewhere", **{"nimbus.thrift.port": port})
    path = write(tmp_path, "endless.py", STORM_STYLE)  # a FILE that reads its ARGS (a build() one refuses them)
    assert main(["jar", "-c", f"nimbus.thrift.port={port}", path, "--config", config]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"squall: error: cannot reach the master at 127.0.0.1:{port}: Connection refused")
    assert err.endswith("; FILE's arguments include --config: squall's options go before FILE "
                        "(squall jar --config PATH FILE ARGS)\n")


def test_jar_of_a_build_file_with_arguments_after_it_says_nothing_reads_them_and_submits_nothing(nimbus, tmp_path):
    """``squall jar pipeline.py --name pipe``, FILE defining build(): ``--name pipe`` is FILE's
    argument (squall's options go before FILE), and a build() gets none. Before, the topology
    was submitted as ``pipeline`` (FILE's stem), with status 0, and took the slots that the
    user's next, corrected ``squall jar --name pipe pipeline.py`` then waited for."""
    path = write(tmp_path, "pipeline.py", BUILD_STYLE)
    run = nimbus.run("jar", path, "--name", "pipe")
    assert (run.returncode, run.stdout) == (2, ""), run
    assert run.stderr == (
        "squall: error: pipeline.py defines its topology (build() or topology), which takes no arguments, but "
        "'--name pipe' follow it, which nothing would read: squall's options go before FILE (squall jar --name "
        "NAME pipeline.py); a FILE reads arguments (sys.argv) only in the `if __name__ == \"__main__\":` code "
        "that submits its topology\n")
    assert "pipeline" not in nimbus.ok("list")


@pytest.mark.parametrize("verb", [["nimbus"], ["jar", "x.py"]])
def test_spark_master_goes_with_host_spark(capsys, tmp_path, verb):
    if verb[0] == "jar":
        verb = ["jar", write(tmp_path, "x.py", BUILD_STYLE)]
    assert main([*verb[:1], "--spark-master", "local[2]", *verb[1:]]) == 2
    assert capsys.readouterr().err == "squall: error: --spark-master goes with --host spark\n"


def test_the_spark_host_without_java_says_how_to_get_it(capsys, monkeypatch):
    pytest.importorskip("pyspark")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["nimbus", "--host", "spark"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("squall: error: the Spark host needs Java") and "JAVA_HOME" in err


@pytest.mark.parametrize("item", ["split", "split=four", "=4"])
def test_rebalance_e_must_be_component_equals_int(capsys, item):
    assert main(["rebalance", "x", "-e", item]) == 2
    assert capsys.readouterr().err == (f"squall: error: -e {item!r}: expected COMPONENT=N with N an integer, "
                                       f"e.g. -e split=4\n")


def test_the_masters_block_of_list_has_no_trailing_blanks(capsys):
    """docs/cli.md: `squall list`'s lines are printed without trailing blanks, the Nimbus HA
    block's header too (it once ended in one, which a script comparing lines tripped on)."""
    from squall.cli._cluster import _print_nimbuses
    _print_nimbuses([{"host": "127.0.0.1", "port": 6627, "status": "Leader", "uptime_secs": 812.4},
                     {"host": "127.0.0.1", "port": 6629, "status": "Offline", "uptime_secs": None}])
    lines = capsys.readouterr().out.split("\n")
    assert lines == ["", "Nimbus                   Status       Uptime_secs", "127.0.0.1:6627           Leader       812",
                     "127.0.0.1:6629           Offline      Not applicable", ""], lines


def test_monitor_watches_on_while_the_master_restarts(tmp_path):
    """``squall monitor`` polls the master; a master SIGKILLed and started again (a crash, an
    upgrade) must not end it: it says on stderr that the master does not answer, and once it
    answers again, that it does, and prints its rows on, until Ctrl-C (status 0). Before, it
    ended at the first poll the master missed (``squall: error: cannot reach the master``,
    status 1), while the workers, and the figures it was watching, went on. No supervisor: the
    topology waits for slots, which is enough to be watched."""
    (port,) = free_ports(1)
    config = write_conf(tmp_path, **{"nimbus.thrift.port": port})
    master = start_nimbus(tmp_path, "--no-supervisor", "--config", config)
    monitor = None
    try:
        assert master.stdout.readline().startswith("squall nimbus ready at "), (tmp_path / "nimbus.log").read_text()
        path = write(tmp_path, "waiting.py", BUILD_STYLE)
        assert squall("jar", "--config", config, path).returncode == 0
        monitor = subprocess.Popen([sys.executable, "-m", "squall", "monitor", "--config", config, "waiting",
                                    "-i", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert monitor.stdout.readline().startswith("topology\tcomponent\t")
        assert monitor.stdout.readline().startswith("waiting\t")  # a row: it polls

        master.kill()
        master.wait()
        assert monitor.stderr.readline() == (
            f"squall: waiting: the master does not answer (cannot reach 127.0.0.1:{port}: Connection refused); "
            f"still watching, every 0.2 s\n")
        assert monitor.poll() is None
        master = start_nimbus(tmp_path, "--no-supervisor", "--config", config)
        assert master.stdout.readline().startswith("squall nimbus ready at ")
        assert monitor.stderr.readline() == "squall: waiting: the master answers again\n"
        assert monitor.stdout.readline().startswith("waiting\t")
        monitor.send_signal(signal.SIGINT)
        assert monitor.wait(30) == 0
    finally:
        if monitor is not None and monitor.poll() is None:
            monitor.kill()
            monitor.wait()
        assert stop_nimbus(master, tmp_path) in (0, -signal.SIGKILL)
