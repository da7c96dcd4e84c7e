"""The compiled hot path against malformed batches and odd Python values (tests/native_fuzz.py):
the inputs that crashed it or made it disagree with its pure-Python twin, fixed, and a short
seeded round of the fuzzer that found them.

A crash takes the interpreter down with it, so each reproducer runs in a child process, where a
crash is a failed test saying so (exit -11) rather than the end of the test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import msgpack
import pytest

from squall import _native
from squall.engine.serialize import SerializationError

from . import native_fuzz

compiled_only = pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): nothing compiled to "
                                   "compare with its twins")
SQUALL_ROOT = Path(_native.__file__).resolve().parents[1]  # the checkout whose squall is tested


def run_child(code: str) -> str:
    """``code`` run by a fresh interpreter importing the same squall; its output (a crash fails, named)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SQUALL_ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=SQUALL_ROOT, timeout=60, check=False)
    assert run.returncode == 0, (f"the child exited {run.returncode}" + (" (killed by signal "
                                 f"{-run.returncode}: a crash)" if run.returncode < 0 else "") + f"\n{run.stderr[-2000:]}")
    return run.stdout.strip()


# --- re-entrant Python code while a C loop walks a list it was given ---------------------------
# Each: a list walked in place, or an object borrowed from it, while a property, __len__, an
# inbox's append or a combine (Python) cleared the list: read past its end, or freed under the
# call. Each crashed the interpreter (SIGSEGV) before the fix.
CLEARING_SOURCE = """
    from squall import _native
    from squall._tuple import Tuple
    items = []
    class Source:  # a source whose task, read by the packer, clears the items being packed
        stream = "default"
        @property
        def task(self):
            items.clear()
            return 1
    def fill():
        items[:] = [5, Tuple(["a"], Source(), 0, 0)] * 1000
"""


def test_grouping_a_batch_whose_source_clears_the_items_groups_the_items_it_was_given():
    out = run_child(CLEARING_SOURCE + """
    fill()
    columns = _native.group_items(items, Tuple)
    runs = columns[0] if columns is not None else None
    print(None if runs is None else (len(runs), len(runs[0][2])))
    """)
    assert out == ("(1, 1000)" if _native.COMPILED else "None")


def test_packing_a_batch_whose_source_clears_the_items_leaves_it_to_msgpack():
    out = run_child(CLEARING_SOURCE + """
    fill()
    print(_native.pack_batch(items, Tuple), len(items))
    """)
    # the items changed under it: msgpack's path packs what is there now (the twin packs nothing)
    assert out == ("None 0" if _native.COMPILED else "None 2000")


def test_delivering_to_an_inbox_that_clears_the_items_stops_where_they_end():
    out = run_child("""
    from squall import _native
    items = []
    class Inbox:
        def __init__(self):
            self.got = []
        def append(self, item):
            items.clear()
            self.got.append(item)
    inbox = Inbox()
    items[:] = [5, "first"] + [5, "later"] * 1000
    print(_native.deliver_items({5: inbox}, items), inbox.got)
    """)
    # the twin walks a copy of the items and delivers all 1,001; the compiled one walks them in
    # place, without a copy per batch, and stops where they end now: after the first
    assert out == ("1 ['first']" if _native.COMPILED else "1001 " + str(["first"] + ["later"] * 1000))


def test_an_outbox_writes_a_tuple_s_values_as_they_are_after_its_source_s_attributes_are_read():
    """The word of a Tuple's one value was copied after the source's task was read: a property
    that cleared the values freed it first, and the freed str's bytes went out (a use after free,
    ASan: heap-use-after-free in outbox_put_tuple)."""
    out = run_child("""
    from squall import _native
    from squall._tuple import Tuple
    from squall.engine.serialize import Serializer
    values = ["w" * 20 + str(7)]  # a short ASCII word made at run time (not an interned constant)
    class Source:
        stream = "default"
        component = "c"
        @property
        def task(self):
            values.clear()
            return 1
    src = Source()
    box = _native.Outbox(100, 1 << 20)
    box.put(5, Tuple(values, src, 0, 0), Tuple)
    [chunk] = box.take()
    ser = Serializer({}, lambda task, stream: src)
    # bytes: written at the put; a list (the twin's): the serializer writes it at the flush
    items = ser.decode_batch(chunk if type(chunk) is bytes else ser.encode_batch(chunk))
    print(items[0], items[1].values)
    """)
    assert out == "5 []"


def test_combining_rows_whose_combine_clears_them_stops_as_the_twin_does():
    out = run_child("""
    from squall import _native
    rows = [["k", 1]] * 1000
    def combine(old, value):
        rows.clear()
        return old + value
    groups = {}
    print(_native.combine_rows(rows, groups, 2, 0, 1, combine), groups)
    """)
    assert out == "0 {('k',): 2}"


def test_an_opaque_commit_whose_combine_clears_its_keys_stops_as_the_twin_s_zip_does():
    out = run_child("""
    from squall import _native
    from squall.trident.state.map import OpaqueValue
    ks = [("k%d" % i,) for i in range(1000)]
    vals = [1] * 1000
    committed = {k: OpaqueValue(0, 5, None) for k in ks}
    def combine(base, arg):
        ks.clear()
        vals.clear()
        return base + arg
    new, left, encode = _native.opaque_commit(committed, {}, ks, vals, 1, combine, OpaqueValue)
    print(new[:2], new.count(None), left, encode)
    """)
    assert out == "[6, None] 999 [] []"


def test_packing_rows_whose_len_clears_them_stops_as_the_twin_does():
    out = run_child("""
    from squall import _native
    rows = []
    class Row(list):
        def __len__(self):
            rows.clear()
            return 1
    rows += [Row(["x%d" % i]) for i in range(1000)]
    packs, counts = {}, {}
    print(_native.pack_rows(rows, 1, lambda full: [0], 1, packs, "s", counts), counts)
    """)
    assert out == "(0, 1) {0: 1}"


# --- a damaged batch the twin decoded -----------------------------------------------------------
def test_the_twin_refuses_a_run_whose_values_column_is_longer_than_its_targets_as_the_compiled_path_does():
    """A run of one target, one root and one edge value but two values lists: map() stopped at
    the shortest column, so the pure path made one Tuple of the first values and said nothing
    (and of a values column of plain values, Tuples whose values were a float or an int)."""
    src = native_fuzz.SOURCES[(3, "words")]
    for values in ([["a"], ["b"]], [1.5, True]):
        data = msgpack.packb([2, [[3, "words", [7], values, [5], [9]]], [], [], [], []])
        with pytest.raises(ValueError, match="columns of different lengths"):
            native_fuzz.TWINS.batch_items([], [7], values, src, [5], [9], native_fuzz.Tuple)
        assert isinstance(native_fuzz.twin_decode(data), SerializationError)
        with pytest.raises(SerializationError, match="columns of different lengths"):
            native_fuzz.Serializer({}, native_fuzz.source_of).decode_batch(data)


# --- a short seeded round of the fuzzer ---------------------------------------------------------
@compiled_only
def test_damaged_batches_decode_in_every_compiled_decoder_as_in_the_twin_or_are_refused_by_both():
    findings, counts = native_fuzz.fuzz_decoders(seed=20261207, seconds=60, max_inputs=20000)
    assert sum(counts.values()) == 20000
    decoded = sum(n for (kind, outcome), n in counts.items() if kind != "valid" and outcome == "decoded")
    assert decoded > 2000, counts  # damage the compiled decoders took (and matched), not only gave up
    assert findings == [], "\n".join(map(str, findings[:5]))


@compiled_only
def test_odd_values_and_re_entrant_callables_neither_crash_the_compiled_entry_points_nor_part_them_from_the_twins():
    out = run_child(f"""
    import sys
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    from tests import native_fuzz
    findings, n = native_fuzz.fuzz_objects(seed=20261207, seconds=60, max_inputs=8000)
    print(n, len(findings))
    for f in findings[:5]:
        print(f)
    """)
    assert out == "8000 0"
