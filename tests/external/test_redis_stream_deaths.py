"""A Redis Streams entry that kills the worker its spout runs in: its retry budget outlives the
spout (kept beside the stream, in `charges_key`'s hash), so it reaches the dead-letter stream
after ``max_retries``, and the good entries in flight beside it at each death are delivered
again, never charged. Driven directly against a real redis-server (tests/external/conftest.py):
a "worker death" here is what a real one leaves behind, a spout object that is dropped without
``close`` (its acks held back never sent, its reading connection cut) and a new one opened under
the same consumer name. tests/acceptance and tests/process run the same on LocalCluster and the
process host, with a bolt under ``topology.bolt.fail.fast`` that raises."""

from __future__ import annotations

import collections
import json
import logging
import re
import time

import pytest

redis = pytest.importorskip("redis")

from squall import Bolt
from squall.engine.clock import SimulatedClock
from squall.external.redis_streams import RedisStreamSpout, charges_key
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff

from ..conftest import QUICK_CRASH_BACKOFF, wait_until
from .test_redis_streams import Context, Recorder

STREAM, GROUP = "events", "g"
GOOD = 1000
POISON = ("poison-a", "poison-b", "poison-c")
IN_FLIGHT = 20        # tuples of the spout in flight at once (its max spout pending)
MAX_RETRIES = 3


class Worker:
    """One life of the spout's worker: a spout task, and bolts that take its tuples
    `IN_FLIGHT` at a time, oldest first. A poison value kills the worker when it is processed."""

    def __init__(self, url: str, max_retries: int = MAX_RETRIES, conf: dict | None = None) -> None:
        self.spout = RedisStreamSpout(url, STREAM, GROUP, ["payload"], batch_size=50,
                                      backoff=RetryBackoff(0.0, 0.001, max_retries, 0.01))
        self.collector = Recorder()
        self.spout.open(conf or {}, Context(), self.collector)
        self.in_flight: collections.deque[tuple[str, str]] = collections.deque()

    def die(self) -> None:
        """What a dead process leaves: nothing sent, its connections cut, no ``close``."""
        drop(self.spout)


def drop(spout: RedisStreamSpout) -> None:
    """What a dead process leaves of ``spout``: nothing sent, its connections cut, no ``close``."""
    reader = spout._reader
    if reader.is_alive():
        reader.stop()
    else:
        reader.client.close()
    spout.client.close()


def test_an_entry_that_kills_its_spouts_worker_each_time_is_dead_lettered_after_its_budget(redis_server):
    """1,003 entries, three of which kill the worker each time they are processed (the spout
    dies with the bolt that raised). Each poison entry is charged only for the deaths while it
    was in flight alone (after its first death it is a suspect, emitted alone), so it reaches
    the dead letters after max_retries + 1 = 4 such deaths, with a cause saying so; the good
    entries in flight or read beside it when it killed the worker are delivered again (counted)
    and each reaches the output; none is dead-lettered or left charged."""
    r = redis_server.client()
    values = [str(i) for i in range(GOOD)]
    for k, value in enumerate(POISON):
        values.insert((k + 1) * GOOD // (len(POISON) + 1), value)
    ids = {r.xadd(STREAM, {"payload": v}): v for v in values}
    delivered: collections.Counter[str] = collections.Counter()   # emits, per value
    out: collections.Counter[str] = collections.Counter()         # processed and acked, per value
    deaths: collections.Counter[str] = collections.Counter()      # worker deaths, per poison value
    w = Worker(redis_server.url)
    deadline = time.monotonic() + 60
    try:
        while not (len(out) == GOOD and r.xlen(f"{STREAM}:dead") == len(POISON) and not w.in_flight
                   and r.xpending(STREAM, GROUP)["pending"] == 0):
            assert time.monotonic() < deadline and sum(deaths.values()) < 40, (
                f"not done: {sum(deaths.values())} deaths {dict(deaths)}, {r.xlen(f'{STREAM}:dead')} dead letters, "
                f"{len(out)} of {GOOD} good entries out")
            w.collector.woken.clear()
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            emitted = w.collector.emitted[before:]
            for (_id, payload), msg_id in emitted:
                assert ids[msg_id] == payload
                delivered[payload] += 1
                w.in_flight.append((msg_id, payload))
            if w.in_flight and (len(w.in_flight) >= IN_FLIGHT or not emitted):
                msg_id, payload = w.in_flight.popleft()
                if payload in POISON:
                    deaths[payload] += 1
                    w.die()
                    w = Worker(redis_server.url)
                    continue
                out[payload] += 1
                w.spout.ack(msg_id)
            elif not emitted:
                w.collector.woken.wait(0.5)   # nothing read yet: the reading thread wakes it
    finally:
        w.spout.close()

    assert set(out) == set(values) - set(POISON)   # every good entry reached the output
    dead = [fields for _, fields in r.xrange(f"{STREAM}:dead")]
    assert sorted(d["fields"] for d in dead) == sorted(json.dumps({"payload": p}) for p in POISON)
    for d in dead:
        said = re.fullmatch(r"failed 4 times \(max_retries 3\): delivered (\d+) times; its worker died each "
                            r"of the 4 times it was in flight alone", d["error"])
        assert said, d["error"]
        cause = json.loads(d["cause"])
        assert cause["kind"] == "worker-lost" and cause["message"] == d["error"].split(": ", 1)[1]
        # delivered once at least per death, and once more (the delivery that found it spent)
        assert int(said[1]) >= deaths[ids[d["id"]]] + 1
    # 4 deaths alone each, one in each level's group of suspects before it goes alone
    # (SUSPECT_GROUPS), and at most one before it was known a suspect
    grouped = len(SUSPECT_GROUPS) - 1
    assert all(MAX_RETRIES + 1 + grouped <= deaths[p] <= MAX_RETRIES + 2 + grouped for p in POISON), deaths
    again = {v: n for v, n in delivered.items() if n > 1 and v not in POISON}
    assert again, "no good entry was beside a poison one when it killed the worker"
    duplicates = sum(out.values()) - len(out)
    assert duplicates <= sum(again.values()) - len(again)   # a duplicate only where delivered again
    assert r.hlen(charges_key(STREAM, GROUP)) == 0   # every charge deleted with its entry


def emit_until(w: Worker, count: int, deadline: float) -> list[tuple[str, str]]:
    """Calls ``next_tuple`` until the spout emitted ``count`` tuples in all; their (id, payload)."""
    while len(w.collector.emitted) < count:
        assert time.monotonic() < deadline, f"{len(w.collector.emitted)} of {count} emitted"
        w.collector.woken.clear()
        before = len(w.collector.emitted)
        w.spout.next_tuple()
        if len(w.collector.emitted) == before:
            w.collector.woken.wait(0.5)   # nothing read yet: the reading thread wakes it
    return [(msg_id, values[1]) for values, msg_id in w.collector.emitted]


def ack_every_entry(w, r, values: list[str], deadline: float) -> None:
    """Acks what the spout of ``w`` emits until it emitted as many entries as ``values``, none
    dead-lettered meanwhile; then closes it and checks that the entries emitted are ``values``,
    each once, and nothing is left pending or charged."""
    out: list[str] = []
    try:
        while len(out) < len(values):
            assert r.xlen(f"{STREAM}:dead") == 0, [f for _, f in r.xrange(f"{STREAM}:dead")]
            before = len(w.collector.emitted)
            for msg_id, payload in emit_until(w, before + 1, deadline)[before:]:
                out.append(payload)
                w.spout.ack(msg_id)
    finally:
        w.spout.close()
    assert sorted(out) == values and r.xlen(f"{STREAM}:dead") == 0
    assert r.xpending(STREAM, GROUP)["pending"] == 0 and r.hlen(charges_key(STREAM, GROUP)) == 0


def test_a_group_recreated_does_not_apply_the_charges_of_the_group_it_replaced(redis_server):
    """A charge left by a group destroyed (XGROUP DESTROY) while its entry was pending is not
    applied to the entry once a group of that name delivers it again: the task that creates the
    group deletes the hash of charges with it. max_retries 0: the first group's worker dies with
    entry 0 in flight alone (charged "1 1 1", after a death in a group of suspects raised its
    level, "0 0 1"); the group is destroyed and recreated, and the new
    group's first worker dies with the 5 entries in flight together (no one charged). On main
    the leftover charge then dead-lettered entry 0, a good entry never alone in flight when a
    worker of this group died; with the fix all 5 are acked, none dead-lettered or charged."""
    r = redis_server.client()
    values = [f"v{i}" for i in range(5)]
    ids = [r.xadd(STREAM, {"payload": v}) for v in values]
    deadline = time.monotonic() + 60
    w = Worker(redis_server.url, max_retries=0)
    assert [v for _, v in emit_until(w, 5, deadline)] == values   # together: no one charged
    w.die()
    w = Worker(redis_server.url, max_retries=0)
    assert emit_until(w, 1, deadline) == [(ids[0], "v0")]   # a suspect, in a group: its level raised
    assert r.hget(charges_key(STREAM, GROUP), ids[0]) == "0 0 1"
    w.die()
    w = Worker(redis_server.url, max_retries=0)
    assert emit_until(w, 1, deadline) == [(ids[0], "v0")]   # level 1: alone, charged first
    assert r.hget(charges_key(STREAM, GROUP), ids[0]) == "1 1 1"
    w.die()
    r.xgroup_destroy(STREAM, GROUP)   # an operator resets the group; the stream stays
    w = Worker(redis_server.url, max_retries=0)
    assert [v for _, v in emit_until(w, 5, deadline)] == values   # afresh, together
    w.die()
    w = Worker(redis_server.url, max_retries=0)
    ack_every_entry(w, r, values, deadline)


def test_a_charge_in_the_hash_that_is_not_one_is_ignored_not_a_crash_at_every_restart(redis_server, caplog):
    """The hash of charges is a Redis key any client may write. A value there that is not a
    charge (another tool's, an operator's edit) raised ValueError out of ``next_tuple`` when the
    pending entries were taken again, and the restarted spout read the same value first: a
    crash loop. As the Kafka spout does with malformed budgets in its commit metadata, it is
    ignored with a warning naming it, and the entry goes on with a fresh budget: all 3 entries
    are delivered again and acked, none dead-lettered."""
    r = redis_server.client()
    values = ["v0", "v1", "v2"]
    ids = [r.xadd(STREAM, {"payload": v}) for v in values]
    deadline = time.monotonic() + 60
    w = Worker(redis_server.url)
    assert [v for _, v in emit_until(w, 3, deadline)] == values   # pending now, together
    w.die()
    r.hset(charges_key(STREAM, GROUP), mapping={ids[0]: "not a charge", ids[1]: "-1 5"})
    w = Worker(redis_server.url)
    ack_every_entry(w, r, values, deadline)
    warned = [rec.getMessage() for rec in caplog.records if "not a charge" in rec.getMessage()]
    assert warned and ids[0] in warned[0], [rec.getMessage() for rec in caplog.records]


@pytest.mark.timeout(300)  # 9 crashes at most, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_on_local_cluster_a_poison_entry_under_fail_fast_is_dead_lettered_and_every_good_one_is_out(redis_server):
    """The same through a topology on LocalCluster (one worker: the bolt that raises under
    ``topology.bolt.fail.fast`` takes the spout down with it each time): the worker restarts
    after each death, and the topology ends with every good entry out (duplicates counted),
    each poison one in the dead-letter stream after its death alone, none charged."""
    from squall import LocalCluster

    from . import poison_fail_fast as p

    r = redis_server.client()
    ids = p.add_entries(r)
    with LocalCluster(QUICK_CRASH_BACKOFF) as cluster:
        cluster.submit_topology("poison", p.conf(), p.topology(redis_server.url))
        try:
            # 9 quick crashes at most (3 poison entries: among others, in a group, alone), restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
            assert wait_until(lambda: p.done(r), 150), p.progress(r)
        finally:
            cluster.kill_topology("poison", 0)
    figures = p.check_outcome(r, ids)
    assert figures["good delivered again"] > 0, figures   # good entries were beside a poison one


def test_entries_lost_with_another_worker_go_out_again_together_only_the_executed_one_alone(redis_server):
    """Another worker dies (SIGKILLed, say) while 20 of the spout's entries are in flight: the
    spout, alive, is told each one's failure as its host tells it, the one a bolt there was
    executing (the 8th) as ``worker-died`` (charged), the 19 others as ``worker-lost``. The 19
    were only in flight: they go out again together, uncharged; the executed one, a suspect,
    goes alone in its turn (the 7 before it go, and it waits until they ended; the 12 after it
    wait until it ended, then go together). On main all 20 were suspects, each sent alone after
    the previous one's whole tree ended: with a persistent window (acked at the next checkpoint)
    a process-host pipeline acked 364 entries in the 190 s after a worker's SIGKILL, about one
    per checkpoint, and 600 were still pending."""
    from squall._failure import WORKER_DIED, WORKER_LOST, FailureCause
    r = redis_server.client()
    ids = [r.xadd(STREAM, {"payload": f"v{i}"}) for i in range(20)]
    deadline = time.monotonic() + 60
    w = Worker(redis_server.url)

    def emitted_now(rounds: int = 5) -> list[str]:
        """What ``rounds`` calls of next_tuple emit (every retry is due at once: the backoff's
        first delay is 0 s)."""
        before = len(w.collector.emitted)
        for _ in range(rounds):
            w.spout.next_tuple()
        return [m for _, m in w.collector.emitted[before:]]
    try:
        assert [m for m, _ in emit_until(w, 20, deadline)] == ids   # all in flight together
        executed = ids[7]
        for msg_id in ids:
            cause = (FailureCause(WORKER_DIED, "bolt", 4, "", "killed by SIGKILL") if msg_id == executed
                     else FailureCause(WORKER_LOST))
            w.spout.fail_with(msg_id, cause)
        assert emitted_now(20) == ids[:7]          # together, no ack between (on main: ids[0] alone)
        # charged: the executed one alone (for its death), no one for having been beside it
        assert r.hgetall(charges_key(STREAM, GROUP)) == {executed: "1 0"}
        for msg_id in ids[:7]:
            w.spout.ack(msg_id)
        assert emitted_now() == [executed]       # then the suspect, alone
        assert r.hget(charges_key(STREAM, GROUP), executed) == "2 1"   # its death, and this delivery's
        assert emitted_now() == []
        w.spout.ack(executed)
        assert emitted_now(20) == ids[8:]          # the rest together
        assert r.hlen(charges_key(STREAM, GROUP)) == 0
        for msg_id in ids[8:]:
            w.spout.ack(msg_id)
        w.spout.next_tuple()
        assert r.xpending(STREAM, GROUP)["pending"] == 0
    finally:
        w.spout.close()


def died_with_in_flight(redis_server, n: int) -> tuple[list[str], float]:
    """Adds ``n`` entries, has a spout's first life emit them all together (fresh, in order) and
    die with them in flight; returns their payloads and a deadline a minute away."""
    r = redis_server.client()
    values = [f"v{i}" for i in range(n)]
    for v in values:
        r.xadd(STREAM, {"payload": v})
    deadline = time.monotonic() + 60
    w = Worker(redis_server.url)
    assert [v for _, v in emit_until(w, n, deadline)] == values
    w.die()
    return values, deadline


def test_after_its_worker_died_the_entries_it_held_drain_in_groups_of_suspects(redis_server):
    """The spout's worker dies with 250 entries in flight (max spout pending 250; behind a
    stateful bolt that acks only at a checkpoint, each round of trees below is a checkpoint).
    Its next life takes them back from the pending list, all suspects, and sends them in groups
    of 32 (`SUSPECT_GROUPS`): each entry's level raised ("0 0 1") before it goes out, nothing
    else beside the group, the next group once every tree of this one ended. 8 rounds; on main
    each went alone after the one before it: 250 rounds (at 200 ms checkpoints, 55-59 s of the
    process-host run tests/process/test_state_rollback_sigkill.py). Every entry counted: each out
    once in the second life, acked, none charged or left marked, none dead-lettered."""
    r = redis_server.client()
    n = 250
    values, deadline = died_with_in_flight(redis_server, n)
    w = Worker(redis_server.url)
    out: list[str] = []
    rounds = 0
    try:
        while len(out) < n:
            assert time.monotonic() < deadline, f"{len(out)} of {n} out after {rounds} rounds"
            before = len(w.collector.emitted)
            while True:   # what the spout sends before it waits for the trees out to end
                sent = len(w.collector.emitted)
                w.spout.next_tuple()
                if len(w.collector.emitted) == sent:
                    break
            group = [(msg_id, values[1]) for values, msg_id in w.collector.emitted[before:]]
            assert group, f"nothing sent with nothing in flight, {len(out)} of {n} out"
            rounds += 1
            marks = r.hgetall(charges_key(STREAM, GROUP))
            assert all(marks[msg_id] == "0 0 1" for msg_id, _ in group), marks   # written before it went out
            for msg_id, payload in group:
                out.append(payload)
                w.spout.ack(msg_id)
    finally:
        w.spout.close()
    assert rounds == -(-n // SUSPECT_GROUPS[0]) == 8, rounds
    assert sorted(out) == sorted(values) and r.xlen(f"{STREAM}:dead") == 0
    assert r.xpending(STREAM, GROUP)["pending"] == 0 and r.hlen(charges_key(STREAM, GROUP)) == 0


def test_a_restarted_task_says_how_many_suspects_it_takes_back_and_in_how_many_groups_they_go(redis_server, caplog):
    """The spout's worker dies with 250 entries in flight: its next life says, in one warning
    as it takes them back, what the recovery waits for (250 suspects, 8 groups of up to 32, a
    checkpoint each behind a persistent window, the checkpoint interval the topology set) and
    the way out (max_retries=None); then each goes out once and is acked. Before, nothing was
    said: after a crash the new user's pipeline sat 14-16 s, 32 groups at one 500 ms
    checkpoint each, nothing failing, and looked hung."""
    r = redis_server.client()
    n = 250
    values, deadline = died_with_in_flight(redis_server, n)
    w = Worker(redis_server.url, conf={"topology.state.checkpoint.interval.ms": 500})
    with caplog.at_level(logging.WARNING, "squall.external.redis_streams"):
        ack_every_entry(w, r, sorted(values), deadline)   # each once, none left pending or charged
    said = [rec.getMessage() for rec in caplog.records if "taking back" in rec.getMessage()]
    assert len(said) == 1, said
    assert ("spout-0: taking back 250 record(s) its previous life left pending" in said[0]
            and "groups of up to 32" in said[0] and "at least 8 group(s)" in said[0]
            and "interval.ms: 500), so this takes 8 checkpoint(s) or more" in said[0]
            and "max_retries=None" in said[0]), said[0]


WINDOW_LAG = 10          # the window acks an entry once one WINDOW_LAG newer went out
WINDOW_TIMEOUT = 30      # the topology's topology.message.timeout.secs (simulated)


def test_a_poison_entry_behind_suspects_held_in_a_window_is_the_only_dead_letter(redis_server):
    """300 entries; entry 120 kills the worker each time it is processed, upstream of an
    event-time window that acks an entry once one WINDOW_LAG newer went out (in the same life).
    After its deaths beside others and in a group of suspects, each suspect goes alone; the
    window holds it for the message timeout (on a simulated clock), it is set aside and the
    next goes beside it, until 120 goes and kills the worker. Before, each suspect set aside
    kept the death charged before it went out, so 120's deaths dead-lettered the good entries
    set aside beside it too; now only 120 is dead-lettered, after max_retries + 1 deaths alone,
    and every other entry is acked."""
    r = redis_server.client()
    ids = {r.xadd(STREAM, {"payload": str(i)}): i for i in range(300)}
    clock = SimulatedClock()
    acked: set[int] = set()
    deaths = 0
    deadline = time.monotonic() + 120
    while True:
        assert deaths <= 6, f"{deaths} deaths"
        spout = RedisStreamSpout(redis_server.url, STREAM, GROUP, ["payload"], batch_size=50, block_ms=20,
                                 backoff=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01), clock=clock)
        out = Recorder()
        spout.open({"topology.message.timeout.secs": WINDOW_TIMEOUT}, Context(), out)
        died = False
        idle = 0
        while idle < 200:   # 200 turns with nothing emitted (simulated seconds apart): the input ended
            assert time.monotonic() < deadline, (deaths, sorted(acked)[-5:], len(acked))
            out.woken.clear()
            before = len(out.emitted)
            spout.next_tuple()
            values = [ids[m] for _, m in out.emitted]
            if 120 in values:
                died = True
                break
            if len(out.emitted) == before:
                idle += 1
                clock.advance(1.0)
                out.woken.wait(0.002)
            else:
                idle = 0
            newest = max(values, default=-1)
            for _, m in out.emitted:
                if ids[m] <= newest - WINDOW_LAG and ids[m] not in acked:
                    acked.add(ids[m])
                    spout.ack(m)
        if died:
            deaths += 1
            drop(spout)
            continue
        for _, m in out.emitted:   # the input ended: the window fires the rest
            if ids[m] not in acked:
                acked.add(ids[m])
                spout.ack(m)
        spout.close()
        break
    dead = [fields for _, fields in r.xrange(f"{STREAM}:dead")]
    assert [json.loads(d["fields"])["payload"] for d in dead] == ["120"]
    assert re.fullmatch(r"failed 4 times \(max_retries 3\): delivered \d+ times; its worker died each of the 4 "
                        r"times it was in flight alone", dead[0]["error"]), dead[0]["error"]
    assert acked == set(range(300)) - {120}
    assert deaths == 6
    assert r.xpending(STREAM, GROUP)["pending"] == 0 and r.hlen(charges_key(STREAM, GROUP)) == 0


class CrashOnce(RedisStreamSpout):
    """A Redis Streams spout that raises (its worker crashes) when the key ``crash`` is found
    and deleted (looked at every 50 ms); each life of the task adds one to ``lives`` at its
    first ``next_tuple``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self._switch = redis.Redis.from_url(self.url)
        self._look_at = 0.0
        self._counted = False

    def next_tuple(self):
        now = time.monotonic()
        if not self._counted:
            self._counted = True
            self._switch.incr("lives")
        if now >= self._look_at:
            self._look_at = now + 0.05
            if self._switch.delete("crash"):
                raise RuntimeError("crash switch: this worker dies now")
        return super().next_tuple()

    def close(self):
        super().close()
        self._switch.close()


class CountExecutes(Bolt):
    """Adds one to hash ``executed``'s field <payload> per tuple, then acks it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.r = redis.Redis.from_url(self.url, decode_responses=True)

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup):
        self.r.hincrby("executed", tup["payload"], 1)
        self.collector.ack(tup)


def _blocked_reads(r) -> int:
    """The clients of the server blocked in an XREADGROUP."""
    return sum(1 for c in r.client_list() if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))


CRASH_CLAIM_IDLE_MS = 8_000   # the spout's claim_idle_ms: the bound on the recovery below
CRASH_BLOCK_MS = 15_000       # its read's BLOCK: a read under way at the crash outlasts the restart


def test_after_a_spout_crash_on_local_cluster_the_next_entries_wait_for_no_claim(redis_server):
    """The spout's worker crashes on LocalCluster while its reading thread is blocked in
    XREADGROUP (idle, waiting for entries); the worker restarts, and 200 entries are added once
    the new task runs. Each goes to the bolt once and is acked well within the spout's
    claim_idle_ms. On main the dead task's reading thread lived on in the process, still
    blocked on its connection: it took the first entries to arrive into the consumer's
    pending list after the new task had replayed that list, nobody emitted them, and they
    waited for a claim to find them idle, claim_idle_ms plus up to claim_interval_secs (in the
    new user's pipeline, 62 s after a crash: claim_idle_ms defaults to a minute). The end of a
    worker now stops what its Redis Streams spouts started (`WorkerResources.at_end`)."""
    from squall import LocalCluster, TopologyBuilder

    r = redis_server.client()
    n = 200
    b = TopologyBuilder()
    b.set_spout("events", CrashOnce(redis_server.url, STREAM, GROUP, ["payload"], block_ms=CRASH_BLOCK_MS,
                                    claim_idle_ms=CRASH_CLAIM_IDLE_MS), 1)
    b.set_bolt("count", CountExecutes(redis_server.url), 1).shuffle_grouping("events")
    with LocalCluster(QUICK_CRASH_BACKOFF) as cluster:
        cluster.submit_topology("crash", {"topology.message.timeout.secs": 30}, b.create_topology())
        try:
            warm = [f"w{i}" for i in range(10)]
            for v in warm:
                r.xadd(STREAM, {"payload": v})
            assert wait_until(lambda: r.hlen("executed") == len(warm), 20), r.hgetall("executed")
            assert wait_until(lambda: _blocked_reads(r) == 1, 10), r.client_list()   # idle, reading
            r.set("crash", 1)
            assert wait_until(lambda: r.get("lives") == "2", 20), r.get("lives")    # restarted, running
            values = [f"v{i}" for i in range(n)]
            with r.pipeline(transaction=False) as p:
                for v in values:
                    p.xadd(STREAM, {"payload": v})
                p.execute()
            # the bound: no entry waits for a claim of a consumer's idle entries
            done = wait_until(lambda: r.hlen("executed") == len(warm) + n
                              and r.xpending(STREAM, GROUP)["pending"] == 0, CRASH_CLAIM_IDLE_MS / 1000)
            executed = {k: int(c) for k, c in r.hgetall("executed").items()}
            missing = [v for v in values if v not in executed]
            assert done and not missing, (
                f"{n - len(missing)} of {n} entries executed within claim_idle_ms "
                f"({CRASH_CLAIM_IDLE_MS} ms) of being added after the crash; pending "
                f"{r.xpending(STREAM, GROUP)}; the others waited for a claim")
        finally:
            cluster.kill_topology("crash", 0)
    assert all(executed[v] == 1 for v in warm + values), {v: c for v, c in executed.items() if c != 1}
    assert r.xpending(STREAM, GROUP)["pending"] == 0 and r.xlen(f"{STREAM}:dead") == 0
