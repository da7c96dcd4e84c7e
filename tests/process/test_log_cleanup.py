"""The process host's supervisor cleans its machine's worker logs as Storm's logviewer does
(`squall.cluster.log_cleaner`): a killed topology's old directory goes, a live worker's log
stays, and its rolled files beyond the per-worker cap go."""

import os
import time

from squall import TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .logging_topology import Counter, Reporter

MB = 1024 * 1024


def _topology():
    b = TopologyBuilder()
    b.set_spout("counter", Counter(5), 1)
    b.set_bolt("reporter", Reporter(), 1).shuffle_grouping("counter")
    return b.create_topology()


def _age(directory, secs):
    """Set ``directory`` and everything in it ``secs`` into the past."""
    t = time.time() - secs
    for p in [*directory.iterdir(), directory]:
        os.utime(p, (t, t), follow_symlinks=False)


def test_a_killed_topologys_old_logs_go_while_a_live_workers_log_stays_and_its_rolled_files_keep_to_the_cap(tmp_path):
    cluster = Cluster(tmp_path, **{"logviewer.cleanup.interval.secs": 1, "logviewer.cleanup.age.mins": 1,
                                   "logviewer.max.per.worker.logs.size.mb": 1,
                                   "logviewer.max.sum.worker.logs.size.mb": 100})
    try:
        root = cluster.dir / "logs" / "workers-artifacts"
        with cluster.client() as m:
            m.submit_topology("gone", {"topology.workers": 1}, _topology())
            gone_id = m.get_topology_info("gone")["id"]
            m.submit_topology("stays", {"topology.workers": 1}, _topology())
            stays_id = m.get_topology_info("stays")["id"]
        assert wait_until(lambda: len(list((root / gone_id).glob("*/worker.log"))) == 1, 30)
        assert wait_until(lambda: len(list((root / stays_id).glob("*/worker.log"))) == 1, 30)
        (gone_dir,) = [p.parent for p in (root / gone_id).glob("*/worker.log")]
        (stays_dir,) = [p.parent for p in (root / stays_id).glob("*/worker.log")]
        with cluster.client() as m:
            m.kill_topology("gone", wait_secs=0)
        assert wait_until(lambda: not any(gone_id in c for c in cluster.workers().values()), 30)
        assert any(stays_id in c for c in cluster.workers().values())
        # a rolled file of the live worker past its 1 MB cap, and everything an hour old: the
        # dead worker's directory is past the 1 minute age, the live one's too but its worker runs
        rolled = stays_dir / "worker.log.1"
        with open(rolled, "wb") as f:
            f.truncate(2 * MB)
        _age(stays_dir, 3600)
        _age(gone_dir, 3600)
        assert wait_until(lambda: not (root / gone_id).exists() and not rolled.exists(), 30), \
            sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        assert (stays_dir / "worker.log").exists()
        assert any(stays_id in c for c in cluster.workers().values())
        sup_log = cluster.dir / "supervisor" / "supervisor.log"  # what it deleted, said (through a pipe)
        assert wait_until(lambda: f"removed {gone_dir}" in sup_log.read_text()
                          and f"deleted {rolled}, {2 * MB} bytes" in sup_log.read_text(), 15), sup_log.read_text()
    finally:
        cluster.stop()
