"""FileSpout's claimed files on the process host: two workers' spout tasks claim the files of one
directory; the worker holding a file's lock is SIGKILLed, and a task takes that file over at its
committed offset as soon as it sees that the lock's process is gone or that the lock is its own
earlier run's (long before ``lock_timeout_secs``), so every line is processed and every file finishes, with no lock left
behind."""

import os
import signal
import time
from pathlib import Path

from squall import BasicBolt, TopologyBuilder
from squall.external.files import FileSpout

from ..conftest import wait_until
from .recovery_topology import OPEN, RECOVERY_CONF, open_gate
from .semantics_topology import topology_conf

FILES, LINES = 6, 200
HOLD = 50  # lines each task records before it waits for the test's gate


class Record(BasicBolt):
    """Appends each line it gets to ``seen-<task>.txt`` under ``test.out.dir`` (then it is acked).
    After `HOLD` lines it holds the next one until the test opens the gate (`open_gate`), so
    no file can finish before the test has killed a worker under it, however fast the machine."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.out = open(Path(conf["test.out.dir"]) / f"seen-{context.get_this_task_id()}.txt", "a")  # noqa: SIM115
        self.gate = Path(conf["test.out.dir"]) / OPEN
        self.recorded = 0

    def execute(self, tup, collector):
        while self.recorded >= HOLD and not self.gate.exists():
            time.sleep(0.01)
        self.out.write(tup[0] + "\n")
        self.out.flush()
        self.recorded += 1


def seen(out: Path) -> set[str]:
    return {line for f in out.glob("seen-*.txt") for line in f.read_text().split()}


def lock_holders(locks: Path) -> dict[str, int]:
    """File name -> the pid of the worker whose task holds its lock (from the lock's first line,
    ``<ms>,<spout>[<index>]@<host>:<pid>:<run>,claimed,<offset>``)."""
    out = {}
    for p in locks.glob("[!.]*"):
        try:
            first = p.read_text().splitlines()[0]
        except (FileNotFoundError, IndexError):
            continue
        out[p.name] = int(first.split(",")[1].rsplit("@", 1)[1].split(":")[1])
    return out


def test_a_file_held_by_a_sigkilled_worker_is_taken_over_and_finished(cluster, tmp_path):
    src, out, local = tmp_path / "in", tmp_path / "out", tmp_path / "spout-state"
    src.mkdir()
    out.mkdir()
    expected = set()
    for f in range(FILES):
        items = [f"f{f}-{i:04d}" for i in range(LINES)]
        (src / f"part-{f}.txt").write_text("".join(x + "\n" for x in items))
        expected |= set(items)
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, quiet_secs=0, claim_files=True, lock_timeout_secs=600, commit_every=1, poll_secs=0.1,
                                   progress_dir=local), 2)
    b.set_bolt("record", Record(), 2).shuffle_grouping("lines")
    locks = local / "filespout" / "lines" / "locks"
    with cluster.client() as m:
        m.submit_topology("claims", topology_conf(out, **RECOVERY_CONF), b.create_topology())
        # both bolt tasks hold their next line: every claimed file stays unfinished until the gate opens
        assert wait_until(lambda: len(seen(out)) == 2 * HOLD and len(set(lock_holders(locks).values())) == 2, 60), \
            f"the two spout tasks did not both claim a file: {lock_holders(locks)}, {len(seen(out))} lines seen"
        holders = lock_holders(locks)
        victim_file = min(holders)
        victim = holders[victim_file]
        assert victim in cluster.workers(), f"the lock names pid {victim}, not a worker: {cluster.workers()}"
        os.kill(victim, signal.SIGKILL)
        open_gate(out)
        assert wait_until(lambda: sorted(os.listdir(src)) == [f"part-{f}.txt.done" for f in range(FILES)], 90), \
            f"not finished: {sorted(os.listdir(src))}; locks {lock_holders(locks)}"
        m.kill_topology("claims", wait_secs=0)
    assert seen(out) == expected
    logs = "".join(p.read_text(errors="replace") for p in cluster.dir.rglob("*.log"))
    # by the other worker's task (the pid is gone) or by the killed task restarted (an earlier run)
    assert (f"took over {src / victim_file}, since its owner's process is gone" in logs
            or f"took over {src / victim_file}, since its owner was an earlier run of this task" in logs)
    assert not lock_holders(locks)
