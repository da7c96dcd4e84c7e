"""Several machines on this one: supervisors with their own address and ``storm.local.dir``, in
network namespaces of their own when the test may make them (`Network`), else on 127.0.0.x.

`Network` builds a small LAN: a "switch" namespace holding a bridge, the root namespace (where
the master and the test run) linked to it by a veth pair at ``10.213.N.1``, and one namespace
per machine linked to it at ``10.213.N.2``, ``.3``, ... The bridge sits in a namespace of its
own so that the root namespace's bridge and firewall settings never see the traffic, and the
addresses exist only in the test's namespaces. Cutting a machine's link is setting its switch
port down. Everything is removed by `remove`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from bench.hosts import descendants

from ..conftest import processes_mentioning


class NetnsUnavailable(Exception):
    """Network namespaces cannot be made here (the message says why)."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


def _free_subnet() -> int:
    """A third octet N with no address of 10.213.N.0/24 on this machine."""
    try:
        shown = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=10,
                               check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NetnsUnavailable(f"cannot run ip: {e}") from None
    start = os.getpid() % 200 + 20
    for n in [*range(start, 250), *range(20, start)]:
        if f" 10.213.{n}." not in shown:
            return n
    raise NetnsUnavailable("every 10.213.N.0/24 is in use")


class Network:
    """A LAN of ``machines`` network namespaces and the root namespace; see the module docstring."""

    def __init__(self, machines: int, tag: str | None = None) -> None:
        """``tag``: the names' prefix (default ``sq`` and this process's id)."""
        tag = tag or f"sq{os.getpid() % 100000}"
        self.subnet = _free_subnet()
        self.switch = f"{tag}-sw"
        self.root_link = f"{tag}r"  # the root namespace's end of its veth pair (15 characters at most)
        self.namespaces = [f"{tag}-m{i}" for i in range(machines)]
        self.master_address = f"10.213.{self.subnet}.1"
        self.addresses = [f"10.213.{self.subnet}.{i + 2}" for i in range(machines)]
        self._made: list[str] = []
        try:
            self._make()
        except Exception:
            self.remove()
            raise

    def _make(self) -> None:
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        _ip("link", "add", self.root_link, "type", "veth", "peer", "name", "root", "netns", self.switch)
        self._plug("root")
        _ip("addr", "add", f"{self.master_address}/24", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")
        for i, (ns, address) in enumerate(zip(self.namespaces, self.addresses)):
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", self.switch, "link", "add", f"m{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            self._plug(f"m{i}")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def _plug(self, port: str) -> None:
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")

    def second_master_address(self) -> str:
        """Another address of the root namespace on the LAN, ``10.213.N.250``, for a second
        master there: a machine can then be cut off from one master (`block`) and not the
        other. It goes with the root namespace's link, in `remove`."""
        address = f"10.213.{self.subnet}.250"
        _ip("addr", "add", f"{address}/24", "dev", self.root_link)
        return address

    def cut(self, machine: int, up: bool = False) -> None:
        """Unplug machine ``machine``: nothing reaches it or leaves it any more (``up``: plug it
        back in)."""
        _ip("-n", self.switch, "link", "set", f"m{machine}", "up" if up else "down")

    def block(self, machine: int, address: str, unblock: bool = False) -> None:
        """Drop, silently, every packet machine ``machine`` sends to ``address`` (a blackhole
        route in its namespace, as a firewall's DROP rule: no reset, no ICMP error), so that
        nothing passes between them either way while both reach everything else
        (``unblock``: route it again)."""
        _ip("-n", self.namespaces[machine], "route", "del" if unblock else "add", "blackhole", f"{address}/32")

    def remove(self) -> None:
        """Delete the namespaces and links (after their processes have ended)."""
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10, check=False)
        subprocess.run(["ip", "link", "del", self.root_link], capture_output=True, timeout=10, check=False)
        self._made = []


class Machine:
    """One machine of a test cluster: a supervisor process binding ``address`` (and its workers),
    with a ``storm.local.dir`` of its own under the cluster's, in network namespace
    ``netns`` if given. ``extra``: more settings for this machine only."""

    def __init__(self, cluster, name: str, address: str, netns: str | None = None, **extra) -> None:
        self.name = name
        self.address = address
        self.netns = netns
        self.dir = cluster.dir / "machines" / name
        self.dir.mkdir(parents=True)
        self.conf = {**cluster.conf, "storm.local.dir": str(self.dir), "storm.local.hostname": address, **extra}
        self.file = self.dir.parent / f"{name}.yaml"
        self.file.write_text(yaml.safe_dump(self.conf))
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.supervisor = subprocess.Popen(
            [*prefix, sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(self.file),
             "--log", str(self.dir.parent / f"{name}.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def workers(self) -> dict[int, str]:
        """pid -> command line of this machine's worker processes."""
        return {p: c for p, c in processes_mentioning(str(self.dir)).items() if "squall.worker" in c}

    def kill(self) -> None:
        """The machine dies: SIGKILL its supervisor (its workers die with it)."""
        self.supervisor.send_signal(signal.SIGKILL)
        self.supervisor.wait(5)

    def freeze(self, sig: int = signal.SIGSTOP) -> None:
        """Stop (or, with SIGCONT, resume) the supervisor and its workers: a hung machine. The
        supervisor first, so that it starts no worker meanwhile; then its descendants, found
        after it stopped: a worker it has just forked, whose command line does not name it as
        a worker yet, is stopped too."""
        _signal(self.supervisor.pid, sig)
        for pid in {*descendants(self.supervisor.pid), *self.workers()}:
            _signal(pid, sig)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def slots_of(client, name: str) -> list[str]:
    """The slots (``host:port``) topology ``name`` runs on now."""
    return sorted(w["slot"] for w in client.get_topology_info(name)["workers"])


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log, for a failed assertion's message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not written)"


def placed(master, name: str, workers: int, executors: dict[str, int]) -> bool:
    """True once ``name`` runs on ``workers`` live workers with ``executors`` (component ->
    count) as its executors (after a rebalance, a worker's restart)."""
    info = master.get_topology_info(name)
    if info["status"] != "ACTIVE" or len(info["workers"]) != workers:
        return False
    if not all(w["alive"] and w["pid"] for w in info["workers"]):
        return False
    return all(info["components"][c]["executors"] == k for c, k in executors.items())
