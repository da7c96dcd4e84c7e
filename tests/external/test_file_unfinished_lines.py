"""FileSpout never splits a line: a last line without its newline is held while its file may still
grow, whichever reader cuts the records (the default one, ``f.readline()``, a CSV or JSON-lines
reader wrapping `read_line`, a user's reader that strips the newline or reads in chunks), and
also once the file has been quiet for ``quiet_secs`` while a process still has it open for
writing (a writer paused mid-line); it is a record once the file is done (quiet and closed).

Before, only the default reader's lines were held back: with any other reader, a writer
pausing mid-line under ``quiet_secs`` had 4 of 60 JSON lines dead-lettered twice over as two
unreadable halves, and 4 of 60 text lines emitted as 8 pieces. And a pause longer than
``quiet_secs`` had every reader emit the first half as a record and rename the file done, the
writer going on into the ``.done`` file: of 60 records, 14 whole, 1 piece, 46 lost."""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from squall import TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.external.files import FileSpout, read_line
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_file_growing import Recorder
from .test_file_progress import Task, lines
from .test_files import CONF, cluster_at

# -- readers a user writes ---------------------------------------------------------------------


def text_lines(f):
    """Text lines, as the file object gives them."""
    return f.readline()


def json_lines(f, limit):
    """JSON lines: the default reader under another name (so not `read_line` itself)."""
    return read_line(f, limit)


def csv_rows(f, limit):
    return read_line(f, limit)


def stripped(f):
    """Lines without their newline: only the file's bytes say where a line ended."""
    line = f.readline()
    return line[:-1] if len(line) > 1 and line.endswith(b"\n") else line


def chunked(f):
    """Bytes up to and with the next newline, read 4 at a time (and the rest given back)."""
    out = bytearray()
    while True:
        chunk = f.read(4)
        if not chunk:
            return bytes(out)
        at = chunk.find(b"\n")
        if at >= 0:
            f.seek(at + 1 - len(chunk), os.SEEK_CUR)
            return bytes(out + chunk[:at + 1])
        out += chunk


def from_json(record: bytes) -> list:
    return [json.loads(record)["rec"]]


def from_csv(record: bytes) -> list:
    return ["|".join(next(csv.reader([record.decode()])))]


def as_text(record: bytes) -> list:
    return [record.decode().rstrip("\n")]


def encode_json(rec: str) -> bytes:
    return json.dumps({"rec": rec}).encode() + b"\n"


def encode_csv(rec: str) -> bytes:
    return rec.replace("-", ",").encode() + b"\n"


def encode_text(rec: str) -> bytes:
    return rec.encode() + b"\n"


# reader, translator, how a record is written, what the bolt gets of it
READERS = {
    "text_lines": (text_lines, as_text, encode_text, str),
    "json_lines": (json_lines, from_json, encode_json, str),
    "csv_rows": (csv_rows, from_csv, encode_csv, lambda rec: rec.replace("-", "|")),
    "stripped": (stripped, as_text, encode_text, str),
    "chunked": (chunked, as_text, encode_text, str),
    "read_line": (read_line, as_text, encode_text, str),
}


def spout_task(src: Path, local: Path, kind: str, clock: SimulatedClock) -> Task:
    reader, translator, _, _ = READERS[kind]
    return Task(src, local, quiet_secs=5, clock=clock, reader=reader, translator=translator)


@pytest.mark.parametrize("kind", [k for k in READERS if k != "read_line"])
def test_every_reader_holds_a_line_without_its_newline_while_the_file_grows(tmp_path, kind):
    """A line half written is not emitted, with any reader, and goes out whole once its newline
    comes; the last line (no newline) goes out once the file is quiet and closed. On main, every
    reader but the default emitted ``r2-ha`` (the JSON and CSV ones dead-lettered it)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    _, _, encode, got_as = READERS[kind]
    clock = SimulatedClock()
    whole = encode("r-2-half")
    with open(src / "a.log", "ab") as f:
        f.write(encode("r-0") + encode("r-1") + whole[:5])
        f.flush()
        task = spout_task(src, local, kind, clock)
        got = task.pump(10)
        task.ack(got)
        assert task.pump(10) == [] and lines(got) == [got_as("r-0"), got_as("r-1")]
        f.write(whole[5:] + encode("r-3")[:-1])  # the last line without its newline
        f.flush()
        more = task.pump(10)
        task.ack(more)
        clock.advance(4.9)
        assert task.pump(10) == []  # "r-3": the file changed 4.9 s ago
    clock.advance(0.2)  # quiet for 5.1 s, and closed
    last = task.pump(10)
    task.ack(last)
    task.pump(5)
    assert lines(more + last) == [got_as("r-2-half"), got_as("r-3")]
    assert os.listdir(src) == ["a.log.done"] and not (local / "filespout" / "lines" / "dead-letter").exists()


@pytest.mark.parametrize("kind", ["read_line", "json_lines", "stripped"])
def test_a_writer_paused_mid_line_longer_than_the_quiet_time_has_its_line_held(tmp_path, kind, caplog):
    """The file is quiet for a minute (``quiet_secs`` is 5) with a half-written line, but the
    writer still has it open: the line is held (said once in the log), goes out whole when the
    writer finishes it, and the file is not renamed done meanwhile. A writer that closes the file
    mid-line has ended it: its last line is a record once the file is quiet. On main, ``r-1-ha``
    went out after 5 s and the file was renamed done, the writer going on into ``a.log.done``."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    _, _, encode, got_as = READERS[kind]
    clock = SimulatedClock()
    whole = encode("r-1-half")
    caplog.set_level(logging.WARNING, logger="squall.external.files")
    with open(src / "a.log", "ab") as f:
        f.write(encode("r-0") + whole[:5])
        f.flush()
        task = spout_task(src, local, kind, clock)
        got = task.pump(10)
        task.ack(got)
        for _ in range(12):  # a minute, looked at every 5 s
            clock.advance(5)
            assert task.pump(10) == []
        assert os.listdir(src) == ["a.log"]
        f.write(whole[5:] + encode("r-2")[:-1])  # the writer goes on, and stops mid-line for good
        f.flush()
        more = task.pump(10)
        task.ack(more)
    clock.advance(5.1)
    last = task.pump(10)
    task.ack(last)
    task.pump(5)
    assert lines(got + more + last) == [got_as("r-0"), got_as("r-1-half"), got_as("r-2")]
    assert os.listdir(src) == ["a.log.done"] and not (local / "filespout" / "lines" / "dead-letter").exists()
    held = [r.getMessage() for r in caplog.records if "still has it open for writing" in r.getMessage()]
    assert len(held) == 1 and str(src / "a.log") in held[0]


# -- a writer process, a topology and a restart ------------------------------------------------

_WRITER = r"""
import sys
with open(sys.argv[1], "ab", buffering=0) as f:
    sys.stdout.write("ok\n")
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        f.write(bytes.fromhex(line.decode()))
        sys.stdout.write("ok\n")
        sys.stdout.flush()
"""


class Writer:
    """A process that keeps the file open and appends what it is given, answering once written."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ok\n"  # it has the file open

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(data.hex().encode() + b"\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == b"ok\n"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=10) == 0


def test_a_writer_process_pausing_mid_line_across_a_restart_gives_each_json_line_once_whole(tmp_path):
    """A writer process appends 40 JSON lines, pausing mid-line three times for 3x ``quiet_secs``;
    the topology is killed during the second pause (the line half read) and submitted again:
    the bolt gets each line once and whole, nothing is dead-lettered, and the file is renamed
    done only after the writer closed it. On main: 10 whole lines, the 11th dead-lettered as an
    unreadable half, and the file renamed done at the first pause, the 29 lines after it written
    into ``a.log.done``."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    quiet = 0.5
    records = [f"rec-{i:03d}-" + "x" * 20 for i in range(40)]
    data = b"".join(encode_json(r) for r in records)
    ends = [len(b"".join(encode_json(r) for r in records[:n])) for n in range(41)]
    cuts = [ends[10] + 7, ends[20] + 7, ends[30] + 7]  # inside records 10, 20 and 30
    log = SharedLog()

    def topology():
        builder = TopologyBuilder()
        builder.set_spout("lines", FileSpout(src, reader=json_lines, translator=from_json, commit_every=1,
                                             poll_secs=0.05, progress_dir=local, quiet_secs=quiet))
        builder.set_bolt("rec", Recorder(log), 2).shuffle_grouping("lines")
        return builder.create_topology()

    with cluster_at(local) as cluster:
        writer = Writer(src / "a.log")
        try:
            cluster.submit_topology("run-1", CONF, topology())
            at = 0
            for n, cut in zip((10, 20, 30), cuts):
                writer.write(data[at:cut])
                at = cut
                assert wait_until(lambda n=n: len(set(log.items())) >= n, timeout=15)
                time.sleep(quiet * 3)  # the writer's pause, mid-line
                if n == 20:  # the line half read: killed, and run again, still paused
                    cluster.kill_topology("run-1", wait_secs=0)
                    assert wait_until(lambda: "run-1" not in cluster.get_topology_names(), timeout=15)
                    cluster.submit_topology("run-2", CONF, topology())
                    time.sleep(quiet * 3)
                assert os.listdir(src) == ["a.log"]
            writer.write(data[at:])
        finally:
            writer.close()
        assert wait_until(lambda: (src / "a.log.done").exists(), timeout=15), os.listdir(src)
        errors = cluster.get_topology_info("run-2")["errors"]
        cluster.kill_topology("run-2", wait_secs=0)
    assert sorted(log.items()) == records and not errors
    assert not (local / "filespout" / "lines" / "dead-letter").exists()


def test_open_for_writing_sees_a_writer_in_another_process(tmp_path):
    """The kernel's answer the spout relies on: True while another process has the file open for
    writing, False once it closed it (or None where it cannot be told)."""
    from squall.external._writers import open_for_writing  # new with the hold (imported here: the file runs on main)

    path = tmp_path / "a.log"
    path.write_bytes(b"x")
    writer = Writer(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        held = open_for_writing(fd)
        if held is None:
            pytest.skip("no read leases here (another system, or a file system without them)")
        assert held is True
        writer.close()
        assert open_for_writing(fd) is False
    finally:
        os.close(fd)
        if writer.proc.poll() is None:
            writer.close()
