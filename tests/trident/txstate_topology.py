"""A topology whose spout counts its own opens in the topology's transactional state
(`squall.trident.txstate`): each open reads the count, adds one, stores it with a per-open key,
and appends what it read to a file, which tests in any host read back."""

from __future__ import annotations

import json
from pathlib import Path

from squall import Fields, Spout, TopologyBuilder
from tests.written import finished_lines


class OpensSpout(Spout):
    """Counts its opens in the transactional state ``opens``; with ``crash_first``, the first
    opening crashes its worker (Storm's fail-fast) once it stored its count."""

    def __init__(self, out: str, crash_first: bool = False) -> None:
        self.out = out
        self.crash_first = crash_first
        self.n = 0

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        state = context.transactional_state("opens")
        self.n = (state.get("count") or 0) + 1
        state.put("count", self.n)
        state.put(f"open/{self.n}", {"storm_id": context.get_storm_id()})
        with open(Path(self.out) / "opens.jsonl", "a") as f:
            f.write(json.dumps({"n": self.n, "keys": state.list("open/"), "storm_id": context.get_storm_id()}) + "\n")

    def next_tuple(self):
        if self.crash_first and self.n == 1:
            raise RuntimeError("crash on purpose, after storing the count")


def opens_topology(out: Path, crash_first: bool = False):
    """One `OpensSpout` task."""
    b = TopologyBuilder()
    b.set_spout("opens", OpensSpout(str(out), crash_first), 1)
    return b.create_topology()


def opens(out: Path) -> list[dict]:
    """What each open read and stored, in order."""
    path = Path(out) / "opens.jsonl"
    return [json.loads(line) for line in finished_lines(path)] if path.exists() else []
