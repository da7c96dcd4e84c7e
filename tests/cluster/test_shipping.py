"""Which user modules travel with a topology (`squall.cluster.shipping.user_modules`), and
pickling them when they import each other (`squall.engine.code_pickler`)."""

import functools
import importlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from typing import NamedTuple

import cloudpickle
import pytest

from squall import TopologyBuilder
from squall.cluster.shipping import pickle_topology, topology_modules
from squall.cluster.shipping import is_user_file, user_modules
from squall.engine import code_pickler

from ..shipping_code import WORDS_SPOUT, helper_modules, module, write_modules

MODULES = {
    **helper_modules("sh_"),
    "sh_held.py": """
        from squall import CustomStreamGrouping


        class Formatter:
            def format(self, text):
                return "<" + text + ">"


        class First(CustomStreamGrouping):
            def choose_tasks(self, task_id, values):
                return self.target_tasks[:1]
    """,
    "sh_trident.py": """
        from squall.trident import BaseFunction


        class Split(BaseFunction):
            def execute(self, tup, collector):
                for word in tup[0].split():
                    collector.emit([word])
    """,
    "sh_pfn.py": """
        def tag(prefix, text):
            return prefix + text
    """,
    "sh_meth.py": """
        class Upper:
            def apply(self, text):
                return text.upper()
    """,
    "sh_slot.py": """
        class Box:
            pass
    """,
    "sh_kept.py": """
        from squall import BasicBolt


        class Keeps(BasicBolt):
            __slots__ = ("__box",)
    """,
    "sh_bolts.py": module("""
        import json

        import yaml

        import sh_helpers2
        from sh_helpers import shout
        from sh_tools.text import twice

        from squall import BasicBolt, Fields, Spout
    """, WORDS_SPOUT, """
        class Decorate(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([sh_helpers2.wrap(twice(shout(tup[0])))])
    """, """
        class Holding(BasicBolt):
            def __init__(self, formatter):
                self.formatter = formatter

            def execute(self, tup, collector):
                collector.emit([self.formatter.format(tup[0])])
    """),
}


@pytest.fixture
def user_code(tmp_path):
    """MODULES written to a directory on sys.path and imported; removed from both after."""
    write_modules(tmp_path, MODULES)
    sys.path.insert(0, str(tmp_path))
    try:
        import sh_bolts
        import sh_held
        yield sh_bolts, sh_held
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("sh_")]:
            del sys.modules[name]


def names(modules):
    return sorted(m.__name__ for m in modules)


def test_every_user_module_the_components_module_reaches_is_found(user_code):
    """``from m import f``, ``import m`` (and what m imports, through a cycle), a package's
    submodule (as the whole package); not the standard library, site-packages or squall."""
    bolts, _held = user_code
    assert names(user_modules([bolts.Decorate()])) == \
        ["sh_bolts", "sh_formats", "sh_helpers", "sh_helpers2", "sh_tools"]


def test_the_modules_of_what_a_component_holds_are_found(user_code):
    bolts, held = user_code
    assert "sh_held" in names(user_modules([bolts.Holding(held.Formatter())]))


def test_custom_groupings_count_too(user_code):
    bolts, held = user_code
    b = TopologyBuilder()
    b.set_spout("s", bolts.Words())
    b.set_bolt("b", bolts.Decorate()).custom_grouping("s", held.First())
    assert "sh_held" in names(topology_modules(b.create_topology()))


def test_what_a_partial_a_bound_method_and_a_private_slot_hold_is_found(tmp_path):
    """A component keeps a function with its arguments (``functools.partial``), another
    object's bound method, and an object in a private (name-mangled) slot: their modules go too,
    though the component's own module does not import them by those names at the top."""
    write_modules(tmp_path, {k: v for k, v in MODULES.items() if k in ("sh_pfn.py", "sh_meth.py", "sh_slot.py",
                                                                        "sh_kept.py")})
    sys.path.insert(0, str(tmp_path))
    try:
        import sh_meth
        import sh_pfn
        import sh_slot
        import sh_kept
        bolt = sh_kept.Keeps()
        bolt._Keeps__box = sh_slot.Box()
        bolt.tag = functools.partial(sh_pfn.tag, "#")
        bolt.upper = sh_meth.Upper().apply
        assert names(user_modules([bolt])) == ["sh_kept", "sh_meth", "sh_pfn", "sh_slot"]
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("sh_")]:
            del sys.modules[name]


def test_helpers_a_bolt_keeps_in_a_list_or_in_another_helper_are_found(tmp_path):
    """``self.handlers = [B()]`` and ``self.a = A(B())``: the module of B, which the bolt's own
    module never imports, goes too (the walk goes a few levels into a user's objects)."""
    write_modules(tmp_path, {
        "sh_deep_b.py": """
            class B:
                pass
        """,
        "sh_deep_a.py": """
            class A:
                def __init__(self, inner):
                    self.inner = inner
        """,
        "sh_deep_bolt.py": """
            from squall import BasicBolt


            class Keeps(BasicBolt):
                def execute(self, tup, collector):
                    pass
        """})
    sys.path.insert(0, str(tmp_path))
    try:
        import sh_deep_a
        import sh_deep_b
        import sh_deep_bolt
        in_list = sh_deep_bolt.Keeps()
        in_list.handlers = [sh_deep_b.B()]
        nested = sh_deep_bolt.Keeps()
        nested.a = sh_deep_a.A(sh_deep_b.B())
        assert names(user_modules([in_list])) == ["sh_deep_b", "sh_deep_bolt"]
        assert names(user_modules([nested])) == ["sh_deep_a", "sh_deep_b", "sh_deep_bolt"]
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("sh_")]:
            del sys.modules[name]


def test_the_modules_of_a_trident_topologys_operations_are_found(user_code):
    """A Trident operation is held deep inside squall's own bolts (the plan's nodes): its
    module travels as a bolt's does (it was not found, and ``squall jar`` of a Trident file
    failed on the master with "No module named ...")."""
    import sh_trident

    from squall import Fields
    from squall.trident import Count, FixedBatchSpout, MemoryMapState, TridentTopology
    topo = TridentTopology()
    (topo.new_stream("s", FixedBatchSpout(["sentence"], 2, ["a b"], ["c"]))
     .each(Fields("sentence"), sh_trident.Split(), Fields("word"))
     .group_by(Fields("word"))
     .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")))
    assert names(topology_modules(topo.build())) == ["sh_trident"]


def test_library_files_are_not_the_users(user_code):
    import json
    import yaml
    assert not is_user_file(json.__file__)
    assert not is_user_file(yaml.__file__)
    assert not is_user_file("/opt/venv/lib/python3.11/site-packages/thing.py")
    assert not is_user_file("/usr/lib/python3/dist-packages/thing.py")
    assert not is_user_file("/home/me/ext.cpython-311-x86_64-linux-gnu.so")
    assert is_user_file(user_code[0].__file__)


def test_modules_that_import_each_other_pickle_by_value_and_load_without_them(user_code):
    """cloudpickle alone recurses forever on ``sh_helpers2`` <-> ``sh_formats``."""
    bolts, _held = user_code
    b = TopologyBuilder()
    b.set_spout("words", bolts.Words())
    b.set_bolt("decorate", bolts.Decorate()).shuffle_grouping("words")
    topology = b.create_topology()
    modules = topology_modules(topology)
    for m in modules:
        cloudpickle.register_pickle_by_value(m)
    try:
        with pytest.raises(pickle.PicklingError, match="recursion"):
            cloudpickle.dumps(topology)
    finally:
        for m in modules:
            cloudpickle.unregister_pickle_by_value(m)
    blob = pickle_topology(topology)
    for name in [n for n in sys.modules if n.startswith("sh_")]:
        del sys.modules[name]  # as on a worker: none of them importable
    loaded = cloudpickle.loads(blob)
    decorate = loaded.components["decorate"].obj
    emitted = []

    class Collector:
        def emit(self, values):
            emitted.append(values)

    decorate.execute(("a",), Collector())
    assert emitted == [["[A!A!]"]]
    # a worker pickles each component again (once per task): what came by value goes again
    again = cloudpickle.loads(code_pickler.dumps(decorate))
    again.execute(("b",), Collector())
    assert emitted[-1] == ["[B!B!]"]


def test_a_module_that_cannot_go_by_value_goes_by_name_and_the_others_still_by_value(user_code, tmp_path, caplog):
    bolts, _held = user_code
    (tmp_path / "sh_locked.py").write_text(textwrap.dedent("""
        import threading

        import sh_helpers

        LOCK = threading.Lock()


        def shout_safely(word):
            with LOCK:
                return sh_helpers.shout(word)
    """))
    (tmp_path / "sh_locking_bolts.py").write_text(textwrap.dedent("""
        from sh_locked import shout_safely
        from sh_tools.text import twice

        from squall import BasicBolt


        class Shout(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([twice(shout_safely(tup[0]))])
    """))
    import sh_locking_bolts
    b = TopologyBuilder()
    b.set_spout("words", bolts.Words())
    b.set_bolt("shout", sh_locking_bolts.Shout()).shuffle_grouping("words")
    with caplog.at_level("WARNING", logger="squall.client"):
        blob = pickle_topology(b.create_topology())
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["could not ship sh_locked by value"]
    shout = cloudpickle.loads(blob).components["shout"].obj
    emitted = []

    class Collector:
        def emit(self, values):
            emitted.append(values)

    shout.execute(("a",), Collector())
    assert emitted == [["A!A!"]]


class Kind(NamedTuple):
    """A kind of class a user defines: the module defining it, a bolt ``Use`` that uses it (in
    another module of the same package), and what ``Use`` emits for ("x",) wherever it is loaded
    (fields, defaults, identity, names)."""
    records: str
    bolt: str
    emits: list


KINDS = {
    "typing_namedtuple": Kind("""
        from typing import NamedTuple


        class Rec(NamedTuple):
            word: str
            n: int = 1

            def shouted(self):
                return self.word.upper()
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                rec = r.Rec(tup[0])._replace(n=2)
                collector.emit([repr(rec), rec.shouted(), rec._asdict(), r.Rec._field_defaults, name(r.Rec),
                                isinstance(rec, tuple)])
    """, ["Rec(word='x', n=2)", "X", {"word": "x", "n": 2}, {"n": 1}, "records.Rec", True]),
    "collections_namedtuple": Kind("""
        import collections

        Point = collections.namedtuple("Point", "x y", defaults=[0])
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                p = r.Point(tup[0])._replace(y=3)
                collector.emit([repr(p), p._asdict(), r.Point._field_defaults, name(r.Point)])
    """, ["Point(x='x', y=3)", {"x": "x", "y": 3}, {"y": 0}, "records.Point"]),
    "dataclass": Kind("""
        import dataclasses


        @dataclasses.dataclass
        class Order:
            item: str
            qty: int = 1
            tags: list = dataclasses.field(default_factory=list)
            note: dataclasses.InitVar[str] = ""
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                o = r.Order(tup[0], note="ignored")
                collector.emit([repr(dataclasses.replace(o, qty=3)), dataclasses.asdict(o),
                                [f.name for f in dataclasses.fields(o)],
                                dataclasses.fields(o)[1].default_factory is dataclasses.MISSING, name(r.Order)])
    """, ["Order(item='x', qty=3, tags=[])", {"item": "x", "qty": 1, "tags": []}, ["item", "qty", "tags"], True,
          "records.Order"]),
    "frozen_dataclass": Kind("""
        import dataclasses


        @dataclasses.dataclass(frozen=True)
        class Key:
            name: str
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                k = r.Key(tup[0])
                try:
                    k.name = "changed"
                    frozen = False
                except dataclasses.FrozenInstanceError:
                    frozen = True
                collector.emit([frozen, {k: 1}[r.Key(tup[0])], dataclasses.asdict(k), name(r.Key)])
    """, [True, 1, {"name": "x"}, "records.Key"]),
    "slots_dataclass": Kind("""
        import dataclasses


        @dataclasses.dataclass(slots=True)
        class Slim:
            name: str


        @dataclasses.dataclass(frozen=True, slots=True)
        class FrozenSlim:
            name: str
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                out = []
                for cls in (r.Slim, r.FrozenSlim):
                    obj = cls(tup[0])
                    out += [dataclasses.asdict(obj), hasattr(obj, "__dict__"), cls.__slots__, name(cls)]
                collector.emit(out)
    """, [{"name": "x"}, False, ["name"], "records.Slim", {"name": "x"}, False, ["name"], "records.FrozenSlim"]),
    "enum": Kind("""
        import enum


        class Color(enum.Enum):
            RED = "x"
            GREEN = "g"

            def label(self):
                return self.name.lower()


        class Perm(enum.IntFlag):
            READ = 1
            WRITE = 2
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                c = r.Color(tup[0])
                collector.emit([repr(c), c.label(), c is r.Color.RED, [m.name for m in r.Color],
                                repr(r.Perm.READ | r.Perm.WRITE), name(r.Color)])
    """, ["<Color.RED: 'x'>", "red", True, ["RED", "GREEN"], "<Perm.READ|WRITE: 3>", "records.Color"]),
    "slots": Kind("""
        class Slotted:
            __slots__ = ("a", "b")

            def __init__(self, a, b):
                self.a, self.b = a, b
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                s = r.Slotted(tup[0], 2)
                collector.emit([s.a, s.b, hasattr(s, "__dict__"), r.Slotted.__slots__, name(r.Slotted)])
    """, ["x", 2, False, ["a", "b"], "records.Slotted"]),
    "typed_dict": Kind("""
        from typing import NotRequired, TypedDict


        class Movie(TypedDict):
            title: str
            year: NotRequired[int]
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                m = r.Movie(title=tup[0], year=1999)
                collector.emit([m, sorted(r.Movie.__required_keys__), sorted(r.Movie.__optional_keys__),
                                name(r.Movie)])
    """, [{"title": "x", "year": 1999}, ["title"], ["year"], "records.Movie"]),
    "protocol_and_abc": Kind("""
        import abc
        from typing import Protocol, runtime_checkable


        @runtime_checkable
        class Shouter(Protocol):
            def shout(self) -> str: ...


        class Loud:
            def shout(self):
                return "!"


        class Step(abc.ABC):
            @abc.abstractmethod
            def run(self, word): ...


        class Upper(Step):
            def run(self, word):
                return word.upper()
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                try:
                    r.Step()
                    abstract = False
                except TypeError:
                    abstract = True
                collector.emit([isinstance(r.Loud(), r.Shouter), isinstance(tup[0], r.Shouter), abstract,
                                r.Upper().run(tup[0]), isinstance(r.Upper(), r.Step), name(r.Upper)])
    """, [True, False, True, "X", True, "records.Upper"]),
    "nested": Kind("""
        class Outer:
            class Inner:
                class Deepest:
                    pass
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([name(r.Outer.Inner), name(type(r.Outer.Inner.Deepest()))])
    """, ["records.Outer.Inner", "records.Outer.Inner.Deepest"]),
    "generic": Kind("""
        from typing import Generic, NamedTuple, TypeVar

        T = TypeVar("T")


        class Box(Generic[T]):
            def __init__(self, item: T):
                self.item = item


        class Pair(NamedTuple, Generic[T]):
            first: T
            second: T
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([r.Box[str](tup[0]).item, repr(r.Pair[str](tup[0], "y")), r.Pair._fields,
                                name(r.Box), name(r.Pair)])
    """, ["x", "Pair(first='x', second='y')", ["first", "second"], "records.Box", "records.Pair"]),
}

BOLTS_HEADER = """
    import dataclasses

    from squall import BasicBolt, Fields, Spout

    from . import records as r


    def name(cls):
        return cls.__module__.partition(".")[2] + "." + cls.__qualname__
"""

# A fresh process that cannot import the user's package, as the master and the workers: load the
# topology, run bolt "use" on ("x",), then again from the pickle a worker makes of it for its tasks
LOAD_IN_FRESH_PROCESS = """
import importlib.util
import json
import sys

import cloudpickle

from squall.engine import code_pickler

assert importlib.util.find_spec(sys.argv[2]) is None
with open(sys.argv[1], "rb") as f:
    topology = cloudpickle.loads(f.read())
bolt = topology.components["use"].obj
emitted = []


class Collector:
    def emit(self, values):
        emitted.append(values)


bolt.execute(("x",), Collector())
cloudpickle.loads(code_pickler.dumps(bolt)).execute(("x",), Collector())
print(json.dumps(emitted, default=list))
"""


def kind_package(package, kind):
    """The package ``package`` of ``kind``: its ``records`` module and ``bolts`` (Words, Use)."""
    return {f"{package}/__init__.py": "",
            f"{package}/records.py": kind.records,
            f"{package}/bolts.py": module(BOLTS_HEADER, WORDS_SPOUT, kind.bolt)}


@pytest.fixture
def user_package(tmp_path):
    """``load(package, files)``: ``files`` written to a directory on sys.path and ``package.bolts``
    imported; all of it undone after."""
    src = tmp_path / "src"
    sys.path.insert(0, str(src))
    packages = []

    def load(package, files):
        write_modules(src, files)
        packages.append(package)
        return importlib.import_module(f"{package}.bolts")

    try:
        yield load
    finally:
        sys.path.remove(str(src))
        for name in [n for n in sys.modules if n.partition(".")[0] in packages]:
            del sys.modules[name]


def ship(bolts, tmp_path):
    """The topology words -> use of ``bolts`` (a module) as `pickle_topology` ships it, in a file."""
    b = TopologyBuilder()
    b.set_spout("words", bolts.Words())
    b.set_bolt("use", bolts.Use()).shuffle_grouping("words")
    blob = tmp_path / "topology.pickle"
    blob.write_bytes(pickle_topology(b.create_topology()))
    return blob


def run_fresh(script, *args, cwd):
    """``script`` run with ``args`` in a new interpreter from ``cwd``, not the user code's directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_class_goes_by_value_and_works_in_a_fresh_process(user_package, tmp_path, kind):
    """Shipped by `pickle_topology`, loaded where the package cannot be imported, and pickled
    again there as a worker does for its tasks: both copies of the bolt emit what they do here."""
    package = f"sk_{kind}"
    bolts = user_package(package, kind_package(package, KINDS[kind]))
    emitted = []
    bolts.Use().execute(("x",), type("Collector", (), {"emit": lambda self, values: emitted.append(values)})())
    expected = json.loads(json.dumps(emitted, default=list))
    assert expected == [KINDS[kind].emits]  # what it emits in the process that defined it
    run = run_fresh(LOAD_IN_FRESH_PROCESS, ship(bolts, tmp_path), package, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [KINDS[kind].emits] * 2


# A fresh process as a worker: load the topology, then encode what bolt "use" emits as a tuple's
# value to another worker (argv[3] absent), or decode such a value from argv[3] and describe it
VALUE_IN_FRESH_PROCESS = """
import sys

import cloudpickle

from squall.engine.serialize import Serializer

with open(sys.argv[1], "rb") as f:
    bolt = cloudpickle.loads(f.read()).components["use"].obj
serializer = Serializer({"topology.fall.back.on.pickle": True}, None)
if len(sys.argv) == 3:
    emitted = []
    bolt.execute(("x",), type("Collector", (), {"emit": lambda self, values: emitted.append(values)})())
    with open(sys.argv[2], "wb") as f:
        f.write(serializer.encode_value(emitted[0][0], "the test's value"))
else:
    with open(sys.argv[2], "rb") as f:
        value = serializer.decode_value(f.read())
    cls = bolt.execute.__globals__["r"].Rec  # the class this worker rebuilt from the topology
    print(repr(value), value._asdict(), type(value) is cls)
"""


def test_a_record_of_a_class_by_value_crosses_to_another_worker(user_package, tmp_path):
    """A bolt emits a NamedTuple of the user's (pickled, as topology.fall.back.on.pickle allows):
    the sending worker has the class only by value, so the value carries it by value too, and the
    receiving worker, which rebuilt the class from the topology, gets an instance of that class."""
    bolts = user_package("sk_value", kind_package("sk_value", KINDS["typing_namedtuple"]._replace(bolt="""
        class Use(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([r.Rec(tup[0], 2)])
    """)))
    blob = ship(bolts, tmp_path)
    value = tmp_path / "value.bin"
    sent = run_fresh(VALUE_IN_FRESH_PROCESS, blob, value, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    received = run_fresh(VALUE_IN_FRESH_PROCESS, blob, value, "decode", cwd=tmp_path)
    assert received.returncode == 0, received.stderr
    assert received.stdout.split("\n") == ["Rec(word='x', n=2) {'word': 'x', 'n': 2} True", ""]


def test_a_class_that_cannot_be_rebuilt_where_it_is_loaded_is_named_with_its_module(user_package, tmp_path):
    """Class keywords are not kept by value (cloudpickle keeps none), so a class whose base's
    ``__init_subclass__`` requires one cannot be rebuilt: the error names it, not the TypeError alone."""
    bolts = user_package("sk_tagged", kind_package("sk_tagged", Kind("""
        class Plugin:
            def __init_subclass__(cls, *, tag, **kwargs):
                super().__init_subclass__(**kwargs)
                cls.tag = tag


        class Tagged(Plugin, tag="t"):
            pass
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                collector.emit([r.Tagged.tag])
    """, [])))
    run = run_fresh(LOAD_IN_FRESH_PROCESS, ship(bolts, tmp_path), "sk_tagged", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.strip().split("\n")[-1] == (
        "squall.engine.code_pickler.ShippedClassError: class Tagged of module sk_tagged.records, which goes by "
        "value with the user's code, cannot be rebuilt: TypeError: Plugin.__init_subclass__() missing 1 "
        "required keyword-only argument: 'tag'")


def test_a_class_that_cannot_be_pickled_is_named_with_its_module(user_package, tmp_path, caplog):
    """By value alone it raises naming the innermost class that failed; `pickle_topology` then
    ships the package by name, with a warning naming the package and that class."""
    bolts = user_package("sk_guarded", kind_package("sk_guarded", Kind("""
        import threading


        class Outer:
            class Guarded:
                LOCK = threading.Lock()
    """, """
        class Use(BasicBolt):
            def execute(self, tup, collector):
                with r.Outer.Guarded.LOCK:
                    collector.emit([tup[0]])
    """, [])))
    cloudpickle.register_pickle_by_value(sys.modules["sk_guarded"])
    try:
        with pytest.raises(code_pickler.ShippedClassError) as raised:
            code_pickler.dumps(bolts.Use())
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules["sk_guarded"])
    message = ("class Outer.Guarded of module sk_guarded.records, which goes by value with the user's code, "
               "cannot be pickled: TypeError: cannot pickle '_thread.lock' object")
    assert str(raised.value) == message
    with caplog.at_level("WARNING", logger="squall.client"):
        ship(bolts, tmp_path)
    assert [r.getMessage() for r in caplog.records] == \
        [f"could not ship sk_guarded by value ({message}); workers must be able to import them"]


def test_a_component_that_cannot_be_pickled_is_named_when_its_topology_is_shipped():
    """As LocalCluster names it (tests/acceptance/test_validation.py): the process and Spark
    hosts' submission said only "the topology cannot be serialized: cannot pickle
    '_thread.lock' object", not which component holds the lock."""
    from squall import InvalidTopologyException
    from squall.testing import FeederSpout

    from ..acceptance.components import AckBolt, UnpicklableBolt
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]))
    b.set_bolt("fine", AckBolt()).shuffle_grouping("feed")
    b.set_bolt("locked", UnpicklableBolt()).shuffle_grouping("feed")

    with pytest.raises(InvalidTopologyException) as raised:
        pickle_topology(b.create_topology())
    assert str(raised.value) == ("Component [locked] cannot be serialized (TypeError: cannot pickle '_thread.lock' "
                                 "object); squall copies each component per task, so it must be picklable by "
                                 "cloudpickle")


class _Unsayable(Exception):
    def __str__(self):
        raise RuntimeError("no words")


class _RefusesPickling:
    """A component whose pickling raises an exception whose own str() raises."""

    def __reduce__(self):
        raise _Unsayable()


def test_a_component_whose_pickling_raises_an_unsayable_exception_is_named_on_every_host():
    """The name of the component and of its exception, not the RuntimeError of its __str__,
    whether the topology is shipped (process and Spark hosts) or run on LocalCluster."""
    from squall import InvalidTopologyException
    from squall._config import Config, topology_conf
    from squall.engine.plan import make_plan
    from squall.engine.worker import component_blobs
    from squall.testing import FeederSpout

    from ..acceptance.components import AckBolt
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]))
    bolt = AckBolt()
    bolt.hold = _RefusesPickling()
    b.set_bolt("odd", bolt).shuffle_grouping("feed")
    topology = b.create_topology()
    said = ("Component [odd] cannot be serialized (_Unsayable: <str() of _Unsayable raised RuntimeError>); squall "
            "copies each component per task, so it must be picklable by cloudpickle")
    with pytest.raises(InvalidTopologyException) as shipped:
        pickle_topology(topology)
    assert str(shipped.value) == said
    with pytest.raises(InvalidTopologyException) as local:
        conf = Config()
        conf.set_num_workers(1)
        component_blobs(make_plan("t", "t-1", topology, topology_conf({}, conf), dict(conf)))
    assert str(local.value) == said
