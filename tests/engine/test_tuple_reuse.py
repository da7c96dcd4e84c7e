"""Tuples made and freed by the thousand, as a drain does: the compiled Tuple takes freed ones back
for the next (a bounded free list, squall/_speedups.c); on both implementations a Tuple releases
its values when it dies, a new one carries only its own slots, and the cycle collector still
sees and collects Tuples made from freed ones."""

from __future__ import annotations

import gc
import weakref

from squall import Fields
from squall._tuple import Source, Tuple


class _Value:
    """A value whose death a weak reference shows."""


def _source(task: int) -> Source:
    return Source("split", "default", task, Fields(["word"]))


def test_a_freed_tuple_releases_its_values_and_a_new_one_carries_only_its_own_slots():
    value = _Value()
    alive = weakref.ref(value)
    old = Tuple([value], _source(1), 5, 7, 9)
    del value, old
    assert alive() is None  # released when the Tuple died, not held while it waits for reuse

    src = _source(2)
    made = [Tuple([i], src) for i in range(3000)]
    for i, t in enumerate(made):
        assert t.values == [i] and t._src is src
        assert (t._root, t._val, t._oav) == (0, 0, 0)
    del made
    t = Tuple(["w"], src, 3, 11, 13)
    assert (t.values, t._root, t._val, t._oav) == (["w"], 3, 11, 13)
    assert t.source_task == 2 and t.get_value_by_field("word") == "w"


def test_tuples_made_from_freed_ones_are_tracked_and_their_cycles_collected():
    # A full collection walks every tracked object of the process: in a pytest-xdist worker that
    # has run a thousand tests, seconds each (15 s for the three at load 6). The objects alive
    # before the test are frozen (left out of collections) meanwhile, so gc.collect walks the
    # ones made here, which must still all be tracked and collected.
    gc.freeze()
    try:
        for _ in range(3):  # the second and third rounds are made from the first's freed Tuples
            tuples = [Tuple([_Value()], _source(1)) for _ in range(2000)]
            assert all(gc.is_tracked(t) for t in tuples)
            alive = [weakref.ref(t.values[0]) for t in tuples]
            for t in tuples:
                t.values.append(t)  # a cycle: only the collector frees it
            del tuples, t
            gc.collect()
            assert all(a() is None for a in alive)
    finally:
        gc.unfreeze()


def test_a_freed_instance_of_a_subclass_is_never_handed_out_as_a_plain_tuple():
    """A subclass of Tuple (slots of its own, a __del__) shares the Tuple's dealloc: its freed
    instances must not join the free list, or the next Tuple made would be one of them."""

    class Roomy(Tuple):
        __slots__ = ("extra",)

    src = _source(3)
    held = [Tuple([i], src) for i in range(2000)]  # the free list emptied (and Tuple adopted)
    for i in range(2000):
        r = Roomy([i], src)
        r.extra = [i]
        del r
    made = [Tuple([i], src) for i in range(2000)]
    assert {type(t) for t in made} == {Tuple}
    assert all(not hasattr(t, "extra") for t in made)
    assert len(held) == 2000
