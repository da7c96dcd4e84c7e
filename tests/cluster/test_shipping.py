"""Which user modules travel with a topology (`squall.cluster.shipping.user_modules`), and
pickling them when they import each other (`squall.engine.code_pickler`)."""

import pickle
import sys
import textwrap

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
