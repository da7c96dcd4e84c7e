"""``squall local FILE --ui PORT`` serves the REST API for the run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

from ..conftest import wait_until
from ..test_cli import TINY_TOPOLOGY, write


def test_squall_local_ui_serves_the_running_topology(tmp_path):
    path = write(tmp_path, "tiny_topology.py", TINY_TOPOLOGY)
    proc = subprocess.Popen([sys.executable, "-m", "squall", "local", path, "--ttl", "8", "--ui", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        match = re.match(r"squall UI at (http://127\.0\.0\.1:\d+)/api/v1/topology/summary$", first.strip())
        assert match, first
        def names():
            with urllib.request.urlopen(f"{match.group(1)}/api/v1/topology/summary", timeout=10) as r:
                return [t["name"] for t in json.load(r)["topologies"]]

        assert wait_until(lambda: names() == ["tiny_topology"], 10), names()  # submitted after the UI starts
    finally:
        proc.kill()
        proc.wait(10)


def test_storms_ui_authentication_keys_refuse_to_serve_rather_than_serve_openly(tmp_path):
    """Storm's ``ui.filter`` (an authenticating servlet filter) was accepted and ignored: the
    operator believed the pages and worker logs protected while anyone could read them."""
    proc = subprocess.run([sys.executable, "-m", "squall", "ui", "-c", "squall.secret=ui-auth-test-secret-0123456789",
                           "-c", f"storm.local.dir={tmp_path}", "-c", "ui.port=0",
                           "-c", "ui.filter=org.apache.hadoop.security.authentication.server.AuthenticationFilter"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "squall ui ready" not in proc.stdout
    assert ("squall: error: ui.filter set, but squall's UI runs none of Storm's UI authentication"
            in proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr
