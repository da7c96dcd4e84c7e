"""``squall sparse submit``, run in the quickstart project's directory, sends its word count to a
running ``squall nimbus --host process``: its components travel to two worker processes (the
project's src/ modules shipped with the topology) and count there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli_cluster import Nimbus

REPO = Path(__file__).resolve().parents[2]


def test_sparse_submit_runs_the_quickstart_on_the_process_host(quickstart: Path, tmp_path: Path) -> None:
    nimbus = Nimbus(tmp_path)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-m", "squall", "sparse", "submit", "--config", str(nimbus.config),
                               "-w", "2"], cwd=quickstart, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "Submitted topology: wordcount" in done.stdout

        with MasterClient(nimbus.conf) as master:
            def counted() -> dict | None:
                info = master.get_topology_info("wordcount")
                bolt = info["components"]["count_bolt"]
                return info if bolt["executed"] > 0 and info["num_workers"] == 2 else None

            assert wait_until(counted, 60, 0.2), master.get_topology_info("wordcount")
            info = counted()
            assert info is not None and info["errors"] == []
            master.kill_topology("wordcount", wait_secs=0)
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()
