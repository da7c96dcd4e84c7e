"""The C paths of a Trident word count against their pure-Python twins: `CountingEmit` (a
function's emits counted by a fused grouped Count) and the opaque commit into a `MemoryMapState` (`squall._native.opaque_commit`,
in C when built) against its pure-Python twin and against the generic map path it stands for.

Both implementations run on the same cases, whichever one squall picked: new keys, Storm's opaque
rule over a stored value (a newer batch, a replay of the same txid, a key this batch wrote
already), a stored value ahead of the batch, keys and values the map keeps encoded (handed back
or left to encode), a combine function and the built-in Count's addition. Then a MemoryMapState
takes a run of batches, replays included, through ``combine_partials`` and through
``multi_update`` with one `CombinerValueUpdater` per key, and must end with the same stored values.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

import squall._native as native
from squall.state import StateError
from squall.trident.builtin import Count, Sum
from squall.trident.failures import TridentOperationError
from squall.trident.state import OpaqueValue
from squall.trident.state.api import CombinerValueUpdater
from squall.trident.state.memory import MemoryMapState


def _pure_twin() -> Any:
    """squall._native as SQUALL_PURE_PYTHON=1 loads it: the pure-Python twins, whatever is built."""
    spec = importlib.util.spec_from_file_location("squall_native_pure", Path(native.__file__))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    old = os.environ.get("SQUALL_PURE_PYTHON")
    os.environ["SQUALL_PURE_PYTHON"] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if old is None:
            del os.environ["SQUALL_PURE_PYTHON"]
        else:
            os.environ["SQUALL_PURE_PYTHON"] = old
    assert module.COMPILED is False
    return module


PURE = _pure_twin()
IMPLEMENTATIONS = {"in use": native.opaque_commit, "pure": PURE.opaque_commit}


def add(a: Any, b: Any) -> Any:
    return a + b


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def commit(request: Any) -> Any:
    return IMPLEMENTATIONS[request.param]


def test_new_keys_are_written_with_no_prev_and_their_partial_as_value(commit):
    committed: dict = {}
    written: dict = {}
    ret, left, encode = commit(committed, written, [("a",), ("b", 2)], [3, 4], 7, None, OpaqueValue)
    assert (ret, left, encode) == ([3, 4], [], [])
    assert committed == written == {("a",): OpaqueValue(7, 3, None), ("b", 2): OpaqueValue(7, 4, None)}
    assert all(type(v) is OpaqueValue for v in committed.values())
    assert pickle.loads(pickle.dumps(committed[("a",)])) == OpaqueValue(7, 3)
    assert repr(committed[("a",)]) == repr(OpaqueValue(7, 3, None))


def test_storms_opaque_rule_per_key(commit):
    committed = {("newer",): OpaqueValue(4, 10, 6), ("replay",): OpaqueValue(5, 10, 6),
                 ("none",): OpaqueValue(None, 10, 6), ("cached",): OpaqueValue(5, 20, 6)}
    # "cached" was written by this very batch (it is in written): the batch builds on its curr
    written = {("cached",): committed[("cached",)]}
    ks = [("newer",), ("replay",), ("none",), ("cached",)]
    ret, left, encode = commit(committed, written, ks, [1, 1, 1, 1], 5, add, OpaqueValue)
    assert ret == [11, 7, 11, 21] and left == [] and encode == []
    assert committed[("newer",)] == OpaqueValue(5, 11, 10), "a newer batch keeps curr as prev"
    assert committed[("replay",)] == OpaqueValue(5, 7, 6), "a replay recomputes from prev"
    assert committed[("none",)] == OpaqueValue(5, 11, 10), "a txid of None is older than any batch"
    assert committed[("cached",)] == OpaqueValue(5, 21, 6), "a second update in one batch adds up"
    assert written == committed


def test_a_batch_of_txid_none_builds_on_curr(commit):
    committed = {("k",): OpaqueValue(9, 10, 6)}
    ret, _, _ = commit(committed, {}, [("k",)], [2], None, None, OpaqueValue)
    assert ret == [12] and committed[("k",)] == OpaqueValue(None, 12, 10)


def test_a_stored_value_ahead_of_the_batch_raises_the_values_own_error(commit):
    committed = {("k",): OpaqueValue(9, 10, 6)}
    with pytest.raises(StateError, match=r"Current batch \(5\) is behind state's batch"):
        commit(committed, {}, [("k",)], [1], 5, None, OpaqueValue)
    assert committed == {("k",): OpaqueValue(9, 10, 6)}


def test_keys_and_values_kept_encoded_are_handed_back_or_left_to_encode(commit):
    committed: dict = {("enc",): b"\x93\x01\x02\xc0"}
    ks = [("plain",), ("enc",), (1.5,), ["list"], (True,), ("tuple",), ("mutable",)]
    args = [1, 1, 1, 1, 1, ("x", (1, 2.5, None)), [1]]
    written: dict = {}
    ret, left, encode = commit(committed, written, ks, args, 3, None, OpaqueValue)
    assert left == [1, 2, 3, 4], "an encoded value, and keys of a float, a list, a bool: the caller's"
    assert encode == [6], "a list value is stored encoded; a tuple of plain values is kept"
    assert ret == [1, None, None, None, None, ("x", (1, 2.5, None)), [1]]
    assert committed[("enc",)] == b"\x93\x01\x02\xc0" and ("mutable",) not in committed
    assert written[("mutable",)] == OpaqueValue(3, [1]) and committed[("tuple",)] == written[("tuple",)]


def test_count_adds_and_a_combine_function_is_called_with_stored_then_partial(commit):
    calls = []

    def combine(a: Any, b: Any) -> Any:
        calls.append((a, b))
        return a * 10 + b

    committed = {("k",): OpaqueValue(1, 2, None)}
    assert commit(committed, {}, [("k",), ("n",)], [3, 4], 2, combine, OpaqueValue)[0] == [23, 4]
    assert calls == [(2, 3)], "a new key takes its partial as it is, as CombinerValueUpdater does"
    with pytest.raises(TypeError):
        commit({("k",): OpaqueValue(1, "s", None)}, {}, [("k",)], [1], 2, None, OpaqueValue)


def test_a_key_count_other_than_the_partials_is_refused(commit):
    with pytest.raises(ValueError, match="2 keys and 1 partial aggregates"):
        commit({}, {}, [("a",), ("b",)], [1], 1, None, OpaqueValue)


def _updates(state: MemoryMapState, batches: list[tuple[int, dict]], inlined: bool, agg: Any) -> dict:
    for txid, partial in batches:
        state.begin_commit(txid)
        if inlined:
            state.combine_partials(list(partial), list(partial.values()), agg)
        else:
            state.multi_update([list(k) for k in partial], [CombinerValueUpdater(agg, a) for a in partial.values()])
        state.commit(txid)
    return dict(state._backing.store.items())


@pytest.mark.parametrize("agg", [Count(), Sum()], ids=["Count", "Sum"])
def test_a_memory_map_commit_stores_what_multi_update_stores_through_replays(agg):
    batches = [
        (1, {("a",): 1, ("b",): 2, (7,): 3}),
        (2, {("a",): 5, ("c",): 1, ("d", 1): 2}),
        (2, {("a",): 4, ("c",): 2}),  # a replay of txid 2 (an opaque spout's other tuples)
        (3, {("a",): 1, (2.5,): 1, ("b",): 1}),  # a float key: kept encoded
        (3, {("a",): 1, ("b",): 2, (2.5,): 4}),
        (4, {("d", 1): 1, (7,): 1, ("e",): 1}),
    ]
    inlined = _updates(MemoryMapState.factory().make_state({}, None, 0, 1), batches, True, agg)
    generic = _updates(MemoryMapState.factory().make_state({}, None, 0, 1), batches, False, agg)
    assert inlined == generic
    assert inlined[("a",)] == OpaqueValue(3, 6, 5) and inlined[("b",)] == OpaqueValue(3, 4, 2)


@pytest.mark.parametrize("make", [native.CountingEmit, PURE.CountingEmit], ids=["in use", "pure"])
def test_a_counting_emit_counts_groups_and_hands_everything_else_to_the_general_emit(make):
    general: list = []
    emit = make(0, general.append)
    emit(["a"])  # nvalues not set yet (-1): nothing is taken
    assert general == [["a"]] and emit.groups == {}
    emit.nvalues = 1
    for values in (["a"], ("a",), ["b"], ["a"]):
        emit(values)
    assert emit.groups == {("a",): 3, ("b",): 1}
    emit.groups = groups = {("a",): 10}  # the next batch's dict, set by the receiver
    emit(["a"])
    assert groups == {("a",): 11}
    for other in (["a", "b"], [], iter(["a"]), [["unhashable"]], "a"):
        emit(other)
    assert general[1:] == [["a", "b"], [], general[3], [["unhashable"]], "a"] and groups == {("a",): 11}
    by_input = make(-2, general.append)
    by_input.nvalues, by_input.input = 1, ["s", "t", "u"]
    by_input(["x"])
    assert by_input.groups == {("t",): 1}
    by_input.input = ["short"]  # the input is too short for the index: the general emit's error
    by_input(["x"])
    assert general[-1] == ["x"]


@pytest.mark.parametrize("pack_rows", [native.pack_rows, PURE.pack_rows], ids=["in use", "pure"])
def test_rows_go_into_the_packs_of_the_tasks_their_grouping_chooses(pack_rows):
    seen: list = []

    def choose(values: list) -> list[int]:
        seen.append(values)
        return [1, 2] if values[1] == "all" else [len(values[1])]

    packs: dict = {("s1", 3): [["old", 0]]}
    counts: dict = {}
    rows = [["abc", 1], ["all", 2], ["xyz", 3], ["de", 4]]
    assert pack_rows(rows, "tx", choose, 2, packs, "s1", counts) == (4, 5)
    assert seen == [["tx", "abc", 1], ["tx", "all", 2], ["tx", "xyz", 3], ["tx", "de", 4]]
    assert all(type(v) is list for v in seen)
    assert packs == {("s1", 3): [["old", 0], ["abc", 1], ["xyz", 3]], ("s1", 1): [["all", 2]],
                     ("s1", 2): [["all", 2], ["de", 4]]}
    assert packs[("s1", 1)][0] is rows[1] and packs[("s1", 2)][0] is rows[1], "the rows themselves, not copies"
    assert counts == {3: 2, 1: 1, 2: 2}
    # a row of another width stops the packing there: the caller raises the engine's error for it
    assert pack_rows([["ab", 1], ["short"], ["cd", 2]], "tx", choose, 2, packs, "s2", counts) == (1, 1)
    assert packs[("s2", 2)] == [["ab", 1]] and counts[2] == 3
    with pytest.raises(ZeroDivisionError):
        pack_rows([["ab", 1]], "tx", lambda values: 1 / 0, 2, packs, "s3", counts)


@pytest.mark.parametrize("impl", [native, PURE], ids=["in use", "pure"])
def test_a_trident_tuple_reads_by_index_slice_and_name_and_a_view_skips_its_init(impl):
    from squall import Fields

    class Checked(impl.TridentTupleBase):
        __slots__ = ()

        def __init__(self, fields: Any, values: Any) -> None:
            raise AssertionError("a view is made without __init__")

    fields = Fields(["word", "count"])
    t = impl.view_of(Checked, fields, ["cow", 3])
    assert (t[0], t[-1], t[0:1], t["count"], len(t)) == ("cow", 3, ["cow"], 3, 2)
    assert t.values == ["cow", 3] and t._fields is fields
    with pytest.raises(ValueError, match="'nope' does not exist"):
        t["nope"]
    with pytest.raises(IndexError):
        t[2]
    empty = Checked.__new__(Checked)
    with pytest.raises(AttributeError):
        empty[0]
    with pytest.raises(TypeError):
        impl.view_of(dict, fields, [])


@pytest.mark.parametrize("combine_rows", [native.combine_rows, PURE.combine_rows], ids=["in use", "pure"])
def test_a_packs_rows_combine_per_group_and_stop_where_the_python_path_must_raise(combine_rows):
    groups: dict = {("a",): 5}
    rows = [["a", 2], ("b", 1), ["a", 1], ["c", 4]]
    assert combine_rows(rows, groups, 2, 0, 1, None) == 4
    assert groups == {("a",): 8, ("b",): 1, ("c",): 4}
    assert combine_rows([[3, "x"], [3, "y"]], groups, 2, 1, 0, lambda a, b: a * 10 + b) == 2
    assert groups[("x",)] == 3 and groups[("y",)] == 3
    assert combine_rows([[1, "x"], [2, "x"]], groups, 2, 1, 0, lambda a, b: a * 10 + b) == 2
    assert groups[("x",)] == 312
    for bad in (["a"], ["a", 1, 2], "ab", [["unhashable"], 1]):
        before = dict(groups)
        assert combine_rows([["a", 1], bad, ["a", 1]], groups, 2, 0, 1, None) == 1
        assert groups == {**before, ("a",): before[("a",)] + 1}
    with pytest.raises(ValueError):
        combine_rows([], groups, 2, 2, 1, None)


def _count_combine_body() -> Any:
    """A bolt after a repartition that combines Count partials per word (the count bolt's first
    node), emitting the combined counts on s1."""
    from squall import Fields
    from squall.trident.processors import AggregateProcessor, BodyNode, CombinerCombineAggregator, \
        GroupedAggregator, SubtopologyBody

    from .test_processors import Context, Output

    nodes = [BodyNode("combine", AggregateProcessor(Fields("word", "count"), GroupedAggregator(
        CombinerCombineAggregator(Count(), owns_lifecycle=True), Fields("word"), Fields("count"))),
        Fields("word", "count"), (("stream", "s0"),), (), ("s1",))]
    body = SubtopologyBody(nodes, {"s0": Fields("word", "count")}, {})
    out = Output()
    body.prepare({}, Context(), out)
    return body, out


def test_a_packs_count_partials_combine_in_one_call_and_bad_rows_fail_as_before():
    from squall.trident.coordinator import TransactionAttempt
    from squall.trident.executor import BatchInfo

    body, out = _count_combine_body()
    assert "s0" in body._combining, "a grouped Count after a repartition takes a pack's rows at once"
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    body.execute_many(batch, "s0", [["a", 2], ("b", 1), ["a", 3]])
    body.execute(batch, "s0", ["c", 1])
    body.finish_batch(batch)
    assert sorted(out.emitted) == [("s1", ["a", 5]), ("s1", ["b", 1]), ("s1", ["c", 1])]
    body.init_batch(batch := BatchInfo(TransactionAttempt(2, 0)))
    with pytest.raises(ValueError, match=r"fields \['word', 'count'\] on stream 's0' got 3 values"):
        body.execute_many(batch, "s0", [["a", 1], ["a", 1, 2]])
    # raised naming the operation (here its node's name) and the row (squall.trident.failures)
    with pytest.raises(TridentOperationError, match=r"^combine raised ValueError: group_by: the group values "
                       r"\[\['x'\]\] are not hashable; its input: fields \['word', 'count'\] values \[\['x'\], 1\]$"):
        body.execute_many(batch, "s0", [["a", 1], [["x"], 1]])
    assert batch.state[0] == {("a",): 2}, "the rows before the bad one were combined, once each"
