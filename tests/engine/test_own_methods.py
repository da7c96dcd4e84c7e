"""`squall._native.own_methods`: a collector class's compiled methods set on the class itself, so
that CPython 3.11 specialises the user's calls of them (it specialises a call of a C method only
on an instance of exactly the method's class, and every engine collector is a Python subclass of
its compiled base)."""

from __future__ import annotations

import dis
import io
import sys

import pytest

from squall import _native
from squall._native import BasicCollectorBase, BoltCollectorBase, own_methods
from squall.engine.bolt_executor import BasicCollector, BoltCollector
from squall.engine.spout_executor import SpoutCollector


def test_the_engine_collectors_own_their_compiled_methods_and_keep_their_python_ones():
    if _native.COMPILED:
        assert BasicCollector.__dict__["emit"].__objclass__ is BasicCollector
        assert SpoutCollector.__dict__["emit"].__objclass__ is SpoutCollector
        assert BoltCollector.__dict__["ack"].__objclass__ is BoltCollector
    assert BoltCollector.emit.__qualname__ == "BoltCollector.emit"  # its Python emit stays
    assert own_methods(BasicCollector) == []  # set once: a second call finds them its own


def test_own_methods_sets_only_what_the_class_does_not_override():
    class Mine(BasicCollectorBase):
        pass

    class Overriding(BoltCollectorBase):
        def ack(self, tup):
            return "mine"

    assert own_methods(Mine) == (["emit"] if _native.COMPILED else [])
    assert own_methods(Overriding) == []
    assert Overriding.__dict__["ack"](None, None) == "mine"
    if _native.COMPILED:
        assert Mine.__dict__["emit"].__objclass__ is Mine
        with pytest.raises(TypeError):
            own_methods(BasicCollectorBase)  # a compiled class is not changed
        with pytest.raises(TypeError):
            Mine.emit(BasicCollector.__new__(BasicCollector), [1])  # the descriptor checks its class


@pytest.mark.skipif(not _native.COMPILED or sys.version_info[:2] != (3, 11),
                    reason="CPython 3.11's specialising interpreter, with the compiled collectors")
def test_a_user_call_of_the_compiled_emit_is_specialised():
    basic = BasicCollector.__new__(BasicCollector)
    basic._routers = None  # no routers: emit hands every call to the Python collector

    class Out:
        def emit(self, values, anchor, stream):
            return []

    basic._out, basic.input = Out(), None

    def execute(collector):
        collector.emit([1])

    for _ in range(64):  # past the interpreter's warm-up
        execute(basic)
    shown = io.StringIO()
    dis.dis(execute, adaptive=True, file=shown)
    assert "PRECALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS" in shown.getvalue()
