"""The user's code travels with the topology, as Storm ships the jar: a topology defined in a
package that only the submitting process can import runs on workers that never imported it.

Only the submitting subprocess has the package's directory on its path (``PYTHONPATH``); the
master and its workers run from the test's directory, without it."""

import os
import subprocess
import sys

from tests.written import finished_lines

from ..conftest import wait_until
from ..shipping_code import WORDS_SPOUT, helper_modules, module, write_modules

PACKAGE = {
    "__init__.py": "",
    "helpers.py": helper_modules()["helpers.py"],
    "parts.py": module("""
        import json
        from pathlib import Path

        from squall import BasicBolt, Fields, Spout

        from .helpers import shout
    """, WORDS_SPOUT, """
        class Shout(BasicBolt):
            def execute(self, tup, collector):
                with open(Path(self.conf["test.out.dir"]) / "shouted.txt", "a") as f:
                    f.write(shout(tup[0]) + "\\n")
    """),
}

SUBMIT = """
import sys
from squall import Config, StormSubmitter, TopologyBuilder
from myshop.parts import Shout, Words

b = TopologyBuilder()
b.set_spout("words", Words())
b.set_bolt("shout", Shout(), 2).shuffle_grouping("words")
conf = Config()
conf.set_num_workers(2)
conf["test.out.dir"] = sys.argv[1]
with StormSubmitter.using_conf(__import__("yaml").safe_load(open(sys.argv[2]))):
    StormSubmitter.submit_topology("shipped", conf, b.create_topology())
"""


def test_a_topology_from_the_users_package_runs_on_workers_that_cannot_import_it(shared_cluster, tmp_path):
    src = tmp_path / "src"
    write_modules(src / "myshop", PACKAGE)
    (src / "submit.py").write_text(SUBMIT)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(src))
    run = subprocess.run([sys.executable, str(src / "submit.py"), str(out), str(shared_cluster.file)],
                         cwd=src, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    try:
        shouted = out / "shouted.txt"
        assert wait_until(lambda: shouted.exists() and len(shouted.read_text().split()) == 3, 30)
        assert sorted(shouted.read_text().split()) == ["A!", "B!", "C!"]
    finally:
        with shared_cluster.client() as m:
            m.kill_topology("shipped", wait_secs=0)


# FILE's directory: the bolt's module reaches helpers in every way a user's code does
BESIDE_FILE = {
    **helper_modules(),
    "bolts.py": module("""
        import json
        from pathlib import Path

        import helpers2
        from helpers import shout
        from tools.text import twice

        from squall import BasicBolt, Fields, Spout
    """, WORDS_SPOUT, """
        class Decorate(BasicBolt):
            def execute(self, tup, collector):
                with open(Path(self.conf["test.out.dir"]) / "decorated.txt", "a") as f:
                    f.write(helpers2.wrap(twice(shout(tup[0]))) + "\\n")
    """),
    "decorated.py": """
        from squall import TopologyBuilder

        from bolts import Decorate, Words


        def build():
            b = TopologyBuilder()
            b.set_spout("words", Words())
            b.set_bolt("decorate", Decorate(), 2).shuffle_grouping("words")
            return b.create_topology()
    """,
}


def jar(cluster, file, *settings):
    """``squall jar FILE`` on ``cluster`` with ``-c`` ``settings``, run from the directory above
    FILE's (so the workers' directory is not FILE's)."""
    overrides = [arg for setting in settings for arg in ("-c", setting)]
    return subprocess.run([sys.executable, "-m", "squall.cli", "jar", "--config", str(cluster.file), *overrides,
                           str(file)], cwd=file.parent.parent, capture_output=True, text=True, timeout=60)


def lines_written(cluster, file, written, count):
    """The ``count`` lines (sorted) that FILE's topology, submitted with ``squall jar`` on 2
    workers and ``test.out.dir`` the directory of ``written``, writes there; killed after."""
    written.parent.mkdir()
    run = jar(cluster, file, f"test.out.dir={written.parent}", "topology.workers=2")
    assert run.returncode == 0, run.stderr
    try:
        assert wait_until(lambda: len(finished_lines(written)) == count, 30), \
            (cluster.dir.parent / "master.log").read_text()[-3000:]
        return sorted(finished_lines(written))
    finally:
        with cluster.client() as m:
            m.kill_topology(file.stem, wait_secs=0)


def test_helper_modules_beside_the_file_travel_with_the_topology(shared_cluster, tmp_path):
    """``squall jar FILE``: the bolt's module imports a helper function (``from helpers import
    shout``), a helper module (``import helpers2``, which imports ``formats``, which imports it
    back) and a package's submodule (``from tools.text import twice``); the workers, which run
    from another directory, import none of them."""
    src = tmp_path / "src"
    write_modules(src, BESIDE_FILE)
    assert lines_written(shared_cluster, src / "decorated.py", tmp_path / "out" / "decorated.txt", 3) == \
        ["[A!A!]", "[B!B!]", "[C!C!]"]


# FILE defines a NamedTuple record that one bolt emits to another on every worker
NAMEDTUPLE_FILE = module("""
    import os
    from pathlib import Path
    from typing import NamedTuple

    from squall import BasicBolt, Fields, Spout, TopologyBuilder
""", WORDS_SPOUT, """
    class Word(NamedTuple):
        text: str
        length: int = 0

        def shouted(self):
            return self.text.upper()


    class Parse(BasicBolt):
        def declare_output_fields(self, declarer):
            declarer.declare(Fields("word", "pid"))

        def execute(self, tup, collector):
            collector.emit([Word(tup[0])._replace(length=len(tup[0])), os.getpid()])


    class Write(BasicBolt):
        def execute(self, tup, collector):
            word, parsed_in = tup[0], tup[1]
            assert isinstance(word, Word), type(word)
            with open(Path(self.conf["test.out.dir"]) / "words.txt", "a") as f:
                f.write(f"{word.shouted()} {word._asdict()['length']} {parsed_in != os.getpid()}\\n")


    def build():
        b = TopologyBuilder()
        b.set_spout("words", Words())
        b.set_bolt("parse", Parse()).shuffle_grouping("words")
        b.set_bolt("write", Write(), 2).all_grouping("parse")
        return b.create_topology()
""")


def test_a_bolt_of_a_file_run_with_jar_emits_a_namedtuple_record_to_other_workers(shared_cluster, tmp_path):
    """``squall jar FILE``: FILE's ``Word`` (a typing.NamedTuple) goes by value to the master and
    to two workers (it failed there with KeyError: '__module__'), and its records cross from the
    worker of ``parse`` to the other worker, where ``write`` gets them as ``Word``s."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "words_file.py").write_text(NAMEDTUPLE_FILE)
    # all_grouping: each of the 3 words reaches both write tasks, one per worker
    assert lines_written(shared_cluster, src / "words_file.py", tmp_path / "out" / "words.txt", 6) == \
        ["A 1 False", "A 1 True", "B 1 False", "B 1 True", "C 1 False", "C 1 True"]


TRIDENT_FILE = {
    "trident_ops.py": """
        from pathlib import Path

        from squall.trident import BaseFunction


        class Split(BaseFunction):
            def prepare(self, conf, context):
                self.out = Path(conf["test.out.dir"]) / "words.txt"

            def execute(self, tup, collector):
                for word in tup[0].split():
                    with open(self.out, "a") as f:
                        f.write(word + "\\n")
                    collector.emit([word])
    """,
    "trident_words.py": """
        from squall import Fields
        from squall.trident import Count, FixedBatchSpout, MemoryMapState, TridentTopology

        from trident_ops import Split


        def build():
            topo = TridentTopology()
            (topo.new_stream("s", FixedBatchSpout(["sentence"], 2, ["a b"], ["c"]))
             .each(Fields("sentence"), Split(), Fields("word"))
             .group_by(Fields("word"))
             .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")))
            return topo.build()
    """,
}


def test_the_operations_of_a_trident_file_travel_with_the_topology(shared_cluster, tmp_path):
    """``squall jar`` of a Trident file whose operation is in a module beside it: the master
    and the workers import neither (the master said "No module named 'trident_ops'")."""
    src = tmp_path / "src"
    write_modules(src, TRIDENT_FILE)
    assert lines_written(shared_cluster, src / "trident_words.py", tmp_path / "out" / "words.txt", 3) == \
        ["a", "b", "c"]


def test_jar_of_a_topology_whose_module_the_master_cannot_import_says_so(shared_cluster, tmp_path):
    """A module installed where only the client finds it (a site-packages directory: installed
    code goes by reference) is named, with what to do, not as a bare "No module named"."""
    lib = tmp_path / "lib" / "site-packages"
    write_modules(lib, {"extmod.py": """
        from squall import BasicBolt


        class Ext(BasicBolt):
            def execute(self, tup, collector):
                pass
    """})
    src = tmp_path / "src"
    write_modules(src, {"ext_file.py": module("""
        from squall import Fields, Spout, TopologyBuilder

        from extmod import Ext
    """, WORDS_SPOUT, """
        def build():
            b = TopologyBuilder()
            b.set_spout("words", Words())
            b.set_bolt("ext", Ext()).shuffle_grouping("words")
            return b.create_topology()
    """)})
    run = subprocess.run([sys.executable, "-m", "squall.cli", "jar", "--config", str(shared_cluster.file),
                          str(src / "ext_file.py")], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(lib)))
    assert run.returncode == 1
    assert run.stderr.startswith("squall: error: the master cannot load topology 'ext_file': ModuleNotFoundError: "
                                 "No module named 'extmod'. Its code refers to a module"), run.stderr
    assert "PYTHONPATH" in run.stderr
    with shared_cluster.client() as m:
        assert "ext_file" not in m.get_topology_names()


def test_jar_of_a_class_the_master_cannot_rebuild_names_the_class_and_its_module(shared_cluster, tmp_path):
    """Class keywords do not travel by value: the master cannot rebuild ``Tagged`` and says which
    class of which module, instead of the TypeError alone."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "tagged_file.py").write_text(module("""
        from squall import BasicBolt, Fields, Spout, TopologyBuilder
    """, WORDS_SPOUT, """
        class Plugin(BasicBolt):
            def __init_subclass__(cls, *, tag, **kwargs):
                super().__init_subclass__(**kwargs)
                cls.tag = tag


        class Tagged(Plugin, tag="t"):
            def execute(self, tup, collector):
                pass


        def build():
            b = TopologyBuilder()
            b.set_spout("words", Words())
            b.set_bolt("tagged", Tagged()).shuffle_grouping("words")
            return b.create_topology()
    """))
    run = jar(shared_cluster, src / "tagged_file.py")
    assert (run.returncode, run.stderr) == (1, (
        "squall: error: class Tagged of module tagged_file, which goes by value with the user's code, cannot be "
        "rebuilt: TypeError: Plugin.__init_subclass__() missing 1 required keyword-only argument: 'tag'\n"))
    with shared_cluster.client() as m:
        assert "tagged_file" not in m.get_topology_names()
