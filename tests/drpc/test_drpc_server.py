"""``squall drpc``'s server in this process (`BackgroundDRPC`), driven through its two ports as
the topologies' spouts and bolts and `DRPCClient` drive it: results and failures reach their own
caller, a request past drpc.request.timeout.secs fails, a wrong secret and an oversized frame
are refused, and which entries of drpc.servers name this machine."""

from __future__ import annotations

import re
import threading

import pytest

from squall import DRPCClient, DRPCExecutionException
from squall.drpc import DRPCExceptionType
from squall.drpc.client import ClusterLinks
from squall.drpc.server import BackgroundDRPC, local_entries
from squall._errors import RpcError
from squall._wire import AuthenticationError

from ..conftest import wait_until
from ..ports import free_ports
from .calls import HANG_GUARD, client_execute, concurrent_answers

SECRET = "drpc-test-secret-0123456789"


@pytest.fixture
def server_conf(tmp_path):
    port, invocations = free_ports(2)
    return {"storm.local.dir": str(tmp_path / "storm-local"), "squall.secret": SECRET,
            "drpc.servers": ["127.0.0.1"], "drpc.port": port, "drpc.invocations.port": invocations,
            "drpc.request.timeout.secs": 600}


@pytest.fixture
def server(server_conf):
    drpc = BackgroundDRPC.start_for_nimbus(server_conf)
    assert drpc is not None
    yield drpc
    drpc.stop()


class Topology:
    """Stands in for a DRPC topology: fetches requests on the invocations port like a DRPC spout
    and answers each (args + "!", or fails it when args start with "fail") like ReturnResults."""

    def __init__(self, conf, function):
        links = ClusterLinks.of(conf)
        self.link = links.link("127.0.0.1", links.drpc.invocations_port)
        self.function = function
        self.answered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            request = self.link.call("fetch_request", function=self.function)
            if request is None:
                self.stop.wait(0.002)
                continue
            if request["args"].startswith("fail"):
                assert self.link.call("fail_request", request_id=request["id"], message="the bolt said no")
            else:
                assert self.link.call("result", request_id=request["id"], result=request["args"] + "!")
            self.answered += 1

    def close(self):
        self.stop.set()
        self.thread.join(HANG_GUARD)
        self.link.close()


def test_concurrent_callers_each_get_their_own_answer(server, server_conf):
    topology = Topology(server_conf, "exclaim")
    threads, n = 8, 40
    clients = []

    def caller():
        clients.append(DRPCClient(server_conf))
        return clients[-1].execute
    answers = concurrent_answers(caller, "exclaim", threads, n)
    for client in clients:
        client.close()
    topology.close()
    assert len(answers) == threads * n and all(r == a + "!" for a, r in answers.items())
    stats = server.server.book.stats()
    assert (stats.executed, stats.fetched, stats.returned, stats.failed, stats.outstanding) == \
        (threads * n, threads * n, threads * n, 0, 0)
    assert topology.answered == threads * n


def test_one_client_shared_by_threads(server, server_conf):
    topology = Topology(server_conf, "exclaim")
    client = DRPCClient(server_conf)
    results: list[str] = []
    callers = [threading.Thread(target=lambda i=i: results.append(client.execute("exclaim", str(i))), daemon=True)
               for i in range(20)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(HANG_GUARD)
    client.close()
    topology.close()
    assert sorted(results) == sorted(f"{i}!" for i in range(20))


def test_a_failed_request_raises_at_once_with_why(server, server_conf):
    topology = Topology(server_conf, "exclaim")
    with DRPCClient(server_conf) as client:
        with pytest.raises(DRPCExecutionException, match="the bolt said no") as raised:
            client.execute("exclaim", "fail this")
        assert raised.value.type is DRPCExceptionType.FAILED_REQUEST
        assert client.execute("exclaim", "next") == "next!"
    topology.close()
    stats = server.server.book.stats()
    assert (stats.executed, stats.failed, stats.returned, stats.timed_out) == (2, 1, 1, 0)


def test_the_requests_a_spout_took_fail_soon_after_its_connection_closes(server, server_conf):
    """A DRPC spout's worker SIGKILLed: the server sees its connection close, and the request it
    took fails after the grace (FAILED_REQUEST, naming the spout), where before it waited for
    drpc.request.timeout.secs (600 here). A spout whose connection closed and that connected
    again (a live worker's lost connection) keeps its request and answers it. Both calls counted.
    The grace is the spout's (its topology.message.timeout.secs): 0.5 s here."""
    links = ClusterLinks.of(server_conf)
    port = links.drpc.invocations_port
    outcomes: dict[str, tuple] = {}
    callers = [threading.Thread(target=lambda a=a: outcomes.__setitem__(a, client_execute(server_conf, "f", a)),
                                daemon=True) for a in ("one", "two")]
    for t in callers:
        t.start()
    dying, living = links.link("127.0.0.1", port), links.link("127.0.0.1", port)
    taken: dict[str, dict] = {}

    def take(link, holder):
        got = link.call("fetch_request", function="f", holder=holder, grace=0.5)
        if got is not None:
            taken[holder] = got
        return got is not None
    assert wait_until(lambda: take(dying, "DRPC spout [f] task 3"), 30)
    assert wait_until(lambda: take(living, "DRPC spout [f] task 4"), 30)
    dying.close()  # as the kernel closes a killed worker's sockets
    living.close()  # a live worker's connection lost, and made again
    again = links.link("127.0.0.1", port)
    assert again.call("fetch_request", function="f", holder="DRPC spout [f] task 4", grace=0.5) is None
    lost, kept = taken["DRPC spout [f] task 3"], taken["DRPC spout [f] task 4"]
    assert wait_until(lambda: lost["args"] in outcomes, HANG_GUARD)
    result, error = outcomes[lost["args"]]
    assert result is None and error.type is DRPCExceptionType.FAILED_REQUEST, outcomes
    assert "lost with the DRPC spout that took it (DRPC spout [f] task 3)" in str(error)
    assert kept["args"] not in outcomes  # past the grace, the spout that came back still has it
    assert again.call("result", request_id=kept["id"], result=kept["args"] + "!")
    for t in callers:
        t.join(HANG_GUARD)
    assert outcomes[kept["args"]] == (kept["args"] + "!", None)
    again.close()
    stats = server.server.book.stats()
    assert (stats.executed, stats.fetched, stats.returned, stats.failed, stats.timed_out, stats.outstanding) == \
        (2, 2, 1, 1, 0, 0)


class _SpoutContext:
    """What a DRPC spout asks of its task's context (one task of component "drpc"; an acker
    task unless ``ackers`` is False)."""

    def __init__(self, ackers=True):
        self.ackers = ackers

    def get_this_component_id(self):
        return "drpc"

    def get_component_tasks(self, component_id):
        if component_id == "__acker":
            return [1] if self.ackers else []
        return [3]

    def get_this_task_index(self):
        return 0

    def get_this_task_id(self):
        return 3

    def get_storm_id(self):
        return "long-trees-1-1"


class _SpoutCollector:
    def __init__(self):
        self.emitted, self.errors = [], []

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append((values, msg_id))

    def report_error(self, error):
        self.errors.append(error)


@pytest.mark.parametrize("message_timeout", [30, 86400, 100000, 2 ** 31 - 1])
def test_a_drpc_spout_of_a_topology_with_a_message_timeout_over_a_day_serves(server, server_conf,
                                                                             message_timeout):
    """topology.message.timeout.secs is any positive number (a topology of long trees sets it
    high): the DRPC spout sends it as its grace, which the server takes up to a day. Before,
    above a day, every fetch_request was refused ("grace must be ...") and the RemoteError came
    out of the spout's next_tuple: the spout fetched nothing and its worker failed, its callers
    waited out drpc.request.timeout.secs. Now the spout asks for a day at most, and serves. One
    request, answered; counted by the server."""
    from squall.drpc import DRPCSpout, ReturnInfo
    from squall.drpc import client as drpc_client
    from squall._secret import load_or_create_secret
    remembered = drpc_client._worker_conf[0]
    drpc_client.remember_cluster(server_conf, load_or_create_secret(server_conf))
    spout, collector = DRPCSpout("long"), _SpoutCollector()
    try:
        spout.open({"topology.message.timeout.secs": message_timeout}, _SpoutContext(), collector)
        outcome: list = []
        caller = threading.Thread(target=lambda: outcome.append(client_execute(server_conf, "long", "x")), daemon=True)
        caller.start()
        assert wait_until(lambda: spout.next_tuple() or collector.emitted, 30), collector.errors
        (args, info), msg_id = collector.emitted[0]
        assert args == "x" and collector.errors == []
        request = ReturnInfo.from_json(info)
        links = ClusterLinks.of(server_conf)
        answer = links.link("127.0.0.1", links.drpc.invocations_port)
        assert answer.call("result", request_id=request.request_id, result="x!")
        answer.close()
        caller.join(HANG_GUARD)
        assert outcome == [("x!", None)]
    finally:
        spout.close()
        drpc_client._worker_conf[0] = remembered
    stats = server.server.book.stats()
    assert (stats.executed, stats.fetched, stats.returned, stats.failed, stats.outstanding) == (1, 1, 1, 0, 0)


@pytest.mark.parametrize(("conf", "ackers"), [
    ({"topology.enable.message.timeouts": False, "topology.message.timeout.secs": 1}, True),
    ({"topology.message.timeout.secs": 1}, False),
], ids=["message-timeouts-off", "no-ackers"])
def test_a_gone_spout_without_message_timeouts_leaves_its_requests_to_the_request_timeout(server, server_conf,
                                                                                         conf, ackers):
    """With topology.enable.message.timeouts false, or no ackers (the spout acks at the emit),
    nothing bounds a DRPC tuple's tree, and once the spout's connection closed (its worker died) a
    bolt in another worker may still return the result at any time: its request waits for
    drpc.request.timeout.secs (600 here), as before the grace. Before, it failed the message
    timeout (1 s) after the close, though no spout would ever have failed it, and the result
    returned later was refused. The request is answered after the close; counted by the server."""
    from squall.drpc import DRPCSpout, ReturnInfo
    from squall.drpc import client as drpc_client
    from squall._secret import load_or_create_secret
    remembered = drpc_client._worker_conf[0]
    drpc_client.remember_cluster(server_conf, load_or_create_secret(server_conf))
    spout, collector = DRPCSpout("slow"), _SpoutCollector()
    book = server.server.book
    try:
        spout.open(conf, _SpoutContext(ackers), collector)
        outcome: list = []
        caller = threading.Thread(target=lambda: outcome.append(client_execute(server_conf, "slow", "y")), daemon=True)
        caller.start()
        assert wait_until(lambda: spout.next_tuple() or collector.emitted, 30), collector.errors
        request = ReturnInfo.from_json(collector.emitted[0][0][1])
    finally:
        spout.close()  # as the kernel closes a killed worker's socket
        drpc_client._worker_conf[0] = remembered
    assert wait_until(lambda: [h.connections for h in book._holders.values()] == [0], 30)  # the server saw it
    assert book.deadline(request.request_id) > server.server.clock() + 300  # the request timeout's, not 1 s
    links = ClusterLinks.of(server_conf)
    answer = links.link("127.0.0.1", links.drpc.invocations_port)
    assert answer.call("result", request_id=request.request_id, result="y!")  # a bolt elsewhere answers
    answer.close()
    caller.join(HANG_GUARD)
    assert outcome == [("y!", None)]
    stats = book.stats()
    assert (stats.executed, stats.fetched, stats.returned, stats.failed, stats.outstanding) == (1, 1, 1, 0, 0)


def test_a_request_past_its_timeout_raises(server_conf):
    drpc = BackgroundDRPC.start_for_nimbus({**server_conf, "drpc.request.timeout.secs": 0.3})
    try:
        with DRPCClient({**server_conf, "drpc.request.timeout.secs": 0.3}) as client:
            with pytest.raises(DRPCExecutionException, match="drpc.request.timeout.secs") as raised:
                client.execute("nobody-serves-this", "x")
        assert raised.value.type is DRPCExceptionType.SERVER_TIMEOUT
        stats = drpc.server.book.stats()
        assert (stats.executed, stats.timed_out, stats.outstanding) == (1, 1, 0)
    finally:
        drpc.stop()


def test_a_wrong_secret_is_refused_on_both_ports(server, server_conf):
    wrong = {**server_conf, "squall.secret": "not-the-cluster-secret-42"}
    with pytest.raises(AuthenticationError, match="squall.secret"):
        DRPCClient(wrong).execute("exclaim", "x")
    links = ClusterLinks.of(wrong)
    with pytest.raises(AuthenticationError):
        links.link("127.0.0.1", links.drpc.invocations_port).call("fetch_request", function="exclaim")
    assert server.server.book.stats().executed == 0


def test_an_oversized_request_closes_its_connection_only(server, server_conf):
    topology = Topology(server_conf, "exclaim")
    with DRPCClient(server_conf) as client:
        with pytest.raises(RpcError):
            client.execute("exclaim", "x" * (server_conf.get("drpc.max_buffer_size", 1048576) + 1))
        assert client.execute("exclaim", "small") == "small!"
    topology.close()
    assert server.server.book.stats().executed == 1


def test_an_oversized_request_says_it_was_neither_sent_nor_run(server, server_conf):
    """Args over drpc.max_buffer_size are refused before they are sent. On main the caller read
    "the DRPC server ... stopped answering after the request was sent (...; nothing was sent); it
    may have run, so retry only if running 'exclaim' twice is harmless": a server that answered,
    a request both sent and not. Now it says what was wrong, and the connection is kept."""
    topology = Topology(server_conf, "exclaim")
    size = server_conf.get("drpc.max_buffer_size", 1048576)
    with DRPCClient(server_conf) as client:
        assert client.execute("exclaim", "first") == "first!"
        with pytest.raises(RpcError) as raised:
            client.execute("exclaim", "x" * (size + 1))
        text = str(raised.value)
        assert re.match(rf"DRPC call of 'exclaim': the request \(execute\) is \d+ bytes, over the {size} of "
                        rf"drpc.max_buffer_size; nothing was sent \(its args are {size + 1} characters\): not run; ",
                        text), text
        assert "stopped answering" not in text and "may have run" not in text, text
        assert client.execute("exclaim", "small") == "small!"
        assert len(client._idle) == 1  # the one connection, used by all three calls
    topology.close()
    assert server.server.book.stats().executed == 2


def test_a_function_no_spout_asked_for_times_out_saying_so(server_conf):
    """A call of a function no topology serves (a typo) times out, as Storm's does; on main its
    message was the one of a served function that was slow ("Timed Out: 'exclaim-typo' had no
    result within 0.5 s"). Now it says no DRPC spout asked for it and names those asked for."""
    conf = {**server_conf, "drpc.request.timeout.secs": 0.5}
    drpc = BackgroundDRPC.start_for_nimbus(conf)
    topology = Topology(conf, "exclaim")
    links = ClusterLinks.of(conf)
    slow = links.link("127.0.0.1", links.drpc.invocations_port)
    try:
        assert slow.call("fetch_request", function="slow") is None  # a spout of 'slow' asks, answers nothing
        with DRPCClient(conf) as client:
            assert client.execute("exclaim", "x") == "x!"
            with pytest.raises(DRPCExecutionException) as typo:
                client.execute("exclaim-typo", "x")
            with pytest.raises(DRPCExecutionException) as late:
                client.execute("slow", "x")
        assert typo.value.type is late.value.type is DRPCExceptionType.SERVER_TIMEOUT
        assert str(typo.value) == (
            "Timed Out: 'exclaim-typo' had no result within 0.5 s (drpc.request.timeout.secs): no DRPC spout "
            "has asked this server for 'exclaim-typo' since it started (no running topology serves it, or its "
            "spout has not started; the functions asked for: 'exclaim', 'slow')")
        assert str(late.value) == (
            "Timed Out: 'slow' had no result within 0.5 s (drpc.request.timeout.secs): no DRPC spout took it, though "
            "spouts of 'slow' asked this server for requests (the topology is deactivated, or its spouts were held "
            "back by topology.max.spout.pending or backpressure)")
    finally:
        topology.close()
        slow.close()
        drpc.stop()


def test_a_request_a_spout_took_times_out_naming_the_spout_and_when_it_took_it(server_conf):
    """``squall drpc``'s caller of a request a DRPC spout took and its topology held past
    drpc.request.timeout.secs heard only "Timed Out: 'slow' had no result within 0.5 s
    (drpc.request.timeout.secs)", as for a request no spout took. Now DRPCClient's
    DRPCExecutionException (SERVER_TIMEOUT, as Storm's clients catch) says which spout took it,
    when, and that the topology may still run it."""
    conf = {**server_conf, "drpc.request.timeout.secs": 0.5}
    drpc = BackgroundDRPC.start_for_nimbus(conf)
    links = ClusterLinks.of(conf)
    spout = links.link("127.0.0.1", links.drpc.invocations_port)
    holder = "DRPC spout [drpc] task 3 of 'slow-1-1' (0123456789ab)"
    taken = []

    def take():  # a DRPC spout that takes each request and whose topology never answers it
        while len(taken) < 3:
            request = spout.call("fetch_request", function="slow", holder=holder, grace=30)
            if request is None:
                threading.Event().wait(0.01)
            else:
                taken.append(request["args"])
    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        with DRPCClient(conf) as client:
            errors = []
            for i in range(3):
                with pytest.raises(DRPCExecutionException) as raised:
                    client.execute("slow", f"call {i}")
                errors.append(raised.value)
        thread.join(HANG_GUARD)
        assert taken == ["call 0", "call 1", "call 2"]
        assert all(e.type is DRPCExceptionType.SERVER_TIMEOUT for e in errors)
        for e in errors:
            assert re.fullmatch(
                r"Timed Out: 'slow' had no result within 0\.5 s \(drpc\.request\.timeout\.secs\): "
                + re.escape(holder) + r" took it (within 0\.01 s of|0\.\d\d s after) the call, and its topology "
                r"neither returned a result nor failed the request since \(a bolt still holds its tuple, whose tree "
                r"fails at the topology's topology\.message\.timeout\.secs; the topology may still run it\)",
                str(e)), str(e)
        assert drpc.server.book.stats()[:5] == (3, 3, 0, 0, 3)  # executed, fetched, returned, failed, timed out
    finally:
        spout.close()
        drpc.stop()


def test_shutdown_fails_waiting_callers(server_conf):
    drpc = BackgroundDRPC.start_for_nimbus(server_conf)
    out: list = []

    def call():
        try:
            DRPCClient(server_conf).execute("nobody-serves-this", "x")
        except DRPCExecutionException as e:
            out.append(e)
    t = threading.Thread(target=call, daemon=True)
    t.start()
    while drpc.server.book.stats().executed == 0:
        t.join(0.005)
    drpc.stop()
    t.join(HANG_GUARD)
    assert out and out[0].type is DRPCExceptionType.SERVER_SHUTDOWN


def test_unknown_operations_and_bad_arguments_are_named(server, server_conf):
    links = ClusterLinks.of(server_conf)
    link = links.link("127.0.0.1", links.drpc.invocations_port)
    with pytest.raises(Exception, match="unknown operation 'execute' on drpc.invocations.port"):
        link.call("execute", function="f", args="x")
    with pytest.raises(Exception, match="request_id must be a string"):
        link.call("result", request_id=3, result="x")
    with pytest.raises(TypeError, match="args of 'f' must be a string"):
        DRPCClient(server_conf).execute("f", 3)
    with pytest.raises(Exception, match="holder must be a string of 1 to 200 characters"):
        link.call("fetch_request", function="f", holder="x" * 201)
    with pytest.raises(Exception, match="grace must be a number of seconds above 0 and at most 86400"):
        link.call("fetch_request", function="f", holder="spout", grace=-1)
    link.close()


def test_no_drpc_servers_is_a_clear_error(tmp_path):
    with pytest.raises(DRPCExecutionException, match="drpc.servers is not set"):
        DRPCClient({"storm.local.dir": str(tmp_path), "squall.secret": SECRET})


def test_which_entries_of_drpc_servers_name_this_machine():
    table = {"me": ["10.0.0.5"], "localhost": ["127.0.0.1", "::1"], "other": ["10.0.0.9"], "gone": []}
    found = local_entries(["other", "me", "gone", "localhost"], table.__getitem__,
                          lambda a: a in {"10.0.0.5", "127.0.0.1", "::1"})
    assert found == [("me", ["10.0.0.5"]), ("localhost", ["127.0.0.1", "::1"])]
    assert BackgroundDRPC.start_for_nimbus({"drpc.servers": ["nowhere.invalid"], "squall.secret": SECRET}) is None


# --- the connection tables of the two ports -------------------------------------------------------------
def test_waiting_callers_do_not_lock_the_topology_out(tmp_path):
    """Callers waiting for answers filled the one connection table of both ports: a spout or
    return bolt connecting then was refused, and every waiting request timed out (Storm serves
    the two ports with pools of their own)."""
    port, inv = free_ports(2)
    conf = {"storm.local.dir": str(tmp_path), "squall.secret": SECRET, "drpc.servers": ["127.0.0.1"],
            "drpc.port": port, "drpc.invocations.port": inv, "drpc.request.timeout.secs": 8,
            "drpc.max.connections": 3}
    server = BackgroundDRPC.start_for_nimbus(conf)
    out = []
    try:
        def call(i):
            try:
                out.append(DRPCClient(conf).execute("f", str(i)))
            except Exception as e:  # noqa: BLE001
                out.append(e)
        threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        assert wait_until(lambda: server.server.book.stats().executed == 3, 5)
        # the topology's spout connects now (a worker restarted, or the topology was just deployed)
        links = ClusterLinks.of(conf)
        link = links.link("127.0.0.1", inv)
        served = 0
        try:
            for _ in range(3):
                req = link.call("fetch_request", function="f")
                assert link.call("result", request_id=req["id"], result=req["args"] + "!")
                served += 1
        except RpcError as e:
            pytest.fail(f"the topology could not reach drpc.invocations.port while 3 callers waited "
                        f"(drpc.max.connections 3): {e}")
        finally:
            link.close()
            for t in threads:
                t.join(20)
        assert sorted(out) == ["0!", "1!", "2!"]
    finally:
        server.stop()


def test_idle_kept_client_connections_do_not_refuse_new_callers(tmp_path):
    """DRPCClient keeps its connection for the next call (docs/drpc.md); an idle kept connection
    counts as 'busy' in the server's table forever, so idle clients refuse every new one."""
    port, inv = free_ports(2)
    conf = {"storm.local.dir": str(tmp_path), "squall.secret": SECRET, "drpc.servers": ["127.0.0.1"],
            "drpc.port": port, "drpc.invocations.port": inv, "drpc.request.timeout.secs": 8,
            "drpc.max.connections": 4}
    server = BackgroundDRPC.start_for_nimbus(conf)
    links = ClusterLinks.of(conf)
    link = links.link("127.0.0.1", inv)
    stop = threading.Event()

    def topology():
        while not stop.is_set():
            try:
                req = link.call("fetch_request", function="f")
            except RpcError:
                return
            if req is None:
                stop.wait(0.005)
                continue
            link.call("result", request_id=req["id"], result=req["args"] + "!")
    t = threading.Thread(target=topology, daemon=True)
    t.start()
    idle = [DRPCClient(conf) for _ in range(3)]
    try:
        for i, c in enumerate(idle):
            assert c.execute("f", str(i)) == f"{i}!"   # each now holds one idle connection
        fresh = DRPCClient(conf)
        try:
            assert fresh.execute("f", "new") == "new!"
        except RpcError as e:
            pytest.fail(f"a new caller was refused while every other connection was idle: {e}")
        finally:
            fresh.close()
    finally:
        for c in idle:
            c.close()
        stop.set()
        t.join(10)
        link.close()
        server.stop()


def test_a_kept_client_whose_server_restarted_connects_again_before_its_call(tmp_path):
    """A DRPCClient's idle connection to a server that restarted failed its next call ("the
    request may have run", so not safely retried) though nothing had reached any server."""
    port, inv = free_ports(2)
    conf = {"storm.local.dir": str(tmp_path), "squall.secret": SECRET, "drpc.servers": ["127.0.0.1"],
            "drpc.port": port, "drpc.invocations.port": inv, "drpc.request.timeout.secs": 8}

    def answered(server, value):
        link = ClusterLinks.of(conf).link("127.0.0.1", inv)
        try:
            assert wait_until(lambda: (req := link.call("fetch_request", function="f")) is not None
                              and link.call("result", request_id=req["id"], result=req["args"] + "!"), 10)
        finally:
            link.close()

    client = DRPCClient(conf)
    try:
        for round_ in range(2):
            server = BackgroundDRPC.start_for_nimbus(conf)
            try:
                t = threading.Thread(target=answered, args=(server, round_), daemon=True)
                t.start()
                assert client.execute("f", str(round_)) == f"{round_}!"
                t.join(10)
            finally:
                server.stop()
    finally:
        client.close()


def test_a_stopped_server_answers_its_waiting_caller_and_closes_every_connection_it_holds(server_conf):
    """`DRPCServer.serve` cancelled (``squall drpc`` sent SIGTERM) with a caller's connection
    idle between its calls, a spout's idle after a fetch and a caller waiting for its request:
    serve ends within a bound, the waiting caller has its SERVER_SHUTDOWN answer, and every
    connection is closed by then, no task of one left. Before, serve left them open for
    ``asyncio.run``'s last cancel; on Python 3.12+, whose ``async with server`` waits for every
    connection to close, it never ended while a client kept its own open: ``squall drpc`` sent
    SIGTERM with a kept caller, a kept spout, or a waiting caller was still running 15 s later
    (3 of 3 on 3.12.1; on 3.11 these left 3 connection tasks running once serve had ended)."""
    import asyncio

    from squall._wire import Client
    from squall.drpc.server import DRPCServer

    links = ClusterLinks.of(server_conf)

    async def main():
        server = DRPCServer(server_conf)
        ready = asyncio.Event()
        serve = asyncio.create_task(server.serve(["127.0.0.1"], ready))
        await ready.wait()

        def connect(port):
            return Client("127.0.0.1", port, links.secret, timeout=10)
        caller = await asyncio.to_thread(connect, links.drpc.port)  # authenticated; then idle
        spout = await asyncio.to_thread(connect, links.drpc.invocations_port)
        waiting = await asyncio.to_thread(connect, links.drpc.port)
        held = [caller, spout, waiting]
        try:
            assert await asyncio.to_thread(spout.call, "fetch_request", function="f") is None
            answer = asyncio.create_task(asyncio.to_thread(waiting.call, "execute", function="nobody", args="x"))
            while server.book.stats().executed == 0:
                await asyncio.sleep(0.005)
            serve.cancel()
            done, _ = await asyncio.wait([serve], timeout=10)
            assert done, "the DRPC server's serve did not end within 10 s of its cancel"
            assert await asyncio.wait_for(answer, 10) == {"failed": "SERVER_SHUTDOWN",
                                                          "message": "Server Shutting Down"}
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            assert not left, f"{len(left)} tasks left running after the DRPC server stopped: {left}"
            open_ = [c for c in held if not c.closed_by_peer()]
            assert not open_, f"{len(open_)} of the {len(held)} connections left open by the stopped server"
        finally:
            for c in held:
                c.close()
            serve.cancel()
            await asyncio.wait([serve], timeout=10)
    asyncio.run(main())
