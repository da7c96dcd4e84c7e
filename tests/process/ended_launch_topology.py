"""A topology whose spout emits batches of ids on demand and whose bolt fails every 10th id, for
counting a topology's acks and failures across a worker's death and a master's restart
(`tests/process/test_ended_launch_figures.py`).

The spout emits the ids of batch ``k`` once a file ``go-<k>`` (holding the batch's size)
appears in its directory, and marks it ``done-<k>``: a launch that replaces a dead one does not
emit an earlier batch again. It replays nothing (``fail`` drops the id), so each batch of ``n``
ids ends in exactly ``n - n // 10`` acks and ``n // 10`` failures at the spout.
"""

from __future__ import annotations

from pathlib import Path

from squall import Bolt, Fields, Spout, TopologyBuilder

FAIL_EVERY = 10


class BatchSpout(Spout):
    """Emits batch ``k`` (ids ``k * 10_000 + i``) when ``go-<k>`` appears in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        self.dir = Path(self.directory)
        self.collector = collector

    def next_tuple(self):
        for go in sorted(self.dir.glob("go-*")):
            k = int(go.name[3:])
            done = self.dir / f"done-{k}"
            if done.exists():
                continue
            for i in range(int(go.read_text())):
                n = k * 10_000 + i
                self.collector.emit([n], msg_id=n)
            done.write_text("")
            return

    def ack(self, msg_id):
        pass

    def fail(self, msg_id):
        pass  # not replayed: every failure is counted once


class FailEveryTenth(Bolt):
    """Fails every id divisible by `FAIL_EVERY`, acks the others."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup[0] % FAIL_EVERY == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def ended_launch_topology(directory: str):
    """The spout and the bolt, each its own worker's with ``topology.workers`` 2."""
    b = TopologyBuilder()
    b.set_spout("batches", BatchSpout(directory), 1)
    b.set_bolt("judge", FailEveryTenth(), 1).shuffle_grouping("batches")
    return b.create_topology()


def go(directory: Path, k: int, n: int) -> None:
    """Ask the spout for batch ``k`` of ``n`` ids (written whole, then named)."""
    tmp = directory / f".go-{k}"
    tmp.write_text(str(n))
    tmp.rename(directory / f"go-{k}")
