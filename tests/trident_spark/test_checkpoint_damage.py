"""A damaged checkpoint is refused at start naming its file: a truncated or overwritten latest
``offsets/`` or ``commits/`` file failed the query inside Spark's JSON decoder, and the user read
only "the query failed: Unexpected end-of-input in field name" (or "Input length = 1")."""

import pytest

from squall.trident import TridentTopology
from squall.trident.spark import start
from squall.trident.spark.checkpoint import CheckpointDamaged, check_checkpoint

OFFSET = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"txid": 2, "parts": {}, "batch": []}\n'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def _checkpoint(root, batches=2):
    """A checkpoint as Spark leaves it after ``batches`` committed batches."""
    for log, text in (("offsets", OFFSET), ("commits", COMMIT)):
        (root / log).mkdir(parents=True)
        for n in range(batches):
            (root / log / str(n)).write_text(text)
    (root / "metadata").write_text('{"id":"q"}')
    return root


@pytest.mark.parametrize(("file", "data", "said"), [
    ("offsets/1", OFFSET[:40].encode(), "line 2 is not complete JSON"),
    ("commits/1", COMMIT[:5].encode(), "line 2 is not complete JSON"),
    ("offsets/2", b"\x00garbage\x93", "is not text"),   # a batch planned next, overwritten
    ("commits/1", b"", "is empty"),
])
def test_a_damaged_latest_log_file_is_named_with_what_to_do(tmp_path, file, data, said):
    ck = _checkpoint(tmp_path / "ck")
    (ck / file).write_bytes(data)
    with pytest.raises(CheckpointDamaged) as e:
        start(TridentTopology(), None, str(ck))   # refused before the topology or Spark is looked at
    text = str(e.value)
    assert f"checkpoint {ck}: {file} ({ck / file}) {said}" in text, text
    assert "from a backup of the checkpoint" in text, text


def test_a_sound_checkpoint_and_other_files_in_it_pass(tmp_path):
    ck = _checkpoint(tmp_path / "ck")
    (ck / "offsets" / "notes.txt").write_text("not a batch: Spark ignores it")
    (ck / "offsets" / ".1.crc").write_bytes(b"\x00\x01")
    check_checkpoint(str(ck))
    check_checkpoint(f"file://{ck}")
    check_checkpoint(str(tmp_path / "new"))        # not made yet: a new query
    check_checkpoint("hdfs://nn:8020/ck")          # not local: Spark's own error
