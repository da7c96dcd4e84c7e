"""FileSpout's record size limit: a record longer than ``max_record_bytes`` (or the topology's
``topology.filespout.max.record.bytes``) is never held whole nor emitted; it is read past in
bounded memory and dead-lettered by file, offset and size, and the spout goes on with the next
line. The tasks are driven directly (open, next_tuple, ack)."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from squall import InvalidTopologyException
from squall.external.files import DEFAULT_MAX_RECORD_BYTES, MAX_RECORD_KEY, FileSpout, LineAt

from .test_file_progress import Context


class Collector:
    """Keeps what a spout emits, and the errors it reports."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, LineAt]] = []
        self.errors: list[str] = []

    def emit(self, values, msg_id, stream):
        self.emitted.append((values[0], msg_id))

    def report_error(self, message):
        self.errors.append(str(message))


def opened(src: Path, local: Path, conf: dict | None = None, **spout) -> tuple[FileSpout, Collector]:
    s = FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0, progress_dir=local, **spout)
    out = Collector()
    s.open(conf or {}, Context(0, 1), out)
    return s, out


def run_to_the_end(spout: FileSpout, out: Collector, src: Path, files: list[str]) -> None:
    """next_tuple and an ack of everything emitted, until every file is renamed done."""
    acked = 0
    for _ in range(10_000):
        if all((src / f"{name}.done").exists() for name in files):
            return
        spout.next_tuple()
        for _, msg_id in out.emitted[acked:]:
            spout.ack(msg_id)
        acked = len(out.emitted)
    raise AssertionError(f"the files were not all finished: {sorted(p.name for p in src.iterdir())}")


def dead_letters(local: Path, name: str) -> list[dict]:
    path = local / "filespout" / "lines" / "dead-letter" / f"{name}.dead"
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("claim_files", [False, True], ids=["by-name-hash", "claimed"])
def test_a_line_above_the_limit_is_dead_lettered_by_file_and_offset_and_every_good_line_is_emitted_once(
        tmp_path, claim_files):
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    good_a = [f"a-{i}" for i in range(20)]
    good_b = [f"b-{i}" for i in range(5)]
    huge = "x" * 5000  # the limit is 100 bytes
    head = "".join(f"{x}\n" for x in good_a[:10])
    (src / "a.txt").write_text(head + huge + "\n" + "".join(f"{x}\n" for x in good_a[10:]))
    tail = "".join(f"{x}\n" for x in good_b)
    (src / "b.txt").write_text(tail + huge)  # the last line, without a newline
    spout, out = opened(src, local, max_record_bytes=100, claim_files=claim_files)

    run_to_the_end(spout, out, src, ["a.txt", "b.txt"])
    spout.close()

    assert Counter(line for line, _ in out.emitted) == Counter(good_a + good_b)  # each exactly once
    [in_a] = dead_letters(local, "a.txt")
    [in_b] = dead_letters(local, "b.txt")
    assert (in_a["file"], in_a["offset"], in_a["size"], in_a["too_large"]) == ("a.txt", len(head), 5001, True)
    assert (in_b["file"], in_b["offset"], in_b["size"], in_b["too_large"]) == ("b.txt", len(tail), 5000, True)
    assert "record" not in in_a and "record too large: 5001 bytes, above the limit of 100 bytes" in in_a["reason"]
    assert spout.dead_letters == 2
    assert any(f"a.txt at byte offset {len(head)}" in e and "record too large" in e for e in out.errors)


def test_a_multi_megabyte_line_is_skipped_in_memory_far_below_its_length(tmp_path):
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    line_bytes = 8 << 20
    with open(src / "big.txt", "wb") as f:
        f.write(b"before\n")
        for _ in range(line_bytes // (1 << 20)):  # written a MiB at a time: the test holds no 8 MiB either
            f.write(b"y" * (1 << 20))
        f.write(b"\nafter\n")
    spout, out = opened(src, local, max_record_bytes=64 << 10)

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run_to_the_end(spout, out, src, ["big.txt"])
        grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    spout.close()

    assert [line for line, _ in out.emitted] == ["before", "after"]
    [entry] = dead_letters(local, "big.txt")
    assert (entry["offset"], entry["size"]) == (7, line_bytes + 1)
    assert grown < line_bytes // 16, f"reading past an {line_bytes}-byte line took {grown} bytes at its peak"


@pytest.mark.parametrize("reader", [lambda f: f.readline(), lambda f, size=-1: f.readline(size)],
                         ids=["f-alone", "f-and-its-own-optional-argument"])
def test_a_reader_of_the_file_alone_has_its_records_measured_after_reading(tmp_path, reader):
    """A reader without a ``limit`` parameter is called with ``f`` alone, also when it has an
    optional argument of its own (which must never receive the limit)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "r.bin").write_bytes(b"ok\n" + b"z" * 300 + b"\nfine\n")
    spout, out = opened(src, local, max_record_bytes=100, reader=reader)

    run_to_the_end(spout, out, src, ["r.bin"])

    assert [line for line, _ in out.emitted] == ["ok", "fine"]
    [entry] = dead_letters(local, "r.bin")
    assert (entry["offset"], entry["size"]) == (3, 301)


def test_the_limit_is_the_argument_else_the_topology_setting_else_16_mib(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    assert opened(src, tmp_path / "l1")[0].record_limit == DEFAULT_MAX_RECORD_BYTES == 16 << 20
    assert opened(src, tmp_path / "l2", {MAX_RECORD_KEY: 4096})[0].record_limit == 4096
    assert opened(src, tmp_path / "l3", {MAX_RECORD_KEY: 4096}, max_record_bytes=512)[0].record_limit == 512
    with pytest.raises(InvalidTopologyException, match=r"FileSpout 'lines'.*topology.filespout.max.record.bytes"):
        opened(src, tmp_path / "l4", {MAX_RECORD_KEY: "big"})
    with pytest.raises(ValueError, match="max_record_bytes must be a positive integer"):
        FileSpout(src, max_record_bytes=0)
