"""A project squall cannot run says what is wrong, naming the file and the name, in one line
(``squall: error: ...``, exit 1) from ``squall sparse run``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from squall.cli import main


@pytest.fixture
def project(quickstart: Path, tmp_path: Path) -> Path:
    """A copy of the quickstart project, for a test to break."""
    return Path(shutil.copytree(quickstart, tmp_path / "wordcount"))


def _error(capsys, *argv: str) -> str:
    assert main(["sparse", "run", "-t", "1", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("squall: error: ") and "\n" not in err, err
    return err


def test_no_project_here(tmp_path: Path, capsys) -> None:
    err = _error(capsys, "--project", str(tmp_path))
    assert f"no config.json in {tmp_path}" in err


def test_a_topology_name_that_has_no_file(project: Path, capsys) -> None:
    err = _error(capsys, "--project", str(project), "-n", "wordcont")
    assert f"topology definition file not found: {project / 'topologies' / 'wordcont.py'}" in err
    assert "(topologies in" in err and ": wordcount)" in err


def test_several_topologies_need_a_name(project: Path, capsys) -> None:
    shutil.copy(project / "topologies" / "wordcount.py", project / "topologies" / "other.py")
    err = _error(capsys, "--project", str(project))
    assert "more than one topology definition" in err and "(other, wordcount): choose one with -n NAME" in err


def test_an_unknown_component_class(project: Path, capsys) -> None:
    path = project / "topologies" / "wordcount.py"
    path.write_text(path.read_text().replace("import WordCountBolt", "import WordCounterBolt")
                    .replace("WordCountBolt.spec", "WordCounterBolt.spec"))
    err = _error(capsys, "--project", str(project))
    assert f"error importing {path}, line 7: ImportError: cannot import name 'WordCounterBolt' from " \
           f"'bolts.wordcount'" in err


def test_a_module_of_src_imported_as_src_dot_module_says_how_to_import_it(project: Path, capsys) -> None:
    """streamparse's examples/redis/topologies/wordcount_redis.py imports 'from src.bolts import
    ...', which fails under sparse too (src/ is on sys.path, and Storm's jar holds its contents);
    the error said only "No module named 'src'"."""
    path = project / "topologies" / "wordcount.py"
    path.write_text(path.read_text().replace("from bolts.wordcount import", "from src.bolts.wordcount import"))
    err = _error(capsys, "--project", str(project))
    assert f"error importing {path}, line 7: ModuleNotFoundError: No module named 'src' (src/ is on sys.path" in err
    assert "import them without 'src.', e.g. 'from bolts import ...' for src/bolts.py)" in err


_TWO_STREAMS = """from streamparse import Spout, Stream


class TwoStreams(Spout):
    outputs = [Stream(fields=["word"], name="words"), Stream(fields=["n"], name="lengths")]

    def next_tuple(self):
        pass
"""


def _subscribe(project: Path, spout_line: str, inputs: str) -> Path:
    (project / "src" / "spouts" / "two_streams.py").write_text(_TWO_STREAMS)
    path = project / "topologies" / "wordcount.py"
    path.write_text(
        "from streamparse import Grouping, Topology\n\n"
        "from bolts.wordcount import WordCountBolt\n"
        "from spouts.two_streams import TwoStreams\n"
        f"{spout_line}\n\n"
        "class WordCount(Topology):\n"
        "    word_spout = TwoStreams.spec()\n"
        f"    count_bolt = WordCountBolt.spec(inputs={inputs}, par=2)\n")
    return path


def test_a_list_input_of_a_component_without_a_default_stream_names_the_streams(project: Path, capsys) -> None:
    """streamparse's own message was ``KeyError: 'default'`` (its Topology metaclass looks the
    default stream up in the spout's declared Streams), at the class line."""
    path = _subscribe(project, "", "[word_spout]")
    err = _error(capsys, "--project", str(project))
    assert err == (f"squall: error: error importing {path}, line 7: count_bolt subscribes to the 'default' "
                   f"stream of word_spout, which declares only 'lengths', 'words': an input in a list "
                   f"subscribes to the default stream; name the stream, as "
                   f"inputs={{word_spout['lengths']: Grouping.SHUFFLE}}")


def test_an_input_spec_outside_the_topology_class_says_so(project: Path, capsys) -> None:
    """A spec made at module level, not a class attribute, has no name: streamparse said
    ``KeyError: None``."""
    path = _subscribe(project, "outside = TwoStreams.spec()", '{outside["words"]: Grouping.fields("word")}')
    err = _error(capsys, "--project", str(project))
    assert err == (f"squall: error: error importing {path}, line 7: count_bolt's inputs name a spec that is "
                   f"not an attribute of this Topology class: make each spec it subscribes to one "
                   f"(split_bolt = SplitBolt.spec(...) in the class)")


def test_a_file_without_a_topology(project: Path, capsys) -> None:
    path = project / "topologies" / "wordcount.py"
    path.write_text("from streamparse import Topology\n")
    err = _error(capsys, "--project", str(project))
    assert f"{path} defines no streamparse Topology subclass" in err


def test_a_component_spec_of_a_class_that_is_no_bolt(project: Path, capsys) -> None:
    path = project / "topologies" / "wordcount.py"
    path.write_text(path.read_text().replace(
        "count_bolt = WordCountBolt.spec(", "count_bolt = ShellBolt.spec(command='streamparse_run', script='x.Y', ")
        .replace("from streamparse import Grouping, Topology", "from streamparse import Grouping, ShellBolt, Topology"))
    err = _error(capsys, "--project", str(project))
    assert "topologies/wordcount.py: component [count_bolt]: streamparse.storm.bolt.ShellBolt is not a " \
           "pystorm.bolt.Bolt subclass" in err


def test_an_environment_config_json_does_not_have(project: Path, capsys) -> None:
    config = json.loads((project / "config.json").read_text())
    assert list(config["envs"]) == ["prod"]
    err = _error(capsys, "--project", str(project), "-e", "staging")
    assert f"{project / 'config.json'} has no env 'staging' (it has: prod)" in err


@pytest.mark.parametrize("where,value,message", [
    (("envs",), ["prod"], "envs must be a JSON object ({\"KEY\": VALUE, ...}), not an array"),
    (("envs", "prod"), "prod", "envs.prod must be a JSON object ({\"KEY\": VALUE, ...}), not a string"),
    (("envs", "prod", "options"), ["topology.debug"],
     "envs.prod.options must be a JSON object ({\"KEY\": VALUE, ...}), not an array"),
    (("envs", "prod", "log"), "debug", "envs.prod.log must be a JSON object ({\"KEY\": VALUE, ...}), not a string"),
])
def test_an_env_setting_of_the_wrong_type_names_config_json_and_the_key(project: Path, capsys, where, value,
                                                                        message) -> None:
    # before the fix: "unexpected ValueError: dictionary update sequence ..." (or AttributeError,
    # TypeError), naming neither the file nor the key
    config = json.loads((project / "config.json").read_text())
    parent = config
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    (project / "config.json").write_text(json.dumps(config))
    err = _error(capsys, "--project", str(project))
    assert err == f"squall: error: {project / 'config.json'}: {message}", err


def test_a_component_that_lacks_the_method_pystorm_leaves_to_it_is_refused_naming_it() -> None:
    """A bolt whose ``process`` was misspelt ran: pystorm's ``Bolt.process`` raised a bare
    NotImplementedError for every tuple, each error saying only that, every tuple failed. The
    topology is refused now, naming the component, the class, its file and the near name."""
    from streamparse import BatchingBolt, Bolt, Grouping, Spout, Topology

    from squall.sparse import translate
    from squall import InvalidTopologyException

    class Words(Spout):
        outputs = ["word"]

        def next_tuple(self):
            self.emit(["a"])

    class Upper(Bolt):
        outputs = ["word"]

        def proces(self, tup):  # the typo
            self.emit([tup.values[0].upper()])

    class Count(BatchingBolt):
        outputs = ["n"]

    class Typo(Topology):
        words = Words.spec()
        upper = Upper.spec(inputs=[words])

    with pytest.raises(InvalidTopologyException) as e:
        translate(Typo)
    assert (f"component [upper]: {Upper.__qualname__} ({__file__}) defines no process() (it defines 'proces': "
            "misspelt?): pystorm's raises NotImplementedError") in str(e.value)

    class NoBatch(Topology):
        words = Words.spec()
        count = Count.spec(inputs={words: Grouping.fields("word")})

    with pytest.raises(InvalidTopologyException, match=r"component \[count\]: .*Count \(.*\) defines no "
                                                         r"process_batch\(\): "):
        translate(NoBatch)


def test_a_bad_configuration_value_is_named_where_it_was_given(project: Path, capsys) -> None:
    """A sparse project's topology configuration comes from config.json's env options, the
    Topology's ``config`` and the command line's options. A bad value (which Storm refuses too)
    said only "topology configuration: 'topology.workers' must be ...", leaving the user to look
    through both files; the error now names the file and the key's place in it."""
    config = project / "config.json"
    settings = json.loads(config.read_text())
    settings["envs"]["prod"]["options"] = {"topology.workers": "two"}
    config.write_text(json.dumps(settings))
    err = _error(capsys, "--project", str(project))
    assert err == (f"squall: error: {config}: envs.prod.options: 'topology.workers' must be a positive integer, "
                   f"got 'two'")

    settings["envs"]["prod"]["options"] = {}
    config.write_text(json.dumps(settings))
    path = project / "topologies" / "wordcount.py"
    path.write_text(path.read_text().replace("class WordCount(Topology):\n",
                                             "class WordCount(Topology):\n    config = {'topology.message.timeout.secs': "
                                             "'30'}\n"))
    err = _error(capsys, "--project", str(project))
    assert err == ("squall: error: topologies/wordcount.py: WordCount.config: 'topology.message.timeout.secs' must "
                   "be a positive number of seconds, got '30'")

    path.write_text(path.read_text().replace("'30'", "30"))
    err = _error(capsys, "--project", str(project), "-o", "topology.max.spout.pending=0")  # the line typed
    assert err.startswith("squall: error: topology configuration: 'topology.max.spout.pending' must be a "
                          "positive integer")
