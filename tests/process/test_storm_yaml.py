"""A storm.yaml brought over as squall.yaml: Storm's JVM options and Netty settings in it apply to
nothing here, and the master and its supervisor say so when they start (before, not a word: a
worker.childopts' -Xmx768m capped no worker)."""

from __future__ import annotations

from ..conftest import wait_until
from .conftest import Cluster

STORM_YAML = {"worker.childopts": "-Xmx768m -XX:+UseG1GC", "nimbus.childopts": "-Xmx1024m",
              "storm.messaging.transport": "org.apache.storm.messaging.netty.Context",
              "storm.messaging.netty.buffer_size": 5242880,
              "storm.messaging.netty.max_wait_ms": 1000}  # squall's own (its reconnect backoff): no warning

WARNINGS = [
    ("cluster configuration: 'nimbus.childopts' is not applied (JVM options: squall's daemons and workers are "
     "Python processes)"),
    ("cluster configuration: 'storm.messaging.netty.buffer_size' is not applied (Storm's Netty transport: "
     "squall's workers talk over their own wire, squall.transport.wire)"),
    ("cluster configuration: 'storm.messaging.transport' is not applied (Storm's Netty transport: squall's "
     "workers talk over their own wire, squall.transport.wire)"),
    ("cluster configuration: 'worker.childopts' is not applied (JVM options: squall's daemons and workers are "
     "Python processes; worker.heap.memory.mb caps a worker's memory)"),
]


def _warned(log_file):
    """The warnings ``log_file`` holds so far, in WARNINGS' order."""
    text = log_file.read_text() if log_file.exists() else ""
    return [w for w in WARNINGS if w in text]


def test_the_master_and_its_supervisor_say_which_storm_yaml_settings_they_do_not_apply(tmp_path):
    cluster = Cluster(tmp_path, **STORM_YAML)
    try:
        master_log = tmp_path / "master.log"
        supervisor_log = cluster.dir / "supervisor" / "supervisor.log"
        assert wait_until(lambda: _warned(master_log) == WARNINGS and _warned(supervisor_log) == WARNINGS,
                          20), (master_log.read_text(), supervisor_log.read_text() if supervisor_log.exists() else "")
        for log_file in (master_log, supervisor_log):
            lines = [line for line in log_file.read_text().splitlines() if "is not applied" in line]
            assert len(lines) == len(WARNINGS), lines  # once each, and none for squall's own netty keys
    finally:
        cluster.stop()
