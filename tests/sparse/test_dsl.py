"""streamparse's Topology DSL translated into squall's topology: every grouping, par (also by
environment), Streams (named, direct), inputs as a list or a dict, component and topology
config; what squall cannot run is refused naming the component."""

from __future__ import annotations

import pytest
from streamparse import Bolt, Grouping, JavaBolt, ShellBolt, Spout, Stream, Topology

from squall import Fields, InvalidTopologyException
from squall._grouping import Grouping as SquallGrouping
from squall.multilang import ShellBolt as MultilangShellBolt
from squall.multilang import ShellSpout as MultilangShellSpout
from squall.sparse import SparseBolt, SparseSpout, translate


class Words(Spout):
    outputs = [Stream(["word", "n"]), Stream(["word"], name="lower"), Stream(["word"], name="pick", direct=True)]

    def next_tuple(self):
        pass


class Sink(Bolt):
    outputs = ["word", "count"]
    config = {"topology.tick.tuple.freq.secs": 5}  # a class's config is its component configuration

    def process(self, tup):
        pass


class Plain(Bolt):
    def process(self, tup):
        pass


class Everything(Topology):
    config = {"topology.max.spout.pending": 7, "my.key": "x"}
    words = Words.spec(par=2, config={"topology.debug": True})
    by_field = Sink.spec(inputs={words: Grouping.fields("word", "n")}, par=3)
    shuffle = Plain.spec(inputs=[words])  # a list: shuffle on default
    everywhere = Plain.spec(inputs={words["lower"]: Grouping.ALL})
    one = Plain.spec(inputs={words: Grouping.GLOBAL})
    nobody = Plain.spec(inputs={words: Grouping.NONE})
    local = Plain.spec(inputs={words: Grouping.LOCAL_OR_SHUFFLE, by_field: Grouping.SHUFFLE})
    direct = Plain.spec(inputs={words["pick"]: Grouping.DIRECT})
    partial = Plain.spec(inputs={words: Grouping.custom_object("org.apache.storm.grouping.PartialKeyGrouping",
                                                                ["word"])})
    per_env = Plain.spec(inputs=[by_field], par={"prod": 4, "beta": 1})


def test_each_grouping_par_stream_and_config_translates() -> None:
    t = translate(Everything, env_name="prod")
    c = t.topology.components

    assert t.conf == {"topology.max.spout.pending": 7, "my.key": "x"}
    assert isinstance(c["words"].obj, SparseSpout) and c["words"].obj.component_cls is Words
    assert isinstance(c["by_field"].obj, SparseBolt) and c["by_field"].obj.component_cls is Sink
    assert (c["words"].parallelism, c["by_field"].parallelism, c["shuffle"].parallelism) == (2, 3, 1)
    assert c["per_env"].parallelism == 4
    assert c["words"].conf["topology.debug"] is True
    assert c["by_field"].conf["topology.tick.tuple.freq.secs"] == 5
    streams = c["words"].streams
    assert streams["default"].fields == Fields("word", "n") and not streams["default"].direct
    assert streams["lower"].fields == Fields("word") and streams["pick"].direct
    assert c["by_field"].streams["default"].fields == Fields("word", "count")

    def inputs(name):
        return {(g.component_id, g.stream_id): (grouping.kind, grouping.fields)
                for g, grouping in c[name].inputs.items()}

    assert inputs("by_field") == {("words", "default"): ("fields", Fields("word", "n"))}
    assert inputs("shuffle") == {("words", "default"): ("shuffle", None)}
    assert inputs("everywhere") == {("words", "lower"): ("all", None)}
    assert inputs("one") == {("words", "default"): ("global", Fields())}
    assert inputs("nobody") == {("words", "default"): ("none", None)}
    assert inputs("local") == {("words", "default"): ("local_or_shuffle", None),
                               ("by_field", "default"): ("shuffle", None)}
    assert inputs("direct") == {("words", "pick"): ("direct", None)}
    assert inputs("partial") == {("words", "default"): ("partial_key", Fields("word"))}
    assert all(isinstance(g, SquallGrouping) for spec in c.values() for g in spec.inputs.values())


def test_a_direct_stream_in_an_inputs_list_is_refused_as_storm_refuses_it() -> None:
    class ShuffledDirect(Topology):  # streamparse gives a GlobalStreamId in a list SHUFFLE
        words = Words.spec()
        direct = Plain.spec(inputs=[words["pick"]])

    with pytest.raises(InvalidTopologyException, match=r"topologies/d.py: .*\[direct\] subscribes to direct stream "
                                                       r"\[pick\] of component \[words\] with shuffle grouping"):
        translate(ShuffledDirect, where="topologies/d.py")


def test_par_by_environment_needs_an_environment_it_names() -> None:
    with pytest.raises(InvalidTopologyException, match=r"component \[per_env\] gives par by environment "
                                                       r"\(beta, prod\) and no environment was chosen"):
        translate(Everything, where="topologies/everything.py")
    with pytest.raises(InvalidTopologyException, match="not for environment 'dev'"):
        translate(Everything, env_name="dev")


def test_a_java_component_is_refused_naming_it() -> None:
    class WithJava(Topology):
        words = Words.spec()
        counter = JavaBolt.spec(full_class_name="com.example.Counter", args_list=[], inputs=[words])

    with pytest.raises(InvalidTopologyException, match=r"topologies/j.py: component \[counter\] is a Java bolt "
                                                       r"\(com.example.Counter\); squall runs no JVM"):
        translate(WithJava, where="topologies/j.py")


def test_a_shell_component_runs_over_multilang_with_the_project_src_as_resources(tmp_path) -> None:
    class WithShell(Topology):
        words = Words.spec()
        upper = ShellBolt.spec(command="node", script="upper.js --fast", inputs=[words],
                               outputs=[Stream(["word"]), Stream(["n"], name="sizes")])

    (tmp_path / "upper.js").write_text("// the shell component's code\n")
    t = translate(WithShell, resources=str(tmp_path))
    upper = t.topology.components["upper"]
    assert isinstance(upper.obj, MultilangShellBolt)
    assert upper.obj.command == ["node", "upper.js", "--fast"] and upper.obj.resources is not None
    assert upper.streams["default"].fields == Fields("word") and upper.streams["sizes"].fields == Fields("n")


def test_python_components_over_multilang_run_streamparse_run() -> None:
    t = translate(Everything, env_name="beta", multilang=True, serializer="msgpack")
    words, sink = t.topology.components["words"].obj, t.topology.components["by_field"].obj
    assert isinstance(words, MultilangShellSpout) and isinstance(sink, MultilangShellBolt)
    assert words.command[-4:] == ["streamparse.run", "-s", "msgpack", f"{Words.__module__}.Words"]
    assert t.topology.components["words"].streams["pick"].direct  # its Streams, declared for it


def test_a_component_class_that_is_not_streamparses_is_refused_naming_it() -> None:
    class NotABolt(ShellBolt):  # streamparse's ShellBolt spec, pointed at streamparse_run by hand
        pass

    class Odd(Topology):
        words = Words.spec()
        odd = NotABolt.spec(command="streamparse_run", script="x.NotABolt", inputs=[words])

    with pytest.raises(InvalidTopologyException, match=r"component \[odd\]: .*NotABolt is not a pystorm.bolt.Bolt"):
        translate(Odd, where="topologies/odd.py")


def test_a_tickless_batching_bolt_with_its_own_init_is_refused_naming_it() -> None:
    from streamparse import TicklessBatchingBolt

    class OwnInit(TicklessBatchingBolt):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

        def process_batch(self, key, tups):
            pass

    class WithOwnInit(Topology):
        words = Words.spec()
        batches = OwnInit.spec(inputs=[words])

    with pytest.raises(InvalidTopologyException, match=r"topologies/t.py: component \[batches\]: .*OwnInit is a "
                                                       r"TicklessBatchingBolt that defines __init__"):
        translate(WithOwnInit, where="topologies/t.py")
