"""The dead-letter figures across a restart of the spout's worker on the process host: a
`FileSpout` reads a first file (60 good lines, 4 that the bolt fails, 3 unreadable), its worker
is SIGKILLed, and its relaunch reads a second (60 good, 5 failed, 2 unreadable). Every line is
counted where it went; ``squall monitor -w dead-lettered``, running throughout, counts all 14
dead letters (the new launch's from zero, the old one's kept: figures carry their launch, as
emitted and acked do), and the topology page's all-time figure is the relaunched worker's own
7, as Storm's windows start with the worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from ..conftest import wait_until
from ..external import poison_figures as p

FIRST = p.Batch("a", good=60, poison=4, unreadable=3)
SECOND = p.Batch("b", good=60, poison=5, unreadable=2)


class Monitor:
    """``squall monitor NAME -m lines -w dead-lettered`` in a process; its rows as they come."""

    def __init__(self, config, name: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "squall", "monitor", "--config", str(config), name,
                                      "-m", "lines", "-w", "dead-lettered", "-i", "0.2"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.header = self.proc.stdout.readline()
        self.rows: list[list[str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.rows.append(line.rstrip("\n").split("\t"))

    def counted(self) -> int:
        """The dead letters of every row so far (each row counts those since the one before)."""
        return sum(int(r[5]) for r in list(self.rows))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # how a user ends it
            try:
                self.proc.wait(30)
            finally:
                self.proc.kill()
        self.reader.join(10)


@pytest.mark.timeout(180)
def test_the_dead_letter_figures_carry_their_launch_across_a_restart_of_the_spouts_worker(cluster, tmp_path):
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    with cluster.client() as master:
        master.submit_topology("dl", p.conf(), p.topology(src, local, notes))
        monitor = Monitor(cluster.file, "dl")
        try:
            assert monitor.header.split("\t")[5] == "dead-lettered", monitor.header
            # monitor's rows count from its first poll: the input comes after it
            assert wait_until(lambda: monitor.rows, 30), monitor.proc.stderr.read()
            FIRST.write(src)
            assert wait_until(lambda: p.done(src, local, notes, FIRST), 60)
            dead_first = FIRST.poison + FIRST.unreadable
            assert wait_until(lambda: monitor.counted() == dead_first, 30), monitor.rows[-3:]
            page = master.get_topology_page("dl")
            assert page["spouts"][0]["deadLettered"] == dead_first

            [(pid, _cmd)] = cluster.workers().items()   # one worker: the spout's
            launch = master.get_topology_info("dl")["workers"][0]["launch_id"]
            os.kill(pid, signal.SIGKILL)
            assert wait_until(lambda: _relaunched(master, launch), 60), master.get_topology_info("dl")["workers"]

            SECOND.write(src)
            assert wait_until(lambda: p.done(src, local, notes, FIRST, SECOND), 60)
            dead_second = SECOND.poison + SECOND.unreadable
            assert wait_until(lambda: monitor.counted() == dead_first + dead_second, 30), monitor.rows[-3:]
            # the page's windows start with the worker: the relaunched one's dead letters
            assert wait_until(lambda: master.get_topology_page("dl")["spouts"][0]["deadLettered"] == dead_second, 30)
            page = master.get_topology_page("dl")
            assert [(b["boltId"], b["deadLettered"]) for b in page["bolts"]] == [("check", SECOND.poison)]
        finally:
            monitor.stop()
            master.kill_topology("dl", 0)

    p.check_outcome(local, notes, FIRST, SECOND)   # 120 good out once each, 14 dead letters once each
    assert monitor.counted() == dead_first + dead_second   # none counted twice after it stopped
    assert {r[3] for r in monitor.rows if int(r[5])} <= {"fail", "unreadable", "fail,unreadable"}, monitor.rows


def _relaunched(master, launch) -> bool:
    """The spout's worker runs again, a new launch, and has sent a heartbeat."""
    info = master.get_topology_info("dl")
    return (any(w["launch_id"] != launch for w in info["workers"])
            and bool(info["components"]["lines"]["task_stats"]))
