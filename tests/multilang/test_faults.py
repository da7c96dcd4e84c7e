"""A shell subprocess that dies, stops answering or breaks the protocol: the error, naming the
component and what happened, is in the topology's errors (the UI's, ``squall get_errors``), and
no spout tuple is lost. A bolt's subprocess that had work in hand is started again in its
worker (the tuple it was processing failed as its exception, the others it held as lost;
tests/multilang/test_poison.py); one that cannot work at all, and a spout's, are a fault of
their worker, as in Storm: the worker is restarted."""

from __future__ import annotations

import collections
import os
import re
import signal
import sys
import threading
from pathlib import Path

import pytest

from squall import Bolt, Config, Fields, LocalCluster, ShellBolt, ShellSpout, Spout, TopologyBuilder
from squall.engine.clock import SimulatedClock

from ..conftest import processes_mentioning, wait_until
from .feeding import fed_builder

HERE = Path(__file__).parent
BARE = HERE / "bare"  # components written without a library, most of them faulty

_LOCK = threading.Lock()
SOURCE = {"todo": collections.deque(), "in_flight": set(), "emitted": collections.Counter(),
          "acked": collections.Counter()}
WORDS: collections.Counter = collections.Counter()


def sentence(i: int) -> str:
    return f"hold sentence {i}" if i == 10 else f"the quick {i} fox jumps"


class ReplayingSource(Spout):
    """A reliable source kept outside the workers (as a queue's unacknowledged messages are):
    a failed id is emitted again, and so is every id in flight when a spout task starts again
    (its worker crashed before they were acked)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["sentence"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        with _LOCK:
            SOURCE["todo"].extend(sorted(SOURCE["in_flight"]))
            SOURCE["in_flight"].clear()

    def next_tuple(self):
        with _LOCK:
            if not SOURCE["todo"]:
                return
            i = SOURCE["todo"].popleft()
            SOURCE["in_flight"].add(i)
            SOURCE["emitted"][i] += 1
        self.collector.emit([sentence(i)], i)

    def ack(self, msg_id):
        with _LOCK:
            SOURCE["in_flight"].discard(msg_id)
            SOURCE["acked"][msg_id] += 1

    def fail(self, msg_id):
        with _LOCK:
            if msg_id in SOURCE["in_flight"]:
                SOURCE["in_flight"].discard(msg_id)
                SOURCE["todo"].append(msg_id)


class CountWords(Bolt):
    def execute(self, tup):
        with _LOCK:
            WORDS[tup[0]] += 1
        self.collector.ack(tup)


def test_a_subprocess_killed_mid_run_is_started_again_and_every_spout_tuple_is_acked(tmp_path):
    """The pystorm bolt keeps sentence 10 unacked and says its pid; the test kills it (SIGKILL)
    with that tuple in it while the spout goes on emitting. The ShellBolt starts a new
    subprocess in its worker (which lives on: it had answered tuples, so it could work), and
    every sentence id is acked, the lost ones after a replay (at-least-once: duplicates are
    allowed, and counted). Before squall restarted a bolt's subprocess, its worker died and was
    restarted."""
    n = 120
    with _LOCK:
        SOURCE["todo"].clear()
        SOURCE["todo"].extend(range(n))
        for k in ("in_flight", "emitted", "acked"):
            SOURCE[k].clear()
        WORDS.clear()
    hold = tmp_path / "held-by-pid"
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSource())
    b.set_bolt("split", ShellBolt([sys.executable, "hold.py"], ["word"], cwd=str(HERE / "with_pystorm"))) \
        .shuffle_grouping("source")
    b.set_bolt("count", CountWords()).shuffle_grouping("split")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_max_spout_pending(20)
    # what the restarted worker's peers do not learn was lost (sent while it restarted) is
    # failed by the message timeout, as in Storm: a short one keeps the test short
    conf.set_message_timeout_secs(5)
    conf["test.hold.file"] = str(hold)
    with LocalCluster() as cluster:
        cluster.submit_topology("killed", conf, b.create_topology())
        assert wait_until(hold.exists, 30)
        os.kill(int(hold.read_text()), signal.SIGKILL)

        assert wait_until(lambda: set(SOURCE["acked"]) == set(range(n)), 40), sorted(set(range(n)) - set(SOURCE["acked"]))
        info = cluster.get_topology_info("killed")
        errors = [e for e in info["errors"] if e["component"] == "split"]
        assert errors and not errors[0]["fatal"]  # reported by the bolt, which goes on
        assert "ShellBolt [split]" in errors[0]["error"] and "killed by SIGKILL" in errors[0]["error"]
        assert sum(w["restarts"] for w in info["workers"]) == 0

    assert SOURCE["emitted"][10] >= 2  # the held sentence came back after the crash
    duplicates = sum(SOURCE["emitted"].values()) - n
    print(f"{n} sentences, {duplicates} emitted again after the crash, acked {sum(SOURCE['acked'].values())} times")
    for word in ("hold", "the", "quick", "fox", "jumps"):
        assert WORDS[word] >= (1 if word == "hold" else n - 1)
    assert all(WORDS[str(i)] >= 1 for i in range(n))


def test_an_idle_subprocess_killed_is_started_again_in_its_worker(tmp_path):
    """A shell bolt's task given no tuple (with 2 workers a load-aware shuffle keeps tuples in
    the spout's worker: the other worker's task stays idle) whose subprocess is killed from
    outside (the OOM killer, a person). It had answered its heartbeats, so it could work: it is
    started again in its worker, as a busy one is. Before, having acked no tuple, it was taken
    for one that cannot start, and crashed its worker with every task in it."""
    b, _feed, _ = fed_builder("sentence")
    b.set_bolt("idle", ShellBolt([sys.executable, "idle.py", str(tmp_path)], cwd=str(BARE))).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("idle", Config(), b.create_topology())
        assert wait_until(lambda: list(tmp_path.glob("idle-*")), 30), "the subprocess answered no heartbeat"
        [first] = tmp_path.glob("idle-*")
        os.kill(int(first.name.split("-")[1]), signal.SIGKILL)
        assert wait_until(lambda: len(list(tmp_path.glob("idle-*"))) == 2, 30), "no new subprocess answered"
        info = cluster.get_topology_info("idle")

    [error] = [e for e in info["errors"] if e["component"] == "idle"]
    assert not error["fatal"] and "killed by SIGKILL" in error["error"], error
    assert sum(w["restarts"] for w in info["workers"]) == 0


def _run_until_error(name, component, conf=None, tracker_out=None):
    """Run ``component`` as bolt "bad" after a spout of one sentence per next; the first error
    the topology reports for "bad". ``tracker_out``: a list given the spout's tracker, which
    is read once that error is there."""
    b, feed, tracker = fed_builder("sentence")
    b.set_bolt("bad", component).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology(name, conf or Config(), b.create_topology())
        feed.feed(["a sentence"], 1)
        assert wait_until(lambda: any(e["component"] == "bad" for e in cluster.get_topology_info(name)["errors"]), 30)
        error = next(e for e in cluster.get_topology_info(name)["errors"] if e["component"] == "bad")
        if tracker_out is not None:
            assert wait_until(lambda: tracker.is_failed(1), 30)
            tracker_out.append(cluster.get_topology_info(name))
    return error


def test_a_subprocess_that_stops_answering_heartbeats_fails_the_tuple_it_holds_and_is_killed():
    """It hangs on its tuple (as on a record that makes it loop for ever): the tuple fails, the
    subprocess is killed and started again in its worker (which would have crash-looped on
    such a record before, the record never charged)."""
    conf = Config()
    conf[Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS] = 1
    marker = f"silent-{os.getpid()}"
    info: list = []
    error = _run_until_error("silent", ShellBolt([sys.executable, "silent.py", marker], cwd=str(BARE)), conf, info)

    assert not error["fatal"] and info  # reported by the bolt, its tuple failed (the wait for it)
    assert error["error"].startswith("MultilangError: ShellBolt [bad] task ")
    assert "it sent nothing, not even a sync for a heartbeat" in error["error"]
    assert "topology.subprocess.timeout.secs 1" in error["error"]
    assert wait_until(lambda: not processes_mentioning(marker), 5)  # killed, and the restarted ones too


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_subprocess_started_by_a_wrapper_script_is_killed_with_it():
    """The command is a shell that runs the bolt's program (a virtualenv's activate, then
    python: the shell does not exec it), which blocks for good on its tuple. At the heartbeat
    timeout squall killed the shell only: the program, the process that answered the handshake
    with its pid, stayed running for ever, after the topology and the cluster had gone (Storm's
    supervisor kills the pid its pidDir lists). Now its whole process group goes."""
    conf = Config()
    conf[Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS] = 1
    marker = f"wrapped-{os.getpid()}"
    wrapper = ["sh", "-c", f"{sys.executable} stuck.py {marker}; exit $?"]
    info: list = []
    error = _run_until_error("wrapped", ShellBolt(wrapper, cwd=str(BARE)), conf, info)

    assert not error["fatal"] and info  # its tuple failed, a new subprocess started
    assert "it sent nothing, not even a sync for a heartbeat" in error["error"]
    pid = int(re.search(r"\(pid (\d+)\)", error["error"]).group(1))  # the program's, from the handshake
    assert pid in processes_mentioning(marker) or not _alive(pid)
    assert wait_until(lambda: not _alive(pid), 10), f"the wrapped program {pid} outlived its killed subprocess"
    assert wait_until(lambda: not processes_mentioning(marker), 5)  # the new one ended with the cluster


def test_a_bolts_heartbeat_follows_the_clusters_clock():
    """On a simulated clock the silent bolt's 30 s (supervisor.worker.timeout.secs) pass
    without waiting for them: no fault before, a fault after."""
    b, feed, _ = fed_builder("sentence")
    b.set_bolt("bad", ShellBolt([sys.executable, "silent.py"], cwd=str(BARE))).shuffle_grouping("feed")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("simulated", Config(), b.create_topology())
        feed.feed(["a sentence"], 1)  # once it is executed, the bolt's heartbeat timer runs
        assert wait_until(lambda: cluster.get_topology_info("simulated")["components"]["bad"]["executed"] == 1, 30)
        cluster.advance_cluster_time(25)
        assert cluster.get_topology_info("simulated")["errors"] == []
        cluster.advance_cluster_time(10)
        assert wait_until(lambda: cluster.get_topology_info("simulated")["errors"], 10)
        error = cluster.get_topology_info("simulated")["errors"][0]

    assert "(topology.subprocess.timeout.secs 30)" in error["error"]


def test_a_spout_subprocess_that_does_not_sync_is_a_fault_of_its_worker():
    conf = Config()
    conf[Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS] = 1
    marker = f"silent-spout-{os.getpid()}"
    b = TopologyBuilder()
    b.set_spout("bad", ShellSpout([sys.executable, "silent.py", marker], ["x"], cwd=str(BARE)))
    with LocalCluster() as cluster:
        cluster.submit_topology("nosync", conf, b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("nosync")["errors"], 30)
        error = cluster.get_topology_info("nosync")["errors"][0]

    assert error["fatal"] and error["error"].startswith("MultilangError: ShellSpout [bad] task ")
    assert "no sync for activate within 1 s (topology.subprocess.timeout.secs)" in error["error"]
    assert wait_until(lambda: not processes_mentioning(marker), 5)


def test_a_spout_subprocess_that_writes_without_reading_is_a_fault_not_a_silent_hang():
    """A spout subprocess that emits many tuples asking for their task ids and reads the ids
    only afterwards fills its input pipe while squall, on the same thread, writes ids and reads
    nothing: squall's write waited for ever, with no error and no timeout (Storm's heartbeat
    thread would have killed it). A write that stays blocked for the subprocess timeout is now
    its worker's fault, naming why."""
    conf = Config()
    conf[Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS] = 1
    b = TopologyBuilder()
    b.set_spout("burst", ShellSpout([sys.executable, "burst.py", "50000"], ["x"], cwd=str(BARE)))
    with LocalCluster() as cluster:
        cluster.submit_topology("full", conf, b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("full")["errors"], 30)
        error = cluster.get_topology_info("full")["errors"][0]

    assert error["fatal"] and error["error"].startswith("MultilangError: ShellSpout [burst] task ")
    assert "it took nothing of its input for 1 s while answering next (topology.subprocess.timeout.secs)" \
        in error["error"]


class Acks(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def test_a_shell_spout_with_acking_off_takes_a_burst_of_emits_and_answers_each_ack():
    """With acking off each emit acks its tuple while the subprocess is busy with its ``next``:
    the acks wait for the sync and go after it, in a loop rather than one nested call deeper
    each (a review's worry for a burst; this burst of 2,000 did not reach the limit before)."""
    conf = Config()
    conf.set_num_ackers(0)
    b = TopologyBuilder()
    b.set_spout("burst", ShellSpout([sys.executable, "burst.py", "2000"], ["x"], cwd=str(BARE)))
    b.set_bolt("sink", Acks()).shuffle_grouping("burst")
    with LocalCluster() as cluster:
        cluster.submit_topology("acked-burst", conf, b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("acked-burst")["components"]["sink"]["executed"] == 2000
                          or cluster.get_topology_info("acked-burst")["errors"], 30)
        # the acks after the sync: the subprocess answers each with a sync (burst.py), then
        # keeps answering next; an error would be a fault of the worker
        assert wait_until(lambda: cluster.get_topology_info("acked-burst")["components"]["burst"]["acked"] == 2000
                          or cluster.get_topology_info("acked-burst")["errors"], 30)
        info = cluster.get_topology_info("acked-burst")
    assert info["errors"] == [] and info["components"]["burst"]["acked"] == 2000


def test_a_malformed_message_is_an_error_naming_the_component_and_what_was_wrong():
    info: list = []
    error = _run_until_error("garbage", ShellBolt([sys.executable, "garbage.py"], cwd=str(BARE)), None, info)

    assert not error["fatal"] and info  # reported by the bolt, its tuple failed (the wait for it)
    first = error["error"].splitlines()[0]
    assert first.startswith("MultilangError: ShellBolt [bad] task ")
    assert "broke the multilang protocol: a message that is not valid JSON" in first
    assert "'{command: emit, tuple: [1]}'" in first
    assert "json/decoder.py" not in error["traceback"]  # squall's error, not the parser's insides
    # nor squall's own frames (its reader thread down to the pipe's read): the error is all of it
    assert error["traceback"].startswith("squall.multilang.messages.MultilangError: ShellBolt [bad] task ")
    assert 'File "' not in error["traceback"]


def test_a_spout_subprocess_that_raises_shows_its_own_traceback_in_the_error():
    """The crash's record and the worker log's line show what the subprocess said and where
    (component, task, command, pid), as a shell bolt's do. They carried a dozen frames of
    squall's executor loop down to the pipe's read above it, none of them the user's."""
    b = TopologyBuilder()
    b.set_spout("bad", ShellSpout([sys.executable, "dies.py"], ["x"], cwd=str(BARE)))
    with LocalCluster() as cluster:
        cluster.submit_topology("dies", Config(), b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("dies")["errors"], 30)
        error = cluster.get_topology_info("dies")["errors"][0]

    assert error["fatal"] and error["component"] == "bad"
    assert error["error"].startswith("MultilangError: ShellSpout [bad] task ")
    assert "it exited; exit code 1" in error["error"]
    assert "ValueError: the source is gone" in error["error"]  # the last lines of its stderr
    tb = error["traceback"]
    assert tb.startswith("squall.multilang.messages.MultilangError: ShellSpout [bad] task ")
    assert "'dies.py'] (pid " in tb and "it exited; exit code 1" in tb
    assert 'File "' + str(BARE / "dies.py") + '", line 9' in tb  # the subprocess's own frame
    assert "squall/engine" not in tb and "squall/multilang" not in tb  # and none of squall's


CRASH = {"armed": False}
SEEN = collections.Counter()


class CrashesWhenArmed(Bolt):
    """Crashes its worker (fail fast) on the first tuple after the test arms it, once."""

    def execute(self, tup):
        with _LOCK:
            crash, CRASH["armed"] = CRASH["armed"], False
            SEEN["tuples"] += 1
        if crash:
            raise RuntimeError("another component's crash")
        self.collector.ack(tup)


def test_a_shell_subprocess_does_not_outlive_its_worker_crashed_by_another_component(tmp_path, monkeypatch):
    """The worker of a shell spout crashes on a Python bolt's error: no close or cleanup runs,
    but the spout's subprocess goes with the worker; the restarted worker has a new one. The
    crashed one's directories go too: it died with its thread (PDEATHSIG), and they stayed in
    the temporary directory until the process's exit, or for good once it was garbage collected."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    CRASH["armed"] = False
    SEEN.clear()
    marker = f"outlive-{os.getpid()}"
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout([sys.executable, "numbers.py", marker], ["n"], cwd=str(BARE)))
    b.set_bolt("crash", CrashesWhenArmed()).shuffle_grouping("numbers")
    conf = Config()
    conf[Config.TOPOLOGY_BOLT_FAIL_FAST] = True
    conf["test.numbers"] = 10 ** 9
    with LocalCluster() as cluster:
        cluster.submit_topology("outlive", conf, b.create_topology())
        assert wait_until(lambda: SEEN["tuples"] > 0, 30)
        first = set(processes_mentioning(marker))
        assert len(first) == 1
        CRASH["armed"] = True
        assert wait_until(lambda: cluster.get_topology_info("outlive")["errors"], 30)
        # the first subprocess is gone, and the restarted worker started its own
        assert wait_until(lambda: (now := set(processes_mentioning(marker))) and not now & first, 10)
        assert len(processes_mentioning(marker)) == 1
        # the crashed worker's task directory went, the restarted one's is there
        assert wait_until(lambda: len(list(tmp_path.glob("squall-multilang-*"))) == 1, 10), \
            list(tmp_path.glob("squall-multilang-*/**"))
    assert wait_until(lambda: not processes_mentioning(marker), 5)
    assert list(tmp_path.glob("squall-multilang-*")) == []


@pytest.mark.parametrize("command, what", [
    (["/nonexistent/program"], "cannot start ['/nonexistent/program']"),
    ([sys.executable, "-c", "print('[1]'); print('end'); input()"], "the handshake's answer must be {\"pid\": N}"),
    ([sys.executable, "-c", "print('hello')"], ("it exited before answering the handshake; it wrote to its stdout "
                                               "only 'hello'; exit code 0")),
])
def test_a_subprocess_that_cannot_start_is_a_failed_start_naming_the_command(command, what):
    error = _run_until_error("nostart", ShellBolt(command))

    assert error["fatal"] and what in error["error"]


@pytest.mark.parametrize("script, timeout, said", [
    ("sys.stderr.write('cannot read config.yaml\\n'); sys.exit(3)", 60,
     r"it exited before answering the handshake; exit code 3\nits stderr ended with:\n  cannot read config.yaml$"),
    ("print('usage: split.py INPUT'); sys.exit(2)", 60,
     r"it exited before answering the handshake; it wrote to its stdout only 'usage: split.py INPUT'; exit code 2$"),
    ("print('starting...', flush=True); time.sleep(60)", 3,
     (r"no answer to the handshake within 3 s \(it must write its pid, \{\"pid\": N\}, first\); it wrote to its "
     r"stdout only 'starting...'; killed by SIGKILL$")),
], ids=["exits", "prints-usage", "prints-and-waits"])
def test_a_subprocess_that_fails_before_its_handshake_is_named_by_its_pid_and_what_it_said(monkeypatch, script, timeout,
                                                                                            said):
    """Before its handshake's answer a subprocess has given no pid, and its error said "(pid ?)";
    one that printed a usage line to its stdout and exited "exited in the middle of a message".
    Now the pid is the one squall started, and what it wrote and how it ended are named.

    ``timeout``: the handshake's. One that exits ends the launch at its exit, however long the
    limit (60 s: a slow machine's interpreter start is no timeout); the one that waits is given
    3 s, time for an interpreter to start and print on a busy machine (with 1 s, a start
    slower than that would have said nothing of the print), and takes all of it."""
    from squall.multilang import process as process_module
    from squall.multilang.messages import MultilangError
    from squall.multilang.process import ShellProcess
    from squall.multilang.serializer import JsonSerializer

    monkeypatch.setattr(process_module, "setup_message", lambda conf, context, pid_dir: {"conf": {}, "context": {}})
    command = [sys.executable, "-c", f"import os, sys, time; sys.stderr.write(f'pid {{os.getpid()}}\\n'); {script}"]
    p = ShellProcess(command, JsonSerializer(), "ShellBolt [t] task 1")
    with pytest.raises(MultilangError) as failed:
        p.launch({}, None, timeout)
    message = str(failed.value)
    told = re.search(r"\n  pid (\d+)", message)  # its stderr's first line: its own pid
    assert told, message
    pid = told.group(1)
    assert message.startswith(f"ShellBolt [t] task 1: subprocess {command} (pid {pid}): "), message
    assert re.search(said, message.replace(f"\n  pid {pid}", ""), re.MULTILINE), message
    assert not p.running()


@pytest.mark.parametrize("script, said", [
    ("print('hello')", r"it exited before answering the handshake; it wrote to its stdout only 'hello'; exit code 0$"),
    ("os.close(0); print('hello', flush=True); time.sleep(60)",
     r"it closed its input before it took the whole handshake \(\d+ bytes\) and did not exit within 2 s$"),
], ids=["exits", "closes-its-input"])
def test_a_subprocess_gone_before_its_handshake_is_written_says_what_it_wrote_and_how_it_ended(monkeypatch, script,
                                                                                               said):
    """Which the OS reports first for a subprocess that exits at its start, the broken pipe of
    the handshake's write or its stdout's end, is timing: the broken pipe made the error "it
    stopped reading its input (it exited); exit code 0", without what it wrote (a start flaky in
    a loaded run). A handshake larger than the pipe holds (1 MB) given to a command that reads
    none of it makes the broken pipe come first every time: the error is the one its stdout's
    end gives. One that closed its input and lives on is said to have done so, not to have exited."""
    from squall.multilang import process as process_module
    from squall.multilang.messages import MultilangError
    from squall.multilang.process import ShellProcess
    from squall.multilang.serializer import JsonSerializer

    big = {"conf": {"lookup": "v" * (1 << 20)}, "pidDir": "", "context": {}}  # 1 MB: far past a pipe's 64 KB
    monkeypatch.setattr(process_module, "setup_message", lambda conf, context, pid_dir: big)
    command = [sys.executable, "-c", f"import os, time; {script}"]
    p = ShellProcess(command, JsonSerializer(), "ShellBolt [t] task 1")
    try:
        with pytest.raises(MultilangError) as failed:
            p.launch({}, None, 60)
        message = str(failed.value)
        assert message.startswith(f"ShellBolt [t] task 1: subprocess {command} (pid "), message
        assert re.search(said, message), message
        assert not p.running()
    finally:
        p.kill("")


def test_a_command_that_never_reads_its_large_handshake_fails_its_start_instead_of_hanging(monkeypatch):
    """The handshake was written without the time limit its answer has: one larger than the pipe
    holds (a big configuration, the context of a topology of thousands of tasks) given to a
    command that never reads its input (the wrong program, one stuck before its loop) hung the
    component's start for ever. Now it fails its start, saying so, within the limit."""
    from squall.multilang import process as process_module
    from squall.multilang.messages import MultilangError
    from squall.multilang.process import ShellProcess
    from squall.multilang.serializer import JsonSerializer

    big = {"conf": {"lookup": "v" * (1 << 20)}, "pidDir": "", "context": {}}  # 1 MB: far past a pipe's 64 KB
    monkeypatch.setattr(process_module, "setup_message", lambda conf, context, pid_dir: big)
    p = ShellProcess([sys.executable, "-c", "import time; time.sleep(600)"], JsonSerializer(), "ShellBolt [t] task 1")
    raised: list[BaseException] = []

    def start():
        try:
            p.launch({}, None, 1)
        except BaseException as e:  # noqa: BLE001 (what the start raised, checked below)
            raised.append(e)

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    starting.join(60)  # a guard against the hang under test, not a measure: it ends after 1 s of no reading
    try:
        assert not starting.is_alive(), "the start still waits on a subprocess that reads nothing"
        [error] = raised
        assert isinstance(error, MultilangError)
        assert re.search(r"it took nothing of the handshake \(\d+ bytes: the configuration and context\) for 1 s",
                         str(error)), error
        assert not p.running()
    finally:
        p.kill("")
