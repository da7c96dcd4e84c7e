"""A translator that returns another count of values than the spout's fields (a CSV line with an
extra comma) makes that record a dead letter in every spout of squall.external. Before, the
collector's emit raised: `FileSpout`'s worker died, its restart read the same line first and died
again, and no later line was ever processed (a crash loop); a Trident spout failed its batch on
every replay."""

from __future__ import annotations

import json
import logging

from squall import LocalCluster, TopologyBuilder
from squall.external.files import FileSpout
from squall.external.trident_files import FileTridentSpout
from squall.testing._registry import SharedLog
from squall.trident.coordinator import TransactionAttempt
from tests.conftest import wait_until
from tests.external.test_files import Recorder
from tests.external.test_kafka import TP, MemoryConsumer, open_spout, run


def csv_pair(record: bytes) -> list:
    return record.decode().rstrip("\n").split(",")


def dead_entries(directory) -> list[dict]:
    if not directory.exists():
        return []
    return [json.loads(line) for p in sorted(directory.glob("*.dead")) for line in p.read_text().splitlines()]


def test_filespout_dead_letters_a_line_with_too_many_values_and_goes_on(tmp_path):
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "a.csv").write_text("1,2\n3,4,5\n6,7\nsolo\n8,9\n")
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["a", "b"], translator=csv_pair, quiet_secs=0, commit_every=1, poll_secs=0.05,
                                   progress_dir=local))
    b.set_bolt("rec", Recorder(log), 1).shuffle_grouping("lines")
    dead_dir = local / "filespout" / "lines" / "dead-letter"
    with LocalCluster({"storm.local.dir": str(local)}) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        # the file is renamed done once every line is acked or dead-lettered
        finished = wait_until(lambda: (src / "a.csv.done").exists(), timeout=30)
        cluster.kill_topology("t", wait_secs=0)
    dead = dead_entries(dead_dir)
    assert finished, f"a.csv never finished; emitted {log.items()}, dead letters {dead}"
    assert sorted(log.items()) == ["1", "6", "8"]  # each good line once: no worker restart replayed any
    assert [(d["offset"], d["record"]) for d in dead] == [(4, "3,4,5\n"), (14, "solo\n")]
    assert "3 value(s) for 2 field(s) (a, b)" in dead[0]["reason"]
    assert "1 value(s) for 2 field(s) (a, b)" in dead[1]["reason"]


def test_filespout_dead_letters_a_translation_that_is_not_a_list(tmp_path):
    from tests.external.test_file_progress import Task, lines

    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "a.txt").write_text("one\ntwo\n")
    task = Task(src, local, translator=lambda b: b.decode().strip())  # a str: would be split into letters
    task.spout.collector.report_error = lambda message: None
    assert lines(task.pump()) == []
    dead = dead_entries(local / "filespout" / "lines" / "dead-letter")
    assert [d["record"] for d in dead] == ["one\n", "two\n"]
    assert "returned a str, not a list or tuple" in dead[0]["reason"]


class Rows:
    def __init__(self) -> None:
        self.values: list = []

    def emit(self, values) -> None:
        self.values.append(values)


def test_file_trident_spout_skips_a_line_with_another_count_of_values_the_same_in_every_replay(tmp_path, caplog):
    (tmp_path / "a.csv").write_text("1,2\n3,4,5\n6,7\n")
    spout = FileTridentSpout(tmp_path, ["a", "b"], translator=csv_pair)
    emitter = spout.get_emitter({}, None)
    [partition] = emitter.get_ordered_partitions(["a.csv"])
    first = Rows()
    with caplog.at_level(logging.ERROR, "squall.external.trident_files"):
        meta = emitter.emit_batch_new(TransactionAttempt(1, 0), first, {partition}, {})[partition]
    assert first.values == [["1", "2"], ["6", "7"]]
    assert meta["end"] == 14
    assert any("offset 4" in r.getMessage() and "3 value(s) for 2 field(s)" in r.getMessage() for r in caplog.records)
    again = Rows()
    emitter.re_emit_partition_batch(TransactionAttempt(1, 1), again, partition, meta)
    assert again.values == first.values


def test_file_trident_spout_with_the_default_translator_and_two_fields_dead_letters_every_line(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    emitter = FileTridentSpout(tmp_path, ["a", "b"]).get_emitter({}, None)
    [partition] = emitter.get_ordered_partitions(["a.txt"])
    rows = Rows()
    meta = emitter.emit_batch_new(TransactionAttempt(1, 0), rows, {partition}, {})[partition]
    assert rows.values == [] and meta["end"] == 4


def test_file_trident_spout_skips_a_line_its_translator_raises_on_whatever_it_raises(tmp_path, caplog):
    """Only a ValueError was a dead letter: a KeyError failed the batch on every replay, for good."""
    (tmp_path / "a.csv").write_text("1,2\nbad\n6,7\n")

    def strict(record: bytes) -> list:
        if record.startswith(b"bad"):
            raise KeyError("no such column")
        return csv_pair(record)

    emitter = FileTridentSpout(tmp_path, ["a", "b"], translator=strict).get_emitter({}, None)
    [partition] = emitter.get_ordered_partitions(["a.csv"])
    rows = Rows()
    with caplog.at_level(logging.ERROR, "squall.external.trident_files"):
        meta = emitter.emit_batch_new(TransactionAttempt(1, 0), rows, {partition}, {})[partition]
    assert rows.values == [["1", "2"], ["6", "7"]] and meta["end"] == 12
    assert any("offset 4: KeyError" in r.getMessage() for r in caplog.records)


def test_kafka_spout_dead_letters_a_record_with_another_count_of_values_and_commits_it():
    dead = []
    c = MemoryConsumer({TP: ["1,2", "3,4,5", "6,7"]})
    spout, col, clock = open_spout(c, translator=lambda r: r.value.split(","), output_fields=["a", "b"],
                                   dead_letter=lambda r, why: dead.append((r.offset, why)))
    run(spout, 6)
    assert [v for v, _ in col.emitted] == [["1", "2"], ["6", "7"]]
    assert dead == [(1, "malformed record: the translator returned 3 value(s) for 2 field(s) (a, b)")]
    for _, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 3  # past the dead letter

