"""The example systemd units (deploy/systemd, docs/cluster.md#running-the-daemons-under-supervision):
each runs a squall verb with options squall takes, restarts it always, and is a unit systemd
accepts (`systemd-analyze verify`, where it is installed)."""

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from squall.cli import _create_arg_parser

UNITS = sorted((Path(__file__).parent.parent / "deploy" / "systemd").glob("*.service"))


def _unit(path):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(path)
    return parser


def test_there_is_a_unit_for_each_daemon():
    assert [u.name for u in UNITS] == ["squall-nimbus.service", "squall-supervisor.service", "squall-ui.service"]


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_a_unit_runs_its_verb_with_options_squall_takes_and_restarts_it(path):
    service = _unit(path)["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/squall")
    args = _create_arg_parser().parse_args(argv[1:])
    assert args.verb == path.stem.removeprefix("squall-")
    assert args.config == "/etc/squall/squall.yaml"
    if args.verb == "nimbus":
        assert args.no_supervisor  # the supervisor is its own unit: restarting the master spares the workers
    assert service["Restart"] == "always"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_the_units(tmp_path):
    for path in UNITS:  # the binary must exist for verify: point it at one that does
        (tmp_path / path.name).write_text(path.read_text().replace("/usr/local/bin/squall", "/bin/true"))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in tmp_path.iterdir())],
                          capture_output=True, text=True, timeout=60)
    problems = [line for line in (done.stdout + done.stderr).splitlines() if ".service" in line]
    assert done.returncode == 0 and not problems, done.stdout + done.stderr


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_a_unit_raises_the_open_files_limit_above_the_default_1024(path):
    # a daemon's connection cap is its open files limit less 128 (squall._connlimit): at systemd's
    # default 1,024, 1,100 idle sockets were enough to make the UI answer nothing (issue 33, item 7)
    assert int(_unit(path)["Service"]["LimitNOFILE"]) >= 65536
