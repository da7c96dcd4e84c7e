"""DRPC on the process host: ``squall nimbus --host process`` with drpc.servers naming this
machine starts ``squall drpc`` beside the master; Storm's manual DRPC topology (DRPCSpout ->
a bolt -> ReturnResults, in worker processes) answers DRPCClient's requests through it. Every
request is counted: each answered with its own result, failed ones raised at once, a wrong
secret refused; ``squall drpc`` alone refuses a configuration that names no server here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from squall import DRPCClient, DRPCExecutionException, SquallError
from squall.cluster.client import MasterClient
from squall.drpc import DRPCExceptionType
from squall.worker.rpc import AuthenticationError

from ..conftest import processes_mentioning, wait_until
from ..test_cli import write
from ..test_cli_cluster import free_ports, squall

HANG_GUARD = 180

MANUAL_DRPC = '''
from squall import Bolt, Fields, TopologyBuilder
from squall.drpc import DRPCSpout, ReturnResults


class Exclaim(Bolt):
    """args + "!" (Storm's ManualDRPC); fails the tuples whose args start with "fail"."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["result", "return-info"]))

    def execute(self, tup):
        args, info = tup.values
        if args.startswith("fail"):
            self.collector.fail(tup)
            return
        self.collector.emit([args + "!", info], anchors=tup)
        self.collector.ack(tup)


def build():
    builder = TopologyBuilder()
    builder.set_spout("drpc", DRPCSpout("exclamation"), 2)
    builder.set_bolt("exclaim", Exclaim(), 2).shuffle_grouping("drpc")
    builder.set_bolt("return", ReturnResults(), 2).shuffle_grouping("exclaim")
    return builder.create_topology()


conf = {"topology.workers": 2}
'''


class DrpcNimbus:
    """``squall nimbus --host process`` with drpc.servers: [127.0.0.1], on free ports."""

    def __init__(self, tmp: Path) -> None:
        port, drpc, invocations, *slots = free_ports(5)
        self.dir = tmp / "storm-local"
        self.conf = {"storm.local.dir": str(self.dir), "nimbus.thrift.port": port, "supervisor.slots.ports": slots,
                     "drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                     "drpc.request.timeout.secs": 120}
        self.config = tmp / "squall.yaml"
        self.config.write_text(yaml.safe_dump(self.conf))
        self.log = tmp / "nimbus.log"
        self.sent = {"requests": 0, "answered": 0, "failed": 0}  # what the tests sent, checked at the end
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "squall", "nimbus", "--host", "process", "--config", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT)
        up = wait_until(lambda: self.proc.poll() is not None or self.slots_total() == len(slots), 60, 0.1)
        assert up and self.proc.poll() is None, f"squall nimbus did not come up:\n{self.log.read_text()}"

    def slots_total(self) -> int | None:
        try:
            with MasterClient(self.conf) as master:
                return master.get_cluster_info()["slots_total"]
        except (SquallError, OSError):
            return None

    def ok(self, verb: str, *args: str) -> str:
        proc = squall(verb, "--config", str(self.config), *args, timeout=60)
        assert proc.returncode == 0, f"squall {verb} {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def clean_up(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in processes_mentioning(str(self.dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def nimbus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drpc-nimbus")
    n = DrpcNimbus(tmp)
    try:
        path = write(tmp, "manual_drpc.py", MANUAL_DRPC)
        assert n.ok("jar", "--name", "manual-drpc", path) == "Submitted topology: manual-drpc\n"
        yield n
        assert n.stop() == 0
        # the server's own count, logged as it stops, against what the tests sent
        sent = n.sent
        line = (f"squall drpc stopped: {sent['requests']} requests, {sent['answered']} answered, "
                f"{sent['failed']} failed, 0 timed out")
        assert line in n.log.read_text(), n.log.read_text()[-3000:]
    finally:
        n.clean_up()


def count(nimbus, requests, answered, failed=0):
    for key, n in (("requests", requests), ("answered", answered), ("failed", failed)):
        nimbus.sent[key] += n


def execute(conf, function, args):
    """(result, error) of one request, on a thread so that a broken build fails instead of hanging."""
    out: list = []

    def run():
        try:
            with DRPCClient(conf) as client:
                out.append((client.execute(function, args), None))
        except Exception as e:
            out.append((None, e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_GUARD)
    assert out, f"execute({function!r}, {args!r}) did not return"
    return out[0]


def test_requests_are_answered_by_the_topology_in_worker_processes(nimbus):
    result, error = execute(nimbus.conf, "exclamation", "first")  # waits for the workers to start
    assert (result, error) == ("first!", None)
    with DRPCClient(nimbus.conf) as client:
        results = [client.execute("exclamation", f"hello-{i}") for i in range(100)]
    assert results == [f"hello-{i}!" for i in range(100)]
    count(nimbus, 101, 101)


def test_concurrent_requests_each_get_their_own_answer(nimbus):
    threads, n = 6, 30
    answers: dict[str, str] = {}
    lock = threading.Lock()

    def caller(t):
        with DRPCClient(nimbus.conf) as client:
            for i in range(n):
                args = f"t{t}-{i}"
                result = client.execute("exclamation", args)
                with lock:
                    answers[args] = result
    callers = [threading.Thread(target=caller, args=(t,), daemon=True) for t in range(threads)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(HANG_GUARD)
    assert len(answers) == threads * n
    assert all(result == args + "!" for args, result in answers.items())
    count(nimbus, threads * n, threads * n)


def test_a_failed_tuple_fails_its_request_at_once(nimbus):
    """drpc.request.timeout.secs is 120 here: FAILED_REQUEST (not SERVER_TIMEOUT) is the spout's
    fail reaching the server; the message names the bolt that failed it."""
    result, error = execute(nimbus.conf, "exclamation", "fail this one")
    assert result is None and isinstance(error, DRPCExecutionException)
    assert error.type is DRPCExceptionType.FAILED_REQUEST
    assert "failed in [exclaim]" in str(error)
    assert execute(nimbus.conf, "exclamation", "then this") == ("then this!", None)
    count(nimbus, 2, 1, 1)


def test_a_wrong_secret_is_refused(nimbus):
    wrong = {**nimbus.conf, "squall.secret": "not-the-cluster-secret-42"}
    result, error = execute(wrong, "exclamation", "x")
    assert isinstance(error, AuthenticationError), error
    assert f"DRPC server 127.0.0.1:{nimbus.conf['drpc.port']}" in str(error)


def test_a_request_of_a_function_nobody_serves_times_out(tmp_path):
    """``squall drpc`` on its own, with a short drpc.request.timeout.secs."""
    drpc, invocations = free_ports(2)
    conf = {"storm.local.dir": str(tmp_path / "storm-local"), "drpc.servers": ["127.0.0.1"], "drpc.port": drpc,
            "drpc.invocations.port": invocations, "drpc.request.timeout.secs": 0.5}
    config = tmp_path / "squall.yaml"
    config.write_text(yaml.safe_dump(conf))
    proc = subprocess.Popen([sys.executable, "-m", "squall", "drpc", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline()
        assert ready == f"squall drpc ready at 127.0.0.1 port {drpc} (invocations port {invocations})\n", \
            proc.stderr.read() if not ready else ready
        result, error = execute(conf, "nobody-serves-this", "x")
        assert isinstance(error, DRPCExecutionException) and error.type is DRPCExceptionType.SERVER_TIMEOUT
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert "1 requests, 0 answered, 0 failed, 1 timed out" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_squall_drpc_refuses_a_configuration_naming_no_server_here(tmp_path):
    proc = squall("drpc", "-c", f"storm.local.dir={tmp_path}", "-c", 'drpc.servers=["nowhere.invalid"]')
    assert proc.returncode == 1
    assert proc.stderr.startswith("squall: error: no entry of drpc.servers ['nowhere.invalid'] names this machine")
