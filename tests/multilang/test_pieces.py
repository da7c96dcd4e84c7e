"""The pieces of the shell components that need no subprocess: the bolt's pending writes
(``topology.shellbolt.max.pending``) and the resources that travel with a component."""

from __future__ import annotations

import os
import pickle
import random
import shutil
import stat
import sys
from pathlib import Path

import pytest

from squall import Config, ShellBolt
from squall._config import cluster_conf, topology_conf
from squall.multilang import process as process_module
from squall.multilang import resources
from squall.multilang.bolt import PendingWrites
from squall.multilang.component import subprocess_timeout
from squall.multilang.messages import MultilangError
from squall.multilang.process import ShellProcess
from squall.multilang.resources import unpack
from squall.multilang.serializer import JsonSerializer


def test_pending_writes_hold_at_most_max_pending_tuples_and_send_task_ids_and_heartbeats_first():
    q = PendingWrites(2)
    assert q.put(b"t1", 0) and q.put(b"t2", 0)
    assert not q.put(b"t3", 0)  # full: execute waits (here: gives up at once)
    q.put_first([4, 5])  # never held back: the subprocess may be waiting for it
    q.put_first({"stream": "__heartbeat"})
    assert [q.take(0) for _ in range(4)] == [[4, 5], {"stream": "__heartbeat"}, b"t1", b"t2"]
    assert q.take(0) is None
    assert q.put(b"t3", 0)  # room again


def test_resources_travel_inside_the_component_with_their_modes(tmp_path):
    src = tmp_path / "resources"
    (src / "lib").mkdir(parents=True)
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "lib" / "words.txt").write_text("a b c")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "x.pyc").write_bytes(b"\0")

    bolt = pickle.loads(pickle.dumps(ShellBolt(["./run.sh"], ["w"], resources=src)))
    (src / "run.sh").unlink()  # read where the component was made, not where it runs
    copy = unpack(bolt.resources, "squall-test-resources-")
    try:
        assert sorted(os.path.relpath(os.path.join(d, f), copy) for d, _, fs in os.walk(copy) for f in fs) == [
            "lib/words.txt", "run.sh"]
        assert stat.S_IMODE(os.stat(os.path.join(copy, "run.sh")).st_mode) == 0o755
        assert Path(copy, "lib", "words.txt").read_text() == "a b c"
    finally:
        shutil.rmtree(copy)


def test_resources_that_are_not_a_directory_or_too_large_are_named(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"ShellBolt \['node', 'x.js'\]: resources '.*nowhere' is not a directory"):
        ShellBolt(["node", "x.js"], resources=tmp_path / "nowhere")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "f").write_bytes(b"x" * 10)
    monkeypatch.setattr(resources, "MAX_RESOURCE_BYTES", 5)
    with pytest.raises(ValueError, match="ShellBolt: resources '.*big' hold more than 0 MB"):
        resources.pack(tmp_path / "big", "ShellBolt")


def test_the_silence_limit_is_the_topologys_else_the_supervisors_worker_timeout_as_in_storm():
    assert subprocess_timeout({}) == 30  # supervisor.worker.timeout.secs's default
    cluster = cluster_conf({Config.SUPERVISOR_WORKER_TIMEOUT_SECS: 7})
    seen = topology_conf(cluster, {})  # what a component's configuration starts from
    assert subprocess_timeout(seen) == 7
    assert subprocess_timeout(topology_conf(cluster, {Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS: 2.5})) == 2.5


def test_a_read_after_close_is_a_multilang_error_and_never_touches_a_reused_descriptor(monkeypatch):
    """close() may run on the bolt's thread while its reader thread is about to read: the pipe's
    descriptor must not be closed under that read (the number could already be another
    subprocess's pipe), and the read says the subprocess was closed, not ValueError."""
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})
    p = ShellProcess([sys.executable, "silent.py"], JsonSerializer(), "ShellBolt [t] task 1",
                     cwd=str(Path(__file__).parent / "bare"))
    p.launch({}, None, 30)
    p.close()
    with pytest.raises(MultilangError, match=r"ShellBolt \[t\] task 1: .*closed"):
        p.read()


def test_a_subprocess_whose_pipes_are_past_descriptor_1023_is_read_and_written_with_time_limits(monkeypatch):
    """A worker holding many sockets and files (or many shell tasks: three pipes each) gives a
    new subprocess's pipes descriptors past 1023, which select() cannot watch: every ShellBolt
    and ShellSpout then failed to start with "ValueError: filedescriptor out of range in
    select()", naming no component, and its worker crash-looped."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files is {hard}: no descriptor past 1023 to test with")
    if soft != resource.RLIM_INFINITY and soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})
    filler: list[int] = []
    try:
        while not filler or filler[-1] < 1030:  # the next descriptors handed out are past 1023
            filler.append(os.open(os.devnull, os.O_RDONLY))
        p = ShellProcess([sys.executable, "checker.py"], JsonSerializer(), "ShellSpout [t] task 1",
                         cwd=str(Path(__file__).parent / "bare"))
        p.launch({}, None, 30)  # the handshake's read has a time limit
        assert p._proc is not None and p._proc.stdout.fileno() > 1023
        p.write({"id": "7", "comp": "src", "stream": "default", "task": 1, "tuple": ["42"]}, 30)  # a spout's write
        emit, ack = p.read(30), p.read(30)
        assert (emit.command, emit.tuple, emit.anchors) == ("emit", [42], ("7",))
        assert (ack.command, ack.id) == ("ack", "7")
        p.close()
        assert not p.running()
    finally:
        for fd in filler:
            os.close(fd)
        if soft != resource.RLIM_INFINITY and soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("value, what", [(float("nan"), "Out of range float"), ("\ud800", "not allowed"),
                                         (b"\xff", "bytes is not JSON serializable")])
def test_a_value_the_wire_cannot_carry_is_named_by_its_field(value, what):
    """A shell bolt's tuple holding a value JSON cannot carry (a NaN, a lone surrogate another
    subprocess sent, bytes) fails and is reported, naming the stream; the encoder's words named
    no field, and with wide tuples the user guessed which one. Now the field is named."""
    from squall import Fields
    from squall._tuple import Source, Tuple

    class Collector:
        def __init__(self):
            self.errors, self.failed = [], []

        def report_error(self, error):
            self.errors.append(str(error))

        def fail_with(self, tup, cause):
            self.failed.append((tup.values[1], cause.message))

    class Process:
        serializer = JsonSerializer()
        where = "ShellBolt [score] task 2"
        owner = None

    bolt = ShellBolt(["true"], ["n"])
    bolt.collector, bolt._process, bolt._death, bolt._where = Collector(), Process(), None, ("score", 2)
    bolt._ids = random.Random(7)
    bolt.execute(Tuple(["ok", value, 3], Source("odd", "values", 5, Fields(["id", "reading", "n"]))))
    assert len(bolt.collector.errors) == 1 and bolt.collector.failed == [(value, bolt.collector.failed[0][1])]
    assert bolt.collector.errors[0].startswith(
        "ShellBolt [score] task 2: a tuple from [odd] stream [values] field [reading] cannot be written as JSON (")
    assert what in bolt.collector.errors[0]
    assert "field [reading]" in bolt.collector.failed[0][1]


def test_a_multi_megabyte_log_command_makes_no_multi_megabyte_log_line(caplog):
    """A subprocess that logged a tuple of several MB (``self.log(f"got {tup}")``) made a log line
    as large, each time (stderr lines were cut already). Now a ``log`` command's message is cut
    at 10,000 characters, saying how long it was; a short one is logged whole."""
    from squall.multilang.messages import ShellMsg

    class Process:
        where, pid = "ShellBolt [split] task 3", 4127

    caplog.set_level("INFO", logger="squall.multilang")
    bolt = ShellBolt(["true"], ["n"])
    bolt._closing = False
    for text in ["got [1]", "got [" + "x" * 3_000_000 + "]"]:
        assert bolt._common(Process(), ShellMsg("log", msg=text), None, None)
    first, second = (r.getMessage() for r in caplog.records if r.name == "squall.multilang.shell_log")
    assert first == "ShellLog ShellBolt [split] task 3 pid 4127: got [1]"
    assert second.startswith("ShellLog ShellBolt [split] task 3 pid 4127: got [xxx")
    assert second.endswith("xxx... (3000006 characters)") and len(second) < 10_100
