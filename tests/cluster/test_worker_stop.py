"""A supervisor stops a worker as Storm's does: SIGTERM, then SIGKILL after
``supervisor.worker.shutdown.sleep.secs`` (`squall.cluster.process_launcher.stop_process`)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from squall._config import Config, conf_value, validate
from squall._errors import InvalidTopologyException
from squall.cluster.process_launcher import stop_process

# A worker whose clean stop takes a while: on SIGTERM it writes its marker after 0.5 s and exits 0.
SLOW_STOP = """
import signal, sys, time
def stop(*_):
    time.sleep(0.5)
    open(sys.argv[1], "w").write("closed")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def _started(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    marker = tmp_path / "closed"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_STOP, str(marker)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # its handler is set
    return proc, marker


def test_a_worker_gets_the_whole_grace_to_stop_cleanly(tmp_path: Path) -> None:
    proc, marker = _started(tmp_path)
    stop_process(proc, 60.0)
    assert proc.returncode == 0
    assert marker.read_text() == "closed"


def test_a_worker_still_running_after_the_grace_is_killed(tmp_path: Path) -> None:
    proc, marker = _started(tmp_path)
    stop_process(proc, 0.05)
    assert proc.returncode == -signal.SIGKILL
    assert not marker.exists()


def test_the_grace_is_storms_key_with_storms_default_and_is_checked() -> None:
    assert conf_value({}, Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS) == 3
    with pytest.raises(InvalidTopologyException, match=r"supervisor\.worker\.shutdown\.sleep\.secs"):
        validate({Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS: -1}, "cluster conf")
