"""The compiled hot path (squall._speedups) and its pure-Python twins (squall._native)."""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from squall import Tuple
from squall import _native
from squall._fields import Fields
from squall._tuple import Source

ROOT = Path(__file__).resolve().parents[1]

# The engine's own tests and the acceptance tests that run BasicBolts (acking, errors, whole
# topologies): what the two implementations must agree on.
TWIN_TESTS = ["tests/engine", "tests/test_tuple.py", "tests/worker/test_nonblocking.py", "tests/test_grouping.py", "tests/acceptance/test_acking.py",
              "tests/acceptance/test_errors.py", "tests/acceptance/test_complete_topology.py"]
# Without the Spark host's runs of those tests: its workers are the process host's worker
# processes (the same engine, started as Spark tasks), and every test run on Spark there is run
# on the process host too, so the twins still cross worker processes; starting a SparkSession
# in the twin run only for them cost ~30 s (half of it the session's start).
TWIN_SELECTION = ["-k", "not spark and not test_a_bolt_that_cannot_prepare_keeps_being_restarted"
                         " and not test_a_bolt_that_crashes_on_every_tuple_backs_off"]
# Nor LocalCluster's restart backoff (tests/acceptance/test_errors.py: a worker restarted 1 s,
# 2 s ... after its crashes, ~7 s of waiting in the twin run): what they run of the twins, an
# exception out of a bolt's execute under fail-fast, is test_a_crashing_bolt_is_reported_and_
# its_worker_restarted_with_fresh_instances's, which runs here; a prepare runs no twin code.
_PROCESS_TWINS_ALSO_RUN = ["test_tree_with_fan_out_and_multi_anchored_fan_in_completes_only_when_every_branch_is_acked",
                           "test_a_spout_tuple_is_acked_once_both_of_its_children_are_acked",
                           "test_a_failed_tuple_fails_its_spout_tuple_long_before_the_timeout",
                           "test_with_acking_disabled_the_spout_is_acked_at_once_on_emit"]
TWIN_SELECTION += [arg for name in _PROCESS_TWINS_ALSO_RUN
                   for arg in ("--deselect", f"tests/acceptance/test_acking.py::{name}[process]")]
# Nor these four process-host runs (~9 s alone, 14-17 s at load): what a process-host run adds
# to its LocalCluster run (which runs here) is the worker processes' wire, whose twins (the
# sender, unpack_into, deliver_items, epoll_ready, send_nb, recv_nb, StaleWatch) run in the
# worker processes whatever the tuples and streams they carry; counted per test in the twin
# run, every other twin that the twin run calls is called in this process, by LocalCluster's
# runs and the engine's tests, already. The two
# process-host runs kept, test_tuples_are_acked_across_two_workers_with_two_ackers (100 trees,
# 2 ackers) and test_acks_and_fails_reach_the_spout_task_that_emitted_the_tuple_and_replays_
# complete (fails and replays), carry tuples, acks, fails and the acker's replies between two
# workers on that wire; of the four, two run on one worker, and the other two's crossings
# (a fail, a fan-out's acks) are the kept runs' kinds.


@pytest.mark.skipif(bool(os.environ.get("SQUALL_PURE_PYTHON")), reason="SQUALL_PURE_PYTHON=1 selects the pure-Python twins: the compiled module is left unloaded on purpose")
def test_pip_install_built_the_compiled_hot_path():
    # gcc and Python's headers are on every machine scripts/install-system-deps.sh prepares
    assert _native.COMPILED, "squall._speedups was not built: run `pip install -e .` with a C compiler"
    assert Tuple.__mro__[1].__module__ == "squall._speedups"


@pytest.mark.timeout(600)
def test_the_pure_python_path_passes_the_same_engine_tests():
    env = dict(os.environ, SQUALL_PURE_PYTHON="1")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
                          *TWIN_SELECTION, *TWIN_TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    probe = subprocess.run([sys.executable, "-c", "import squall._native as n; print(n.COMPILED)"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "False"


def test_a_tuple_keeps_its_ack_slots_through_pickle_and_attribute_writes():
    src = Source("split", "default", 3, Fields("word"))
    t = Tuple(["a"], src, 5, 7)
    t._oav ^= 12
    back = pickle.loads(pickle.dumps(t))
    assert (back.values, back._root, back._val, back._oav) == (["a"], 5, 7, 12)
    assert back.source_component == "split" and back.get_value_by_field("word") == "a"
    untracked = Tuple(["b"], src)
    assert (untracked._root, untracked._val, untracked._oav) == (0, 0, 0)
    with pytest.raises(AttributeError):
        t.other = 1  # no __dict__: a Tuple stays small on both paths




@pytest.mark.skipif(not _native.COMPILED, reason="the compiled Tuple keeps _oav in 64 bits; the twin's is a plain slot")
def test_the_compiled_tuples_oav_holds_any_64_bit_xor_and_refuses_other_values_naming_it():
    # _oav (Storm's outAckVal) is the xor of 64-bit edge ids, kept as C bits: every emit xors
    # into it without making an int
    src = Source("split", "default", 3, Fields("word"))
    t = Tuple(["a"], src, 5, 7, 2**64 - 1)
    t._oav ^= 2**63
    assert t._oav == 2**63 - 1 and pickle.loads(pickle.dumps(t))._oav == 2**63 - 1
    for bad in (2**64, -1, "3", None):
        with pytest.raises(ValueError, match=r"_oav is the xor of 64-bit edge ids.*got"):
            t._oav = bad
        with pytest.raises(ValueError, match=r"_oav is the xor of 64-bit edge ids"):
            Tuple(["a"], src, 5, 7, bad)
    assert t._oav == 2**63 - 1
def test_tuples_and_their_subclasses_are_freed_whole_and_a_subclass_s_del_still_runs():
    # compiled, squall.Tuple (a subclass of TupleBase that adds nothing) is made and freed without
    # the generic paths; a subclass that adds a __del__ or a __dict__ keeps Python's own
    import gc
    import sys

    src = Source("split", "default", 3, Fields("word"))
    freed: list = []

    class Noted(Tuple):
        def __del__(self):
            freed.append(self.values[0])

    class Roomy(Tuple):
        __slots__ = ("extra",)

    def run(n):
        for i in range(n):
            Tuple([i], src, 5, 7)
            r = Roomy([i], src)
            r.extra = [i]

    run(1)  # (the compiled module holds the type it adopted at its first tuple)
    # earlier tests in this process can leave Tuples in reference cycles; a collection inside
    # _bytes_left_by would free them and lower the count, so collect them before counting
    gc.collect()
    refs = sys.getrefcount(Tuple), sys.getrefcount(Roomy)
    assert _bytes_left_by(run) < 20_000
    assert (sys.getrefcount(Tuple), sys.getrefcount(Roomy)) == refs  # each instance let its type go
    Noted(["n"], src)
    assert freed == ["n"]
    kept = Noted(["m"], src, 5, 7, 9)
    assert (kept.values, kept._root, kept._val, kept._oav, freed) == (["m"], 5, 7, 9, ["n"])
    del kept
    assert freed == ["n", "m"]


def _bytes_left_by(run) -> int:
    """The bytes still allocated after ``run(20_000)`` (after a warm-up ``run(1000)``): a
    reference leaked per call leaves at least one object per call. The warm-up is traced too:
    the freed Tuples the compiled Tuple keeps for reuse (a bounded free list) are then traced
    ones both before and after, not untraced ones replaced by traced ones."""
    import gc
    import tracemalloc

    tracemalloc.start()
    try:
        run(1000)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(20_000)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_emit_and_execute_keep_no_reference_they_should_not():
    """A leaked reference in the C path would grow a worker by every tuple: run 20,000 inputs
    through a BasicBolt's execute and emit, drop what they sent, and nothing may be left."""
    import functools
    import random
    from collections import deque

    from squall._errors import FailedException
    from squall.engine.acker import ACK
    from squall.engine.bolt_executor import BasicCollector
    from squall.engine.executor import TaskStats
    from squall.engine.routing import _NOWHERE, Router

    src = Source("split", "default", 1, Fields("word"))
    out_src = Source("split", "default", 1, Fields("word"))
    delivered, acker_inbox = [], []
    basic = BasicCollector.__new__(BasicCollector)
    basic.input, basic._out = None, None
    basic._routers = {"default": Router("default", out_src, lambda values: [7], False, {7: False})}
    basic._deliver = {7: delivered.append}
    basic._rand = functools.partial(random.Random(1).getrandbits, 64)
    basic._tuple_type, basic._nowhere, basic._acking = Tuple, _NOWHERE, True

    held: dict = {}

    def split(tup, collector):
        for word in tup.values[0].split():
            collector.emit([word])

    inbox: deque = deque()
    stats = TaskStats()
    execute = _native.BasicExecute(split, basic, None, None, FailedException, held, stats, {}, None,
                                   lambda: 0.0, inbox, [acker_inbox.append], ACK)
    rng = random.Random(2)

    def run(n):
        for _ in range(n):
            execute(Tuple(["a b c"], src, rng.getrandbits(64) | 1, rng.getrandbits(64)))
        _native.send_acks(held, [acker_inbox.append], ACK)
        delivered.clear()
        acker_inbox.clear()
        basic.input = None

    grown = _bytes_left_by(run)
    assert stats.acked == 21_000
    assert grown < 20_000, f"{grown} bytes left after 20,000 inputs"  # one object per input would be >= 640,000


def _acker_messages(seed):
    """Shuffled trees with acks before inits, fails (with a cause and without) and timeout
    resets, some left pending: the messages of an acker, from spout tasks 3 and 4."""
    import random

    from squall.engine.acker import ACK, FAIL, INIT, RESET

    rng = random.Random(seed)
    # ids of every width the C path reads on its own (0 to 3 digits of 30 bits), and its edges
    edge_ids = [0, 1, 2 ** 30 - 1, 2 ** 30, 2 ** 60 - 1, 2 ** 60, 2 ** 63, 2 ** 64 - 1]
    messages = []
    for root in (rng.getrandbits(64) | 1 for _ in range(300)):
        edges = [rng.choice(edge_ids) if rng.random() < 0.3 else rng.getrandbits(rng.choice((64, 64, 45, 20)))
                 for _ in range(rng.randrange(1, 5))]
        init = 0
        for e in edges:
            init ^= e
        tree = [(INIT, root, init, rng.choice((3, 4)))] + [(ACK, root, e, -1) for e in edges]
        if rng.random() < 0.1:  # a failure with a cause (the first one told is kept), or without
            tree.append((FAIL, root, rng.choice((0, ("exception", "parse", 3, "ValueError", "x"))), -1))
            if rng.random() < 0.5:
                tree.append((FAIL, root, ("fail", "other", 4, "", ""), -1))
        if rng.random() < 0.1:
            tree.insert(1, (RESET, root, 0, -1))
        if rng.random() < 0.1:
            tree.pop()  # an ack lost: the tree stays pending
        rng.shuffle(tree)
        messages += tree
    rng.shuffle(messages)
    return messages


def _acker_replay(messages, run):
    """``run(acker, pop, n, now, deliver)`` over the messages in two parts with a rotation
    after each: the replies, and the trees left pending."""
    from collections import deque

    from squall.engine.acker import Acker

    acker, got = Acker(), []
    deliver = {3: lambda m: got.append((3, *m)), 4: lambda m: got.append((4, *m))}
    half = len(messages) // 2
    for part, now in ((messages[:half], 10.0), (messages[half:], 12.5)):
        run(acker, deque(part).popleft, len(part), now, deliver)
        acker.rotate()
    pending = {root: (e.xor, e.spout_task, e.start, e.failed, e.reset, e.cause)
               for b in acker.pending._buckets for root, e in b.items()}
    return got, pending


def _acker_one_by_one(acker, pop, n, now, deliver):
    for _ in range(n):
        reply = acker.update(*pop(), now)
        if reply is not None:
            deliver[reply[0]](reply[1:])


def test_acker_run_replies_as_acker_update_does_in_any_order():
    """`acker_run` (C when compiled) against `Acker.update` called one message at a time, on
    shuffled trees with acks before inits, fails and timeout resets, and a rotation midway."""
    messages = _acker_messages(5)
    expected = _acker_replay(messages, _acker_one_by_one)
    assert len(expected[0]) > 250 and expected[1]  # replies of every kind, and trees left pending
    causes = {reply[3] for reply in expected[0] if reply[1] == 2}  # FAILED replies carry the cause
    assert causes >= {None, ("exception", "parse", 3, "ValueError", "x")}, causes
    assert _acker_replay(messages, _native.acker_run) == expected


def test_acker_drain_replies_as_acker_update_does_and_counts_every_sampled_message_in_its_stream():
    """`acker_drain` (C when compiled): the same replies and pending trees as `Acker.update` one
    message at a time, and Storm's sampled figures: the last message of each gap counted
    ``freq`` times under its stream (an init's also under its spout task's component), the gap
    left over kept for the next drain."""
    import random

    from squall.engine.acker import INIT
    from squall.engine.acker_executor import ACKER_STREAMS
    from squall.engine.stats import TaskStatistics

    messages = _acker_messages(6)
    components = {3: "words", 4: "lines"}

    def figures(sampled):
        return {k: ks.executed for k, ks in sampled.keys.items()}, sampled.left

    def sample_key(sampled, kind, spout_task):
        handle = (kind, spout_task) if kind == INIT else kind
        return sampled.key(components[spout_task] if kind == INIT else "", ACKER_STREAMS[kind], handle)

    def sampled_reference(sampled):
        def run(acker, pop, n, now, deliver):
            for _ in range(n):
                msg = pop()
                _acker_one_by_one(acker, iter((msg,)).__next__, 1, now, deliver)
                sampled.left -= 1
                if not sampled.left:
                    sample_key(sampled, msg[0], msg[3]).executed += sampled.freq
                    sampled.left = sampled.gaps()
        return run

    expected_stats = TaskStatistics(3, random.Random(1))
    expected = _acker_replay(messages, sampled_reference(expected_stats))
    stats = TaskStatistics(3, random.Random(1))
    got = _acker_replay(messages, lambda acker, pop, n, now, deliver: _native.acker_drain(
        acker, pop, n, now, deliver, stats, lambda kind, task: sample_key(stats, kind, task)))
    assert got == expected
    counted, left = figures(expected_stats)
    assert set(counted) == {("words", "__ack_init"), ("lines", "__ack_init"), ("", "__ack_ack"),
                            ("", "__ack_fail"), ("", "__ack_reset_timeout")}, counted
    # one message in 3 sampled, each counted 3 times: the estimate is within a block of the truth
    assert abs(sum(counted.values()) - len(messages)) <= 3
    assert figures(stats) == (counted, left)


def test_a_spout_s_rounds_of_next_tuple_stop_as_its_executor_s_produce_did():
    """`spout_produce` (C when compiled): each next_tuple called as its task, round after round,
    until a round emits nothing, the spout reaches max pending or the worker is throttled, or the
    budget is spent; an exception from next_tuple leaves with its task current."""

    class Executor(_native.SpoutExecutorBase):
        def __init__(self, max_pending):
            self.emits = self.in_flight = 0
            self.max_pending, self.current_task, self.seen = max_pending, None, []

    class Spout:
        def __init__(self, ex, task, stock, throttle=None, tracked=True):
            self.ex, self.task, self.stock, self.throttle, self.tracked = ex, task, stock, throttle, tracked

        def next_tuple(self):
            self.ex.seen.append((self.task, self.ex.current_task))
            if self.stock == "raise":
                raise ValueError(f"next_tuple of task {self.task}")
            if self.stock:
                self.stock -= 1
                self.ex.emits += 1
                self.ex.in_flight += self.tracked
                if self.throttle is not None and self.stock == 2:
                    self.throttle.throttled = True

    def run(max_pending, stocks, budget, throttle_at=None, tracked=True):
        ex = Executor(max_pending)
        throttle = SimpleNamespace(throttled=False)
        spouts = [Spout(ex, t, n, throttle if t == throttle_at else None, tracked) for t, n in stocks]
        made = _native.spout_produce(ex, [(s.task, s.next_tuple) for s in spouts], budget, throttle)
        return made, ex.emits, len(ex.seen), all(t == current for t, current in ex.seen)

    assert run(0, [(3, 5), (4, 9)], 64) == (14, 14, 20, True)  # until a round emits nothing
    assert run(0, [(3, 50)], 7) == (7, 7, 7, True)  # the budget
    assert run(6, [(3, 50), (4, 50)], 64) == (6, 6, 6, True)  # max pending, checked per round
    assert run(6, [(3, 50)], 64, tracked=False) == (50, 50, 51, True)  # nothing in flight: no limit
    assert run(0, [(3, 10), (4, 10)], 64, throttle_at=4) == (16, 16, 16, True)  # throttled
    ex = Executor(0)
    with pytest.raises(ValueError, match="task 4"):
        _native.spout_produce(ex, [(3, Spout(ex, 3, 9).next_tuple), (4, Spout(ex, 4, "raise").next_tuple)],
                              64, SimpleNamespace(throttled=False))
    assert ex.current_task == 4 and ex.emits == 1


def test_spout_replies_do_what_spout_executor_reply_does():
    """`spout_replies` (C when compiled) against `SpoutExecutor._reply` called one reply at a
    time: acks, fails, timeout resets and late replies over two tasks and both buckets."""
    import itertools
    import random
    from collections import deque
    from types import SimpleNamespace

    from squall import FailureCause
    from squall.engine.acker import ACKED, FAILED, RESET_TIMEOUT
    from squall.engine.executor import TaskStats
    from squall.engine.rotating_map import RotatingMap
    from squall.engine.spout_executor import SpoutExecutor
    from squall.engine.stats import TaskStatistics

    class Spout:
        def __init__(self):
            self.calls = []

        def ack(self, msg_id):
            self.calls.append(("ack", msg_id))

        def fail_with(self, msg_id, cause):
            self.calls.append(("fail", msg_id, cause))

    class Executor(_native.SpoutExecutorBase):  # its counters the compiled ones (when compiled)
        _reply = SpoutExecutor._reply
        _count_failed = SpoutExecutor._count_failed

        def __init__(self):
            ticks = itertools.count()
            self.wiring = SimpleNamespace(clock=SimpleNamespace(now=lambda: float(next(ticks))))
            self.pending, self.in_flight, self.current_task = RotatingMap(2), 0, None
            self.stats = {3: TaskStats(), 4: TaskStats()}
            self.sampled = {t: TaskStatistics(20, random.Random(t), spout=True) for t in (3, 4)}
            self.objs = {3: Spout(), 4: Spout()}
            self.fail_hooks = {t: s.fail_with for t, s in self.objs.items()}

    rng = random.Random(7)
    roots = [rng.getrandbits(64) for _ in range(200)]
    cause = ("exception", "parse", 3, "ValueError", "bad")
    replies = [(kind, root, cause if kind == FAILED else 0.5)
               for kind, root in ((rng.choice((ACKED, ACKED, ACKED, FAILED, RESET_TIMEOUT)), root) for root in roots)]
    replies += [(ACKED, rng.getrandbits(64), 0.5) for _ in range(20)]  # late: already timed out
    rng.shuffle(replies)

    def replay(run):
        ex = Executor()
        for i, root in enumerate(roots):
            ex.pending.put(root, (f"id{i}", 3 + i % 2, ("default", "other")[i % 3 == 0], -float(i)))
            ex.in_flight += 1
            if i == 100:
                ex.pending.rotate()
        run(ex, deque(replies).popleft, len(replies), ex.wiring.clock.now)
        stats = {t: (s.acked, s.failed, s.latency_sum, s.latency_count) for t, s in ex.stats.items()}
        # every ack and fail counted in the statistics, per stream (exact), latencies not sampled here
        counts = {t: {k: (ks.acked, ks.failed, ks.latency_n) for k, ks in s.keys.items()} for t, s in ex.sampled.items()}
        return (ex.in_flight, ex.current_task, stats, [sorted(b) for b in ex.pending._buckets],
                {t: s.calls for t, s in ex.objs.items()}, counts)

    def one_by_one(ex, pop, n, now):
        for _ in range(n):
            ex._reply(*pop())

    expected = replay(one_by_one)
    assert type(Executor().in_flight) is int
    assert expected[2][3][0] > 50 and expected[2][4][1] > 5 and expected[3][0]  # acks, fails, resets held
    for t in (3, 4):  # the statistics' counts are the task's exact ones
        assert sum(a for a, _f, _n in expected[5][t].values()) == expected[2][t][0]
        assert sum(f for _a, f, _n in expected[5][t].values()) == expected[2][t][1]
        assert len(expected[5][t]) == 2
    fails = [c for calls in expected[4].values() for c in calls if c[0] == "fail"]
    assert fails and all(c[2] == FailureCause(*cause) for c in fails)
    assert replay(_native.spout_replies) == expected

    # with the task's statistics: one reply in each gap sampled (its complete latency averaged)
    def sampled_one_by_one(ex, pop, n, now):
        sampled = ex.sampled[3]
        for _ in range(n):
            sampled.left -= 1
            if sampled.left:
                ex._reply(*pop())
            else:
                sampled.next_gap()
                ex._reply(*pop(), True)

    def latencies(ex):
        return {t: {k: (ks.latency_n, ks.latency_ms) for k, ks in s.keys.items()} for t, s in ex.sampled.items()}, ex.sampled[3].left

    def with_latencies(run):
        def ran(ex, pop, n, now):
            run(ex, pop, n, now)
            seen.append(latencies(ex))
        seen = []
        return replay(ran), seen

    expected = with_latencies(sampled_one_by_one)
    assert sum(n for by_key in expected[1][0][0].values() for n, _ms in by_key.values()) > 5  # sampled acks
    assert with_latencies(lambda ex, pop, n, now: _native.spout_replies(ex, pop, n, now, ex.sampled[3])) == expected


def test_spout_replies_sample_a_latency_of_a_clock_of_whole_seconds_as_the_python_reply_does():
    """A simulated clock of ints (Storm's users pass whole seconds) gives an int complete latency:
    the compiled replies refused it at the first sampled ack with a TypeError, which crashed the
    spout's worker (Trident's master coordinator: the window tests hung now and then)."""
    import random
    from types import SimpleNamespace

    from squall.engine.acker import ACKED
    from squall.engine.executor import TaskStats
    from squall.engine.rotating_map import RotatingMap
    from squall.engine.spout_executor import SpoutExecutor
    from squall.engine.stats import TaskStatistics

    class Spout:
        def __init__(self):
            self.acked = []

        def ack(self, msg_id):
            self.acked.append(msg_id)

    class Executor(_native.SpoutExecutorBase):
        _reply = SpoutExecutor._reply

        def __init__(self):
            self.wiring = SimpleNamespace(clock=SimpleNamespace(now=lambda: 1_000_007))
            self.pending, self.in_flight, self.current_task = RotatingMap(2), 0, None
            self.stats = {3: TaskStats()}
            self.sampled = {3: TaskStatistics(1, random.Random(3), spout=True)}  # every reply sampled
            self.objs = {3: Spout()}

    def run(replies) -> tuple:
        ex = Executor()
        for root in range(1, 11):
            ex.pending.put(root, (f"m{root}", 3, "default", 1_000_000 + root % 3))  # emitted at int times
            ex.in_flight += 1
        replies(ex)
        ks = ex.sampled[3].key("", "default", "default")
        return ex.objs[3].acked, ks.acked, ks.latency_n, ks.latency_ms, ex.stats[3].latency_sum

    def in_python(ex) -> None:
        for root in range(1, 11):
            ex.sampled[3].left -= 1
            sample = not ex.sampled[3].left
            if sample:
                ex.sampled[3].next_gap()
            ex._reply(ACKED, root, 0, sample)

    def compiled(ex) -> None:
        inbox = [(ACKED, root, 0) for root in range(10, 0, -1)]
        _native.spout_replies(ex, inbox.pop, 10, ex.wiring.clock.now, ex.sampled[3])

    expected = run(in_python)
    assert expected[0] == [f"m{r}" for r in range(1, 11)] and expected[2] == 10
    assert run(compiled) == expected


def test_the_fields_chooser_picks_as_the_stable_hash_does_for_any_key():
    """The compiled chooser answers a remembered str key itself and hands everything else to the
    Python chooser: the task is the one `stable_hash` names, whatever the key's type, whether the
    values are a list or a tuple, and after the memo is cleared for being full."""
    from squall import _grouping
    from squall._stable_hash import stable_hash

    g = _grouping.FieldsGrouping(Fields(["n", "word"]), Fields(["word"]))
    tasks = [3, 4, 5, 9]
    g.prepare(None, None, tasks)
    choose = g.chooser(1)
    keys = ["cow", "moon", "", "naïve", "\udc80", 7, 7.0, True, None, b"cow", ("a", 1), 2 ** 70]
    for round_ in range(3):  # the second and third rounds hit the memo for the str keys
        for key in keys:
            for values in ([0, key], (0, key)):
                assert choose(values) == [tasks[stable_hash([key]) % 4]], (round_, key, values)
    old = _grouping.FIELDS_MEMO_SIZE
    _grouping.FIELDS_MEMO_SIZE = 3
    try:
        g.prepare(None, None, tasks)
        choose = g.chooser(1)
        for i in range(20):
            word = f"w{i % 7}"
            assert choose([0, word]) == [tasks[stable_hash([word]) % 4]]
    finally:
        _grouping.FIELDS_MEMO_SIZE = old
    with pytest.raises(IndexError):
        choose([0])  # too short: the Python chooser's error


def test_the_fields_chooser_computes_an_ascii_key_s_task_as_the_stable_hash_for_any_length_and_task_count():
    """The compiled chooser computes an ASCII key's task itself, four bytes at a time, with a
    remainder by multiplication: for keys of every length up to 40 (whole four-byte steps and
    every tail) and task counts of 1, powers of two, odd and large, it names the task
    `stable_hash` names."""
    import random

    from squall import _grouping
    from squall._stable_hash import stable_hash

    rng = random.Random(38)
    alphabet = [chr(c) for c in range(128)]
    keys = ["".join(rng.choice(alphabet) for _ in range(n)) for n in range(41) for _ in range(25)]
    for n_tasks in (1, 2, 3, 4, 7, 8, 10, 64, 1000, 65537):
        tasks = list(range(100, 100 + n_tasks))
        g = _grouping.FieldsGrouping(Fields(["word"]), Fields(["word"]))
        g.prepare(None, None, tasks)
        choose = g.chooser(1)
        for key in keys:
            assert choose([key]) == [tasks[stable_hash([key]) % n_tasks]], (n_tasks, key)


@pytest.mark.skipif(bool(os.environ.get("SQUALL_PURE_PYTHON")), reason="SQUALL_PURE_PYTHON=1 leaves the compiled module unloaded")
def test_the_compiled_module_records_the_hash_of_the_source_it_was_built_from():
    from squall import _speedups  # type: ignore[attr-defined]
    source = ROOT / "squall" / "_speedups.c"
    digest = hashlib.sha256(source.read_bytes())
    for included in sorted((ROOT / "squall").glob("_speedups_*.c")):
        assert f'#include "{included.name}"' in source.read_text()
        digest.update(included.read_bytes())
    assert _speedups.SOURCE_SHA256 == digest.hexdigest() == _native.source_digest(source)


def test_a_module_built_from_another_source_is_refused_saying_how_to_rebuild(tmp_path):
    source = tmp_path / "_speedups.c"
    source.write_bytes(b"/* the source as edited after the build */\n")
    for built in ("0" * 64, ""):  # another source's hash; a build that recorded none (older setup.py)
        module = SimpleNamespace(__file__=str(tmp_path / "_speedups.so"), SOURCE_SHA256=built)
        with pytest.raises(_native.StaleBuildError) as raised:
            _native.check_build(module, source)
        message = str(raised.value)
        assert str(source) in message and "python setup.py build_ext --inplace" in message
        assert "pip install -e ." in message and "SQUALL_PURE_PYTHON=1" in message
    fresh = SimpleNamespace(SOURCE_SHA256=hashlib.sha256(source.read_bytes()).hexdigest())
    _native.check_build(fresh, source)  # built from this very source: taken
    (tmp_path / "_speedups_part.c").write_bytes(b"/* a file it includes, edited after the build */\n")
    with pytest.raises(_native.StaleBuildError):
        _native.check_build(fresh, source)
    _native.check_build(SimpleNamespace(), tmp_path / "absent.c")  # an installed wheel, no source beside it


@pytest.mark.skipif(bool(os.environ.get("SQUALL_PURE_PYTHON")), reason="SQUALL_PURE_PYTHON=1 leaves the compiled module unloaded")
def test_importing_squall_with_its_c_source_edited_since_the_build_fails_at_import(tmp_path):
    """The whole path: a copy of the package whose _speedups.c gained a line after the build
    refuses ``import squall`` with the rebuild message, and runs on the twins when told to."""
    import shutil
    from squall import _speedups  # type: ignore[attr-defined]
    copy = tmp_path / "squall"
    shutil.copytree(ROOT / "squall", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert Path(_speedups.__file__).parent == ROOT / "squall"  # the build the copy carries
    with (copy / "_speedups.c").open("a") as edited:
        edited.write("/* an edit with no rebuild */\n")
    env = {k: v for k, v in os.environ.items() if k != "SQUALL_PURE_PYTHON"}
    run = subprocess.run([sys.executable, "-c", "import squall"], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=str(tmp_path)))
    assert run.returncode != 0
    assert "StaleBuildError" in run.stderr and "build_ext --inplace" in run.stderr, run.stderr[-2000:]
    pure = subprocess.run([sys.executable, "-c", "import squall._native as n; print(n.COMPILED)"], cwd=tmp_path,
                          capture_output=True, text=True, env=dict(env, PYTHONPATH=str(tmp_path), SQUALL_PURE_PYTHON="1"))
    assert pure.stdout.split() == ["False"], pure.stderr


def test_the_sender_checks_only_tuples_with_values_that_may_not_serialize():
    """A task's sender to another worker queues task, then item (flat); it asks the serializer's check
    about a Tuple only when a value's type is not plain, and an error of the check reaches the
    emitting code with nothing queued."""
    from squall.engine.serialize import PLAIN_TYPES

    queued, checked = [], []

    def check(item):
        checked.append(item)
        if any(isinstance(v, set) for v in item.values):
            raise ValueError("a set")

    send = _native.sender(queued, 7, Tuple, PLAIN_TYPES, check)
    src = Source("split", "default", 3, Fields("word"))
    plain = Tuple(["cow", 1, 2.0, None, b"x", True], src)
    other = Tuple([["a list"]], src)
    bad = Tuple([{1}], src)
    ack = (1, 2, 3, -1)
    assert send(plain) is None
    send(other)
    send(ack)
    with pytest.raises(ValueError, match="a set"):
        send(bad)
    assert queued == [7, plain, 7, other, 7, ack]
    assert checked == [other, bad]


class _Counters(_native.SpoutExecutorBase):
    """A stand-in spout executor whose counters are the compiled ones (when compiled)."""


def _spout_collector(acking: bool, counters: type = SimpleNamespace, id_source: bool = False):
    """A SpoutCollector on a stand-in executor (its counters an attribute or `_Counters`): three
    streams (two targets, none, direct), the acker and every target recorded, ids and clock seeded
    (``id_source``: edge and root ids from `IdSource`s, the engine's own, which the C paths draw
    without a call; else from Python callables, the first root drawn 0)."""
    import functools
    import itertools
    import random
    from types import SimpleNamespace

    from squall.engine.executor import TaskStats
    from squall.engine.rotating_map import RotatingMap
    from squall.engine.routing import Router
    from squall.engine.spout_executor import SpoutCollector
    from squall.engine.stats import TaskStatistics

    sent: list = []
    acked: list = []
    ex = counters()
    ex.emits, ex.in_flight, ex.pending = 0, 0, RotatingMap(2)
    ex.sampled, ex.objs = {5: TaskStatistics(2, random.Random(3), True)}, {5: SimpleNamespace(ack=acked.append)}
    src = Source("words", "default", 5, Fields("word", "n"))
    c = SpoutCollector.__new__(SpoutCollector)
    c._ex, c._task, c._component, c._acking = ex, 5, "words", acking
    c.routers = {"default": Router("default", src, lambda values: [7, 8], False, {7: False, 8: False}),
                 "none": Router("none", Source("words", "none", 5, Fields("word")), lambda values: [], False, {}),
                 "direct": Router("direct", Source("words", "direct", 5, Fields("word")), None, True, {7: True})}
    c._deliver = {t: (lambda item, t=t: sent.append((t, item))) for t in (7, 8)}
    c._ackers = [lambda msg: sent.append(("acker0", msg)), lambda msg: sent.append(("acker1", msg))]
    c._rand = functools.partial(random.Random(1).getrandbits, 64)
    roots = random.Random(2)
    c._root = itertools.chain([0], iter(lambda: roots.getrandbits(64), None)).__next__  # 0 first: taken as 1
    if id_source:
        c._rand, c._root = _native.IdSource(1), _native.IdSource(2)
    ticks = itertools.count()
    c._now = lambda: float(next(ticks))
    c._stats = TaskStats()
    c._tuple_type = Tuple
    c._pending = ex.pending  # as SpoutCollector.__init__: the compiled emit stores tracked tuples here
    return c, ex, sent, acked


def test_a_spout_s_emit_does_what_its_general_python_path_does():
    """`SpoutCollector.emit` (C when compiled) against `_emit_general` on the same seeded ids and
    clock: tracked and untracked emits, keyword forms, a stream nobody hears, and the errors."""
    from squall._errors import EmitError

    calls = [((["a", 1], "m1"), {}), ((["b", 2],), {}), ((["c", 3],), {"msg_id": "m2"}),
             ((["d"], None, "none"), {}), ((["e"],), {"msg_id": "m3", "stream": "none"}),
             (((["f", 4]),), {"msg_id": 0}), (((("g", 5)), "m4"), {})]
    bad = [((["a"], "m5"), {}), ((["a", 1], "m6", "nope"), {}), ((["a"], "m7", "direct"), {}), ((None,), {})]

    def replay(acking, emit, counters=SimpleNamespace, id_source=False):
        c, ex, sent, acked = _spout_collector(acking, counters, id_source)
        returned = [list(emit(c)(*args, **kw)) for args, kw in calls]
        errors = []
        for args, kw in bad:
            with pytest.raises((EmitError, TypeError)) as e:
                emit(c)(*args, **kw)
            errors.append((e.type, str(e.value)))
        tuples = [(t, (i.values, i._root, i._val, i._oav, i._src.stream)) if isinstance(i, Tuple) else (t, i)
                  for t, i in sent]
        routers = {s: (r.emitted, r.transferred) for s, r in c.routers.items()}
        sampled = ex.sampled[5]
        return (returned, errors, tuples, routers, ex.emits, ex.in_flight, acked,
                [dict(b) for b in ex.pending._buckets], c._stats.acked,
                (sampled.left, {k: v.acked for k, v in sampled.keys.items()}))

    for acking in (True, False):
        expected = replay(acking, lambda c: c._emit_general)
        assert replay(acking, lambda c: c.emit) == expected
        assert replay(acking, lambda c: c.emit, _Counters) == expected
        expected = replay(acking, lambda c: c._emit_general, id_source=True)
        assert replay(acking, lambda c: c.emit, _Counters, id_source=True) == expected
    tracked = replay(True, lambda c: c.emit)
    assert tracked[5] == 5 and len(tracked[7][0]) == 5  # m1, m2, m3 (to nobody), msg_id 0 and m4 pending
    assert tracked[7][0][1][0] == "m1"  # the root drawn as 0 is 1
    inits = [m for t, m in tracked[2] if t in ("acker0", "acker1")]
    edges = [i for t, i in tracked[2] if t in (7, 8)]
    for kind, root, xor, task in inits:  # each init carries the xor of its tree's edges
        mine = [e[2] for e in edges if e[1] == root]
        assert kind == 0 and task == 5 and xor == (mine[0] ^ mine[1] if mine else 0)
    assert replay(False, lambda c: c.emit)[6] == ["m1", "m2", "m3", 0, "m4"]  # acking off: acked in emit


@pytest.mark.parametrize("id_source", [False, True])
def test_a_spout_s_emit_keeps_no_reference_it_should_not(id_source):

    c, ex, sent, acked = _spout_collector(True, id_source=id_source)

    def run(n):
        for i in range(n):
            c.emit(["a", i], i)
            c.emit(["b", i])
        sent.clear()
        ex.pending.rotate()
        ex.pending.rotate()

    grown = _bytes_left_by(run)
    assert grown < 20_000, f"{grown} bytes left after 40,000 emits"


def test_a_bolt_s_ack_does_what_its_general_python_path_does():
    """`BoltCollector.ack` (C when compiled) against `_ack_general`: one-tree inputs with and
    without a sibling next, acks held for coalescing, several roots, untracked inputs, acks from
    another thread, and open samples."""
    import random
    import threading
    from collections import deque
    from types import SimpleNamespace

    from squall.engine.bolt_executor import BoltCollector, BoltExecutor
    from squall.engine.executor import TaskStats

    src = Source("work", "default", 3, Fields("id"))
    rng = random.Random(4)
    roots = [rng.getrandbits(64) | 1 for _ in range(6)]
    inputs = [Tuple([i], src, roots[i % 6] if i % 7 else {roots[0]: 5, roots[1]: 9}, rng.getrandbits(64),
                    rng.getrandbits(64)) for i in range(60)]
    inputs += [Tuple([i], src, rng.getrandbits(64) | 1, rng.getrandbits(64), rng.getrandbits(64)) for i in range(20)]
    inputs += [Tuple(["untracked"], src)]  # (and above, 20 trees of one input each: W2's case)
    order = sorted(range(len(inputs)), key=lambda i: (inputs[i]._root if type(inputs[i]._root) is int else 0, i))

    def replay(ack_of):
        sent: list = []
        closed: list = []

        class Executor:
            flush_acks = BoltExecutor.flush_acks

            def __init__(self):
                self.acks = {}
                self.wiring = SimpleNamespace(ackers=[sent.append, lambda m: sent.append(("other", m))],
                                              loop=SimpleNamespace(wake=lambda: sent.append("wake")))

        c = BoltCollector.__new__(BoltCollector)
        c._ex = Executor()
        c._acks = c._ex.acks  # as BoltCollector.__init__: the compiled ack reads the held acks here
        c._ackers, c._nackers = c._ex.wiring.ackers, 2
        c._stats = TaskStats()
        c._samples = {}
        c._close_sample = lambda key, ok, now: (closed.append((key, ok, now)), c._samples.pop(key, None))
        c._now = lambda: 1.5
        c._inbox = deque()
        c._loop_ident = threading.get_ident()
        queue = [inputs[i] for i in order]  # siblings of a tree in a row, as a fan-out's children come
        c._inbox.extend(queue)
        for n, tup in enumerate(queue):
            c._inbox.popleft()
            if n % 5 == 0:
                c._samples[id(tup)] = tup
            if n % 11 == 0:  # from a thread of the bolt's own
                t = threading.Thread(target=ack_of(c), args=(tup,))
                t.start()
                t.join()
            else:
                ack_of(c)(tup)
        c._ex.flush_acks()
        return sent, [(inputs.index(next(t for t in inputs if id(t) == k)), ok, now) for k, ok, now in closed], \
            c._stats.acked, c._ex.acks

    expected = replay(lambda c: c._ack_general)
    assert replay(lambda c: c.ack) == expected
    assert expected[2] == len(inputs) and any(type(m) is tuple and m[0] == "other" for m in expected[0])


@pytest.mark.parametrize("decoded", [False, True])
def test_a_basic_bolt_acks_each_run_of_siblings_once_and_a_run_cut_by_the_drain_is_spilled_whole(decoded):
    """`BasicExecute` (C when compiled): the acks of a run of siblings (inputs of one tree in a
    row) go to the acker as one message, their xor; a run that a drain's end cuts is held until
    ``spill()`` hands it to the executor's dict, from which `send_acks` sends it, and the rest of
    the run then adds to it there. Every tree's acks add up to the xor of its inputs' ack values.
    ``decoded``: each sibling's root is an int of its own, equal to the others (as inputs decoded
    from another worker's batch come), not one shared object: siblings are told by value."""
    import random
    from collections import deque

    from squall._errors import FailedException
    from squall.engine.executor import TaskStats
    from squall.engine.stats import TaskStatistics

    src = Source("split", "default", 3, Fields("word"))
    rng = random.Random(9)
    inputs = []
    for _ in range(40):  # trees of 1 to 12 children in a row (W1's split: a sentence's words)
        root = rng.getrandbits(64) | 1
        inputs += [Tuple([f"w{len(inputs)}"], src, int(str(root)) if decoded else root, rng.getrandbits(64),
                         rng.getrandbits(64)) for _ in range(rng.randrange(1, 13))]
    inputs.insert(7, Tuple(["untracked"], src))
    if decoded:
        assert any(a._root == b._root and a._root is not b._root for a, b in zip(inputs, inputs[1:]))
    sent, executed = [], []
    acks, inbox = {}, deque(inputs)
    basic = _native.BasicCollectorBase()
    sampled = TaskStatistics(0, random.Random(1))
    execute = _native.BasicExecute(lambda tup, collector: executed.append(tup.values[0]), basic, None, None,
                                   FailedException, acks, TaskStats(), sampled.open_samples, sampled, lambda: 0.0,
                                   inbox, [sent.append], 1)
    expected: dict = {}
    for tup in inputs:
        if tup._root:
            expected[tup._root] = expected.get(tup._root, 0) ^ tup._val ^ tup._oav
    # runs: inputs of one tree in a row (the untracked input may cut one in two)
    runs = sum(1 for i, t in enumerate(inputs) if t._root and (i == 0 or inputs[i - 1]._root != t._root))
    cuts = 0
    while inbox:  # drains of 17 inputs each, as BoltExecutor.drain: then spill, then flush
        for _ in range(min(17, len(inbox))):
            last = inbox.popleft()
            execute(last)
        cut = bool(inbox) and last._root != 0 and inbox[0]._root == last._root  # a sibling waits
        cuts += cut
        execute.spill()
        assert bool(acks) == cut, "a run cut by the drain's end is in the executor's dict after spill"
        _native.send_acks(acks, [sent.append], 1)
    got: dict = {}
    for kind, root, x, task in sent:
        assert (kind, task) == (1, -1)
        got[root] = got.get(root, 0) ^ x
    assert got == expected and len(executed) == len(inputs)
    assert cuts > 3 and len(sent) == runs + cuts  # one message a run, and one more for each cut


def test_a_basic_bolt_s_emits_reach_their_tasks_and_a_task_s_new_callable_at_once():
    """`BasicCollectorBase.emit` (C when compiled) remembers the callables of the last few tasks it
    delivered to while the deliver dict is unchanged: emits to more tasks than it remembers, in a
    random order, each reach their task's callable, and once a task's callable is replaced (a
    worker moving the task to another loop) the next emit to it reaches the new one."""
    import random

    from squall.engine.bolt_executor import BasicCollector
    from squall.engine.routing import Router

    tasks = list(range(10, 17))  # more than the cache's ways
    got: list = []
    deliver = {t: (lambda item, t=t: got.append((t, item.values[0]))) for t in tasks}
    rng = random.Random(5)
    order = [rng.choice(tasks) for _ in range(600)]
    src = Source("split", "default", 3, Fields("n", "task"))
    out = SimpleNamespace(routers={"default": Router("default", src, lambda values: [values[1]], False,
                                                     {t: False for t in tasks})},
                          _deliver=deliver, _rand=lambda: 1, _nackers=0, _debug=False)
    c = BasicCollector(out)
    c.input = Tuple(["a sentence"], Source("spout", "default", 1, Fields("sentence")))
    for n, task in enumerate(order[:300]):
        assert c.emit([n, task]) == [task]
    moved: list = []
    deliver[12] = lambda item: moved.append(item.values[0])
    for n, task in enumerate(order[300:], 300):
        c.emit([n, task])
    assert got == [(task, n) for n, task in enumerate(order) if n < 300 or task != 12]
    assert moved == [n for n, task in enumerate(order) if n >= 300 and task == 12] and moved


def test_a_bolt_s_ack_keeps_no_reference_it_should_not():
    import threading
    from collections import deque
    from types import SimpleNamespace

    from squall.engine.bolt_executor import BoltCollector
    from squall.engine.executor import TaskStats

    sent: list = []
    c = BoltCollector.__new__(BoltCollector)
    c._ex = SimpleNamespace(acks={})
    c._ackers, c._nackers = [sent.append], 1
    c._stats, c._samples, c._inbox = TaskStats(), {}, deque()
    c._close_sample = lambda key, ok, now: c._samples.pop(key, None)
    c._now = lambda: 0.0
    c._loop_ident = threading.get_ident()
    src = Source("work", "default", 3, Fields("id"))

    def run(n):
        for i in range(n):
            tup = Tuple([i], src, i + 1, i, 7)
            if i % 3 == 0:
                c._samples[id(tup)] = tup
            c.ack(tup)
        sent.clear()

    grown = _bytes_left_by(run)
    assert c._stats.acked == 21_000 and not c._samples
    assert grown < 20_000, f"{grown} bytes left after 20,000 acks"


def test_the_shuffle_chooser_takes_the_grouping_s_next_choice_whatever_the_values():
    import random

    from squall._grouping import ShuffleGrouping

    g = ShuffleGrouping(random.Random(5))
    g.prepare(None, None, [4, 5, 6])
    a, b = g.chooser(1), g.chooser(2)
    picks = [a(["x"]), b([1, 2]), g.choose_tasks(3, ["y"]), a(()), b(["z"])]
    assert sorted(map(tuple, picks[:3])) == [(4,), (5,), (6,)] and picks[3:] == picks[:2]  # one cycle, shared
    with pytest.raises(TypeError):
        a()


def test_the_next_chooser_gives_what_its_next_gives_from_iterators_and_callables_alike():
    # compiled, the __next__ of an itertools iterator is called through its type's slot (no
    # method-wrapper call); every other callable is called; an exhausted iterator still stops
    import itertools

    def picks(make):
        choose, out = _native.next_chooser(make()), []
        for values in (["a"], [1, 2], ()):
            try:
                out.append(choose(values))
            except StopIteration:
                out.append("stop")
        return out

    assert picks(lambda: itertools.repeat([4]).__next__) == [[4], [4], [4]]
    assert picks(lambda: itertools.cycle([[4], [5]]).__next__) == [[4], [5], [4]]
    assert picks(lambda: itertools.chain([[6]], [[7]]).__next__) == [[6], [7], "stop"]
    assert picks(lambda: iter([[8]]).__next__) == [[8], "stop", "stop"]
    assert picks(lambda: (x for x in ([9], [10])).__next__) == [[9], [10], "stop"]
    drawn = iter(range(3))
    assert picks(lambda: lambda: [next(drawn)]) == [[0], [1], [2]]


def test_an_emit_after_its_task_moved_to_another_loop_goes_to_the_new_delivery():
    # the compiled collectors remember the callable they delivered to last, with the deliver
    # dict's version: the worker replaces a task's callable when it moves the task (worker.py)
    c, ex, sent, acked = _spout_collector(True, _Counters, id_source=True)
    moved: list = []
    c.emit(["a", 1], "m1")
    c._deliver[7] = lambda item: moved.append(item)
    c.emit(["b", 2], "m2")
    c.emit(["c", 3])
    assert [i.values for t, i in sent if t == 7] == [["a", 1]]
    assert [i.values for i in moved] == [["b", 2], ["c", 3]]
    assert [i.values for t, i in sent if t == 8] == [["a", 1], ["b", 2], ["c", 3]]


def test_a_batch_s_tuples_are_made_from_its_columns_as_the_python_path_makes_them():
    from itertools import chain, repeat

    def python_path(out, targets, values, src, roots, vals, tuple_type):
        if roots is None:
            tuples = map(tuple_type, values, repeat(src))
        else:
            tuples = map(tuple_type, values, repeat(src), roots, vals)
        out.extend(chain.from_iterable(zip(targets, tuples, strict=True)))

    src = Source("split", "default", 3, Fields("word"))
    runs = [([7, 8, 7], [["a"], ["b"], ["c"]], [1, 2 ** 64 - 1, 3], [4, 5, 6]),
            ([9], [["d"]], None, None), ([], [], [], [])]
    for make in (python_path, _native.batch_items):
        out: list = ["kept"]
        for targets, values, roots, vals in runs:
            make(out, targets, values, src, roots, vals, Tuple)
        # flat, as a sender queues them: target, Tuple, target, Tuple, ...
        pairs = list(zip(out[1::2], out[2::2]))
        assert out[0] == "kept" and len(out) == 9 and [(t, i.values, i._src, i._root, i._val, i._oav)
                                                        for t, i in pairs] == [
            (7, ["a"], src, 1, 4, 0), (8, ["b"], src, 2 ** 64 - 1, 5, 0), (7, ["c"], src, 3, 6, 0),
            (9, ["d"], src, 0, 0, 0)]
        assert all(type(i) is Tuple for _, i in pairs)
        with pytest.raises(ValueError):  # a forged batch's columns of different lengths
            make([], [7, 8], [["a"]], src, [1, 2], [3, 4], Tuple)


def test_a_batch_s_columns_are_grouped_as_the_python_path_groups_them():
    """`group_items` (C when compiled; None on the pure path) against `Serializer._group`: runs
    of tracked, untracked and several-root Tuples of alternating sources, acker messages and
    spout replies; None for an item that is none of these, which `_group` then words."""
    import random

    from squall._errors import SerializationError
    from squall.engine.serialize import Serializer

    a, b = Source("split", "default", 3, Fields("word")), Source("split", "other", 4, Fields("word"))
    rng = random.Random(6)
    items = []
    for i in range(300):
        kind = rng.randrange(6)
        src = a if i % 37 < 20 else b
        if kind == 0:
            items.append((7, Tuple([f"w{i}"], src)))
        elif kind == 1:
            items.append((8, Tuple([f"w{i}", i], src, {rng.getrandbits(64): 1, 5: 2}, 0)))
        elif kind == 2:
            items.append((9, (1, rng.getrandbits(64), rng.getrandbits(64), -1)))
        elif kind == 3:
            items.append((2, (1, rng.getrandbits(64), 0.25)))
        else:
            items.append((7 + i % 2, Tuple([f"w{i}"], src, rng.getrandbits(64) | 1, rng.getrandbits(64))))
    untracked = [(7, Tuple(["x"], a)), (8, Tuple(["y"], a))]
    for batch in (_flat(items), _flat(untracked), []):
        columns = _native.group_items(batch, Tuple)
        if _native.COMPILED:
            assert columns == Serializer._group(batch)
        else:
            assert columns is None
    assert Serializer._group(_flat(untracked))[0] == [[3, "default", [7, 8], [["x"], ["y"]], None, None]]
    for bad in ([7, "not an item"], [7, Tuple(["x"], a), 8]):  # an item of another kind; a task without its item
        assert _native.group_items(bad, Tuple) is None
    with pytest.raises(SerializationError, match="cannot send a builtins.str to task 7"):
        Serializer._group([7, "not an item"])
    with pytest.raises(SerializationError, match="flat: got 3 values"):
        Serializer._group([7, Tuple(["x"], a), 8])


def _flat(pairs):
    """``[(task, item), ...]`` as the transport queues them: ``[task, item, ...]``."""
    return [x for pair in pairs for x in pair]


def test_a_batch_s_items_go_to_their_inboxes_and_items_for_tasks_not_here_are_dropped():
    from collections import deque

    for inboxes in ({3: deque(), 4: deque(["old"])}, {}):
        items = [(3, "a"), (9, "gone"), (4, "b"), (3, "c")]
        want = {t: list(q) + [i for task, i in items if task == t] for t, q in inboxes.items()}
        assert _native.deliver_items(inboxes, _flat(items)) == sum(1 for t, _ in items if t in inboxes)
        assert {t: list(q) for t, q in inboxes.items()} == want
    with pytest.raises(TypeError, match="flat, task then item: got 3 values"):  # a task without its item
        _native.deliver_items({3: deque()}, [3, "a", 4])


def test_a_run_of_inputs_is_executed_in_order_and_counted_even_when_one_raises():
    """`execute_run` (C when compiled): ``n`` inputs popped and executed in order, counted in the
    task's statistics (compiled: C numbers); on an exception, the inputs before it are counted,
    the rest stay in the inbox and the exception is the one raised."""
    from collections import deque

    from squall.engine.executor import TaskStats

    seen = []

    def execute(tup):
        if tup == "boom":
            raise ValueError("boom")
        seen.append(tup)

    stats = TaskStats()
    inbox = deque(["a", "b", "c", "d"])
    assert _native.execute_run(execute, inbox.popleft, 3, stats) == 3
    assert seen == ["a", "b", "c"] and list(inbox) == ["d"] and stats.executed == 3

    inbox = deque(["e", "boom", "f"])
    with pytest.raises(ValueError, match="boom"):
        _native.execute_run(execute, inbox.popleft, 3, stats)
    assert seen == ["a", "b", "c", "e"] and list(inbox) == ["f"] and stats.executed == 4
    assert _native.execute_run(execute, inbox.popleft, 0, stats) == 0 and stats.executed == 4


def test_an_input_that_raises_goes_to_on_error_and_the_run_goes_on():
    """`execute_run` and `drain_inbox` (C when compiled) with ``on_error``: an `Exception` from
    ``execute`` goes to ``on_error(input, exception)`` (traceback kept), the input counts as
    executed and the run goes on; what ``on_error`` raises ends the run; a BaseException that is
    no Exception is never handed over."""
    import random
    from collections import deque

    from squall.engine.executor import TaskStats
    from squall.engine.stats import TaskStatistics

    seen, errors = [], []

    def execute(tup):
        if tup.values[0].startswith("boom"):
            raise ValueError(tup.values[0])
        if tup.values[0] == "stop":
            raise KeyboardInterrupt
        seen.append(tup.values[0])

    def on_error(tup, e):
        assert e.__traceback__ is not None
        errors.append((tup.values[0], str(e)))

    src = Source("a", "default", 1, Fields(["x"]))
    values = ["a", "boom1", "b", "boom2", "c"]
    stats = TaskStats()
    inbox = deque(Tuple([v], src) for v in values)
    assert _native.execute_run(execute, inbox.popleft, 5, stats, on_error) == 5
    assert seen == ["a", "b", "c"] and errors == [("boom1", "boom1"), ("boom2", "boom2")] and stats.executed == 5

    for freq in (1, 2, 20):  # every input sampled, every other, one in 20: both paths meet a raise
        seen.clear(), errors.clear()
        stats, sampled = TaskStats(), TaskStatistics(freq, random.Random(freq))
        inbox = deque(Tuple([v], src) for v in values * 4)
        assert _native.drain_inbox(execute, inbox.popleft, 20, stats, sampled, lambda: 1.0, on_error) == 20
        assert seen == ["a", "b", "c"] * 4 and [v for v, _ in errors] == ["boom1", "boom2"] * 4
        assert stats.executed == 20 and not inbox

    def refuse(tup, e):
        raise RuntimeError(f"no: {e}")
    inbox = deque(Tuple([v], src) for v in ["a", "boom", "b"])
    with pytest.raises(RuntimeError, match="no: boom"):
        _native.execute_run(execute, inbox.popleft, 3, TaskStats(), refuse)
    assert [t.values[0] for t in inbox] == ["b"]
    inbox = deque(Tuple([v], src) for v in ["stop", "b"])
    with pytest.raises(KeyboardInterrupt):
        _native.drain_inbox(execute, inbox.popleft, 2, TaskStats(), TaskStatistics(1, random.Random(1)),
                            lambda: 1.0, on_error)


def test_a_run_of_inputs_keeps_no_reference_it_should_not():
    from collections import deque

    from squall.engine.executor import TaskStats

    stats = TaskStats()

    def run(n):
        inbox = deque([object()] for _ in range(n))
        _native.execute_run(len, inbox.popleft, n, stats)

    assert _bytes_left_by(run) < 20_000


def test_an_id_source_draws_ids_of_its_width_reproducibly_from_its_seed():
    for bits in (64, 56, 1):
        draw = _native.IdSource(7, bits)
        ids = [draw() for _ in range(2000)]
        assert all(type(i) is int and 0 <= i < 2 ** bits for i in ids)
        again = _native.IdSource(7, bits)
        assert [again() for _ in range(2000)] == ids
        if bits == 64:
            assert len(set(ids)) == 2000 and max(ids) >= 2 ** 63  # no repeat; the top bit is drawn too
            other = _native.IdSource(8)
            assert [other() for _ in range(5)] != ids[:5]
        if bits == 1:
            assert set(ids) == {0, 1}
    assert _native.IdSource(2 ** 70 + 5)() >= 0  # a seed wider than 64 bits is taken
    for bad in ((1, 0), (1, 65), ("seed", 64)):
        with pytest.raises(ValueError, match="IdSource"):
            _native.IdSource(*bad)


def test_an_id_source_that_names_an_acker_scales_and_shifts_its_ids():
    """``times``/``plus``: ``(id or 1) * times + plus``, the roots a spout draws for the acker
    ``plus`` of ``times`` (`SpoutCollector._root_maker`): never 0, below 2**64, same sequence."""
    plain, named = _native.IdSource(9, 56), _native.IdSource(9, 56, times=3, plus=2)
    for _ in range(2000):
        bits, root = plain(), named()
        assert root == (bits or 1) * 3 + 2 and root % 3 == 2 and 0 < root < 2 ** 64
    assert _native.IdSource(1, 56, times=256, plus=255)() < 2 ** 64
    for bad in ({"times": 0}, {"times": 2}, {"plus": 1}):  # 64 bits times 2, or plus 1: past 2**64
        with pytest.raises(ValueError, match="IdSource"):
            _native.IdSource(1, 64, **bad)


@pytest.mark.skipif(not _native.COMPILED, reason="pure-Python path: it keeps a tree's xor in a Python int, which has no 64-bit bound to refuse ids at")
def test_the_compiled_acker_refuses_an_edge_id_wider_than_64_bits():
    """Edge ids are 64 bits; the C acker keeps a tree's xor in 64 bits, so a wider one (which
    squall never makes) is refused, not cut to its low bits."""
    from collections import deque

    from squall.engine.acker import INIT, Acker

    for val in (2 ** 64, 2 ** 64 + 5, 2 ** 89, -1):
        with pytest.raises(OverflowError):
            _native.acker_run(Acker(), deque([(INIT, 7, val, 3)]).popleft, 1, 1.0, {3: lambda m: None})
    _native.acker_run(Acker(), deque([(INIT, 7, 2 ** 64 - 1, 3)]).popleft, 1, 1.0, {3: lambda m: None})
