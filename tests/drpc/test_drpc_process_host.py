"""DRPC on the process host: ``squall nimbus --host process`` with drpc.servers naming this
machine starts ``squall drpc`` beside the master; Storm's manual DRPC topology (DRPCSpout ->
a bolt -> ReturnResults, in worker processes) answers DRPCClient's requests through it. Every
request is counted: each answered with its own result, failed ones raised at once, a wrong
secret refused; ``squall drpc`` alone refuses a configuration that names no server here."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import yaml

from squall import DRPCClient, DRPCExecutionException
from squall.drpc import DRPCExceptionType
from squall._wire import AuthenticationError

from ..test_cli import write
from ..ports import free_ports
from ..test_cli_cluster import Nimbus, squall
from .calls import client_execute as execute
from .calls import concurrent_answers

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


@pytest.fixture(scope="module")
def nimbus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drpc-nimbus")
    drpc, invocations = free_ports(2)
    n = Nimbus(tmp, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                     "drpc.request.timeout.secs": 120})
    n.sent = {"requests": 0, "answered": 0, "failed": 0}  # what the tests sent, checked at the end
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


def test_requests_are_answered_by_the_topology_in_worker_processes(nimbus):
    result, error = execute(nimbus.conf, "exclamation", "first")  # waits for the workers to start
    assert (result, error) == ("first!", None)
    with DRPCClient(nimbus.conf) as client:
        results = [client.execute("exclamation", f"hello-{i}") for i in range(100)]
    assert results == [f"hello-{i}!" for i in range(100)]
    count(nimbus, 101, 101)


def test_concurrent_requests_each_get_their_own_answer(nimbus):
    threads, n = 6, 30
    answers = concurrent_answers(lambda: DRPCClient(nimbus.conf).execute, "exclamation", threads, n)
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


def test_a_call_while_the_master_is_down_says_what_happened_and_whether_a_retry_is_safe(tmp_path):
    """DRPC served by ``squall nimbus``: a call in flight when the master is SIGKILLed (the
    request fetched by a spout, so it may have run) says that server stopped answering and to
    retry only if running it twice is harmless; a call while the master is down names the
    server tried, that none answered, and that the request was not sent, so a retry is safe."""
    import threading

    from squall._errors import RpcError
    from squall.drpc.client import ClusterLinks

    drpc, invocations = free_ports(2)
    n = Nimbus(tmp_path, {"drpc.servers": ["127.0.0.1"], "drpc.port": drpc, "drpc.invocations.port": invocations,
                          "drpc.request.timeout.secs": 120})
    try:
        raised: list[BaseException] = []
        done = threading.Event()

        def call():
            try:
                DRPCClient(n.conf).execute("held", "x")
            except BaseException as e:  # noqa: BLE001 - what the caller sees, checked below
                raised.append(e)
            done.set()
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        # as a DRPC spout would: the request is fetched, so the topology may have run it
        spout = ClusterLinks.of(n.conf).link("127.0.0.1", invocations)
        try:
            deadline = time.monotonic() + 10
            while (fetched := spout.call("fetch_request", function="held")) is None or not fetched.get("id"):
                assert time.monotonic() < deadline, "the call never reached the DRPC server"
                time.sleep(0.02)
        finally:
            spout.close()
        n.proc.send_signal(signal.SIGKILL)
        n.proc.wait(10)
        assert done.wait(10), "the call in flight did not end when its DRPC server died"
        [in_flight] = raised
        assert isinstance(in_flight, RpcError)
        text = str(in_flight)
        assert f"DRPC call of 'held': the DRPC server 127.0.0.1:{drpc} stopped answering after the request " \
               "was sent" in text, text
        assert "it may have run, so retry only if running 'held' twice is harmless" in text, text

        with pytest.raises(RpcError) as down:
            DRPCClient(n.conf).execute("held", "y")
        text = str(down.value)
        assert f"DRPC call of 'held': none of the DRPC servers of drpc.servers answered on drpc.port {drpc} " \
               f"(tried cannot reach 127.0.0.1:{drpc}" in text, text
        assert "the request was not sent, so retrying it is safe" in text, text
        assert "`squall nimbus`" in text, text
    finally:
        n.clean_up()
