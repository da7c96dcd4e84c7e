"""Worker logs on the process host are rotated by size (``squall.log.max.bytes``,
``squall.log.backup.count``), user prints included."""

from squall import TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .recovery_topology import Chatty


def test_a_worker_that_prints_a_lot_has_its_log_rotated_at_the_configured_size_and_count(tmp_path):
    cluster = Cluster(tmp_path, **{"squall.log.max.bytes": 20_000, "squall.log.backup.count": 2})
    try:
        b = TopologyBuilder()
        b.set_spout("chatty", Chatty(3000), 1)  # 300 KB of prints
        with cluster.client() as m:
            m.submit_topology("chatty", {"topology.workers": 1}, b.create_topology())
        sup_dir = cluster.dir / "supervisor"

        def printed_all():
            try:
                return "chatty line 00003000" in next(sup_dir.glob("worker-*.log")).read_text()
            except (StopIteration, FileNotFoundError):  # caught between a rename and the new file
                return False
        assert wait_until(printed_all, 30), sorted(p.name for p in sup_dir.iterdir())
        (log,) = sup_dir.glob("worker-*.log")
        rotated = sorted(p.name for p in sup_dir.glob(f"{log.name}.*"))
        assert rotated == [f"{log.name}.1", f"{log.name}.2"]
        assert all(p.stat().st_size <= 20_000 for p in sup_dir.glob(f"{log.name}*"))
        assert "chatty line 00002900" in (sup_dir / f"{log.name}.1").read_text() + log.read_text()
    finally:
        cluster.stop()
