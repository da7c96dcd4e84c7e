"""storm-starter's ReachTopology (examples/storm_starter/reach.py, LinearDRPCTopologyBuilder's
``create_remote_topology``) on the process host, answering DRPCClient calls through ``squall
drpc``, while a worker is SIGKILLed mid-run: every call is answered with its URL's reach or
fails with DRPCExecutionException (none hangs, none is answered wrong), every call made once the
topology answers again is answered right, and the server's own count of requests, answers,
failures and timeouts is the callers' count."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from squall import DRPCClient, DRPCExecutionException
from squall.cluster.client import MasterClient
from squall.drpc import DRPCExceptionType

from ..conftest import wait_until
from ..examples.conftest import EXAMPLES
from ..ports import free_ports
from ..test_cli import write
from ..test_cli_cluster import Nimbus
from .calls import HANG_GUARD, client_execute

TOPOLOGY_TAIL = '''

def build():
    return construct().create_remote_topology()


conf = {"topology.workers": 2, "topology.message.timeout.secs": 4}
'''
"""The topology's message timeout, 4 s: the grace the server gives the requests a lost spout
took, which the callers blocked on them wait out after the spout's worker is killed (the test
waited 8 s for it at 8 s); still far above a reach call's tuples' time on a loaded machine."""


class Calls:
    """Every call the callers made: (started, url, result, error), by a DRPCClient per thread."""

    def __init__(self, conf, urls):
        self.conf, self.urls = conf, urls
        self.made: list[tuple[float, str, str | None, Exception | None]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.answered_at: dict[float, float] = {}  # when each answered call was answered, by its start

    def run(self, t):
        with DRPCClient(self.conf) as client:
            i = 0
            while not self.stop.is_set():
                url = self.urls[(t + i) % len(self.urls)]
                i += 1
                started = time.monotonic()
                try:
                    result, error = client.execute("reach", url), None
                except DRPCExecutionException as e:
                    result, error = None, e
                with self.lock:
                    self.made.append((started, url, result, error))
                    if result is not None:
                        self.answered_at[started] = time.monotonic()

    def answered_since(self, t0):
        with self.lock:
            return sum(1 for started, _, result, _ in self.made if started > t0 and result is not None)


REQUEST_TIMEOUT = 120
"""drpc.request.timeout.secs of the test's server: far above the grace the server gives a spout
that went (its topology.message.timeout.secs, 4 s here), so that a call failed for it is told by
its type and message, never by the timeout."""


def all_tasks_running(info: dict) -> bool:
    """Every worker of the topology alive and every task of it reported."""
    comps = info["components"].values()
    return (bool(info["workers"]) and all(w["alive"] for w in info["workers"])
            and sum(len(c["task_stats"]) for c in comps) == sum(c["tasks"] for c in comps))


@pytest.mark.parametrize("victim_runs_the_spout", [False, True], ids=["bolts-only", "the-spouts-worker"])
def test_reach_on_the_process_host_survives_a_sigkilled_worker(tmp_path, victim_runs_the_spout):
    """A worker running bolts only: its calls in flight fail at once (FAILED_REQUEST, a worker
    lost). The spout's worker: the server sees its spout's connection close, and the requests it
    had taken fail a grace later (FAILED_REQUEST, "lost with the DRPC spout"), where Storm's (and
    squall's before) waited for drpc.request.timeout.secs (docs/drpc.md). No call times out."""
    source = (EXAMPLES / "storm_starter" / "reach.py").read_text()
    drpc, invocations = free_ports(2)
    n = Nimbus(tmp_path, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                          "drpc.request.timeout.secs": REQUEST_TIMEOUT})
    try:
        reach = {}
        exec(compile(source, "reach.py", "exec"), reach)  # noqa: S102 (the example's own tables and answer)
        urls = [*reach["TWEETERS_DB"], "notaurl.com"]
        expected = {url: str(reach["reach"](url)) for url in urls}
        path = write(tmp_path, "reach_topology.py", source + TOPOLOGY_TAIL)
        assert n.ok("jar", "--name", "reach-drpc", path) == "Submitted topology: reach-drpc\n"
        # every task running first: the first call is not timed against the workers' start
        with MasterClient(n.conf) as master:
            assert wait_until(lambda: all_tasks_running(master.get_topology_info("reach-drpc")), 120), \
                "the topology's workers did not start"
        assert client_execute(n.conf, "reach", "foo.com/blog/1") == ("16", None)
        calls = Calls(n.conf, urls)
        callers = [threading.Thread(target=calls.run, args=(t,), daemon=True) for t in range(4)]
        for c in callers:
            c.start()
        try:
            assert wait_until(lambda: calls.answered_since(0) >= 40, 60), "the callers got no answers"
            with MasterClient(n.conf) as master:
                info = master.get_topology_info("reach-drpc")
            spout_ports = {st["worker"] for st in info["components"]["spout"]["task_stats"].values()}
            victim = next(w for w in info["workers"]
                          if (int(w["slot"].rsplit(":", 1)[1]) in spout_ports) == victim_runs_the_spout)
            os.kill(victim["pid"], signal.SIGKILL)
            killed = time.monotonic()
            # answered again: every request goes through every task of bolt2, in both workers
            assert wait_until(lambda: calls.answered_since(killed) >= 1, 120), "no call answered after the kill"
            with calls.lock:
                back = min(s for s, _, r, _ in calls.made if s > killed and r is not None)
                first_answer = min(t for started, t in calls.answered_at.items() if started > killed)
            assert wait_until(lambda: calls.answered_since(back) >= 40, 60), "the callers stopped getting answers"
            workers = n.workers()  # the victim died and its slot has a worker again
            assert victim["pid"] not in workers and len(workers) == 2, (victim, workers)
        finally:
            calls.stop.set()
            for c in callers:
                c.join(HANG_GUARD)
            assert not any(c.is_alive() for c in callers), "a call hung"
        made = calls.made
        wrong = [(url, result) for _, url, result, _ in made if result is not None and result != expected[url]]
        assert wrong == []
        errors = [e for _, _, _, e in made if e is not None]
        assert all(e.type is DRPCExceptionType.FAILED_REQUEST for e in errors), errors
        lost = [e for e in errors if "lost with the DRPC spout that took it (DRPC spout [spout]" in str(e)]
        # The spout's worker: the calls its spout had taken and nothing finished failed its grace
        # later, as "lost" (none timed out: checked above, and none hung). How many is a race with
        # the kill, 0 included (1 run in 6 under load): at that moment the calls may all be in the
        # server's queue, or past the spout in the live worker, which answers them. That a taken
        # call fails its grace later is shown without the race in tests/drpc/test_drpc_server.py.
        if not victim_runs_the_spout:
            assert lost == [], errors
        after = [(url, result, error) for started, url, result, error in made if started >= back]
        assert [a for a in after if a[2] is not None] == []  # once answered again, every call answered right
        print(f"reach on the process host, SIGKILL: {len(made)} calls, {len(errors)} failed, "
              f"the first answer to a call made after the kill {first_answer - killed:.1f} s after it")
        assert n.stop() == 0
        answered = sum(result is not None for _, _, result, _ in made) + 1  # + the first call
        failed = sum(e.type is DRPCExceptionType.FAILED_REQUEST for e in errors)
        timed_out = sum(e.type is DRPCExceptionType.SERVER_TIMEOUT for e in errors)
        line = (f"squall drpc stopped: {len(made) + 1} requests, {answered} answered, {failed} failed, "
                f"{timed_out} timed out")
        assert line in n.log.read_text(), n.log.read_text()[-3000:]
    finally:
        n.clean_up()
