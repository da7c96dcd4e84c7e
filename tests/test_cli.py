"""The ``squall`` command (`squall.cli`): errors in-process, one real run in a subprocess."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import squall
from squall.cli import main
from squall.cli._options import parse_overrides
from squall._errors import RpcError

NUMBERS_TOPOLOGY = '''
from squall import Bolt, Fields, Spout, TopologyBuilder


class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n = 0

    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n], self.n)


class Sink(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def build():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("sink", Sink(), 2).shuffle_grouping("numbers")
    return builder.create_topology()

'''
"""A file whose `build()` gives a reliable numbers spout and an acking sink."""

TINY_TOPOLOGY = NUMBERS_TOPOLOGY + '''
conf = {"topology.max.spout.pending": 500}
'''


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "expected an error message on stderr"
    return err[-1]


def test_a_missing_file_is_a_one_line_error(capsys):
    assert main(["local", "no/such/topology.py"]) == 1
    assert error_line(capsys) == "squall: error: file not found: no/such/topology.py"


def test_a_file_without_a_topology_names_the_three_ways_to_define_one(tmp_path, capsys):
    path = write(tmp_path, "nothing.py", "x = 1\n")
    assert main(["local", path, "--ttl", "1"]) == 1
    line = error_line(capsys)
    assert line.startswith("squall: error: nothing.py defines no topology")
    assert "build()" in line and "StormSubmitter.submit_topology" in line


def test_a_file_whose_main_runs_its_own_local_cluster_is_told_so(tmp_path, capsys):
    """storm-starter's main runs a LocalCluster of its own unless given a name: under squall
    local it ran, and then the error said the file defined no topology."""
    path = write(tmp_path, "starter.py", (
        "import sys\n"
        "from squall import LocalCluster, StormSubmitter, TopologyBuilder\n"
        "from squall.testing import TestWordSpout\n"
        "def make():\n"
        "    b = TopologyBuilder()\n"
        "    b.set_spout('w', TestWordSpout())\n"
        "    return b.create_topology()\n"
        "if __name__ == '__main__':\n"
        "    if len(sys.argv) > 1:\n"
        "        StormSubmitter.submit_topology(sys.argv[1], {}, make())\n"
        "    else:\n"
        "        with LocalCluster() as cluster:\n"
        "            cluster.submit_topology('own', {}, make())\n"))
    assert main(["local", path, "--ttl", "1"]) == 1
    assert error_line(capsys) == (
        "squall: error: starter.py submitted nothing to squall: its __main__ code ran a LocalCluster of its own "
        "(as `python starter.py` would) instead of calling StormSubmitter.submit_topology. Give it a build() "
        "function returning its StormTopology, which squall local and squall jar run (see docs/cli.md)")


def test_an_import_error_inside_the_file_shows_the_exception_without_a_traceback(tmp_path, capsys):
    path = write(tmp_path, "broken.py", "import squall_no_such_module\n")
    assert main(["local", path]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == ("squall: error: error importing broken.py: ModuleNotFoundError: "
                           "No module named 'squall_no_such_module'")


def test_debug_adds_the_traceback(tmp_path, capsys):
    path = write(tmp_path, "broken2.py", "raise ValueError('bad constant')\n")
    assert main(["local", path, "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "bad constant" in err
    assert err.strip().splitlines()[-1] == "squall: error: error importing broken2.py: ValueError: bad constant"


@pytest.mark.parametrize(("source", "message"), [
    ("def build():\n    return 42\n",
     "wrongtype.py: build() returned an int, expected a StormTopology (from TopologyBuilder.create_topology())"),
    ("from squall import TopologyBuilder\ntopology = TopologyBuilder()\n",
     "wrongtype.py: topology is a TopologyBuilder, expected a StormTopology (call .create_topology() on the builder)"),
    ("def build():\n    raise RuntimeError('no spouts today')\n",
     "wrongtype.py: build() raised RuntimeError: no spouts today"),
])
def test_a_wrong_topology_definition_is_named(tmp_path, capsys, source, message):
    path = write(tmp_path, "wrongtype.py", source)
    assert main(["local", path]) == 1
    assert error_line(capsys) == f"squall: error: {message}"


TRIDENT_FILE = """
from squall import Fields
from squall.trident import Count, FixedBatchSpout, MemoryMapState, TridentTopology

conf = {"topology.workers": 2}


def build():
    topology = TridentTopology()
    topology.new_stream("words", FixedBatchSpout(Fields("word"), 2, ["a"], ["b"])) \\
        .group_by(Fields("word")) \\
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    return topology
"""


@pytest.mark.parametrize("source", [TRIDENT_FILE, TRIDENT_FILE + "\ntopology = build()\ndel build\n"],
                         ids=["build", "topology"])
def test_the_file_squall_trident_runs_is_built_for_squalls_engine(tmp_path, source):
    """The FILE of `squall trident` (build() or topology, a TridentTopology; docs/trident.md:
    "as for squall local") was refused by squall local and squall jar: "build() returned a
    TridentTopology, expected a StormTopology (from TopologyBuilder.create_topology())". It is
    the Trident topology's StormTopology there, as Storm's ``topology.build()``."""
    from squall._topology import StormTopology
    from squall.cli._topology_file import import_file, topology_in

    path = Path(write(tmp_path, "trident_file.py", source))
    topology, conf = topology_in(import_file(path), path)
    assert isinstance(topology, StormTopology) and conf == {"topology.workers": 2}
    assert "spout-words" in topology.bolts  # the Trident spout's bolt, under its coordinator


@pytest.mark.parametrize("item", ["topology.workers", "=2", "topology workers=2"])
def test_bad_c_syntax_is_a_usage_error(tmp_path, capsys, item):
    path = write(tmp_path, "tiny.py", TINY_TOPOLOGY)
    assert main(["local", path, "-c", item]) == 2
    assert error_line(capsys) == f"squall: error: -c {item!r}: expected KEY=VALUE, e.g. -c topology.workers=2"


def test_a_bad_config_value_is_named(tmp_path, capsys):
    path = write(tmp_path, "tiny.py", TINY_TOPOLOGY)
    assert main(["local", path, "-c", "topology.workers=many"]) == 1
    assert error_line(capsys) == ("squall: error: topology configuration: 'topology.workers' must be a "
                                  "positive integer, got 'many'")


def test_c_values_are_json_else_text_and_daemon_keys_go_to_the_cluster():
    """Storm's readCommandLineOpts: JSON, else the text (YAML read 0123 as 83 and on as true)."""
    topology, daemon = parse_overrides(["topology.workers=2", "topology.debug=true", "my.key=[1, 2]",
                                        "my.text=hello world", "ui.port=9090", "topology.max.spout.pending=null",
                                        "my.empty=", "my.octal=0123", "my.switch=on", "my.day=2024-01-01"])
    assert topology == {"topology.workers": 2, "topology.debug": True, "my.key": [1, 2],
                        "my.text": "hello world", "topology.max.spout.pending": None, "my.empty": "",
                        "my.octal": "0123", "my.switch": "on", "my.day": "2024-01-01"}
    assert daemon == {"ui.port": 9090}


def test_a_credential_given_with_c_is_used_and_warned_about_without_showing_it(capsys):
    """The docs showed `squall local -c squall.secret=...`, which every local user reads in ps."""
    topology, daemon = parse_overrides(["squall.secret=0123456789abcdef-hunter2", "topology.workers=2",
                                        "app.url=redis://:pw-8c1d@db:6379/0", "drpc.http.secret.required=false"])
    assert daemon == {"squall.secret": "0123456789abcdef-hunter2", "drpc.http.secret.required": False}
    assert topology == {"topology.workers": 2, "app.url": "redis://:pw-8c1d@db:6379/0"}
    err = capsys.readouterr().err
    assert [line.split(":")[1:3] for line in err.splitlines()] == [
        [" warning", " -c squall.secret"], [" warning", " -c app.url"]]
    assert "readable by you only (chmod 600) and give --config FILE" in err
    assert "hunter2" not in err and "pw-8c1d" not in err


def test_version(capsys):
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith(f"squall {squall.__version__} ")


def test_storm_style_file_submits_through_storm_submitter_with_overrides(tmp_path, capsys):
    """Case c: the file's __main__ block submits; -c reaches the topology conf, --name renames it."""
    out = tmp_path / "seen.json"
    path = write(tmp_path, "storm_style.py", f'''
        import json
        from squall import Config, Fields, Spout, StormSubmitter, TopologyBuilder

        class Once(Spout):
            def declare_output_fields(self, declarer):
                declarer.declare(Fields("x"))

            def open(self, conf, context, collector):
                super().open(conf, context, collector)
                with open({str(out)!r}, "w") as f:
                    json.dump([conf["topology.workers"], conf["my.key"], conf["topology.name"]], f)

        if __name__ == "__main__":
            builder = TopologyBuilder()
            builder.set_spout("once", Once())
            conf = Config()
            conf.set_num_workers(1)
            StormSubmitter.submit_topology("from-file", conf, builder.create_topology())
    ''')
    assert main(["local", path, "--ttl", "1", "--name", "renamed", "-c", "topology.workers=2",
                 "-c", "my.key=[1, 2]"]) == 0
    assert json.loads(out.read_text()) == [2, [1, 2], "renamed"]
    stdout = capsys.readouterr().out
    assert "renamed ACTIVE" in stdout and "Summary of topology renamed" in stdout


def test_squall_local_runs_a_topology_file_and_prints_a_summary(tmp_path):
    path = write(tmp_path, "tiny_topology.py", TINY_TOPOLOGY)
    proc = subprocess.run([sys.executable, "-m", "squall", "local", path, "--ttl", "3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    live = [ln for ln in lines if ln.startswith("[") and "tiny_topology ACTIVE" in ln]
    assert len(live) >= 2  # one line a second while it runs
    assert "numbers (spout)" in live[-1] and "sink (bolt)" in live[-1]
    assert "Summary of topology tiny_topology: ran 3" in proc.stdout
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.startswith("  ")}
    assert rows["numbers"][1] == "spout" and int(rows["numbers"][4]) > 0  # emitted
    assert rows["sink"][1:4] == ["bolt", "2", "2"]  # type, executors, tasks
    assert "errors: none" in proc.stdout


@pytest.mark.timeout(60)  # it used to look for a module name forever
@pytest.mark.parametrize("name", ["word-count.py", "2nd topology.py"])
def test_a_file_whose_name_is_no_python_identifier_runs_under_an_identifier_of_its_own(tmp_path, capsys, name):
    """FILE is imported as a module named after it (its classes pickle by reference to that name):
    a name Python cannot import (a dash, a space, a digit first) is made one, not searched for
    without end among names that were never identifiers either."""
    from squall.cli._topology_file import import_file

    path = Path(write(tmp_path, name, TINY_TOPOLOGY))
    module = import_file(path)
    try:
        assert module.__name__.isidentifier() and sys.modules[module.__name__] is module
        assert module.__name__ == {"word-count.py": "word_count", "2nd topology.py": "_2nd_topology"}[name]
    finally:
        del sys.modules[module.__name__]
    assert main(["local", str(path), "--ttl", "1"]) == 0, capsys.readouterr().err


def test_a_storm_style_file_runs_once(tmp_path, capsys):
    """A file without build() or topology is not imported first and then run as __main__: its
    module-level code runs once."""
    runs = tmp_path / "runs.txt"
    path = write(tmp_path, "counted.py", f'''
        with open({str(runs)!r}, "a") as f:
            f.write("ran\\n")

        from squall import StormSubmitter, TopologyBuilder
        from squall.testing import FeederSpout
        from squall import Fields

        if __name__ == "__main__":
            builder = TopologyBuilder()
            builder.set_spout("feed", FeederSpout(Fields("x")))
            topology = builder.create_topology()  # bound in the __main__ block: still case c
            StormSubmitter.submit_topology("counted", {{}}, topology)
    ''')
    assert main(["local", path, "--ttl", "1"]) == 0, capsys.readouterr().err
    assert runs.read_text() == "ran\n"


@pytest.mark.parametrize(("source", "binds"), [
    ("def build():\n    pass\n", True),
    ("topology = make()\n", True),
    ("x, topology = 1, make()\n", True),
    ("from lib import build\n", True),
    ("from lib import make as build\n", True),
    ("from lib import *\n", True),
    ("try:\n    from lib import build\nexcept ImportError:\n    build = None\n", True),
    ("if True:\n    topology = make()\n", True),
    ("def (:\n", True),  # a syntax error: importing reports it
    ("x = 1\n", False),
    ("if __name__ == '__main__':\n    topology = make()\n    submit(topology)\n", False),
    ("if '__main__' == __name__:\n    def build():\n        pass\n", False),
    ("def main():\n    topology = make()\n", False),
    ("import topology_tools\n", False),
])
def test_which_files_bind_build_or_topology_is_read_from_the_source(source, binds):
    from squall.cli._topology_file import binds_topology
    assert binds_topology(source) is binds


def test_an_error_in_the_main_block_of_a_storm_style_file_is_named_as_such(tmp_path, capsys):
    path = write(tmp_path, "fails_in_main.py", "x = 1\nif __name__ == '__main__':\n    raise ValueError('late')\n")
    assert main(["local", path]) == 1
    assert error_line(capsys) == "squall: error: fails_in_main.py: its __main__ code raised ValueError: late"


def test_squall_alone_prints_the_usage_and_the_version(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: squall")
    assert "local" in out and "jar" in out and "monitor" in out
    assert out.rstrip().splitlines()[-1].startswith(f"squall {squall.__version__} (Python ")


def test_dash_dash_version_prints_the_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"squall {squall.__version__} (Python ")


def test_the_live_table_shows_the_component_of_the_last_error():
    """rich reads "[split]" as markup: escaped, the caption keeps the component's name (and the
    title and rows keep brackets in names)."""
    import io
    import time

    from rich.console import Console

    from squall.cli._local import _LiveView

    counts = {"executors": 2, "tasks": 2, "emitted": 10, "acked": 9, "failed": 1, "executed": 10,
              "complete_latency_ms": 0.0}
    info = {"name": "wc[1]", "status": "ACTIVE", "uptime_secs": 3.0,
            "components": {"split": {"type": "bolt", **counts}, "[b]old": {"type": "bolt", **counts}},
            "errors": [{"component": "split", "task": 3, "error": "ValueError: bad [input]",
                        "time": time.time()}]}
    out = io.StringIO()
    with _LiveView(Console(file=out, width=200, color_system=None)) as view:
        view.show([(info, {})])
    text = out.getvalue()
    assert "last error: [split] task 3: ValueError: bad [input]" in text
    assert "wc[1]  ACTIVE" in text
    assert "[b]old" in text


def test_the_live_latency_is_of_the_last_second_or_a_dash_when_nothing_was_acked_in_it(capsys):
    """A spout's latency column is the mean complete latency of the tuples acked since the last
    reading; with none acked (a finished source, a restarted worker) it is "-", never the mean of
    the whole run shown as if it were current."""
    from squall.cli._local import _PlainView, _Sampler

    class Cluster:
        def __init__(self):
            self.acked, self.latency = 0, 0.0

        def get_topology_info(self, name):
            task = {"emitted": {"default": self.acked, "__ack_init": self.acked}, "acked": self.acked,
                    "complete_latency_sum": self.acked * self.latency / 1000.0, "complete_latency_count": self.acked}
            return {"name": name, "status": "ACTIVE", "uptime_secs": 1.0, "errors": [],
                    "components": {"s": {"type": "spout", "executors": 1, "tasks": 1, "emitted": self.acked,
                                         "acked": self.acked, "failed": 0, "executed": 0,
                                         "complete_latency_ms": self.latency, "task_stats": {"7": task}}}}

        def get_topology_page(self, name):
            return {"spouts": [{"spoutId": "s", "emitted": self.acked, "acked": self.acked, "failed": 0,
                                "completeLatency": self.latency}], "bolts": []}

    cluster, sampler, view = Cluster(), _Sampler(0.0), _PlainView()
    readings = []
    for acked, mean in ((100, 2.0), (300, 4.0), (300, 4.0)):  # 200 more at 5 ms, then none
        cluster.acked, cluster.latency = acked, mean
        view.show(sampler.sample(cluster, ["t"], {}))
        readings.append(capsys.readouterr().out)
    assert "latency=2.00ms" in readings[0] and "latency=5.00ms" in readings[1] and "latency=-" in readings[2]


def test_the_live_view_counts_a_task_moved_to_a_slot_of_the_same_launch_number_from_zero():
    """``squall local``'s live figures across a rebalance that moved a spout task to another slot
    whose launch has the same number (each slot numbers its own): its 150 tuples there are all
    new. Compared by launch id alone, the view read 50 (150 less the old slot's 100)."""
    from squall.cli._local import _task_readings

    def component(slot, emitted):
        return {"task_stats": {"7": {"slot": slot, "launch_id": 2, "emitted": {"default": emitted},
                                     "complete_latency_sum": 0.0, "complete_latency_count": 0}}}

    before = _task_readings(component("127.0.0.1:6700", 100))
    moved = _task_readings(component("127.0.0.1:6701", 150))
    assert moved["7"].since(before["7"]).emitted == 150
    stayed = _task_readings(component("127.0.0.1:6700", 150))
    assert stayed["7"].since(before["7"]).emitted == 50


@pytest.mark.parametrize(("acked", "latency_ms", "shown"), [
    (0, 0.0, "mean complete latency - (no acked tuple sampled)"),  # a spout that sends no message ids
    (2, 0.0, "mean complete latency - (no acked tuple sampled)"),  # acked, but none sampled
    (4, 3.5, "mean complete latency 3.50 ms"),
])
def test_the_summary_shows_no_latency_figure_when_none_was_measured(capsys, acked, latency_ms, shown):
    """The summary's latency, like the live lines', is "-" when nothing was measured: 0.00 ms would
    read as a measured latency."""
    from squall.cli._local import _print_summary

    spout = {"type": "spout", "executors": 1, "tasks": 1, "emitted": 4, "acked": acked, "failed": 0,
             "executed": 0, "complete_latency_ms": latency_ms}
    _print_summary({"t": {"uptime_secs": 2.0, "errors": [], "components": {"s": spout}}}, "stopped", False)
    assert shown in capsys.readouterr().out


def test_the_summary_shows_the_errors_that_happened_last_even_when_they_first_happened_early(capsys):
    """A worker crashed on "boom" at 1 s, twelve other components reported an error each, and it
    crashed on "boom" again at 20 s, which `add_error` folds into the first record (x2, last at
    20 s). The summary sorted by first time, so "the latest 10" left the crash out, while it said
    "a worker crashed (the errors above)"; it sorts by when each error last happened."""
    from squall.cli._local import _print_summary
    from squall.engine.executor import ErrorRecord, add_error

    errors: list[ErrorRecord] = []
    add_error(errors, ErrorRecord("b", 3, 1.0, "ValueError: boom", "", fatal=True))
    for i in range(12):
        add_error(errors, ErrorRecord(f"c{i:02d}", 10 + i, 2.0 + i, f"IOError: disk {i}", ""))
    add_error(errors, ErrorRecord("b", 3, 20.0, "ValueError: boom", "", fatal=True))
    spout = {"type": "spout", "executors": 1, "tasks": 1, "emitted": 0, "acked": 0, "failed": 0,
             "executed": 0, "complete_latency_ms": 0.0}
    _print_summary({"t": {"uptime_secs": 21.0, "errors": [e.as_dict() for e in errors], "components": {"s": spout}}},
                   "stopped", False)
    out = capsys.readouterr().out
    assert "errors: 13 (the latest 10 below)" in out
    shown = [line.strip() for line in out.splitlines() if line.startswith("    [")]
    assert len(shown) == 10
    assert shown[-1] == "[b] task 3: ValueError: boom (x2) (worker crashed)"
    assert shown[:-1] == [f"[c{i:02d}] task {10 + i}: IOError: disk {i}" for i in range(3, 12)]


def test_the_list_names_what_a_shell_subprocess_said_before_it_exited():
    """A streamparse bolt over multilang raised in ``initialize`` (its database was down): the
    error's first line says only that the subprocess exited, the last line of its stderr what
    went wrong. ``squall list``'s last error (`ErrorRecord.describe`) showed the first line alone:
    "... it exited; exit code 1", with nothing of the database; then the two joined by " ... ",
    read as one sentence. The first line is the summary now, and what went wrong is indented
    under it, named as the subprocess's stderr, as `squall local` and `squall monitor` say it."""
    from squall.cli._cluster import _errors_note
    from squall.engine.executor import ErrorRecord

    error = ("MultilangError: ShellBolt [count_bolt] task 3: subprocess ['python3', '-m', 'streamparse.run', '-s', "
             "'json', 'bolts.wordcount.WordCountBolt'] (pid 27047): it exited; exit code 1\n"
             "its stderr ended with:\n  Traceback (most recent call last):\n"
             '    File "src/bolts/wordcount.py", line 12, in initialize\n'
             "      raise RuntimeError('cannot reach the counts database at db:5432')\n"
             "  RuntimeError: cannot reach the counts database at db:5432")
    record = ErrorRecord("count_bolt", 3, 1.0, error, "", fatal=True, count=4)
    note = _errors_note({"name": "wordcount", "errors": 1, "last_error": record.describe()})
    assert note.splitlines() == [
        ("wordcount: 1 error; last: [count_bolt] MultilangError: ShellBolt [count_bolt] task 3: subprocess ['python3', "
         "'-m', 'streamparse.run', '-s', 'json', 'bolts.wordcount.WordCountBolt'] (pid 27047): it exited; exit code 1 "
         "(x4) (squall info wordcount)"),
        "    its stderr ended with: RuntimeError: cannot reach the counts database at db:5432"]
    assert " ... " not in note
    # a one-line error, and pystorm's report with its traceback, read as before and as `squall local` shows them
    assert ErrorRecord("b", 1, 1.0, "ValueError: boom", "").describe() == "[b] ValueError: boom"
    report = ("Python ValueError raised while processing Tuple Tuple(id='1', values=['x'])\nTraceback (most recent "
              "call last):\n  File \"bolt.py\", line 3, in process\n    int(x)\nValueError: invalid literal\n")
    assert ErrorRecord("b", 1, 1.0, report, "").describe() == (
        "[b] Python ValueError raised while processing Tuple Tuple(id='1', values=['x'])\nValueError: invalid literal")
    assert _errors_note({"name": "b", "errors": 2, "last_error": ErrorRecord("b", 1, 1.0, "ValueError: boom", "",
                                                                            count=2).describe()}) \
        == "b: 2 errors; last: [b] ValueError: boom (x2) (squall info b)"


def test_monitor_shows_what_a_shell_subprocess_said_under_its_error(capsys):
    """`squall monitor`'s line of a new error showed its first line only: a shell subprocess's
    "... it exited; exit code 1", nothing of why. What went wrong is indented under it now, as
    `squall list` shows it."""
    from squall.cli._cluster import _print_errors

    error = ("MultilangError: ShellBolt [split] task 3: subprocess ['python3', 'split.py'] (pid 4127): it exited; "
             "exit code 1\nits stderr ended with:\n  Traceback (most recent call last):\n"
             '    File "split.py", line 5, in <module>\n  RuntimeError: cannot reach db:5432')
    err = {"component": "split", "task": 3, "error": error, "time": 10.0, "last_time": 10.0, "count": 1}
    _print_errors({"name": "wc", "errors": [err]}, since=None)
    assert capsys.readouterr().err.splitlines() == [
        ("squall: wc: error in [split]: MultilangError: ShellBolt [split] task 3: subprocess ['python3', 'split.py'] "
         "(pid 4127): it exited; exit code 1"),
        "    its stderr ended with: RuntimeError: cannot reach db:5432"]


def test_a_run_counts_each_crash_of_a_worker_and_not_a_report_of_the_same_error():
    """A worker crashed on "boom" three times (one record, x3) and its bolt also reported "boom"
    through its collector twice, living on. The run said "a worker crashed 1 time(s)" (a record
    counted once), and a report and a crash of one text folded into one fatal record x5; now the
    crashes are one record x3 and the reports another x2, and the run counts 3."""
    from squall.cli._local import crashes
    from squall.engine.executor import ErrorRecord, add_error

    errors: list[ErrorRecord] = []
    for t in range(3):
        add_error(errors, ErrorRecord("b", 3, 1.0 + t, "ValueError: boom", "", fatal=True))
        if t < 2:
            add_error(errors, ErrorRecord("b", 3, 1.5 + t, "ValueError: boom", ""))
    assert [(e.fatal, e.count) for e in errors] == [(False, 2), (True, 3)]
    assert crashes({"t": {"errors": [e.as_dict() for e in errors]}}) == 3


def test_jar_says_submitted_when_the_master_cannot_be_reached_after_the_submit(monkeypatch, capsys):
    """The note about free slots needs a second connection; losing it must not turn a submit
    that succeeded into "cannot reach the master"."""
    from squall import StormSubmitter
    from squall.cli import _cluster
    from squall._errors import RpcError

    submitted = []
    monkeypatch.setattr(StormSubmitter, "submit_topology", lambda name, conf, topology: submitted.append(name))

    def unreachable(conf):
        raise RpcError("cannot reach 127.0.0.1:6627: Connection refused")
    monkeypatch.setattr(_cluster, "MasterClient", unreachable)
    _cluster._ToMaster({}).submit_topology("t", {}, None)
    assert submitted == ["t"] and capsys.readouterr().out == "Submitted topology: t\n"


def test_a_misspelt_topology_key_is_warned_about_where_the_user_sees_it(monkeypatch, capsys, caplog):
    """Storm passes unknown keys through, so a typo in a topology's conf silently does nothing:
    `squall jar` prints a warning naming the key and the likely one, and a LocalCluster (so
    `squall local`) logs it; custom keys and known ones pass without a word."""
    import logging

    from squall import LocalCluster, StormSubmitter, TopologyBuilder
    from squall.cli import _cluster
    from squall.testing import FeederSpout

    conf = {"topology.max.spout.pendng": 10, "my.app.threshold": 3, "topology.workers": 1}
    monkeypatch.setattr(StormSubmitter, "submit_topology", lambda name, conf, topology: None)
    monkeypatch.setattr(_cluster, "MasterClient", lambda conf: (_ for _ in ()).throw(RpcError("down")))
    _cluster._ToMaster({}).submit_topology("t", conf, None)
    assert capsys.readouterr().err.splitlines() == [
        "squall: warning: t: topology configuration key 'topology.max.spout.pendng' is unknown and used by "
        "nothing; did you mean 'topology.max.spout.pending'?"]
    builder = TopologyBuilder()
    builder.set_spout("s", FeederSpout(["x"]))
    with caplog.at_level(logging.WARNING, "squall.master"), LocalCluster() as cluster:
        cluster.submit_topology("local", conf, builder.create_topology())
        cluster.kill_topology("local", wait_secs=0)
    assert [r.getMessage() for r in caplog.records if "unknown" in r.getMessage()] == [
        "local: topology configuration key 'topology.max.spout.pendng' is unknown and used by nothing; "
        "did you mean 'topology.max.spout.pending'?"]


def test_a_components_own_key_the_topology_overrides_is_warned_about(monkeypatch, capsys, caplog):
    """squall gives a key the topology's Config sets precedence over a component's own (API
    contract); Storm the other way. A bolt ported from Storm that asks for its own tick
    frequency while the topology sets another would tick at the topology's without a word: the
    submission warns, naming both values; a component that agrees, or a key only one sets, not."""
    import logging

    from squall import BasicBolt, Fields, LocalCluster, StormSubmitter, TopologyBuilder
    from squall.cli import _cluster
    from squall.testing import FeederSpout

    class Ticking(BasicBolt):
        def __init__(self, secs):
            self.secs = secs

        def get_component_configuration(self):
            return {"topology.tick.tuple.freq.secs": self.secs}

        def execute(self, tup, collector):
            pass

    builder = TopologyBuilder()
    builder.set_spout("s", FeederSpout(["x"]))
    builder.set_bolt("rolling", Ticking(1)).shuffle_grouping("s")
    builder.set_bolt("agrees", Ticking(5)).shuffle_grouping("s")
    builder.set_bolt("paced", Ticking(1)).shuffle_grouping("s").set_max_spout_pending(7)
    topology = builder.create_topology()
    conf = {"topology.tick.tuple.freq.secs": 5, "topology.workers": 1}
    warning = ("t: component [{}] sets 'topology.tick.tuple.freq.secs' to 1, but the topology's Config sets it "
               "to 5, which wins (squall's rule; Storm's gives the component's): leave it out of the Config for "
               "the component's to apply")
    monkeypatch.setattr(StormSubmitter, "submit_topology", lambda name, conf, topology: None)
    monkeypatch.setattr(_cluster, "MasterClient", lambda conf: (_ for _ in ()).throw(RpcError("down")))
    _cluster._ToMaster({}).submit_topology("t", conf, topology)
    assert capsys.readouterr().err.splitlines() == [f"squall: warning: {warning.format(c)}" for c in ("paced", "rolling")]
    with caplog.at_level(logging.WARNING, "squall.master"), LocalCluster() as cluster:
        cluster.submit_topology("t", conf, topology)
        cluster.kill_topology("t", wait_secs=0)
    assert [r.getMessage() for r in caplog.records if "wins" in r.getMessage()] == [
        warning.format(c) for c in ("paced", "rolling")]
    # a Trident topology's own components (coordinators, executors: their ticks and single
    # tasks are squall's choice) are not the user's to be warned of
    from squall.trident import MemoryMapState, TridentTopology
    from squall.trident.builtin import Count
    from squall.trident.spout import FixedBatchSpout

    trident = TridentTopology()
    trident.new_stream("s", FixedBatchSpout(Fields("w"), 2, ["a"])).group_by(Fields("w")) \
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("c"))
    _cluster._ToMaster({}).submit_topology("t", {**conf, "topology.max.task.parallelism": 4}, trident.build())
    assert "warning" not in capsys.readouterr().err


def test_monitor_prints_an_error_again_with_its_count_when_it_repeats(capsys):
    """One record per repeated error: monitor shows it once, then again only when it happens
    again, with how many times it has (a new error, as before, once)."""
    from squall.cli._cluster import _print_errors

    err = {"component": "split", "task": 3, "error": "ValueError: bad", "time": 10.0, "last_time": 10.0, "count": 1}
    info = {"name": "wc", "errors": [err]}
    seen = _print_errors(info, since=None)
    assert _print_errors(info, since=seen) == seen  # nothing new
    err.update(count=3, last_time=25.0)
    _print_errors(info, since=seen)
    assert capsys.readouterr().err.splitlines() == ["squall: wc: error in [split]: ValueError: bad",
                                                    "squall: wc: error in [split]: ValueError: bad (x3)"]


class _TwoTaskMaster:
    """A component "b" with two tasks, each emitting 100 more on "default" (and some on the system
    and batch-count streams, not counted) between polls; before poll 3 task 2's worker restarted."""

    def __init__(self):
        self.polls = 0
        self.counts = {"1": 10_000, "2": 10_000}  # hours of counts already

    def get_topology_info(self, name):
        self.polls += 1
        if self.polls > 1:
            self.counts = {t: n + 100 for t, n in self.counts.items()}
        if self.polls == 4:
            self.counts["2"] = 100  # counted again from zero, by the new worker
        tasks = {t: {"emitted": {"default": n, "__metrics": 7 * self.polls, "$coord-b": n},
                     "transferred": {"default": 2 * n}} for t, n in self.counts.items()}
        return {"name": name, "errors": [],
                "components": {"b": {"type": "bolt", "executors": 2, "tasks": 2, "task_stats": tasks}}}


def test_monitor_counts_each_task_from_zero_after_its_worker_restarted_and_the_others_on(monkeypatch, capsys):
    """The sum over the tasks went down by less than one task's count: judged on the sum, the
    restart printed the surviving task's whole count (10,400 here) as one interval's tuples."""
    from squall.cli import _cluster

    monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(_TwoTaskMaster()))
    monkeypatch.setattr(_cluster.time, "sleep", lambda secs: None)
    args = argparse.Namespace(name="t", component="b", stream=None, watch="emitted", interval=0.001, count=4)
    assert _cluster.cmd_monitor(args) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[3], int(r[5])) for r in rows] == [("default", 200)] * 4
    monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(_TwoTaskMaster()))
    args = argparse.Namespace(name="t", component="b", stream="default", watch="transferred", interval=0.001, count=4)
    assert _cluster.cmd_monitor(args) == 0
    assert [int(line.split("\t")[5]) for line in capsys.readouterr().out.splitlines()[1:]] == [400] * 4


class _RelaunchedMaster:
    """A component "b" with two tasks in two workers, 100 tuples each between polls; before poll 3
    task 2's worker restarted (launch 2) and its new worker has counted 150 by then: more than
    the 100 its predecessor had counted at poll 2, so its count did not go down."""

    def __init__(self):
        self.polls = 0

    def get_topology_info(self, name):
        self.polls += 1
        step = self.polls - 1
        tasks = {"1": {"launch_id": 1, "emitted": {"default": 100 * step}},
                 "2": {"launch_id": 1, "emitted": {"default": 100 * step}} if self.polls < 3
                 else {"launch_id": 2, "emitted": {"default": 150 + 100 * (self.polls - 3)}}}
        return {"name": name, "errors": [],
                "components": {"b": {"type": "bolt", "executors": 2, "tasks": 2, "task_stats": tasks}}}


def test_monitor_counts_a_task_from_zero_after_its_worker_restarted_even_when_its_count_grew(monkeypatch, capsys):
    """A restarted worker's task is counted from zero by its launch, not only when its count went
    down: one that counted 150 after its restart, past the 100 of its predecessor (a crash loop,
    a young worker), read 50 tuples instead of 150."""
    from squall.cli import _cluster

    monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(_RelaunchedMaster()))
    monkeypatch.setattr(_cluster.time, "sleep", lambda secs: None)
    args = argparse.Namespace(name="t", component="b", stream=None, watch="emitted", interval=0.001, count=3)
    assert _cluster.cmd_monitor(args) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [int(r[5]) for r in rows] == [200, 100 + 150, 200]


class _RebalancedMaster:
    """A component "b" with two tasks in two slots, 100 tuples each between polls; before poll 3 a
    rebalance moved task 2 to the other slot, whose new launch has the number of its old one
    (each slot numbers its own launches: 2), and where it has counted 150 by then, past the
    100 it had counted in its old slot."""

    def __init__(self):
        self.polls = 0

    def get_topology_info(self, name):
        self.polls += 1
        step = self.polls - 1
        moved = self.polls >= 3
        tasks = {"1": {"slot": "h:6700", "launch_id": 2 if moved else 1, "emitted": {"default": 100 * step}},
                 "2": {"slot": "h:6700", "launch_id": 2, "emitted": {"default": 150 + 100 * (self.polls - 3)}}
                 if moved else {"slot": "h:6701", "launch_id": 2, "emitted": {"default": 100 * step}}}
        if moved:  # task 1's slot relaunched too: it counts from zero, 100 by poll 3
            tasks["1"]["emitted"]["default"] = 100 * (self.polls - 2)
        return {"name": name, "errors": [],
                "components": {"b": {"type": "bolt", "executors": 2, "tasks": 2, "task_stats": tasks}}}


def test_monitor_counts_a_task_moved_to_another_slot_from_zero_though_its_launch_number_is_the_same(
        monkeypatch, capsys):
    """A rebalance moved task 2 to a slot whose launch has its old launch's number: counted from
    zero there all the same (150, read 50 before)."""
    from squall.cli import _cluster

    monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(_RebalancedMaster()))
    monkeypatch.setattr(_cluster.time, "sleep", lambda secs: None)
    args = argparse.Namespace(name="t", component="b", stream=None, watch="emitted", interval=0.001, count=3)
    assert _cluster.cmd_monitor(args) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [int(r[5]) for r in rows] == [200, 100 + 150, 200]


class _AckAll(squall.Bolt):
    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup):
        self.collector.ack(tup)


def test_task_stats_name_the_slot_whose_launch_counted_them():
    """monitor tells a moved task by its slot: `get_topology_info` gives each task's slot beside
    its launch id, the worker's that counted its figures (one tuple, acked: 3 tasks reported)."""
    from squall import LocalCluster
    from squall.testing import FeederSpout

    from .conftest import wait_until

    spout = FeederSpout(["x"])
    b = squall.TopologyBuilder()
    b.set_spout("s", spout)
    b.set_bolt("b", _AckAll(), 2).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.workers": 2}, b.create_topology())
        spout.feed(["a"])
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["s"]["acked"] == 1, 30)
        info = cluster.get_topology_info("t")
        slot_of = {t: w["slot"] for w in info["workers"] for first, last in w["executors"]
                   for t in range(first, last + 1)}
        launch_of = {w["slot"]: w["launch_id"] for w in info["workers"]}
        stats = {t: s for c in ("s", "b") for t, s in info["components"][c]["task_stats"].items()}
        assert len(stats) == 3 and len(set(slot_of.values())) == 2
        assert {t: (s.get("slot"), s["launch_id"]) for t, s in stats.items()} == {
            t: (slot_of[t], launch_of[slot_of[t]]) for t in stats}
        cluster.kill_topology("t", wait_secs=0)


def _run_with_stdout_closed(*argv: str) -> subprocess.CompletedProcess:
    """Runs ``python -m squall ARGV`` with stdout a pipe whose reader is already gone, as in
    ``squall info T | head`` once head has read its lines."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "squall", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [("version",), ()])
def test_a_closed_stdout_ends_the_command_quietly_as_unix_tools_do(argv):
    """Issue 33 item 11: `squall info T | head` ended with "squall: error: unexpected
    BrokenPipeError". Now nothing is printed and the status is the shell's 141 (128 + SIGPIPE),
    for a verb's output and the plain usage alike (argparse's own --help already ends quietly)."""
    proc = _run_with_stdout_closed(*argv)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(monkeypatch, capsys):
    """Only stdout's reader going away is quiet: a connection that breaks under a verb (the
    master's, say) is the verb's error, named as before."""
    from squall.cli import _cluster

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(_cluster, "cmd_list", broken)
    assert main(["list"]) == 1
    assert "squall: error: unexpected BrokenPipeError: [Errno 32] Broken pipe" in capsys.readouterr().err


def _out(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_help_verb_prints_the_verbs_usage_and_description_as_storm_help_does(capsys):
    """Storm's `storm help COMMAND`: squall help VERB prints what squall VERB --help prints, an
    alias the help of the verb it names; squall help alone, squall's own (the verbs)."""
    kill = _out(capsys, "help", "kill")
    assert kill.startswith("usage: squall kill ") and "Deactivate each topology's spouts for -w seconds" in kill
    assert kill == _out(capsys, "kill", "--help")
    assert _out(capsys, "help", "get_errors") == _out(capsys, "help", "get-errors") == _out(capsys, "get-errors", "-h")
    everything = _out(capsys, "help")
    assert everything == _out(capsys, "--help") and "get-errors" in everything and "help" in everything


@pytest.mark.parametrize("argv, message", [
    (("help", "nosuch"), "squall: error: squall has no verb 'nosuch' (its verbs: activate, deactivate, "),
    (("help", "kill", "now"), "squall: error: squall kill takes no verb after it, got 'now'"),
])
def test_help_of_a_verb_that_does_not_exist_is_a_usage_error_naming_it(capsys, argv, message):
    assert main(list(argv)) == 2
    assert error_line(capsys).startswith(message)


def test_get_errors_keeps_each_components_newest_error_as_the_master_orders_them():
    """The master's errors come oldest first, and a repeat folded into an earlier record moves that
    record last; a component with no error is absent, as in Storm's get-errors."""
    from squall.cli._errors_verb import last_errors
    from squall.engine.executor import ErrorRecord, add_error

    errors: list[ErrorRecord] = []
    for component, text in [("split", "ValueError: first"), ("count", "KeyError: 'w'"),
                            ("split", "ValueError: second"), ("split", "ValueError: second"),
                            ("__master", "worker on host:6700 failed to start 3 times; gave up")]:
        add_error(errors, ErrorRecord(component, 1, 0.0, text, ""))
    assert last_errors([e.as_dict() for e in errors]) == {
        "split": "ValueError: second", "count": "KeyError: 'w'",
        "__master": "worker on host:6700 failed to start 3 times; gave up"}
    assert last_errors([]) == {}


def test_an_unknown_option_is_the_verbs_usage_error(capsys):
    """docs/cli.md: other command-line mistakes print the verb's usage, then ``squall VERB:
    error: ...``, status 2 (argparse's top level said it, with its own usage)."""
    assert main(["local", "topology.py", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: squall local ") and "squall local: error: unrecognized arguments: --bogus" in err
    assert main(["sparse", "submit", "--bogus"]) == 2
    assert "squall sparse submit: error: unrecognized arguments: --bogus" in capsys.readouterr().err
    assert main(["--bogus"]) == 2
    assert "squall: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def _columns_line_up(table: list[str]) -> bool:
    """Whether every field of each row of ``table`` (header, rule, rows) starts where its
    header's does (fields hold no blanks; a row may end early: its owner is empty)."""
    import re

    starts = [m.start() for m in re.finditer(r"\S+", table[0])]
    return all([m.start() for m in re.finditer(r"\S+", row)] == starts[:len(row.split())] for row in table[2:])


def test_list_fits_every_status_and_long_names_in_its_columns():
    """REBALANCING (11 characters) overflowed Storm's 10-wide Status column and a name past 20
    its own: the rest of the row sat under the wrong headers. A column widens to its longest
    value; a table whose values all fit is Storm's, character for character."""
    from squall.cli._cluster import list_table
    from squall.cluster.state import TopologyStatus

    def row(name, status, n):
        return {"name": name, "status": status, "num_tasks": 11, "num_workers": 2, "uptime_secs": 73 + n,
                "id": f"{name}-{n}-1763785531"}
    statuses = [s.value for s in TopologyStatus]
    assert "REBALANCING" in statuses and max(map(len, statuses)) > 10
    rows = [row(f"t{i}", s, i) for i, s in enumerate(statuses)] + [row("a" * 45, "ACTIVE", 9)]
    table = list_table(rows)
    assert len(table) == 2 + len(rows) and _columns_line_up(table), "\n".join(table)
    assert [line.split()[:2] for line in table[2:]] == [[r["name"], r["status"]] for r in rows]
    assert table[1] == "-" * 85 and all(line == line.rstrip() for line in table)
    # every status alone (a cluster running one topology, rebalancing) lines up too
    for status in statuses:
        alone = list_table([row("word_count", status, 1)])
        assert _columns_line_up(alone), "\n".join(alone)
    # values that fit: Storm's own format, "%-20s %-10s %-10s %-12s %-12s %-20s %-20s"
    storm = {"name": "wc", "status": "ACTIVE", "num_tasks": 11, "num_workers": 2, "uptime_secs": 73, "id": "wc-1-17637"}
    storm_format = "%-20s %-10s %-10s %-12s %-12s %-20s %-20s"
    assert list_table([storm]) == [
        (storm_format % ("Topology_name", "Status", "Num_tasks", "Num_workers",
                         "Uptime_secs", "Topology_Id", "Owner")).rstrip(),
        "-" * 85,
        (storm_format % ("wc", "ACTIVE", 11, 2, 73, "wc-1-17637", "")).rstrip()]
