"""The acker's xor bookkeeping (Storm's Acker.java, STORM.md section 1.5), without threads."""

from __future__ import annotations

from squall.engine.acker import ACK, ACKED, FAIL, FAILED, INIT, RESET, RESET_TIMEOUT, Acker, PendingTree

ROOT = 0x1234_5678_9ABC_DEF0
SPOUT_TASK = 7


def test_the_worked_xor_example_completes_the_tree():
    """STORM.md 1.9: spout -> A (2 children) -> B. init [r, e1]; A acks with e1^c1^c2; B acks
    c1 and c2; the xor returns to 0 only with the last ack."""
    e1, c1, c2 = 0xA1, 0xB2 << 40, 0xC3 << 20
    acker = Acker()

    assert acker.update(INIT, ROOT, e1, SPOUT_TASK, now=10.0) is None
    assert acker.update(ACK, ROOT, e1 ^ c1 ^ c2, -1, now=10.1) is None
    assert acker.update(ACK, ROOT, c1, -1, now=10.2) is None
    reply = acker.update(ACK, ROOT, c2, -1, now=10.5)

    assert reply[:3] == (SPOUT_TASK, ACKED, ROOT)
    assert abs(reply[3] - 0.5) < 1e-9  # time since the entry was created
    assert len(acker) == 0


def test_an_init_with_value_zero_is_acked_at_once():
    """A spout tuple with no targets has init-val 0: its tree is already complete."""
    acker = Acker()

    assert acker.update(INIT, ROOT, 0, SPOUT_TASK, now=0.0) == (SPOUT_TASK, ACKED, ROOT, 0.0)


def test_an_ack_before_the_init_is_remembered_until_the_init_arrives():
    """Acks and inits travel different paths; the first message creates the entry, and
    completion waits for the init to name the spout task."""
    e1 = 0xFEED
    acker = Acker()

    assert acker.update(ACK, ROOT, e1, -1, now=1.0) is None
    assert len(acker) == 1
    assert acker.update(INIT, ROOT, e1, SPOUT_TASK, now=2.0) == (SPOUT_TASK, ACKED, ROOT, 1.0)
    assert len(acker) == 0


def test_fail_before_init_still_fails_the_root():
    acker = Acker()

    assert acker.update(FAIL, ROOT, 0, -1, now=1.0) is None
    reply = acker.update(INIT, ROOT, 0xABC, SPOUT_TASK, now=1.5)

    assert reply[:3] == (SPOUT_TASK, FAILED, ROOT)
    assert len(acker) == 0


def test_a_fail_wins_over_outstanding_edges():
    acker = Acker()
    acker.update(INIT, ROOT, 0x55, SPOUT_TASK, now=0.0)

    assert acker.update(FAIL, ROOT, 0, -1, now=0.1)[:3] == (SPOUT_TASK, FAILED, ROOT)
    assert ROOT not in acker.pending


def test_acks_after_completion_start_a_new_entry_that_never_completes_by_itself():
    acker = Acker()
    acker.update(INIT, ROOT, 0x1, SPOUT_TASK, now=0.0)
    acker.update(ACK, ROOT, 0x1, -1, now=0.0)

    assert acker.update(ACK, ROOT, 0x99, -1, now=0.0) is None  # a stray late ack


def test_reset_timeout_answers_the_spout_and_keeps_the_entry():
    acker = Acker()
    acker.update(INIT, ROOT, 0x5, SPOUT_TASK, now=0.0)

    assert acker.update(RESET, ROOT, 0, -1, now=3.0) == (SPOUT_TASK, RESET_TIMEOUT, ROOT, 3.0)
    assert ROOT in acker.pending
    assert acker.update(ACK, ROOT, 0x5, -1, now=4.0)[:2] == (SPOUT_TASK, ACKED)


def test_reset_timeout_before_init_is_answered_once_the_init_arrives():
    acker = Acker()

    assert acker.update(RESET, ROOT, 0, -1, now=0.0) is None
    assert acker.update(INIT, ROOT, 0x5, SPOUT_TASK, now=0.0)[:2] == (SPOUT_TASK, RESET_TIMEOUT)
    assert acker.update(ACK, ROOT, 0x4, -1, now=0.0) is None  # the reset flag was consumed


def test_reset_timeout_moves_the_entry_to_the_newest_bucket():
    acker = Acker()
    acker.update(INIT, ROOT, 0x5, SPOUT_TASK, now=0.0)
    acker.rotate()
    acker.rotate()

    acker.update(RESET, ROOT, 0, -1, now=0.0)
    acker.rotate()
    acker.rotate()

    assert ROOT in acker.pending


def test_an_entry_expires_silently_on_the_third_rotation():
    """3 buckets: an entry survives two rotations and is dropped by the third, without any
    message to the spout (which times the tuple out on its own)."""
    acker = Acker()
    acker.update(INIT, ROOT, 0x5, SPOUT_TASK, now=0.0)

    assert acker.rotate() == 0
    assert acker.rotate() == 0
    assert ROOT in acker.pending
    assert acker.rotate() == 1
    assert ROOT not in acker.pending
    assert acker.update(ACK, ROOT, 0x5, -1, now=0.0) is None  # too late: no spout task known


def test_ordinary_acks_do_not_refresh_the_expiry():
    """Storm mutates the entry in place on init/ack (no re-put), so a tree that keeps getting
    acks still expires 2..3 rotations after its first message."""
    acker = Acker()
    acker.update(INIT, ROOT, 0x7, SPOUT_TASK, now=0.0)
    acker.rotate()
    acker.update(ACK, ROOT, 0x1, -1, now=0.0)
    acker.rotate()
    acker.update(ACK, ROOT, 0x2, -1, now=0.0)

    assert acker.rotate() == 1


def test_roots_are_tracked_independently():
    acker = Acker()
    acker.update(INIT, 1, 0x10, 3, now=0.0)
    acker.update(INIT, 2, 0x20, 4, now=0.0)

    assert acker.update(ACK, 2, 0x20, -1, now=0.0)[:3] == (4, ACKED, 2)
    assert acker.update(ACK, 1, 0x11, -1, now=0.0) is None
    assert acker.update(ACK, 1, 0x01, -1, now=0.0)[:3] == (3, ACKED, 1)


def test_a_pending_tree_names_what_the_acker_knows_of_it():
    """An ack that overtook its init: the tree has its xor and start, but no spout task yet."""
    acker = Acker()
    acker.update(ACK, ROOT, 0x3, -1, now=5.0)
    acker.update(RESET, ROOT, 0, -1, now=6.0)

    tree = acker.pending.get(ROOT)
    assert type(tree) is PendingTree
    assert (tree.xor, tree.spout_task, tree.start, tree.failed, tree.reset) == (0x3, -1, 5.0, False, True)
    acker.update(INIT, ROOT, 0x1, SPOUT_TASK, now=7.0)
    assert (tree.xor, tree.spout_task, tree.reset) == (0x2, SPOUT_TASK, False)


def test_held_acks_go_to_the_acker_of_their_root_and_are_forgotten():
    """`send_acks` (a bolt executor's held acks, C when compiled): one message per root, to
    ``ackers[root % len(ackers)]``, in the order they were held; the dict is emptied in place,
    also when a send raises (the rest are dropped, as the tree's timeout will replay them)."""
    import pytest

    from squall._native import send_acks

    got: list[list] = [[], [], []]
    ackers = [got[0].append, got[1].append, got[2].append]
    held = {ROOT: 5, 4: 6, 2**64 - 2: 7, 9: 8}  # roots % 3: 0, 1, 2, 0

    send_acks(held, ackers, ACK)

    assert held == {}
    assert got == [[(ACK, ROOT, 5, -1), (ACK, 9, 8, -1)], [(ACK, 4, 6, -1)], [(ACK, 2**64 - 2, 7, -1)]]

    def broken(msg):
        raise RuntimeError("acker gone")
    held.update({1: 1, 4: 2})
    with pytest.raises(RuntimeError, match="acker gone"):
        send_acks(held, [broken], ACK)
    assert held == {}


def test_a_basic_bolt_holds_a_tree_s_acks_as_one_xor_whatever_the_ids():
    """A BasicBolt's inputs of one tree in a row are acked as one message: the xor of each
    input's id and what it emitted, exact over the whole 64 bits (C when compiled, which keeps
    both in 64 bits: a Tuple refuses any other value for them, see test_native)."""
    import functools
    import random
    from collections import deque

    from squall import Fields
    from squall._errors import FailedException
    from squall._native import BasicExecute
    from squall._tuple import Source, Tuple
    from squall.engine.bolt_executor import BasicCollector
    from squall.engine.executor import TaskStats
    from squall.engine.routing import _NOWHERE

    src = Source("count", "default", 1, Fields("word"))
    basic = BasicCollector.__new__(BasicCollector)
    basic.input, basic._out, basic._routers, basic._deliver = None, None, {}, {}
    basic._rand = functools.partial(random.Random(1).getrandbits, 64)
    basic._tuple_type, basic._nowhere, basic._acking = Tuple, _NOWHERE, True
    widths = [(0, 0), (1, 2**64 - 1), (2**64 - 1, 2**63), (2**63 + 3, 3), (2**32 + 5, 2**64 - 1), (2**64 - 2, 7)]
    rng = random.Random(4)
    trees = {ROOT: widths, 6: [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(5)], 9: [(2**64 - 1, 0)]}
    q = deque()
    for root, ids in trees.items():
        for val, oav in ids:
            q.append(Tuple([f"w{val}"], src, root, val, oav))
    acker: list = []
    stats = TaskStats()
    execute = BasicExecute(lambda tup, collector: None, basic, None, None, FailedException, {}, stats, {}, None,
                           lambda: 0.0, q, [acker.append], ACK)

    while q:
        execute(q.popleft())

    expected = []
    for root, ids in trees.items():
        x = 0
        for val, oav in ids:
            x ^= val ^ oav
        expected.append((ACK, root, x, -1))
    assert acker == expected
    assert stats.acked == sum(map(len, trees.values()))


def test_a_tuple_s_edge_value_holds_any_64_bit_value_and_refuses_others_naming_it():
    """Compiled, a Tuple keeps ``_val`` (its edge value in its one tree) in 64 bits, as it keeps
    ``_oav``, so an anchored emit makes no int for it: every 64-bit value reads back, survives
    pickling and acks exactly; a value no 64-bit edge id makes is refused, naming ``_val``."""
    import pickle

    import pytest

    from squall import Fields, _native
    from squall._tuple import Source, Tuple

    src = Source("split", "default", 3, Fields("word"))
    for val in (0, 1, 2**32, 2**63, 2**64 - 1):
        t = Tuple(["a"], src, 5, val, 2**64 - 1)
        back = pickle.loads(pickle.dumps(t))
        assert (t._val, back._val, back._oav, back._root) == (val, val, 2**64 - 1, 5)
        t._val ^= 2**63
        assert t._val == val ^ 2**63
        assert t.message_id.get_anchors_to_ids() == {5: val ^ 2**63}
    if not _native.COMPILED:
        return  # the twin's _val is a plain slot: it keeps whatever int it is given
    t = Tuple(["a"], src, 5, 7)
    for bad in (2**64, -1, "3", None):
        with pytest.raises(ValueError, match=r"_val is a 64-bit edge value.*got"):
            t._val = bad
        with pytest.raises(ValueError, match=r"_val is a 64-bit edge value"):
            Tuple(["a"], src, 5, bad)
    assert t._val == 7
    with pytest.raises(AttributeError, match="_val cannot be deleted"):
        del t._val
