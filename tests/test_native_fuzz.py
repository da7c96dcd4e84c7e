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

