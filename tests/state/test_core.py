"""The pure core of stateful bolts: `KeyValueState` over its stores, the checkpoint spout's
protocol, the stateful bolt executor and the builder's wiring, each on its own."""

import json
import logging
import threading

import pytest

from squall import BaseStatefulBolt, Bolt, Fields, KeyValueState, SerializationError, Spout, TopologyBuilder
from squall._fields import GlobalStreamId
from squall._tuple import Source, Tuple
from squall.state import State, StateError, StateHome, StateProvider, get_state
from squall.state._bolt import CheckpointBarrier, CheckpointTupleForwarder, StatefulBoltExecutor
from squall.state._in_flight import HeldCheckpoint, InputsInFlight
from squall.state._kv import MemoryStore, StateCodec, TransactionalKeyValueState
from squall.state.checkpoint import (
    COMMIT, COMMITTED, COMMITTING, INITIAL, INITSTATE, PREPARE, PREPARING, ROLLBACK, CheckPointState,
    CheckpointProgress, CheckpointSpout,
)
from squall.state.file import FileStore, state_dir
from squall.state.memory import HostMemory

KEY = b"k" * 32


def kv(store=None, conf=None):
    return TransactionalKeyValueState(store or MemoryStore(), StateCodec(conf or {}, "component [count] task 3"))


# --- KeyValueState -------------------------------------------------------------------------------------------

def test_put_get_delete_see_uncommitted_changes_and_rollback_drops_them():
    s = kv()
    assert isinstance(s, KeyValueState)
    s.put("a", 1)
    s.put(("t", 2), {"x": [1, 2]})
    assert s.get("a") == 1 and s.get(("t", 2)) == {"x": [1, 2]} and s.get("b", 7) == 7
    s.prepare_commit(0)
    s.commit(0)
    s.put("a", 2)
    assert s.delete(("t", 2)) == {"x": [1, 2]}
    assert s.get(("t", 2)) is None and s.get("a") == 2
    s.rollback()
    assert s.get("a") == 1 and s.get(("t", 2)) == {"x": [1, 2]}
    assert dict(s) == {"a": 1, ("t", 2): {"x": [1, 2]}}
    s.put("b", 3)
    s.prepare_commit(1)
    assert dict(s.committed()) == {"a": 1, ("t", 2): {"x": [1, 2]}}


def test_a_put_value_is_a_copy():
    s = kv()
    v = [1]
    s.put("a", v)
    v.append(2)
    assert s.get("a") == [1]


def test_a_prepared_transaction_survives_a_new_state_object_and_commits_there():
    store = MemoryStore()
    s = kv(store)
    s.put("a", 1)
    s.prepare_commit(5)
    again = kv(store)  # a restarted task: the COMMIT of txid 5 reaches it
    assert again.get("a") == 1
    again.commit(5)
    assert store.txids() == (5, None) and kv(store).get("a") == 1
    again.commit(5)  # repeated by a recovering spout: already done
    assert store.txids() == (5, None) and kv(store).get("a") == 1


def test_commit_of_another_txid_than_the_prepared_one_is_refused():
    s = kv()
    s.put("a", 1)
    s.prepare_commit(3)
    with pytest.raises(StateError, match="txid 3 is prepared"):
        s.commit(4)


def test_a_value_that_cannot_be_serialized_with_pickle_off_names_component_and_key():
    s = kv(conf={"topology.fall.back.on.pickle": False})
    with pytest.raises(SerializationError) as e:
        s.put("lock-key", threading.Lock())
    msg = str(e.value)
    assert "component [count] task 3" in msg and "'lock-key'" in msg and "topology.fall.back.on.pickle" in msg


def test_a_value_that_cannot_be_pickled_names_component_and_key():
    s = kv()
    with pytest.raises(SerializationError, match=r"state key 'k' of component \[count\] task 3.*cannot be pickled"):
        s.put("k", threading.Lock())


def test_host_memory_keeps_states_by_topology_and_namespace_until_cleared():
    mem = HostMemory()
    a = kv(mem.store("t", "count-1"))
    a.put("x", 1)
    a.prepare_commit(0)
    a.commit(0)
    assert kv(mem.store("t", "count-1")).get("x") == 1
    assert kv(mem.store("other", "count-1")).get("x") is None
    mem.clear()
    assert kv(mem.store("t", "count-1")).get("x") is None


# --- the file store -------------------------------------------------------------------------------------------

def test_the_file_store_keeps_commits_and_prepares_across_reopening(tmp_path):
    d = state_dir(tmp_path, "topo", "count-3")
    s = kv(FileStore(d, "count-3", KEY))
    s.put("a", 1)
    s.prepare_commit(0)
    s.commit(0)
    s.put("b", 2)
    s.delete("a")
    s.prepare_commit(1)
    reopened = kv(FileStore(d, "count-3", KEY))
    assert reopened.get("a") is None and reopened.get("b") == 2  # the prepared transaction is seen
    reopened.rollback()
    assert kv(FileStore(d, "count-3", KEY)).get("a") == 1
    assert sorted(p.name for p in d.iterdir()) == ["committed"]
    assert oct(d.stat().st_mode & 0o777) == "0o700" and oct((d / "committed").stat().st_mode & 0o777) == "0o600"


def test_a_crash_between_writing_the_commit_and_removing_the_prepare_is_a_commit(tmp_path):
    d = state_dir(tmp_path, "topo", "n")
    store = FileStore(d, "n", KEY)
    s = kv(store)
    s.put("a", 1)
    s.prepare_commit(4)
    prepared = (d / "prepared").read_bytes()
    s.commit(4)
    (d / "prepared").write_bytes(prepared)  # as if the process died before the unlink
    again = FileStore(d, "n", KEY)
    assert again.txids() == (4, None) and kv(again).get("a") == 1


@pytest.mark.parametrize("damage", ["flip", "other-key", "garbage", "other-namespace"])
def test_a_state_file_not_written_by_this_cluster_is_refused_naming_it(tmp_path, damage):
    d = state_dir(tmp_path, "topo", "n")
    s = kv(FileStore(d, "n", KEY))
    s.put("a", 1)
    s.commit()
    f = d / "committed"
    blob = f.read_bytes()
    if damage == "flip":
        f.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    elif damage == "garbage":
        f.write_bytes(b"\x00garbage")
    elif damage == "other-namespace":  # a sealed file copied from another state
        other = state_dir(tmp_path, "topo", "m")
        o = kv(FileStore(other, "m", KEY))
        o.put("a", 99)
        o.commit()
        f.write_bytes((other / "committed").read_bytes())
    with pytest.raises(StateError) as e:
        FileStore(d, "n", b"x" * 32 if damage == "other-key" else KEY)
    assert str(f) in str(e.value)


def test_the_namespace_cannot_escape_the_state_directory(tmp_path):
    d = state_dir(tmp_path, "topo", "../../etc")
    assert d.parent == tmp_path / "topo"


# --- providers ---------------------------------------------------------------------------------------------------

class Ctx:
    def __init__(self, home=None, component="count", task=3):
        self.state_home = home
        self._c, self._t = component, task

    def get_this_component_id(self):
        return self._c

    def get_this_task_id(self):
        return self._t

    def register_metric(self, name, metric, bucket_secs):
        return metric


def test_the_default_provider_uses_the_hosts_memory_or_else_its_file_store(tmp_path):
    mem = HostMemory()
    s = get_state("count-3", {"topology.name": "t"}, Ctx(StateHome(memory=mem)))
    s.put("a", 1)
    s.commit()
    assert get_state("count-3", {"topology.name": "t"}, Ctx(StateHome(memory=mem))).get("a") == 1
    on_disk = get_state("count-3", {"topology.name": "t"}, Ctx(StateHome(directory=tmp_path, key=KEY)))
    on_disk.put("b", 2)
    on_disk.commit()
    assert (state_dir(tmp_path, "t", "count-3") / "committed").exists()


def test_an_unknown_provider_is_an_error_naming_the_component_and_key():
    with pytest.raises(StateError) as e:
        get_state("count-3", {"topology.state.provider": "nowhere.at_all:Provider"}, Ctx())
    assert "component [count] task 3" in str(e.value) and "'topology.state.provider'" in str(e.value)


class PlainState(State):
    """A State that keeps no keys (Storm allows one; the checkpoint spout cannot use it)."""

    def prepare_commit(self, txid):
        pass

    def commit(self, txid=None):
        pass

    def rollback(self):
        pass


class PlainStateProvider(StateProvider):
    def new_state(self, namespace, conf, context):
        return PlainState()


def test_the_checkpoint_spout_refuses_a_state_without_keys_naming_the_component_and_key():
    # it used to take whatever State the provider made and fail on its first get() with an AttributeError
    conf = {"topology.name": "t", "topology.state.provider": f"{__name__}:PlainStateProvider"}
    with pytest.raises(StateError) as e:
        CheckpointSpout().open(conf, Ctx(component="$checkpointspout", task=1), None)
    assert "component [$checkpointspout] task 1" in str(e.value)
    assert "topology.state.provider" in str(e.value) and "PlainState, not a KeyValueState" in str(e.value)


class Emits:
    def __init__(self):
        self.emitted = []

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append((stream, list(values)))
        return []

    def report_error(self, error):
        raise AssertionError(error)


def test_a_checkpoint_spout_restarted_while_its_topology_is_inactive_finishes_the_prepared_commit(tmp_path):
    """A worker restarted during a rebalance's or a kill's wait: its executor never tells the
    new checkpoint spout `deactivate` (it was never activated), so it took it for active and its
    inactive ticks did nothing: the transaction prepared before the death was left uncommitted
    and its tuples replayed after the wait. Now it commits it while inactive, and takes no new
    checkpoint."""
    conf = {"topology.name": "t", "topology.state.provider": "squall.state:FileKeyValueStateProvider",
            "topology.state.provider.config": '{"directory": "%s"}' % tmp_path}
    ctx = Ctx(component="$checkpointspout", task=1)
    first, out = CheckpointSpout(now=lambda: 0.0), Emits()
    first.open(conf, ctx, out)
    first.activate()
    first.next_tuple()
    first.ack(-1)  # INITSTATE
    first.next_tuple()
    assert out.emitted[-1][1] == [0, PREPARE]
    first.ack(0)  # prepared, saved COMMITTING; the worker dies before the COMMIT goes out
    restarted, out = CheckpointSpout(now=lambda: 100.0), Emits()
    restarted.open(conf, ctx, out)
    restarted.inactive_tick()  # the topology inactive: no activate
    assert [values for _, values in out.emitted] == [[0, COMMIT]]
    restarted.ack(0)
    restarted.inactive_tick()
    assert len(out.emitted) == 1  # committed; no new checkpoint while inactive


def test_the_file_provider_with_a_directory_of_its_own(tmp_path):
    conf = {"topology.name": "t", "topology.state.provider": "squall.state:FileKeyValueStateProvider",
            "topology.state.provider.config": '{"directory": "%s"}' % tmp_path}
    s = get_state("count-3", conf, Ctx())
    s.put("a", 1)
    s.commit()
    assert get_state("count-3", conf, Ctx()).get("a") == 1
    assert (tmp_path / "secret").exists()


def test_the_file_provider_names_its_own_directory_when_anyone_may_write_it(tmp_path):
    # refused as storm.local.dir is, but named as the user set it: the error once sent them to
    # storm.local.dir, which they had not set
    tmp_path.chmod(0o777)
    conf = {"topology.name": "t", "topology.state.provider": "squall.state:FileKeyValueStateProvider",
            "topology.state.provider.config": json.dumps({"directory": str(tmp_path)})}
    with pytest.raises(StateError, match=r'the "directory" of \'topology.state.provider.config\' .* may be written') as e:
        get_state("count-3", conf, Ctx())
    assert "storm.local.dir" not in str(e.value)


# --- the checkpoint spout's protocol ----------------------------------------------------------------------------

def progress(state=INITIAL, interval=1.0):
    saved = []
    return CheckpointProgress(state, interval, saved.append), saved


def test_first_initstate_then_prepare_and_commit_every_interval():
    p, saved = progress()
    assert p.next_step(0.0) == (-1, INITSTATE)
    assert p.next_step(0.0) is None  # one step in flight
    p.acked(-1)
    assert p.next_step(0.0) == (0, PREPARE) and saved[-1] == CheckPointState(0, PREPARING)
    p.acked(0)
    assert saved[-1] == CheckPointState(0, COMMITTING)
    assert p.next_step(0.0) == (0, COMMIT)  # at once, not after the interval
    p.acked(0)
    assert saved[-1] == CheckPointState(0, COMMITTED)
    assert p.next_step(0.5) is None
    assert p.next_step(1.0) == (1, PREPARE)


def test_a_failed_prepare_rolls_back_then_initstate_again():
    p, saved = progress()
    p.next_step(0.0)
    p.acked(-1)
    assert p.next_step(0.0) == (0, PREPARE)
    p.failed(0)
    assert p.next_step(0.1) == (0, ROLLBACK)
    p.acked(0)
    assert saved[-1] == CheckPointState(-1, COMMITTED)
    assert p.next_step(0.1) == (-1, INITSTATE)
    p.acked(-1)
    assert p.next_step(1.0) == (0, PREPARE)


def test_a_failed_commit_is_committed_again():
    p, _ = progress()
    p.next_step(0.0)
    p.acked(-1)
    p.next_step(0.0)
    p.acked(0)
    assert p.next_step(0.0) == (0, COMMIT)
    p.failed(0)
    assert p.next_step(0.0) == (0, COMMIT)
    p.acked(0)
    assert p.next_step(0.0) == (0, INITSTATE)


def test_a_failed_step_of_the_recovery_is_tried_again_an_interval_later_not_at_once():
    """A rollback that fails again (a store that fenced this worker off refuses every write)
    was emitted again at once, failing in a loop that kept a core busy; the first failure of a
    step still recovers at once, as Storm's spout does."""
    p, _ = progress(interval=1.0)
    p.next_step(0.0)
    p.acked(-1)
    assert p.next_step(0.0) == (0, PREPARE)
    p.failed(0, now=0.0)
    assert p.next_step(0.0) == (0, ROLLBACK)  # the protocol's failure: recovered at once
    p.failed(0, now=0.0)
    assert p.next_step(0.5) is None  # the recovery's own failure: not before the interval
    assert p.next_step(1.0) == (0, ROLLBACK)
    p.acked(0)
    assert p.next_step(1.0) == (-1, INITSTATE)


def test_a_restarted_spout_finishes_what_was_left():
    p, _ = progress(CheckPointState(100, PREPARING))
    assert p.next_step(0.0) == (100, ROLLBACK)
    p, _ = progress(CheckPointState(7, COMMITTING))
    assert p.next_step(0.0) == (7, COMMIT)


# --- the stateful bolt executor ----------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.acked, self.failed, self.emitted, self.errors = [], [], [], []

    def emit(self, values, anchors=None, stream="default"):
        self.emitted.append((stream, values, anchors))
        return []

    def emit_direct(self, task_id, values, anchors=None, stream="default"):
        self.emitted.append((stream, values, anchors))

    def ack(self, t):
        self.acked.append(t)

    def fail(self, t):
        self.failed.append(t)

    def reset_timeout(self, t):
        pass

    def report_error(self, e):
        self.errors.append(e)


class BoltCtx(Ctx):
    def __init__(self, mem, inputs):
        super().__init__(StateHome(memory=mem))
        self.inputs = inputs

    def get_this_sources(self):
        return {GlobalStreamId(c, "$checkpoint"): None for c in self.inputs}

    def get_component_tasks(self, c):
        return self.inputs[c]


class Counter(BaseStatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        self.collector.emit([tup[0]], tup)
        self.collector.ack(tup)


DATA = Source("spout", "default", 1, Fields("w"))


def cp(txid, action, task=9):
    return Tuple([txid, action], Source("$checkpointspout", "$checkpoint", task, Fields("txid", "action")))


def stateful(mem=None, inputs=None):
    ex = StatefulBoltExecutor(Counter())
    rec = Recorder()
    ex.prepare({"topology.name": "t"}, BoltCtx(mem or HostMemory(), inputs or {"$checkpointspout": [9]}), rec)
    return ex, rec


def test_inputs_wait_for_initstate_and_acks_wait_for_the_commit():
    mem = HostMemory()
    ex, rec = stateful(mem)
    a = Tuple(["a"], DATA)
    ex.execute(a)
    assert rec.emitted == []  # no state yet: it waits
    ex.execute(cp(-1, INITSTATE))
    assert rec.emitted[0][1] == ["a"] and rec.acked == [rec.emitted[1][2]]  # the checkpoint forwarded, acked
    assert a not in rec.acked
    ex.execute(cp(0, PREPARE))
    assert a not in rec.acked
    ex.execute(cp(0, COMMIT))
    assert a in rec.acked
    assert kv(mem.store("t", "count-3")).get("a") == 1


def test_rollback_fails_the_tuples_acked_since_the_commit_and_drops_their_updates():
    mem = HostMemory()
    ex, rec = stateful(mem)
    ex.execute(cp(-1, INITSTATE))
    a, b = Tuple(["a"], DATA), Tuple(["b"], DATA)
    ex.execute(a)
    ex.execute(cp(0, PREPARE))
    ex.execute(b)
    ex.execute(cp(0, ROLLBACK))
    assert rec.failed == [a, b]
    assert ex.state.get("a") is None and ex.state.get("b") is None


def test_prepare_before_initstate_fails_so_the_spout_recovers():
    ex, rec = stateful()
    t = cp(3, PREPARE)
    ex.execute(t)
    assert rec.failed == [t] and not [e for e in rec.emitted if e[0] == "$checkpoint"]


def test_with_acking_off_a_prepare_before_initstate_initializes_from_the_last_commit(caplog):
    """No failure reaches the checkpoint spout with acking off, so no INITSTATE follows the
    PREPARE a restarted task fails: it initializes itself, with a warning, and prepares."""
    mem = HostMemory()
    first, _ = stateful(mem)
    first.execute(cp(-1, INITSTATE))
    first.execute(Tuple(["a"], DATA))
    first.execute(cp(0, PREPARE))
    first.execute(cp(0, COMMIT))
    ex, rec = StatefulBoltExecutor(Counter()), Recorder()  # its worker restarted
    ex.prepare({"topology.name": "t", "topology.acker.executors": 0},
               BoltCtx(mem, {"$checkpointspout": [9]}), rec)
    b = Tuple(["b"], DATA)
    ex.execute(b)
    ex.execute(cp(1, PREPARE))
    ex.execute(cp(1, COMMIT))
    assert ex.initialized and not rec.failed and b in rec.acked
    assert dict(ex.state.committed()) == {"a": 1, "b": 1}
    assert any("initializes from its last commit now" in r.getMessage() for r in caplog.records)


def test_with_acking_off_a_live_task_keeps_what_it_took_through_a_rollback_of_the_restarted_spout():
    """With acking off the checkpoint spout rolls a PREPARING txid back only when it restarted
    (or could not save its COMMITTING phase) inside the PREPARE's emit, acked as emitted. Rolled
    back, the live task dropped what it took since its last commit: nothing replays with acking
    off, so those records were lost (b and c here). It keeps them for the next commit now, each
    counted once."""
    ex, rec = StatefulBoltExecutor(Counter()), Recorder()
    ex.prepare({"topology.name": "t", "topology.acker.executors": 0}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}),
               rec)
    ex.execute(cp(-1, INITSTATE))
    ex.execute(Tuple(["a"], DATA))
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    ex.execute(Tuple(["b"], DATA))
    ex.execute(cp(1, PREPARE))
    ex.execute(Tuple(["c"], DATA))
    for txid, action in ((1, ROLLBACK), (0, INITSTATE)):  # the restarted spout found txid 1 PREPARING
        ex.execute(cp(txid, action))
    ex.execute(Tuple(["d"], DATA))
    ex.execute(cp(1, PREPARE))
    ex.execute(cp(1, COMMIT))
    assert dict(ex.state.committed()) == {"a": 1, "b": 1, "c": 1, "d": 1}   # on main: {"a": 1, "d": 1}
    assert not rec.failed


def test_a_checkpoint_counts_once_every_input_task_sent_it():
    ex, rec = stateful(inputs={"split": [4, 5]})
    first = Tuple([-1, INITSTATE], Source("split", "$checkpoint", 4, Fields("txid", "action")))
    ex.execute(first)
    assert not ex.initialized and rec.acked == [first]
    ex.execute(Tuple([-1, INITSTATE], Source("split", "$checkpoint", 5, Fields("txid", "action"))))
    assert ex.initialized
    b = CheckpointBarrier(2)
    assert [b.arrived(4, PREPARE, 1), b.arrived(5, PREPARE, 1)] == [False, True]
    assert [b.arrived(4, COMMIT, 1), b.arrived(4, PREPARE, 2), b.arrived(5, COMMIT, 1)] == [False, False, True]
    assert b.arrived(5, PREPARE, 2)  # task 4 sent it before task 5's COMMIT completed


def _from(task, txid, action):
    return Tuple([txid, action], Source("split", "$checkpoint", task, Fields("txid", "action")))


def test_steps_one_input_task_passed_on_before_another_sent_the_first_each_complete_in_order():
    """With acking off (``topology.acker.executors`` 0) the checkpoint spout's steps are acked
    as it emits them: it sends INITSTATE, PREPARE and COMMIT at once, and one input task may
    pass all three on before another passed INITSTATE. Counted by each task's last step, only
    the COMMIT completed: the bolt was never initialized and held every input for good (a
    persistent window behind a bolt of 2 tasks fired nothing). Each step completes in order."""
    ex, rec = stateful(inputs={"split": [4, 5]})
    for txid, action in ((-1, INITSTATE), (0, PREPARE), (0, COMMIT)):
        ex.execute(_from(4, txid, action))
    a = Tuple(["a"], DATA)
    ex.execute(a)
    assert not ex.initialized
    ex.execute(_from(5, -1, INITSTATE))
    assert ex.initialized and ex.state.get("a") == 1
    ex.execute(_from(5, 0, PREPARE))
    ex.execute(_from(5, 0, COMMIT))
    assert dict(ex.state.committed()) == {"a": 1} and a in rec.acked
    passed = [tuple(e[1]) for e in rec.emitted if e[0] == "$checkpoint"]
    assert passed == [(-1, INITSTATE), (0, PREPARE), (0, COMMIT)] and not rec.failed


def test_a_prepare_one_input_task_failed_does_not_count_when_the_transaction_is_tried_again():
    """Storm's barrier counts the copies of each (action, txid). A PREPARE that one input task
    failed (its worker died, a hook raised) while the other passed it on left a count of 1
    behind; after the rollback the spout tries the same txid again, and the first copy of the
    new PREPARE completed the count: the bolt prepared before the other task's PREPARE, so an
    input that task sent before it was not in the transaction (not acked at its commit, its
    update not committed; after a persistent window, whose results no spout replays, lost at
    the next rollback). Now each input task's last checkpoint is what counts."""
    ex, rec = stateful(inputs={"split": [4, 5]})
    for task in (4, 5):
        ex.execute(_from(task, -1, INITSTATE))
    ex.execute(_from(5, 0, PREPARE))  # task 4 failed this PREPARE: it never passed it on
    for action, txid in ((ROLLBACK, 0), (INITSTATE, -1)):  # the spout's recovery
        for task in (4, 5):
            ex.execute(_from(task, txid, action))
    ex.execute(_from(5, 0, PREPARE))  # txid 0 again: task 5's copy first
    a = Tuple(["a"], DATA)  # task 4's, sent before its PREPARE
    ex.execute(a)
    ex.execute(_from(4, 0, PREPARE))
    for task in (4, 5):
        ex.execute(_from(task, 0, COMMIT))
    assert a in rec.acked  # in transaction 0, acked at its commit
    assert dict(ex.state.committed()) == {"a": 1}


def test_unanchored_emits_raise():
    class Unanchored(Counter):
        def execute(self, tup):
            self.collector.emit([tup[0]])
    ex = StatefulBoltExecutor(Unanchored())
    ex.prepare({}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), Recorder())
    ex.execute(cp(-1, INITSTATE))
    with pytest.raises(Exception, match=r"must emit anchored tuples \(component \[count\]"):
        ex.execute(Tuple(["a"], DATA))


class WritesLater(Bolt):
    """A sink that acks each input only once written, later, as RedisStreamSinkBolt's writer
    thread does: `write` acks (or fails) what it was given so far."""

    def prepare(self, conf, context, collector):
        self.collector, self.queued = collector, []

    def execute(self, tup):
        self.queued.append(tup)

    def write(self, fail=False):
        done, self.queued = self.queued, []
        for t in done:
            (self.collector.fail if fail else self.collector.ack)(t)


def forwarder():
    sink = WritesLater()
    ex, rec = CheckpointTupleForwarder(sink), Recorder()
    ex.prepare({}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    return ex, sink, rec


def passed_on(rec):
    return [values for stream, values, _anchor in rec.emitted if stream == "$checkpoint"]


def test_a_checkpoint_passes_a_bolt_only_once_it_acked_every_input_before_it():
    """A persistent window's results are unanchored: a PREPARE that went past the sink before
    they were written let the window's fire be committed, and a SIGKILL of the sink's worker
    then lost them for good (the Spark host's exact-windows test, issue 33)."""
    ex, sink, rec = forwarder()
    before, after = Tuple(["w1"], DATA), Tuple(["w2"], DATA)
    ex.execute(before)
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    ex.execute(after)  # an input after the checkpoint does not hold it back
    assert passed_on(rec) == [] and prepare not in rec.acked
    writer = threading.Thread(target=sink.write)  # acked from the sink's own thread
    writer.start()
    writer.join()
    assert passed_on(rec) == [[0, PREPARE]] and prepare in rec.acked
    assert rec.acked == [before, prepare, after]  # passed on once the input before it was acked
    ex.execute(cp(0, COMMIT))  # nothing open: passed on at once
    assert passed_on(rec) == [[0, PREPARE], [0, COMMIT]]


def test_a_prepare_behind_a_failed_input_fails_so_the_state_rolls_back():
    ex, sink, rec = forwarder()
    ex.execute(Tuple(["w1"], DATA))
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    sink.write(fail=True)
    assert passed_on(rec) == [] and prepare in rec.failed
    ex.execute(cp(0, ROLLBACK))  # the next one passes
    assert passed_on(rec) == [[0, ROLLBACK]]


def test_an_input_whose_execute_raised_is_settled_so_the_checkpoints_behind_it_pass():
    """A bolt that raises on a bad record (not fail-fast: the engine fails that input) never
    acks or fails it itself; held open, every checkpoint behind it waited forever, so the
    stateful bolt after it never committed and its inputs timed out and replayed, forever."""
    class Raises(WritesLater):
        def execute(self, tup):
            if tup[0] == "bad":
                raise ValueError("bad record")
            super().execute(tup)
    ex, rec = CheckpointTupleForwarder(Raises()), Recorder()
    ex.prepare({}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    with pytest.raises(ValueError, match="bad record"):
        ex.execute(Tuple(["bad"], DATA))
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    assert passed_on(rec) == [] and prepare in rec.failed  # the failed input costs a rollback
    ex.execute(cp(0, ROLLBACK))
    ex.execute(cp(0, INITSTATE))
    ex.execute(cp(1, PREPARE))
    assert passed_on(rec) == [[0, ROLLBACK], [0, INITSTATE], [1, PREPARE]]


def test_an_anchored_input_that_fails_replays_from_its_spout_and_fails_no_checkpoint():
    """Storm's forwarder passes a checkpoint whatever its bolt failed: an input in a spout's
    tree replays from there. Failing the PREPARE for it rolled every stateful bolt back, and a
    steady trickle of rejected records replayed most of the stream."""
    ex, sink, rec = forwarder()
    ex.execute(Tuple(["rejected"], DATA, 0x5EED, 0x1))  # in the tree of root 0x5EED
    prepare = cp(0, PREPARE)
    ex.execute(prepare)
    sink.write(fail=True)
    assert passed_on(rec) == [[0, PREPARE]] and prepare in rec.acked


def test_a_checkpoint_passes_a_bolt_that_still_holds_inputs_in_a_spouts_tree():
    """Storm's forwarder passes a checkpoint once it came from every input task. A bolt that
    batches its inputs (keeps them un-acked until it has N) behind a spout that paces itself on
    its acks, before a stateful bolt: held until the batch was acked, the PREPARE waited for
    the batch, the batch for the spout, the spout for the commit's acks, and nothing ever
    committed (tests/state/test_batching_stall.py). Lost, such an input replays from its spout."""
    ex, sink, rec = forwarder()
    held = [Tuple([f"r{i}"], DATA, 0x5EED + i, 0x1) for i in range(3)]  # in spouts' trees
    for t in held:
        ex.execute(t)
    steps = [cp(0, PREPARE), cp(0, COMMIT), cp(1, PREPARE)]
    for c in steps:
        ex.execute(c)
    assert passed_on(rec) == [[0, PREPARE], [0, COMMIT], [1, PREPARE]] and rec.acked == steps
    sink.write()  # the batch, acked after the checkpoints
    assert rec.acked == steps + held


def test_a_checkpoint_held_a_message_timeout_behind_a_kept_result_is_reported_once():
    """A bolt that keeps a persistent window's result (no spout's tree) for good holds every
    checkpoint behind it: the stateful bolts after it commit nothing. Once one has waited a
    message timeout (here 0 s) the next checkpoint to come says so, once, naming the bolt and the key."""
    sink = WritesLater()
    ex, rec = CheckpointTupleForwarder(sink), Recorder()
    ex.prepare({"topology.message.timeout.secs": 0}, BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(Tuple(["a window's result"], DATA))
    ex.execute(cp(0, PREPARE))
    assert rec.errors == []
    ex.execute(cp(0, ROLLBACK))  # the spout gave up on the PREPARE
    ex.execute(cp(0, ROLLBACK))  # and on its ROLLBACK, held behind the same: not reported again
    assert len(rec.errors) == 1 and passed_on(rec) == []
    assert rec.errors[0] == (
        "component [count] task 3: checkpoint PREPARE at txid 0 has waited here 0 s (over "
        "topology.message.timeout.secs 0) behind 1 input(s) [count] has neither acked nor failed that may carry a persistent "
        "window's results (nothing replays them); no checkpoint passes it until it does, so the stateful "
        "bolts after it commit nothing: ack or fail each input")
    sink.write()
    assert passed_on(rec) == [[0, PREPARE], [0, ROLLBACK], [0, ROLLBACK]]


def test_a_held_checkpoint_is_overdue_only_once_it_has_waited_the_time_given():
    now = [100.0]
    in_flight = InputsInFlight(now=lambda: now[0])
    in_flight.given(Tuple(["result"], DATA))
    in_flight.hold(lambda failed: None, action=PREPARE, txid=4)
    now[0] += 29.9
    assert in_flight.overdue(30) is None
    now[0] += 0.1
    assert in_flight.overdue(30) == HeldCheckpoint(PREPARE, 4, 30.0, 1)
    assert in_flight.overdue(30) is None  # once


def test_a_result_failed_while_a_commit_is_held_fails_the_next_prepare():
    """A persistent window's result fired after PREPARE 0 passed belongs to transaction 1:
    the COMMIT held behind it passes, and the failure is kept for PREPARE 1 (released with the
    COMMIT, it was forgotten, and transaction 1 recorded the window as fired, its result lost)."""
    ex, sink, rec = forwarder()
    ex.execute(cp(0, PREPARE))
    ex.execute(Tuple(["fired after PREPARE 0"], DATA))
    ex.execute(cp(0, COMMIT))
    sink.write(fail=True)
    assert passed_on(rec) == [[0, PREPARE], [0, COMMIT]]
    prepare = cp(1, PREPARE)
    ex.execute(prepare)
    assert prepare in rec.failed and passed_on(rec) == [[0, PREPARE], [0, COMMIT]]
    ex.execute(cp(1, ROLLBACK))
    ex.execute(cp(1, INITSTATE))
    ex.execute(cp(2, PREPARE))  # the rollback settled it
    assert passed_on(rec)[-3:] == [[1, ROLLBACK], [1, INITSTATE], [2, PREPARE]]


def test_a_result_failed_before_an_initstate_fails_the_next_prepare():
    """A worker dies: the checkpoint spout sends INITSTATE to recover its restarted tasks, and
    the live ones go on. A live persistent window fired as the worker died; its results failed
    at the sink (its Redis restarting, or lost with the sink's task). The INITSTATE changes
    nothing in the live window, so the failure belongs to the next PREPARE. Cleared by the
    INITSTATE, that PREPARE passed and the commit recorded the windows as fired, their results
    lost: on the process host, 22 (window, user) results of 2,000 purchases were never written,
    their purchases acked and in no late stream (tests/process/test_trust_trial.py)."""
    ex, sink, rec = forwarder()
    ex.execute(Tuple(["fired as the worker died"], DATA))
    sink.write(fail=True)
    ex.execute(cp(3, INITSTATE))
    prepare = cp(3, PREPARE)
    ex.execute(prepare)
    assert prepare in rec.failed and passed_on(rec) == [[3, INITSTATE]]
    ex.execute(cp(3, ROLLBACK))  # the window fires again after it
    ex.execute(cp(4, PREPARE))
    assert passed_on(rec) == [[3, INITSTATE], [3, ROLLBACK], [4, PREPARE]]


# --- the builder's wiring -------------------------------------------------------------------------------------------

class Src(Spout):
    def declare_output_fields(self, d):
        d.declare(Fields("w"))


class Pass(Bolt):
    def declare_output_fields(self, d):
        d.declare(Fields("w"))


def test_a_stateful_bolt_gets_the_checkpoint_spout_and_streams():
    b = TopologyBuilder()
    b.set_spout("s", Src())
    b.set_bolt("p", Pass(), 2).shuffle_grouping("s")
    b.set_bolt("c", Counter(), 2).fields_grouping("p", ["w"])
    topo = b.create_topology()
    comps = topo.components
    assert comps["$checkpointspout"].kind == "spout" and "$checkpoint" in comps["$checkpointspout"].streams
    assert GlobalStreamId("$checkpointspout", "$checkpoint") in comps["p"].inputs
    assert GlobalStreamId("p", "$checkpoint") in comps["c"].inputs
    assert comps["c"].inputs[GlobalStreamId("p", "$checkpoint")].kind == "all"
    assert type(comps["c"].obj).__name__ == "StatefulBoltExecutor"
    assert type(comps["p"].obj).__name__ == "CheckpointTupleForwarder"
    plain = TopologyBuilder()
    plain.set_spout("s", Src())
    plain.set_bolt("p", Pass()).shuffle_grouping("s")
    assert "$checkpointspout" not in plain.create_topology().components


class SpoutCtx(Ctx):
    """A checkpoint spout's context on a host that lends a transactional state (``marks``)."""

    def __init__(self, mem, marks, storm_id="t-1-1"):
        super().__init__(StateHome(memory=mem), component="$checkpointspout", task=1)
        self.marks, self.storm_id = marks, storm_id

    def get_storm_id(self):
        return self.storm_id

    def transactional_state(self, name):
        from squall.trident.txstate import MemoryTransactionalState
        return MemoryTransactionalState(self.marks, "t", name)


class SpoutOut:
    def __init__(self):
        self.emitted, self.errors = [], []

    def emit(self, values, msg_id=None, stream=None):
        self.emitted.append(tuple(values))

    def report_error(self, e):
        self.errors.append(str(e))


def _wipe(mem):
    """Empty every store of ``mem`` (a Redis server restarted without persistence)."""
    for ns in mem.namespaces("t"):
        store = mem.store("t", ns)
        store.committed.clear()
        store.commit_txid = None
        store.rollback()


def _checkpoints(spout, out, clock, steps):
    """Run ``steps`` checkpoint steps, acking each; returns the (txid, action) emitted."""
    for _ in range(steps):
        clock[0] += 1
        before = len(out.emitted)
        spout.next_tuple()
        if len(out.emitted) > before:
            spout.ack(out.emitted[-1][0])
    return out.emitted


def test_a_store_that_lost_the_checkpoint_state_is_not_taken_for_a_first_start():
    from squall._transactional import MemoryBackend

    from ..conftest import wait_until
    mem, marks, clock = HostMemory(), MemoryBackend(), [0.0]
    conf = {"topology.name": "t", "topology.state.checkpoint.interval.ms": 100}
    spout, out = CheckpointSpout(now=lambda: clock[0]), SpoutOut()
    spout.open(conf, SpoutCtx(mem, marks), out)
    spout.activate()  # as its executor does once the topology is active
    _checkpoints(spout, out, clock, 7)  # INITSTATE, then PREPARE and COMMIT of txids 0-2
    assert out.emitted[-1] == (2, "COMMIT") and not out.errors
    record = SpoutCtx(mem, marks).transactional_state("checkpoint")
    assert wait_until(lambda: record.get("txid/_checkpointspout-1") == ["t-1-1", 2], 10)  # its own thread writes it
    # the store comes back empty under the running spout: no PREPARE is emitted on it
    _wipe(mem)
    out.emitted.clear()
    _checkpoints(spout, out, clock, 5)
    assert out.emitted == [] and len(out.errors) == 1
    assert "lost committed state" in out.errors[0] and "component [$checkpointspout] task 1" in out.errors[0]
    # a restarted spout (same submission) finds its record outside the store: still no checkpoint
    again, out2 = CheckpointSpout(now=lambda: clock[0]), SpoutOut()
    again.open(conf, SpoutCtx(mem, marks), out2)
    again.activate()
    assert _checkpoints(again, out2, clock, 5) == [] and "txid 2 was committed" in out2.errors[0]
    # the store restored (its state back): checkpoints go on from there
    restored = get_state("$checkpointspout-1", conf, SpoutCtx(mem, marks))
    restored.put("__state", [2, "COMMITTED"])
    restored.commit()
    assert _checkpoints(again, out2, clock, 4)[-2:] == [(3, "PREPARE"), (3, "COMMIT")]
    # the topology submitted again (a new storm id) over a store emptied on purpose starts afresh
    _wipe(mem)
    fresh, out3 = CheckpointSpout(now=lambda: clock[0]), SpoutOut()
    fresh.open(conf, SpoutCtx(mem, marks, storm_id="t-2-2"), out3)
    fresh.activate()
    assert _checkpoints(fresh, out3, clock, 3) == [(-1, "INITSTATE"), (0, "PREPARE"), (0, "COMMIT")]
    assert not out3.errors
    for s in (spout, again, fresh):
        s.close()


def test_a_committed_txid_the_master_refuses_for_a_killed_workers_launch_is_said_at_info(caplog):
    """The checkpoint spout records each committed txid with the master, on a thread of its own.
    Once its topology is killed (or the worker moved or relaunched), the master refuses the launch
    (`LaunchRefusedError`): every kill of a topology with stateful bolts logged a WARNING. It is an
    operator's own act: INFO, as Trident's coordinators and the file state say it. Any other
    failure to record stays a warning."""
    from squall._transactional import LaunchRefusedError
    from squall.state.checkpoint import CheckpointSpout

    class Refusing:
        def __init__(self, error):
            self.error = error

        def put(self, key, value):
            raise self.error

    spout = CheckpointSpout()
    spout._where, spout._mark_key = "component [$checkpointspout] task 1", "mark"
    caplog.set_level(logging.INFO, logger="squall")
    spout._marks = Refusing(LaunchRefusedError("worker 'h:1' launch 3 of 't-1' is not running now"))
    spout._record(["t-1", 7])
    spout._marks = Refusing(ConnectionError("master away"))
    spout._record(["t-1", 8])
    said = [(r.levelno, r.getMessage()) for r in caplog.records if "txid" in r.getMessage()]
    assert said == [
        (logging.INFO, "component [$checkpointspout] task 1: the master no longer runs this worker; committed "
                       "txid 7 is not recorded"),
        (logging.WARNING, "component [$checkpointspout] task 1: cannot record committed txid 8 in the topology's "
                          "transactional state: master away")]
