"""`tests.ports`: the ports one process running tests drew are not drawn by another while it
lives (the other pytest-xdist worker of a run, another run on the machine), as two draws of
one slot port once left a whole-suite run's topology without a worker that could bind it."""

import os
import subprocess
import sys
from pathlib import Path

from . import ports
from .ports import free_ports

ROOT = Path(__file__).resolve().parent.parent

# A process that draws 1,000 ports (in draws of 100, as tests draw a few at a time), prints
# them, and lives until its standard input closes
DRAWER = """
import sys
from pathlib import Path
from tests import ports
ports.CLAIMS = Path(sys.argv[1])
drawn = [p for _ in range(10) for p in ports.free_ports(100)]
print(" ".join(map(str, drawn)), flush=True)
sys.stdin.read()
"""


def test_a_port_another_process_drew_is_not_drawn_while_it_lives(tmp_path, monkeypatch):
    """Another process draws 1,000 of the 8,192 ports; this one then draws 200, none of them its
    (drawn at random, with a check that each was free, about 24 were among them), and neither
    drew a port twice; once that process ended, its claims are gone."""
    monkeypatch.setattr(ports, "CLAIMS", tmp_path / "claims", raising=False)  # (absent before claims)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    other = subprocess.Popen([sys.executable, "-c", DRAWER, str(ports.CLAIMS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        drawn = [int(p) for p in other.stdout.readline().split()]
        theirs = set(drawn)
        mine = [p for _ in range(20) for p in free_ports(10)]
        assert not theirs & set(mine), f"{len(theirs & set(mine))} ports drawn by both processes"
        # nor twice by one process (each draw of a few checked only against itself before)
        assert len(theirs) == len(drawn) == 1000 and len(set(mine)) == 200
    finally:
        other.stdin.close()
        other.wait(10)
    assert not [p for p in theirs if (ports.CLAIMS / str(p)).exists()], "the ended process left claims"


def test_the_claim_of_a_process_that_died_without_removing_it_is_taken_over(tmp_path, monkeypatch):
    """A process SIGKILLed keeps its claims on disk: they hold no port (nor does one older than
    `ports.CLAIM_SECS`, whatever its process), and are taken over; a live process's claim holds."""
    monkeypatch.setattr(ports, "CLAIMS", tmp_path / "claims")
    monkeypatch.setattr(ports, "_SPAN", 64)  # the fewest ports it draws from
    ports.CLAIMS.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    low = ports._ephemeral_low()
    span = range(max(1024, low - ports._SPAN), low)
    for port in span:  # every port claimed by the dead process
        (ports.CLAIMS / str(port)).write_text(str(dead.pid))
    [port] = free_ports(1)
    assert port in span and (ports.CLAIMS / str(port)).read_text() == str(os.getpid())

    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        claim = ports.CLAIMS / str(port)
        claim.write_text(str(live.pid))
        assert not ports._claim(port)  # a live process's
        os.utime(claim, (0, 0))
        assert ports._claim(port)  # too old, whatever its process
        assert claim.read_text() == str(os.getpid())
    finally:
        live.stdin.close()
        live.wait(10)
