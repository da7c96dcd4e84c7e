"""A shell bolt's subprocess that fails a tuple, or dies, says why, and the reason reaches the
spout: the component and what the subprocess reported (the error it sent before its ``fail``;
the exit code and the last line of its stderr), never its whole traceback. Before, a ``fail``
from the subprocess was a plain fail: a record given up after its retries was dead-lettered as
``failed 4 times; last: failed in [check] task 3`` while the traceback sat in the errors."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

import pytest

from squall import Bolt, Fields, LocalCluster, ShellBolt, TopologyBuilder
from squall._failure import EXCEPTION, WORKER_LOST, FailureCause
from squall._tuple import Source, Tuple
from squall.external.files import FileSpout
from squall.multilang import process as process_module
from squall.multilang.messages import MultilangError
from squall.multilang.process import ShellProcess
from squall.multilang.serializer import JsonSerializer
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

BARE = Path(__file__).parent / "bare"
LINES = ["1", "x", "3", "4", "y", "6", "7"]  # N = 7, K = 2 ("x", "y")


def _crashed(monkeypatch, value: str, *args: str) -> tuple[ShellProcess, Exception]:
    """A ``checker.py *args`` subprocess sent a tuple of ``value``, which it dies on: the process
    (closed) and the error its read raised."""
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})
    p = ShellProcess([sys.executable, "checker.py", *args], JsonSerializer(), "ShellBolt [check] task 3",
                     cwd=str(BARE))
    p.launch({}, None, 30)
    try:
        p.write({"id": "1", "comp": "lines", "stream": "default", "task": 2, "tuple": [value]})
        try:
            p.read()
        except Exception as e:  # noqa: BLE001 (the MultilangError under test)
            return p, e
        raise AssertionError("the subprocess answered")
    finally:
        p.close()


class Numbers(Bolt):
    """Keeps each number it gets, and acks it."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup) -> None:
        self.log.append(tup.values[0])
        self.collector.ack(tup)


def test_a_tuple_the_subprocess_fails_is_dead_lettered_with_the_error_it_reported(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("".join(f"{x}\n" for x in LINES))
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=tmp_path / "local"))
    b.set_bolt("check", ShellBolt([sys.executable, "checker.py"], ["n"], cwd=str(BARE))).shuffle_grouping("lines")
    b.set_bolt("keep", Numbers(log)).shuffle_grouping("check")
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("shell", {"topology.message.timeout.secs": 30}, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=30), "the file was not finished"
        cluster.kill_topology("shell", wait_secs=0)
    assert sorted(log.items()) == [1, 3, 4, 6, 7]  # N - K, each once
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert sorted(json.loads(d["record"])[0] for d in dead) == ["x", "y"]  # K, each once
    for d in dead:
        value = json.loads(d["record"])[0]
        why = (r"ShellBolt subprocess \(pid \d+\) failed a tuple from \[lines\] stream \[default\] after "
               rf"reporting: ValueError: invalid literal for int\(\) with base 10: '{value}'")
        # main: "failed 4 times; last: failed in [check] task 2", the reason only in the errors
        assert re.fullmatch(rf"failed 4 times; last: failed in \[check\] task \d+: {why}", d["reason"]), d["reason"]
        assert re.fullmatch(why, d["cause"]["message"]) and "Traceback" not in json.dumps(d)


def test_a_subprocess_that_dies_gives_a_failure_cause_of_one_line_naming_the_component_and_what_it_said(
        monkeypatch):
    """The error that crashes the worker keeps the last lines of the subprocess's stderr; the
    cause of the tuple failed by it (`FailureCause.of_exception`, as the engine makes it) is one
    line: the component, the exit code and the stderr's last line, not the traceback."""
    p, error = _crashed(monkeypatch, "crash")
    assert "Traceback (most recent call last)" in str(error)  # the crash report keeps the stderr lines
    cause = FailureCause.of_exception(EXCEPTION, "check", 3, error)
    assert cause.error == "MultilangError"
    # main: the message was the whole stderr block, "...\nits stderr ended with:\n  Traceback ..."
    assert cause.message == (f"ShellBolt [check] task 3: subprocess {[sys.executable, 'checker.py']} (pid {p.pid}): "
                             f"it exited; exit code 3; its stderr ended with: ZeroDivisionError: division by zero")


def test_a_node_subprocess_that_dies_is_named_by_its_exception_not_its_node_version_line(monkeypatch):
    """Node.js ends an uncaught exception's report with ``Node.js v20.20.2``, after the stack: a
    Node bolt dying on a poison record was one line ending "its stderr ended with: Node.js
    v20.20.2", in the tuple's cause, the log and `squall local`'s summary. It names the
    exception's line, above the stack's frames, now."""
    from squall._error_lines import first_and_last

    p, error = _crashed(monkeypatch, "crash-like-node")
    cause = FailureCause.of_exception(EXCEPTION, "check", 3, error)
    assert cause.message == (f"ShellBolt [check] task 3: subprocess {[sys.executable, 'checker.py']} (pid {p.pid}): "
                             f"it exited; exit code 1; its stderr ended with: Error: poison record POISON")
    assert first_and_last(f"MultilangError: {error}")[1] == "Error: poison record POISON"  # the summary's line
    # a script node cannot find: its error has a `{ code: 'MODULE_NOT_FOUND' ... }` block after the stack
    _, error = _crashed(monkeypatch, "crash-like-node-missing-script")
    said = "its stderr ended with: Error: Cannot find module '/work/upper.js'"
    assert FailureCause.of_exception(EXCEPTION, "check", 3, error).message.endswith(said)


def test_the_stderr_line_named_is_a_javas_cause_and_never_a_message_starting_with_at():
    """A Java component's stack with a cause ends with `... 1 more`, which was named as what went
    wrong; a program's own last line starting with "at" (`at offset 42: bad record`) was taken
    for a stack frame and the line above it named instead."""
    from squall._error_lines import stderr_cause

    java = ['Exception in thread "main" java.lang.RuntimeException: wrapped', "\tat Split.main(Split.java:9)",
            "Caused by: java.io.IOException: poison record", "\tat Split.read(Split.java:20)", "\t... 1 more"]
    assert stderr_cause(java) == "Caused by: java.io.IOException: poison record"
    assert stderr_cause(["reading partition 3", "at offset 42: bad record"]) == "at offset 42: bad record"
    node = ["Error: poison record", "    at Object.<anonymous> (/w/split.js:3:11)", "    at /w/split.js:9:5",
            "    at new Promise (<anonymous>)", "", "Node.js v20.1.0"]
    assert stderr_cause(node) == "Error: poison record"


def test_a_subprocess_that_dies_writing_megabytes_to_stderr_makes_no_megabyte_error_or_log_line(monkeypatch, caplog):
    """Each stderr line was logged and kept whole: a subprocess that wrote two 3 MB lines before
    it died made two 3 MB log lines, and a 6 MB error (the crash's report, logged with it). Now a
    line is cut to 1,000 characters, saying how long it was; the cause is one line, as before."""
    import logging

    caplog.set_level(logging.INFO, logger="squall.multilang")
    p, error = _crashed(monkeypatch, "crash-loudly")
    logged = [r.getMessage() for r in caplog.records if " stderr: " in r.getMessage()]
    assert len(logged) == 2 and all(len(m) < 1200 for m in logged), [len(m) for m in logged]  # main: 3,000,047
    assert logged[1].endswith(f"ValueError: {'w' * 988}... (3000012 characters)"), logged[1][-80:]
    assert len(str(error)) < 3000, len(str(error))  # main: 6,000,185
    cause = FailureCause.of_exception(EXCEPTION, "check", 3, error)
    assert cause.message.startswith(f"ShellBolt [check] task 3: subprocess {[sys.executable, 'checker.py']} "
                                    f"(pid {p.pid}): it exited; exit code 3; its stderr ended with: ValueError: www")
    assert len(cause.message) <= 1003


def test_a_stderr_line_without_a_newline_is_read_and_logged_in_pieces(monkeypatch, caplog):
    """A stderr line was read whole before anything of it was logged: a component that writes
    without a newline (2.5 MB here; 1 GB would be as well) grew the worker by the line, and by it
    again as text, and nothing named its task in the log until the line ended. Now a line is
    read a piece at a time, of which only its head is kept, and one longer than
    ``STDERR_PIECE_CHARS`` is logged in pieces, each naming the task and counting its characters."""
    import logging
    import tracemalloc

    monkeypatch.setattr(process_module, "STDERR_PIECE_CHARS", 1_000_000, raising=False)
    caplog.set_level(logging.INFO, logger="squall.multilang")
    tracemalloc.start()
    try:
        _, error = _crashed(monkeypatch, "crash-endlessly")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # main: 5,159,801 bytes (the line read whole, then as text)
    logged = [r.getMessage() for r in caplog.records if " stderr: " in r.getMessage()]
    pieces = [re.fullmatch(r"ShellBolt \[check\] task 3 stderr: (\(continued\) )?e{1000}\.\.\. "
                           r"\((\d+) characters(; the line goes on)?\)", m) for m in logged]
    assert all(pieces) and len(pieces) == 3, [m[:60] + m[-60:] for m in logged]  # main: one, after the exit
    assert [bool(m[1]) for m in pieces] == [False, True, True]  # the first piece, then its continuations
    assert [bool(m[3]) for m in pieces] == [True, True, False]  # the line went on, until its end
    assert sum(int(m[2]) for m in pieces) == 2_500_000  # every character counted, once
    assert all(int(m[2]) >= 1_000_000 for m in pieces[:2])
    assert logged[-1].split(" stderr: ", 1)[1] in str(error)  # the error ends with the line's last piece


def test_the_fails_after_a_huge_error_each_read_only_its_last_line(monkeypatch):
    """A subprocess that reports one error and then fails a batch of tuples (pystorm's
    BatchingBolt) gives each fail that error's last line. The bolt kept the whole error and took
    its last line again at each fail: after a 5 MB error, 100 fails read 500 MB. Now the line is
    taken once, when the error comes, and cut to what a failure's message carries."""
    from squall import Fields
    from squall._tuple import Source, Tuple
    from squall.multilang import messages
    from squall.multilang.messages import ShellMsg

    read: list[int] = []
    real = messages.last_line
    monkeypatch.setattr(messages, "last_line", lambda text: read.append(len(text)) or real(text))

    class Collector:
        def __init__(self) -> None:
            self.causes: list = []
            self.errors: list = []

        def fail_with(self, tup, cause) -> None:
            self.causes.append(cause)

        def report_error(self, error) -> None:
            self.errors.append(error)

    class Process:
        pid = 4127
        where = "ShellBolt [check] task 3"

    bolt = ShellBolt([sys.executable, "checker.py"], ["n"])
    bolt.collector, bolt.context, bolt._where, bolt._reported = Collector(), None, ("check", 3), None
    tuples = {str(i): Tuple([str(i)], Source("lines", "default", 1, Fields(["line"]))) for i in range(100)}
    bolt._inputs = dict(tuples)
    bolt._places, bolt._starts, bolt._answered, bolt._answers = {}, {}, 0, 0  # (what `ShellBolt._start` sets)
    error = "Traceback (most recent call last):\n" + "  x\n" * 1_250_000 + "ValueError: " + "v" * 2000
    bolt._handle(Process(), ShellMsg("error", msg=error))
    for tuple_id in tuples:
        bolt._handle(Process(), ShellMsg("fail", id=tuple_id))
    assert len(bolt.collector.causes) == 100 and bolt._inputs == {}
    assert sum(read) < 2 * len(error), sum(read)  # main: 100 times the error's 5 MB
    for cause in bolt.collector.causes:
        assert cause.message.startswith("ShellBolt subprocess (pid 4127) failed a tuple from [lines] stream "
                                        "[default] after reporting: ValueError: vvv") and len(cause.message) <= 1003


def test_a_credential_on_the_subprocess_command_line_reaches_no_cause(monkeypatch):
    """The failure a dying subprocess gives names its command, which a dead letter then quotes:
    a token passed as an argument (``['python', 'checker.py', '--api-key', 'tok']``) reached
    it whole, the list form escaping every rule (a flag and its value are two items)."""
    token = "tok-8f2a91c4e7"
    _, error = _crashed(monkeypatch, "crash", "--api-key", token)
    cause = FailureCause.of_exception(EXCEPTION, "check", 3, error)
    assert token not in cause.message and token not in cause.describe()  # main: the token, whole
    assert cause.message.startswith(f"ShellBolt [check] task 3: subprocess {[sys.executable, 'checker.py']}"[:-1]
                                    + ", '--api-key', '***'] (pid ")


# A bolt subprocess that answers the handshake, then dies without reading a byte of the tuples
# waiting in its input (pystorm's `initialize` raising: its database is down), or after reading
# the first (a poison record). It dies once tuples are in its pipe, so each run is the same.
_DIES_IN_ITS_START = (
    "import json, os, select, sys\n"
    "sys.stdin.readline(); sys.stdin.readline()\n"  # the handshake: one line of JSON, then end
    "sys.stdout.write(json.dumps({'pid': os.getpid()}) + '\\nend\\n'); sys.stdout.flush()\n"
    "select.select([0], [], [])\n"
    "{read}"
    "sys.stderr.write('Traceback (most recent call last):\\nRuntimeError: {why}\\n'); sys.exit(1)\n")


@pytest.mark.parametrize("read, why, charged", [
    ("", "cannot reach the counts database", False),
    ("sys.stdin.readline(); sys.stdin.readline()\n", "poison record", True),
])
def test_a_subprocess_that_dies_before_reading_a_tuple_is_not_put_down_to_it(monkeypatch, read, why, charged):
    """The bolt put the death of a subprocess down to the first tuple it was given after its
    last answer, as if it had died processing it; one that died in its start (pystorm's
    ``initialize`` raising) with tuples already waiting in its input charged the first of
    them, and restarted in its worker: each restart charged another tuple, and with its
    database down a spout with a retry budget dead-lettered its records. A tuple it read
    none of (all the pipe took from its start on still in the pipe) is not the cause now:
    with no answer ever, the failure is the worker's (raised: the worker crashes, the host
    restarts it, as Storm's ShellBolt halts its worker), and every tuple fails as lost, not
    charged. One that read the first tuple and died is charged for it, as before."""
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})

    class Context:
        def get_this_component_id(self) -> str:
            return "count"

        def get_this_task_id(self) -> int:
            return 3

    class Collector:
        def __init__(self) -> None:
            self.causes: dict[str, FailureCause] = {}
            self.errors: list = []

        def fail_with(self, tup, cause) -> None:
            self.causes[tup.values[0]] = cause

        def report_error(self, error) -> None:
            self.errors.append(error)

    script = _DIES_IN_ITS_START.replace("{read}", read).replace("{why}", why)
    bolt = ShellBolt([sys.executable, "-c", script], ["n"])
    collector = Collector()
    bolt.prepare({}, Context(), collector)
    try:
        for i in range(3):
            bolt.execute(Tuple([f"r{i}"], Source("lines", "default", 1, Fields(["line"]))))
        assert wait_until(lambda: bolt._death is not None, 30)
        if charged:
            bolt._recover()  # a new subprocess, in this worker
        else:
            with pytest.raises(MultilangError, match=rf"task 3: .*it exited; exit code 1\n(.|\n)*RuntimeError: {why}"):
                bolt._recover()
        assert sorted(collector.causes) == ["r0", "r1", "r2"]  # every tuple failed, once
        assert {t for t, c in collector.causes.items() if c.record_caused} == ({"r0"} if charged else set())
        assert all(c.kind == WORKER_LOST for t, c in collector.causes.items() if not c.record_caused)
    finally:
        bolt.cleanup()


# acks the first tuple, then acks it again (a protocol error, with nothing in hand), then reads
# its input and answers nothing
_ACKS_TWICE = (
    "import json, os, sys\n"
    "sys.stdin.readline(); sys.stdin.readline()\n"
    "sys.stdout.write(json.dumps({'pid': os.getpid()}) + '\\nend\\n'); sys.stdout.flush()\n"
    "first = json.loads(sys.stdin.readline()); sys.stdin.readline()\n"
    "ack = json.dumps({'command': 'ack', 'id': first['id']}) + '\\nend\\n'\n"
    "sys.stdout.write(ack + ack); sys.stdout.flush()\n"
    "for line in sys.stdin: pass\n")


def test_a_tuple_written_after_the_subprocess_broke_the_protocol_is_not_put_down_to_it(monkeypatch):
    """A subprocess that acked its tuple and then broke the protocol (the same ack twice) had
    nothing in hand; but its error waits up to half a second for its stderr while it still
    runs, and the next tuple, written meanwhile, was charged as the one it died on (an
    ``exception`` of the bolt, a retry spent for no fault of its own). Now what had been
    written when the failure was seen decides: that tuple fails as lost, not charged."""
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})

    class Context:
        def get_this_component_id(self) -> str:
            return "count"

        def get_this_task_id(self) -> int:
            return 3

    class Collector:
        def __init__(self) -> None:
            self.acked: list = []
            self.causes: dict[str, FailureCause] = {}

        def ack(self, tup) -> None:
            self.acked.append(tup.values[0])

        def fail_with(self, tup, cause) -> None:
            self.causes[tup.values[0]] = cause

        def report_error(self, error) -> None:
            pass

    bolt = ShellBolt([sys.executable, "-c", _ACKS_TWICE], ["n"])
    collector = Collector()
    making_error = process_module.ShellProcess.protocol_error
    seen = threading.Event()

    def slow_error(process, error, context=""):
        # the error is made once the next tuple's writing started, as a busy bolt's is
        seen.set()
        assert wait_until(lambda: bolt._written >= 2, 30)
        return making_error(process, error, context)

    monkeypatch.setattr(process_module.ShellProcess, "protocol_error", slow_error)
    bolt.prepare({}, Context(), collector)
    try:
        source = Source("lines", "default", 1, Fields(["line"]))
        bolt.execute(Tuple(["r0"], source))
        assert seen.wait(30) and collector.acked == ["r0"]  # the second ack is being refused
        bolt.execute(Tuple(["r1"], source))
        assert wait_until(lambda: bolt._death is not None, 30)
        assert "ack of tuple id" in str(bolt._death)
        bolt._recover()  # a new subprocess, in this worker
        assert collector.acked == ["r0"]
        assert list(collector.causes) == ["r1"]
        assert collector.causes["r1"].kind == WORKER_LOST and not collector.causes["r1"].record_caused
    finally:
        bolt.cleanup()


# reads its first tuple and never answers again (a call that does not return)
_HANGS_ON_ITS_TUPLE = (
    "import json, os, sys, time\n"
    "sys.stdin.readline(); sys.stdin.readline()\n"
    "sys.stdout.write(json.dumps({'pid': os.getpid()}) + '\\nend\\n'); sys.stdout.flush()\n"
    "if sys.stdin.readline():\n"
    "    time.sleep(60)\n")


def test_a_subprocess_silent_past_the_timeout_names_the_tuple_it_was_given(monkeypatch):
    """A bolt whose call hangs on one record was killed with 'it sent nothing, not even a sync
    for a heartbeat, for 31 s (topology.subprocess.timeout.secs 30)': the user could not tell
    which record it hung on. The error now names the tuple it held, its values cut and its
    credentials masked."""
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})

    class Context:
        def get_this_component_id(self) -> str:
            return "geo"

        def get_this_task_id(self) -> int:
            return 4

    class Collector:
        def __init__(self) -> None:
            self.causes: dict[str, FailureCause] = {}

        def fail_with(self, tup, cause) -> None:
            self.causes[tup.values[0]] = cause

        def report_error(self, error) -> None:
            pass

    bolt = ShellBolt([sys.executable, "-c", _HANGS_ON_ITS_TUPLE], ["n"])
    collector = Collector()
    bolt.prepare({"topology.subprocess.timeout.secs": 5}, Context(), collector)
    now = [100.0]
    bolt._now = lambda: now[0]
    try:
        bolt.execute(Tuple(["k7", "password=hunter2 " + "x" * 5000],
                           Source("addresses", "default", 1, Fields(["key", "line"]))))
        assert wait_until(lambda: bolt._written == 1, 30)
        bolt._check_silence()  # what it had heard so far, at 100 s
        now[0] += 6
        bolt._check_silence()
        error = str(bolt._death)
        assert "for 6 s (topology.subprocess.timeout.secs 5), processing a tuple from [addresses] stream " \
               "[default]: ['k7', 'password=***" in error, error
        assert "hunter2" not in error and len(error) < 1000
        bolt._recover()
        assert collector.causes["k7"].record_caused
    finally:
        bolt.cleanup()
