"""The `squall` command line where Storm's `storm` command differs from what squall did:
`-c` values, `-c` after FILE, several kills, `local` ARGS and exit status, Storm's verbs squall
lacks, and errors that were silent (a rebalance's topology keys, an unknown monitor stream)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from squall.cli._options import parse_overrides
from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli import NUMBERS_TOPOLOGY
from tests.test_cli_cluster import Nimbus, squall

BUILD_STYLE = NUMBERS_TOPOLOGY + '''
conf = {"topology.workers": 1, "topology.max.spout.pending": 100}
'''

STORM_STYLE = '''
import json, sys
from squall import Config, Fields, Spout, StormSubmitter, TopologyBuilder

class Idle(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))
    def next_tuple(self):
        pass

if __name__ == "__main__":
    open(sys.argv[2], "w").write(json.dumps(sys.argv))
    b = TopologyBuilder()
    b.set_spout("idle", Idle())
    conf = Config()
    conf.set_num_workers(2)
    StormSubmitter.submit_topology(sys.argv[1], conf, b.create_topology())
'''

CRASHING = NUMBERS_TOPOLOGY + '''

class Boom(Bolt):
    def prepare(self, conf, context, collector):
        raise RuntimeError("cannot connect to db")


def build():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("boom", Boom()).shuffle_grouping("numbers")
    return b.create_topology()
'''


def write(directory: Path, name: str, source: str) -> str:
    path = directory / name
    path.write_text(textwrap.dedent(source))
    return str(path)


@pytest.fixture(scope="module")
def nimbus(tmp_path_factory):
    n = Nimbus(tmp_path_factory.mktemp("nimbus"))
    try:
        yield n
        n.stop()
    finally:
        n.clean_up()


def _kill(nimbus: Nimbus, name: str) -> None:
    """Clean up: kill ``name`` if it runs, through the master in this process (a `squall kill`
    process each, as before, cost a Python start and squall's imports; the verb is tested as a
    process where a test is about it)."""
    from squall import SquallError
    with MasterClient(nimbus.conf) as master:
        try:
            master.kill_topology(name, 0)
        except SquallError:  # not alive (killed by the test, or never submitted)
            pass


# --- 1. -c values: Storm reads JSON, else keeps the text ------------------------------------------------
@pytest.mark.parametrize("text, storm_value", [
    ("0123", "0123"),          # PyYAML: octal 83
    ("12:30", "12:30"),        # PyYAML: sexagesimal 750
    ("on", "on"),              # PyYAML: True
    ("#ops", "#ops"),          # PyYAML: a comment, None
    ("abc # c", "abc # c"),    # PyYAML: 'abc'
    ("2024-01-01", "2024-01-01"),  # PyYAML: datetime.date (unserializable for jar)
])
def test_c_values_are_read_as_storm_reads_them(text, storm_value):
    """Storm's Utils.readCommandLineOpts parses a -c value as JSON, else keeps the string.
    Fixed: each value above is the string the user typed, as in Storm."""
    topology, _ = parse_overrides([f"my.key={text}"])
    assert topology["my.key"] == storm_value


def test_jar_with_a_date_valued_c_is_not_an_unexpected_typeerror(nimbus, tmp_path):
    """`squall jar -c my.day=2024-01-01 FILE` dies with `unexpected TypeError: can not serialize
    'datetime.date' object` (no option named). Fixed: submitted (Storm: the string)."""
    path = write(tmp_path, "dated.py", BUILD_STYLE)
    proc = nimbus.run("jar", "-c", "my.day=2024-01-01", path)
    try:
        assert "unexpected TypeError" not in proc.stderr, proc.stderr
        assert proc.returncode == 0, proc.stderr
    finally:
        _kill(nimbus, "dated")


# --- 2. -c after FILE: Storm takes it, squall hands it to FILE silently -------------------------------
def test_jar_c_after_file_is_applied_as_storm_does(nimbus, tmp_path):
    """`storm jar T.jar Main NAME -c topology.workers=1`: storm.py's argparse takes -c wherever it
    stands and Main gets [NAME]. squall passes `-c topology.workers=1` to FILE's sys.argv and
    submits with 2 workers, silently. Fixed: FILE's argv is [FILE, NAME, ARGV_FILE] and the
    topology wants 1 worker (or the command fails naming -c)."""
    argv_file = tmp_path / "argv.json"
    path = write(tmp_path, "stormy.py", STORM_STYLE)
    proc = nimbus.run("jar", path, "stormy", str(argv_file), "-c", "topology.workers=1")
    try:
        if proc.returncode != 0:
            assert "-c" in proc.stderr
            return
        argv = json.loads(argv_file.read_text())
        with MasterClient(nimbus.conf) as master:
            row = next(t for t in master.list_topologies() if t["name"] == "stormy")
        assert argv == [path, "stormy", str(argv_file)]
        assert row["workers_wanted"] == 1
    finally:
        _kill(nimbus, "stormy")


# --- 3. rebalance -c: Storm applies topology keys; squall says it does not -------------------------------
def test_rebalance_refuses_topology_keys_rather_than_dropping_them():
    """Storm's Rebalance puts -c keys into topology_conf_overrides; squall dropped them without
    a word (the rebalance said it was done, the key unchanged)."""
    proc = squall("rebalance", "any", "-w", "0", "-c", "topology.max.spout.pending=7")
    assert proc.returncode == 2
    assert "-c topology.max.spout.pending: squall's rebalance changes the workers and executors only" in proc.stderr


# --- 4. monitor -s STREAM that does not exist ---------------------------------------------------------------
def test_monitor_unknown_stream_is_an_error(nimbus, tmp_path):
    """Storm's Monitor throws `stream: X not found`. squall prints rows of 0 and exits 0.
    Fixed: non-zero exit with an error naming the stream (and the component's streams)."""
    path = write(tmp_path, "mon.py", BUILD_STYLE)
    nimbus.ok("jar", path)
    try:
        # asked in this process: a `squall info` a poll (a Python process each, back to back) took
        # the CPU the topology's worker needed to start
        with MasterClient(nimbus.conf) as master:
            assert wait_until(lambda: master.get_topology_info("mon")["components"]["numbers"]["emitted"] > 0, 30)
        proc = nimbus.run("monitor", "mon", "-s", "defualt", "-i", "1", "--count", "1")
        assert proc.returncode != 0 and "defualt" in proc.stderr, (proc.stdout, proc.stderr)
    finally:
        _kill(nimbus, "mon")


# --- 5. set_log_level reports expired settings as current ---------------------------------------------------
def test_set_log_level_does_not_report_an_expired_level_as_current():
    """The workers restore a logger once its timeout passed; the levels printed listed it as
    current for ever (`app.db=DEBUG for 1 s`)."""
    from squall._nimbus import LogConfig, LogLevel
    from squall.cli._log_level import describe
    config = LogConfig({"app.db": LogLevel("UPDATE", "DEBUG", 1, 1000.0), "other": LogLevel("UPDATE", "INFO"),
                        "app.web": LogLevel("UPDATE", "WARN", 60, 1050.0)})
    assert describe(config, now=1010.0) == "app.web=WARN for 40 s, other=INFO"


# --- 6. jar of a FILE named like a stdlib module -------------------------------------------------------------
def test_jar_of_a_file_named_like_a_stdlib_module(nimbus, tmp_path):
    """`squall jar calendar.py` (a stdlib name not yet imported by the CLI): FILE is imported as
    `calendar`, shipping treats that name as stdlib and pickles its classes by reference, and the
    master fails: `Can't get attribute 'Numbers' on <module 'calendar' ...>`. (`squall local`
    runs it.) Fixed: submitted and running."""
    path = write(tmp_path, "calendar.py", BUILD_STYLE)
    proc = nimbus.run("jar", path)
    try:
        assert proc.returncode == 0, proc.stderr
    finally:
        _kill(nimbus, "calendar")


# --- 7. kill of several topologies, as Storm's KillTopology takes ------------------------------------------------
def test_kill_takes_several_names_as_storm_does(nimbus, tmp_path):
    """Storm's KillTopology takes a list of names (`storm kill a b`, `-i` to go on after an
    error). squall: `unrecognized arguments: b`, nothing killed. Fixed: both killed."""
    for name in ("ka", "kb"):
        nimbus.ok("jar", "--name", name, write(tmp_path, f"{name}.py", BUILD_STYLE))
    proc = nimbus.run("kill", "ka", "kb", "-w", "0")
    _kill(nimbus, "ka")
    _kill(nimbus, "kb")
    assert proc.returncode == 0, proc.stderr


# --- 8. squall local: a worker crash-looping until --ttl exits 0 ---------------------------------------------------
def test_local_exits_non_zero_when_a_worker_crashed(tmp_path):
    """Storm's `storm local`: an executor error kills the worker, and the local cluster's JVM
    exits 1 (Utils.exitProcess(1, "Worker died")). squall local restarts the worker until --ttl and
    exits 0, so a CI smoke run (`squall local topo.py --ttl 30 && deploy`) passes on a topology
    that never processed a tuple. Fixed: non-zero status when a worker crashed (errors with
    fatal=True), the summary still printed."""
    path = write(tmp_path, "crash.py", CRASHING)
    proc = squall("local", path, "--ttl", "2", timeout=60)  # its bolt fails in prepare, at once
    assert "(worker crashed)" in proc.stdout, proc.stdout
    assert proc.returncode != 0


# --- 9. Storm verbs squall lacks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("verb", ["localconfvalue", "remoteconfvalue", "upload-credentials", "blobstore",
                                  "logviewer", "kill_workers", "drpc-client"])
def test_a_storm_verb_squall_lacks_says_so(verb):
    """`squall localconfvalue x` prints argparse's `invalid choice: 'localconfvalue' (choose from
    ...)`, as for a typo. Fixed: `squall: error: squall has no 'localconfvalue' (a Storm verb that
    squall does not implement ...)`, status 2."""
    proc = squall(verb, "x")
    assert proc.returncode == 2
    assert "invalid choice" not in proc.stderr, proc.stderr


# --- 10. squall local FILE ARGS, as storm local passes main's args -------------------------------------------------
def test_local_passes_args_to_file_as_storm_local_does(tmp_path):
    """`storm local T.jar Main NAME` runs Main with [NAME] (storm.py's main_args). `squall local
    FILE NAME` is `unrecognized arguments: NAME`, and without it a Storm-style FILE (the same one
    `squall jar FILE NAME` submits) dies on sys.argv[1]. Fixed: FILE's sys.argv is [FILE, ARGS...]
    and the topology runs."""
    argv_file = tmp_path / "argv.json"
    path = write(tmp_path, "stormy.py", STORM_STYLE)
    proc = squall("local", path, "stormy", str(argv_file), "--ttl", "1", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(argv_file.read_text()) == [path, "stormy", str(argv_file)]


ARGPARSE_MAIN = '''
import argparse
from squall import Config, Fields, Spout, StormSubmitter, TopologyBuilder

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("name")
    a = p.parse_args()
'''


def test_jar_file_help_is_not_reported_as_no_topology(tmp_path):
    """`squall jar FILE --help`: FILE's argparse prints its usage and exits 0 (as `storm jar T.jar
    Main --help` does, status 0), then squall adds `FILE defines no topology ...` and exits 1.
    Fixed: status 0, no error (a __main__ that exits 0 on purpose submitted nothing on purpose)."""
    path = write(tmp_path, "helpful.py", ARGPARSE_MAIN)
    proc = squall("jar", path, "--help")
    assert "usage: helpful.py" in proc.stdout
    assert proc.returncode == 0, proc.stderr
