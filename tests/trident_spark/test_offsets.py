"""A spout's batch metadata in Spark's checkpoint: JSON that carries no code.

Spark keeps each batch's offset (the spout's metadata) in ``<checkpoint>/offsets/<batch>``, a file
anyone who can write the checkpoint directory can rewrite; reading it back must never run what
the file says (it was a pickle once)."""

import base64
import json
import math
import os
import pickle

import pytest

from squall.trident.spark.rows import from_offset, to_offset


class _Payload:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # what a rewritten checkpoint's pickle does when loaded: make a directory
        return (os.mkdir, (self.path,))


def _through_checkpoint(meta):
    """``meta`` as Spark writes it and hands it back: JSON text in between."""
    return from_offset(json.loads(json.dumps(to_offset(meta, "spout 'words'"))), "spout 'words'")


def test_a_pickle_in_a_rewritten_checkpoint_is_refused_and_never_loaded(tmp_path):
    marker = tmp_path / "ran"
    offset = json.loads(json.dumps({"txid": 7, "meta": {"$pickle": base64.b64encode(
        pickle.dumps(_Payload(str(marker)))).decode()}}))
    with pytest.raises(ValueError, match="spout 'words'.*never loaded from a checkpoint"):
        from_offset(offset["meta"], "spout 'words'")
    assert not marker.exists()


@pytest.mark.parametrize("meta", [
    None, 3, -(1 << 70), 2.5, "text", True, [1, "a", None],
    {"topic": "t", "partition": 0, "offset": 12},
    ("a", 1), {("a", 1): 2, 3: [b"\x00\xff"]}, {"$tuple": 1}, {1, 2, 3}, frozenset({"x"}),
    {"nested": [(1, 2), {b"k": {"s": {4}}}]}, [], {}, (),
])
def test_metadata_made_of_python_values_comes_back_equal_and_of_its_types(meta):
    back = _through_checkpoint(meta)
    assert back == meta
    assert type(back) is type(meta)


def test_non_finite_floats_come_back():
    back = _through_checkpoint([math.inf, -math.inf, math.nan])
    assert back[:2] == [math.inf, -math.inf] and math.isnan(back[2])
    assert "Infinity" not in json.dumps(to_offset([math.inf]))  # no JSON extension in the checkpoint


def test_metadata_of_a_class_of_the_spouts_own_is_refused_naming_the_spout():
    class Position:
        pass

    with pytest.raises(TypeError, match=r"spout 'words'.*Position.*cannot keep in Spark's checkpoint"):
        to_offset({"at": Position()}, "spout 'words'")


@pytest.mark.parametrize("hostile", [
    {"$bytes": "not base64!"}, {"$dict": [[[1], 2]]}, {"$float": "__import__('os')"}, {"$tuple": 5},
])
def test_a_tagged_value_squall_did_not_write_is_refused_naming_the_spout(hostile):
    with pytest.raises(ValueError, match="spout 'words'.*not squall's"):
        from_offset(hostile, "spout 'words'")
