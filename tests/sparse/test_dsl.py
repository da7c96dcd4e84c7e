"""streamparse's Topology DSL translated into squall's topology: every grouping, par (also by
environment), Streams (named, direct), inputs as a list or a dict, component and topology
config; what squall cannot run is refused naming the component."""

from __future__ import annotations

import pytest
from streamparse import Bolt, Grouping, JavaBolt, JavaSpout, ShellBolt, Spout, Stream, Topology

import squall
from squall import Fields, InvalidTopologyException, LocalCluster
from squall._grouping import Grouping as SquallGrouping
from squall.multilang import ShellBolt as MultilangShellBolt
from squall.multilang import ShellSpout as MultilangShellSpout
from squall.sparse import SparseBolt, SparseSpout, translate
from squall.testing._registry import SharedLog
from tests.conftest import wait_until


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


class Pixels(squall.Spout):
    """A squall spout written in place of a Java one (storm-kafka's, in streamparse's kafka-jvm
    example): ``total`` numbered pixels, reliably."""

    acked: SharedLog

    def __init__(self, prefix: str, total: int) -> None:
        self.prefix, self.total = prefix, total

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("pixel"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0

    def next_tuple(self):
        if self.i < self.total:
            self.collector.emit([f"{self.prefix}{self.i}"], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.acked.append(msg_id)


class PixelSink(Bolt):
    got: SharedLog

    def process(self, tup):
        self.got.append(tup.values.pixel)  # pystorm names the values by the spout's declared fields


class PixelCount(Topology):  # kafka-jvm's topologies/pixelcount.py, its spout's class now Python
    pixel_spout = JavaSpout.spec(name="pixel-spout", full_class_name=f"{__name__}.Pixels", args_list=["px", 40],
                                 outputs=["pixel"])
    sink = PixelSink.spec(name="sink", inputs={pixel_spout: Grouping.fields("pixel")}, par=2)


def test_a_java_component_whose_class_is_a_python_squall_component_runs_it() -> None:
    """As Flux reads a className, a JavaSpout's full_class_name may name a Python class written in
    its place (kafka-jvm's PixelSpout); it was refused as Java whatever it named."""
    Pixels.acked, PixelSink.got = SharedLog(), SharedLog()
    t = translate(PixelCount, where="topologies/pixelcount.py")
    assert type(t.topology.components["pixel-spout"].obj) is Pixels

    with LocalCluster() as cluster:
        cluster.submit_topology("pixels", t.conf, t.topology)
        assert wait_until(lambda: len(Pixels.acked.items()) >= 40, 30)
        assert cluster.get_topology_info("pixels")["errors"] == []

    assert sorted(Pixels.acked.items()) == list(range(40))
    assert sorted(PixelSink.got.items()) == sorted(f"px{i}" for i in range(40))


class CountingWords(Spout):
    outputs = ("word",)
    acked: SharedLog

    def initialize(self, conf, ctx):
        self.i = 0

    def next_tuple(self):
        if self.i < 30:
            self.emit([f"w{self.i}"], tup_id=self.i)
            self.i += 1

    def ack(self, tup_id):
        self.acked.append(tup_id)


class Shout(Bolt):
    outputs = ("word",)

    def process(self, tup):
        self.emit([tup.values.word.upper()])


class ShoutSink(Bolt):
    got: SharedLog

    def process(self, tup):
        self.got.append(tup.values.word)


class StreamparseClassesAsJava(Topology):
    words = JavaSpout.spec(name="words", full_class_name=f"{__name__}.CountingWords", args_list=[], outputs=["word"])
    shout = JavaBolt.spec(name="shout", full_class_name=f"{__name__}.Shout", args_list=[], inputs=[words],
                          outputs=["word"])
    sink = ShoutSink.spec(name="sink", inputs={shout: Grouping.fields("word")}, par=2)


def test_a_java_spec_naming_a_streamparse_class_runs_it_as_its_own_spec_would() -> None:
    """A JavaSpout/JavaBolt whose full_class_name is a streamparse class of the project: squall
    made it as a Python class in the Java class's place, which pystorm's constructor answers by
    wrapping sys.stdout (closed when the object went), then refused it ("set_bolt needs a Bolt
    ... got Shout"), and `squall sparse run` ended in "ValueError: I/O operation on closed file".
    It runs in process now, as ``Shout.spec`` would, never made in the loading process."""
    CountingWords.acked, ShoutSink.got = SharedLog(), SharedLog()
    t = translate(StreamparseClassesAsJava, where="topologies/shout.py")
    assert (type(t.topology.components["words"].obj), type(t.topology.components["shout"].obj)) == \
        (SparseSpout, SparseBolt)

    with LocalCluster() as cluster:
        cluster.submit_topology("shout", t.conf, t.topology)
        assert wait_until(lambda: len(CountingWords.acked.items()) >= 30, 30)
        assert cluster.get_topology_info("shout")["errors"] == []

    assert sorted(CountingWords.acked.items()) == list(range(30))
    assert sorted(ShoutSink.got.items()) == sorted(f"W{i}" for i in range(30))

    class WithArgs(Topology):
        words = JavaSpout.spec(name="words", full_class_name=f"{__name__}.CountingWords", args_list=[5],
                               outputs=["word"])
    with pytest.raises(InvalidTopologyException, match=r"^topologies/args.py: component \[words\]: "
                                                       r"tests.sparse.test_dsl.CountingWords is a streamparse "
                                                       r"component, made with no arguments"):
        translate(WithArgs, where="topologies/args.py")


def test_a_streamparse_object_given_to_squalls_builder_is_refused_saying_what_runs_it() -> None:
    """A user porting a streamparse topology to squall's API passed its objects as they were;
    the error said only "set_bolt needs a Bolt, ... got Shout". It says what runs such a class."""
    import io

    streams = {"input_stream": io.BytesIO(), "output_stream": io.BytesIO(), "rdb_signal": None}  # not sys.stdout
    builder = squall.TopologyBuilder()
    with pytest.raises(InvalidTopologyException) as bolt:
        builder.set_bolt("shout", Shout(**streams))
    assert str(bolt.value).endswith(
        "got Shout, a streamparse (pystorm) component: squall runs its class in process from a streamparse Topology "
        "(squall sparse run) or a Flux file's className (tests.sparse.test_dsl.Shout), or write it as a squall Bolt")
    with pytest.raises(InvalidTopologyException, match=r"got CountingWords, a streamparse \(pystorm\) component: "
                                                       r".* or write it as a squall Spout$"):
        builder.set_spout("words", CountingWords(**streams))


def test_the_python_class_of_a_java_spec_must_declare_the_specs_outputs() -> None:
    class Mismatch(Topology):
        pixel_spout = JavaSpout.spec(name="pixel-spout", full_class_name=f"{__name__}.Pixels", args_list=["px", 1],
                                     outputs=["url", "ip"])
        sink = PixelSink.spec(name="sink", inputs=[pixel_spout])

    with pytest.raises(InvalidTopologyException, match=r"topologies/m.py: component \[pixel-spout\]: its spec's "
                                                       r"outputs give stream \[default\] the fields \['url', 'ip'\], "
                                                       r"and its class declares \['pixel'\]"):
        translate(Mismatch, where="topologies/m.py")


def test_a_java_class_name_whose_package_a_module_of_the_project_hides_says_so() -> None:
    """kafka-jvm's topology file is topologies/pixelcount.py, imported as ``pixelcount``; its
    spout's class pixelcount.spouts.PixelSpout, written in Python in src/pixelcount/spouts.py,
    then cannot import, and was refused as a Java class with no word of why."""
    class Hidden(Topology):
        pixel_spout = JavaSpout.spec(name="pixel-spout", full_class_name=f"{__name__}.spouts.Pixels",
                                     args_list=["px", 1], outputs=["pixel"])

    with pytest.raises(InvalidTopologyException, match=rf"component \[pixel-spout\]: {__name__}.spouts.Pixels: "
                                                       rf"{__name__} is the module .*test_dsl.py, not a package"):
        translate(Hidden, where="topologies/h.py")


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


def test_submitting_a_translation_whole_says_to_pass_its_topology_and_conf() -> None:
    """The docs' ``translate(TopologyClass)`` returns a record: passed to ``submit_topology`` as
    it is, the error said only ``got Translation``; it now says what to pass."""
    t = translate(Everything, env_name="prod")
    with LocalCluster() as cluster:
        said = (r"submit_topology needs a StormTopology \(from TopologyBuilder.create_topology\(\)\), got "
                r"Translation: pass its \.topology, and its \.conf as the configuration$")
        with pytest.raises(InvalidTopologyException, match=said):
            cluster.submit_topology("whole", t.conf, t)
        with pytest.raises(InvalidTopologyException, match=r"got dict$"):  # nothing to point at
            cluster.submit_topology("plain", {}, {})
        assert cluster.get_cluster_info()["topologies"] == []
