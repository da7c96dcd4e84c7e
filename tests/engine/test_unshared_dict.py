"""A component unpickled for its task gets an instance dict of its own keys before it opens
(`squall.engine.executor.unshare_dict`), so that CPython specialises the attribute reads in its
``next_tuple`` and ``execute``: unpickling had left the instance a dict sharing its class's keys,
on which every ``self.x`` went CPython's generic way (issue 38: W2's spout and bolt, W1's spout)."""

from __future__ import annotations

import dis
import gc
import sys

import cloudpickle
import pytest

from squall import BasicBolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.engine.executor import unshare_dict
from squall.testing._registry import SharedLog

from ..conftest import wait_until

N = 3000
# dis shows the specialised forms from 3.11 on; the generic read is LOAD_ATTR (its adaptive
# form LOAD_ATTR_ADAPTIVE in 3.11)
GENERIC = {"LOAD_ATTR", "LOAD_ATTR_ADAPTIVE"}
needs_specialising = pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython specialises from 3.11")


def reads_of(fn, name: str) -> list[str]:
    """The opcodes reading attribute ``name`` in ``fn``'s code, as it runs now."""
    return [i.opname for i in dis.get_instructions(fn, adaptive=True)
            if i.opname.startswith("LOAD_ATTR") and i.argval == name]


class Adder:
    def __init__(self, step: int) -> None:
        self.step, self.total = step, 0

    def add(self) -> None:
        self.total += self.step


class Slotted:
    __slots__ = ("step",)

    def __init__(self, step: int) -> None:
        self.step = step


@needs_specialising
def test_an_unpickled_object_keeps_its_attributes_and_its_reads_are_specialised():
    obj = cloudpickle.loads(cloudpickle.dumps(Adder(3)))
    unshare_dict(obj)
    for _ in range(2000):
        obj.add()
    assert vars(obj) == {"step": 3, "total": 6000}
    assert reads_of(Adder.add, "step") and not set(reads_of(Adder.add, "step")) & GENERIC


class Counter:
    def prepare(self) -> None:
        self.n = 0

    def add(self) -> None:
        self.n += 1


@needs_specialising
def test_an_object_unpickled_without_state_keeps_its_inline_values():
    obj = cloudpickle.loads(cloudpickle.dumps(Counter()))
    unshare_dict(obj)
    assert not any(type(r) is dict for r in gc.get_referents(obj))  # no dict made for it
    obj.prepare()
    for _ in range(2000):
        obj.add()
    assert obj.n == 2000 and reads_of(Counter.add, "n") and not set(reads_of(Counter.add, "n")) & GENERIC


def test_an_object_without_a_dict_is_left_as_it_is():
    obj = cloudpickle.loads(cloudpickle.dumps(Slotted(4)))
    unshare_dict(obj)
    assert obj.step == 4 and not hasattr(obj, "__dict__")


class Numbers(Spout):
    """Emits 0 .. limit - 1, reading its own attributes on every call."""

    def __init__(self, limit: int) -> None:
        self.limit, self.sent = limit, 0

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("n"))

    def next_tuple(self) -> None:
        if self.sent < self.limit:
            self.collector.emit([self.sent])
            self.sent += 1


class Tally(BasicBolt):
    """Adds the numbers; logs the sum at each hundredth."""

    def __init__(self, log: SharedLog) -> None:
        self.log, self.total, self.seen = log, 0, 0

    def execute(self, tup, collector) -> None:
        self.total += tup.values[0]
        self.seen += 1
        if self.seen % 100 == 0:
            self.log.append((self.seen, self.total))


@needs_specialising
def test_a_running_spouts_and_bolts_attribute_reads_are_specialised():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(N))
    b.set_bolt("tally", Tally(log)).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        assert wait_until(lambda: (N, N * (N - 1) // 2) in log.items(), timeout=60), log.items()[-1:]
        # read while the topology runs: the words' reads were specialised on its loop
        spout_reads, bolt_reads = reads_of(Numbers.next_tuple, "limit"), reads_of(Tally.execute, "seen")
    assert spout_reads and not set(spout_reads) & GENERIC, spout_reads
    assert bolt_reads and not set(bolt_reads) & GENERIC, bolt_reads
