"""A worker SIGKILLed under a shell bolt started through a wrapper (``sh -c "python3 ...; exit
$?"``, as a virtualenv launcher does): PDEATHSIG ends the wrapper, not the program under it, and
the task's directories (its pid directory, its resources' copy) had no cleanup to remove them.
Its supervisor ends both once the worker is dead (Storm's supervisor kills what a dead worker's
pid directory lists), and every record still goes through once after the restart."""

from __future__ import annotations

import collections
import os
import signal
import sys
from pathlib import Path

from squall import BasicBolt, ShellBolt, TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .recovery_topology import RECOVERY_CONF, DurableSpout, acked, acked_lines, stop_and_wait
from .semantics_topology import topology_conf

BARE = Path(__file__).parent.parent / "multilang" / "bare"


class Noted(BasicBolt):
    """Writes each id it is given to ``sink-<task>.txt`` under ``test.out.dir``."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.out = open(Path(conf["test.out.dir"]) / f"sink-{context.get_this_task_id()}.txt", "a")

    def execute(self, tup, collector):
        self.out.write(f"{tup[0]}\n")
        self.out.flush()


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (None: gone, or a zombie: it ended)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[19])


def _programs(out: Path) -> list[int]:
    """The pids of the shell programs that started (tests/multilang/bare/lingers.py)."""
    return [int(p.name.split("-")[1]) for p in out.glob("lingers-*")]


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[1])


def test_a_sigkilled_workers_wrapped_shell_bolt_leaves_no_process_nor_directory(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"  # the cluster's temporary directory: what a worker's tasks leave in it is seen
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    out = tmp_path / "out"
    out.mkdir()
    b = TopologyBuilder()
    b.set_spout("source", DurableSpout(), 1)  # endless until the test stops it: the kill hits tuples in flight
    b.set_bolt("shell", ShellBolt(["sh", "-c", f"{sys.executable} lingers.py; exit $?"], ["id"], resources=BARE)) \
        .shuffle_grouping("source")
    b.set_bolt("sink", Noted()).shuffle_grouping("shell")
    cluster = Cluster(tmp_path)
    lingering: dict[int, int] = {}  # the shell programs' pids -> start times
    try:
        with cluster.client() as m:
            m.submit_topology("wrapped", topology_conf(out, workers=1, **RECOVERY_CONF), b.create_topology())
            assert wait_until(lambda: len(acked(out)) > 50 and list(out.glob("lingers-*")), 60), \
                "the topology did not start processing"
            [program] = _programs(out)
            lingering[program] = _start_time(program)
            wrapper = _parent(program)
            [worker] = cluster.workers()
            assert _parent(wrapper) == worker  # the program is the worker's grandchild, under sh
            os.kill(worker, signal.SIGKILL)
            # PDEATHSIG ends the wrapper; the program under it lingers unless the supervisor ends it
            assert wait_until(lambda: _start_time(program) != lingering[program], 30), \
                f"the shell program {program} outlived its SIGKILLed worker {worker}"
            n = stop_and_wait(out, resume=50)  # after the restart
            lingering.update({pid: _start_time(pid) for pid in _programs(out) if pid != program})
            m.kill_topology("wrapped", wait_secs=0)
            assert wait_until(lambda: not cluster.workers(), 30), "the topology's worker did not stop"
        survivors = [pid for pid, start in lingering.items() if start is not None and _start_time(pid) == start]
    finally:
        cluster.stop()
        for pid, start in lingering.items():  # what a failure left: a program lingers ten minutes
            if start is not None and _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)
    assert len(lingering) == 2  # the first worker's program, and its restart's
    assert not survivors, f"shell programs still running: {survivors}"
    # every record once through the spout's acks, and every one reached the sink (at least once:
    # what the killed worker had in flight is replayed, and may have reached the sink before)
    assert collections.Counter(acked_lines(out)) == collections.Counter(range(n))
    sunk = collections.Counter(int(x) for f in out.glob("sink-*.txt") for x in f.read_text().split())
    assert set(sunk) == set(range(n))
    left = sorted(str(p) for p in tmp.iterdir() if p.name.startswith("squall-multilang"))
    left += sorted(str(p) for home in (cluster.dir / "supervisor").glob("shell-*") for p in home.iterdir())
    assert not left, f"shell tasks' directories left behind: {left}"
