"""The squall_trident source's columns and input partitions (issue 36 items 3 and 6), without a
query: a field the spout declares travels in a typed column, the others pickled; a partitioned
spout's partitions are read in at most the source's task count of Spark input partitions, every
line once."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.external.trident_files import FileTridentSpout
from squall.trident.spark.rows import loads
from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec, spread, typed_fields

from .conftest import write_lines


def _spec(spout, tasks=0):
    fields = list(spout.get_output_fields())
    return SpoutSpec("files", spout, {}, tuple(fields), typed_fields("files", spout, fields, "trident_s0"), tasks)


def test_the_file_spouts_line_travels_in_a_string_column_and_nothing_is_pickled(tmp_path):
    write_lines(tmp_path / "a.txt", ["one", "two"])
    spout = FileTridentSpout(str(tmp_path))
    spec = _spec(spout)
    assert spec.schema() == "trident_tuple BINARY, trident_s0_f0 STRING"
    reader = PartitionedSpoutReader(spec)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    [rb] = [rb for p in reader.partitions(start, end) for rb in reader.read(p)]
    assert rb.column("trident_s0_f0").to_pylist() == ["one", "two"]
    assert rb.column("trident_tuple").to_pylist() == [None, None]


def test_another_translators_fields_are_pickled(tmp_path):
    write_lines(tmp_path / "a.txt", ["1 one"])
    spout = FileTridentSpout(str(tmp_path), ["n", "word"],
                             translator=lambda line: [int(line.split()[0]), line.split()[1].decode()])
    spec = _spec(spout)
    assert spec.typed == ()
    reader = PartitionedSpoutReader(spec)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    [rb] = [rb for p in reader.partitions(start, end) for rb in reader.read(p)]
    assert [loads(b) for b in rb.column("trident_tuple").to_pylist()] == [[1, "one"]]


def test_seven_files_are_read_in_three_input_partitions_every_line_once(tmp_path):
    lines = {f"f{i}.txt": [f"{i}-{j}" for j in range(i + 1)] for i in range(7)}
    for name, text in lines.items():
        write_lines(tmp_path / name, text)
    reader = PartitionedSpoutReader(_spec(FileTridentSpout(str(tmp_path), max_batch_records=100), tasks=3))
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    partitions = reader.partitions(start, end)
    assert sorted(len(p.value) for p in partitions) == [2, 2, 3]  # 7 files, 3 tasks
    read = [line for p in partitions for rb in reader.read(p) for line in rb.column("trident_s0_f0").to_pylist()]
    assert sorted(read) == sorted(line for text in lines.values() for line in text)


def test_spread_puts_every_item_in_one_group_of_at_most_the_task_count():
    assert spread([1, 2, 3, 4, 5], 2) == [[1, 3, 5], [2, 4]]
    assert spread([1, 2], 5) == [[1], [2]]
    assert spread([1, 2], 0) == [[1], [2]]


def test_a_partitioned_spouts_value_not_of_its_declared_type_fails_its_read_naming_spout_field_and_txid(tmp_path):
    """The planning emit only counts the tuples (`latestOffset`: the offsets of a batch); the
    read, which emits them again into the columns, checks each value."""
    write_lines(tmp_path / "a.txt", ["one", "two"])
    spout = FileTridentSpout(str(tmp_path), ["word", "n"], translator=lambda line: [line.decode(), "7"])
    fields = ["word", "n"]
    spec = SpoutSpec("files", spout, {}, tuple(fields), typed_fields("files", spout, fields, "trident_s0", {"n": int}))
    reader = PartitionedSpoutReader(spec)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert end["txid"] == 1
    [partition] = reader.partitions(start, end)
    with pytest.raises(ValueError, match=r"field 'n' is declared int, and txid 1 emitted '7' \(str\)"):
        list(reader.read(partition))
