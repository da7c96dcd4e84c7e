"""Shared by the tests of the dead-letter figures (tests/ui/test_dead_letter_figures.py on a
LocalCluster, tests/process/test_dead_letter_figures.py on the process host): input files of
good lines, poison lines that the bolt ``check`` fails (a known reason, ``max_retries`` 0: each
is dead-lettered at its first failure, failed by ``check``) and unreadable lines that the
spout's translator refuses (dead-lettered as read, never emitted, failed by no component); a
topology of a `FileSpout` ``lines`` and ``check``, which appends each good line to the file
``out``; and the counts of what came out, every line counted."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import NamedTuple

from squall import Bolt, Config, TopologyBuilder
from squall._failure import fail_because
from squall.external.files import FileSpout
from squall.external.retry import RetryBackoff

from .poison_file_fail_fast import lines, note


class Batch(NamedTuple):
    """One input file: ``good`` good lines, ``poison`` failed by the bolt, ``unreadable`` refused
    by the translator, mixed; ``tag`` makes its lines its own."""

    tag: str
    good: int
    poison: int
    unreadable: int

    def values(self) -> list[str]:
        good = [f"{self.tag}-{i}" for i in range(self.good)]
        bad = [f"poison-{self.tag}-{i}" for i in range(self.poison)] + [f"bad-{self.tag}-{i}" for i in range(self.unreadable)]
        out = list(good)
        for k, value in enumerate(bad):  # spread among the good ones
            out.insert((k + 1) * len(out) // (len(bad) + 1), value)
        return out

    def write(self, src: Path) -> None:
        """The file, moved into ``src`` complete."""
        tmp = src / f".{self.tag}.txt"
        tmp.write_text("".join(f"{v}\n" for v in self.values()))
        tmp.rename(src / f"{self.tag}.txt")


def translate(record: bytes) -> list[str]:
    """The spout's translator: a ``bad-`` line is refused (dead-lettered as unreadable)."""
    text = record.decode().rstrip("\n")
    if text.startswith("bad-"):
        raise ValueError(f"unreadable test line {text!r}")
    return [text]


class Check(Bolt):
    """Fails a ``poison-`` line for a reason; appends the others to ``out`` and acks."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.component = context.get_this_component_id()
        self.task = context.get_this_task_id()

    def execute(self, tup):
        value = tup.values[0]
        if value.startswith("poison-"):
            fail_because(self.collector, tup, self.component, self.task, f"test poison line {value!r}")
            return
        note(os.path.join(self.notes, "out"), value)
        self.collector.ack(tup)


def topology(src: Path, local_dir: Path, notes: Path):
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, ["line"], translator=translate, quiet_secs=0, progress_dir=local_dir, poll_secs=0.05,
                                   commit_every=10, backoff=RetryBackoff(0.0, 0.001, 0, 0.01)))
    b.set_bolt("check", Check(str(notes)), 2).shuffle_grouping("lines")
    return b.create_topology()


def conf() -> Config:
    c = Config()
    c.set_message_timeout_secs(300)  # no failure but the bolt's
    c["topology.stats.sample.rate"] = 1.0
    return c


def dead_letters(local_dir: Path) -> list[dict]:
    out = []
    dead = local_dir / "filespout" / "lines" / "dead-letter"
    for path in sorted(dead.glob("*.dead")) if dead.exists() else ():
        out += [json.loads(x) for x in lines(path)]
    return out


def record(letter: dict) -> str:
    """The line a dead letter holds: a record failed after it was emitted is kept as its values
    (JSON), an unreadable one as read."""
    text = letter["record"]
    return json.loads(text)[0] if "cause" in letter else text.rstrip("\n")


def done(src: Path, local_dir: Path, notes: Path, *batches: Batch) -> bool:
    """Every file of ``batches`` finished, and each of its lines out or dead-lettered."""
    settled = set(lines(notes / "out")) | {record(d) for d in dead_letters(local_dir)}
    return (all((src / f"{b.tag}.txt.done").exists() for b in batches)
            and settled >= {v for b in batches for v in b.values()})


def check_outcome(local_dir: Path, notes: Path, *batches: Batch) -> None:
    """Each good line out exactly once, each poison and unreadable one dead-lettered exactly
    once with its reason: every line counted."""
    out = collections.Counter(lines(notes / "out"))
    good = [f"{b.tag}-{i}" for b in batches for i in range(b.good)]
    assert sorted(out.elements()) == sorted(good), (len(out), sum(out.values()), len(good))
    dead = collections.Counter(record(d) for d in dead_letters(local_dir))
    bad = [v for b in batches for v in b.values() if v.startswith(("poison-", "bad-"))]
    assert sorted(dead.elements()) == sorted(bad), dead
    for d in dead_letters(local_dir):
        if record(d).startswith("poison-"):
            assert d["cause"]["kind"] == "fail" and d["cause"]["component"] == "check", d
        else:
            assert "unreadable test line" in d["reason"] and "cause" not in d, d
