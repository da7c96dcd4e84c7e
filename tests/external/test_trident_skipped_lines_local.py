"""On LocalCluster, a `FileTridentSpout` batch whose lines the translator all skips (None: no
tuple, no dead letter) commits like any batch and the next txid reads on after it: its metadata is
stored, whatever it emitted. The Spark source planned such a batch again at every trigger and read
nothing after it (tests/trident_spark/test_skipped_batches.py); this is the same input on squall's
engine, every good line counted once, in the txid its place in the file gives it."""

from __future__ import annotations

import itertools

import pytest

from squall import Config, Fields, LocalCluster
from squall.external.trident_files import FileTridentSpout
from squall.trident import TridentTopology

from ..trident.trident_ops import Record, Recorded

_runs = itertools.count()


def skip_comments(line: bytes) -> list | None:
    """Skips (None) a line starting ``#``; the line as text otherwise."""
    text = line.decode().rstrip("\n")
    return None if text.startswith("#") else [text]


def _append(path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.write("".join(line + "\n" for line in lines))


@pytest.mark.timeout(120)
def test_a_batch_of_only_skipped_lines_commits_and_the_next_txid_reads_on(tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    # two lines a batch: txid 1 #1 #2 (skipped only), 2 good1 #3, 3 #4 #5 (skipped only), 4 #6 good2
    staged = tmp_path / "a.txt"
    _append(staged, ["#1", "#2", "good1", "#3", "#4", "#5", "#6", "good2"])
    staged.rename(directory / "a.txt")  # whole before the spout lists it: the batches are the ones above
    key = f"skipped-{next(_runs)}"
    topology = TridentTopology()
    stream = topology.new_stream(key, FileTridentSpout(str(directory), ["line"], translator=skip_comments,
                                                       max_batch_records=2))
    stream.partition_aggregate(Fields("line"), Record(key), Fields("line"))
    with LocalCluster() as cluster:
        cluster.submit_topology(key, Config(), topology.build())
        Recorded.wait_for(key, lambda seen: len(seen) >= 2)
        # more skipped lines, then a good one: read on after them too
        _append(directory / "a.txt", ["#7", "#8", "#9", "good3"])
        seen = Recorded.wait_for(key, lambda seen: len(seen) >= 3)
        cluster.kill_topology(key, wait_secs=0)
    by_line = {values[0]: txid for txid, values in seen}
    assert sorted(values[0] for _, values in seen) == ["good1", "good2", "good3"], seen  # each once
    assert (by_line["good1"], by_line["good2"]) == (2, 4), seen
