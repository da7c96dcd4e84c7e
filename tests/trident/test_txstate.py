"""Trident's transactional state (`squall.trident.txstate`): the interface, its limits, the
master's stores (memory, sealed files, the master's operations across its restart), and on
LocalCluster, where it lives in the cluster and outlives a crashed worker and the topology."""

from __future__ import annotations

import os
import pickle

import pytest

from squall import LocalCluster, TopologyBuilder, TopologyContext
from squall._config import cluster_conf
from squall._transactional import (MAX_KEY_CHARS, MAX_KEYS, MAX_VALUE_BYTES, MasterBackend, MemoryBackend,
                                   TransactionalStateError)
from squall.cluster.store import MemoryStore
from squall.cluster.txstore import FileStore
from squall.trident.txstate import BackedTransactionalState, MemoryTransactionalState, name_key, transactional_state
from squall._errors import RemoteError, RpcError
from squall._nimbus import TxWrite

from ..cluster.served import served  # a master as its server drives it: each verb's changes kept
from ..conftest import wait_until
from .txstate_topology import OpensSpout, opens, opens_topology


# --- the interface -------------------------------------------------------------------------------
def test_values_are_stored_as_they_were_put_and_listed_by_prefix():
    s = MemoryTransactionalState()
    assert s.get("currtx") is None and s.list() == []
    meta = {"offsets": [1, 2]}
    s.put("currtx", 7)
    s.put("meta/1", meta)
    s.put("meta/2", ("b", 2))
    s.put("metaphor", "not under meta/")
    meta["offsets"].append(3)  # a change after the put is not stored: the value was pickled
    assert s.get("currtx") == 7 and s.get("meta/1") == {"offsets": [1, 2]}
    assert s.list("meta/") == ["meta/1", "meta/2"]
    assert s.list() == ["currtx", "meta/1", "meta/2", "metaphor"]
    s.delete("meta")  # with what is below it, as Storm deletes a node and its children
    assert s.list() == ["currtx", "metaphor"]
    s.delete("absent")
    s.put("currtx", 8)
    assert s.get("currtx") == 8


def test_names_share_a_topology_store_without_seeing_each_others_keys():
    backend = MemoryBackend()
    a = BackedTransactionalState(backend, "words", "coordinator")
    b = BackedTransactionalState(backend, "words", "spout-1")
    other = BackedTransactionalState(backend, "other", "coordinator")
    a.put("currtx", 3)
    b.put("currtx", 5)
    assert (a.get("currtx"), b.get("currtx"), other.get("currtx")) == (3, 5, None)
    assert a.list() == ["currtx"] and backend.list("words") == ["coordinator/currtx", "spout-1/currtx"]
    assert MemoryTransactionalState(backend, "words", "coordinator").get("currtx") == 3


@pytest.mark.parametrize("key, why", [
    ("", "1 to"), ("a//b", "non-empty"), ("../x", "'..'"), ("a b", "A-Z"),
    ("x" * (MAX_KEY_CHARS + 1), "1 to"),
    (7, "must be a str"),
])
def test_a_bad_key_is_refused_naming_it(key, why):
    s = MemoryTransactionalState()
    with pytest.raises(TransactionalStateError, match="transactional state") as e:
        s.put(key, 1)
    assert why in str(e.value)


def test_a_value_too_large_is_refused_naming_its_key():
    s = MemoryTransactionalState()
    with pytest.raises(TransactionalStateError, match=r"key 'meta/9' is \d+ bytes pickled; the limit is"):
        s.put("meta/9", b"x" * MAX_VALUE_BYTES)
    assert s.get("meta/9") is None
    with pytest.raises(TransactionalStateError, match="key 'fn' cannot be pickled"):
        s.put("fn", _Unpicklable())


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("no")


def test_a_topology_holds_a_bounded_number_of_keys():
    backend = MemoryBackend()
    for i in range(MAX_KEYS):
        backend.put("t", f"k{i}", b"")
    backend.put("t", "k0", b"again")  # replacing a key adds none
    with pytest.raises(TransactionalStateError, match="holds 10000 keys already: key 'one-more' not added"):
        backend.put("t", "one-more", b"")
    backend.put("u", "k0", b"")  # another topology has its own


def test_a_context_without_a_host_says_so():
    b = TopologyBuilder()
    b.set_spout("s", OpensSpout("unused"), 1)
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "s"}, 1, 6700, [1], {"topology.name": "t"})
    with pytest.raises(TransactionalStateError, match="lends none"):
        context.transactional_state("coordinator")
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "s"}, 1, 6700, [1], {"topology.name": "t"},
                              transactional_home=MemoryBackend())
    context.transactional_state("coordinator").put("x", 1)
    assert transactional_state(context, "coordinator").get("x") == 1
    assert context.transactional_home.list("t") == ["coordinator/x"]
    with pytest.raises(TransactionalStateError, match="name"):
        context.transactional_state("")


def test_any_name_a_user_gives_new_stream_is_a_key_of_its_own():
    """Storm takes any txid id (a ZooKeeper path): squall escapes what keys cannot hold, one way
    only, so distinct names never share a store."""
    names = ["bad name", "$drpc-counts", "word_count", "word_5fcount", "ünï", ".", "..", "a/b", "a/./b"]
    backend = MemoryBackend()
    b = TopologyBuilder()
    b.set_spout("s", OpensSpout("unused"), 1)
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "s"}, 1, 6700, [1], {"topology.name": "t"},
                              transactional_home=backend)
    for n, name in enumerate(names):
        context.transactional_state(name).put("x", n)
    assert [transactional_state(context, name).get("x") for name in names] == list(range(len(names)))
    assert len(backend.list("t")) == len(names)
    assert name_key("word_count") == "word_5fcount" and name_key("$drpc-counts") == "_24drpc-counts"


# --- the master's stores ---------------------------------------------------------------------------
def test_the_file_store_keeps_values_sealed_per_key(tmp_path, monkeypatch):
    store = FileStore(tmp_path / "tx", b"secret")
    store.put("words", "coordinator/currtx", b"\x80pickled")
    store.put("words", "coordinator/meta/1", b"m1")
    store.put("words", ".hidden/.x", b"a key like a hidden file's name")
    again = FileStore(tmp_path / "tx", b"secret")  # a restarted master
    assert again.get("words", "coordinator/currtx") == b"\x80pickled"
    assert again.list("words", "coordinator/") == ["coordinator/currtx", "coordinator/meta/1"]
    assert again.list("words", ".") == [".hidden/.x"] and again.get("words", ".hidden/.x").startswith(b"a key")
    again.delete("words", ".hidden", prefix=True)
    # a file copied over another key's is refused (it is sealed for its own key), as is one
    # sealed under another secret: an error naming it, not "none" (a coordinator without its
    # state would start its txids again, under states that keep the old ones)
    d = tmp_path / "tx" / "words"
    (d / "coordinator~meta~1.v").write_bytes((d / "coordinator~currtx.v").read_bytes())
    with pytest.raises(TransactionalStateError, match=r"coordinator~meta~1\.v refused: .*'coordinator/meta/1'"):
        again.get("words", "coordinator/meta/1")
    with pytest.raises(TransactionalStateError, match=r"coordinator~currtx\.v refused: .*start that topology's"):
        FileStore(tmp_path / "tx", b"other").get("words", "coordinator/currtx")
    again.delete("words", "coordinator/meta", prefix=True)
    assert again.list("words") == ["coordinator/currtx"]
    again.delete("words", "", prefix=True)
    assert again.list("words") == []
    monkeypatch.setattr("squall.cluster.txstore.MAX_KEYS", 2)
    again.put("words", "a", b"")
    again.put("words", "b", b"")
    again.put("words", "a", b"again")
    with pytest.raises(TransactionalStateError, match="holds 2 keys already: key 'c' not added"):
        again.put("words", "c", b"")


def test_a_file_store_entry_that_cannot_be_read_is_refused_naming_it_and_its_key(tmp_path):
    """A directory, or a symlink to one, in a value's place (or a file in the topology's): the
    worker's coordinator got a bare ``[Errno 21] Is a directory: ...`` from the master and its
    worker crashed on it at every restart, nothing saying it was Trident's state or what to do."""
    store = FileStore(tmp_path / "tx", b"secret")
    store.put("words", "coordinator/currtx", b"1")
    store.put("words", "coordinator/meta/1", b"m1")
    d = tmp_path / "tx" / "words"
    (d / "coordinator~currtx.v").unlink()
    (d / "coordinator~currtx.v").mkdir()
    (d / "coordinator~meta~1.v").unlink()
    (d / "coordinator~meta~1.v").symlink_to(d / "coordinator~meta~1.v")  # a loop
    with pytest.raises(TransactionalStateError, match=r"transactional state file .*coordinator~currtx\.v of key "
                                                      r"'coordinator/currtx' of topology 'words' cannot be read "
                                                      r"\(Is a directory\); restore it from a backup"):
        store.get("words", "coordinator/currtx")
    with pytest.raises(TransactionalStateError, match=r"coordinator~meta~1\.v of key 'coordinator/meta/1' .*cannot "
                                                      r"be read \(Too many levels of symbolic links\)"):
        store.get("words", "coordinator/meta/1")
    store.put("other", "k", b"v")
    other = tmp_path / "tx" / "other"
    for f in other.iterdir():
        f.unlink()
    other.rmdir()
    other.write_bytes(b"not a directory")
    with pytest.raises(TransactionalStateError, match=r"directory .*tx/other cannot be listed \(Not a directory\)"):
        store.list("other")



@pytest.mark.parametrize("link", ["directory", "topology", "value"])
def test_a_file_store_behind_a_symlink_that_does_not_resolve_is_refused_not_read_as_no_value(tmp_path, link):
    """The transactional directory linked to a disk not mounted yet (or the topology's directory,
    or a value's file, a link whose target is gone): the read found no file and answered "no
    value", the listing no keys, so a Trident coordinator started its txids again over the state
    it had. Now each is refused naming the link; once the link resolves the values are there."""
    disk = tmp_path / "disk"
    store = FileStore(disk / "tx", b"secret")
    store.put("words", "coordinator/currtx", b"7")
    place = {"directory": (tmp_path / "tx", disk / "tx"),
             "topology": (disk / "tx" / "words", disk / "moved"),
             "value": (disk / "tx" / "words" / "coordinator~currtx.v", disk / "moved.v")}[link]
    at, target = place
    if link != "directory":
        os.replace(at, target)
    at.symlink_to(tmp_path / "unmounted")
    store = FileStore(tmp_path / "tx" if link == "directory" else disk / "tx", b"secret")
    with pytest.raises(TransactionalStateError, match=r"of key 'coordinator/currtx' of topology 'words' cannot be "
                                                      r"read \(.* is a symlink to .*unmounted, which does not resolve\)"):
        store.get("words", "coordinator/currtx")
    if link != "value":
        with pytest.raises(TransactionalStateError, match=r"directory .*words cannot be read \(.*does not resolve\)"):
            store.list("words")
    at.unlink()
    at.symlink_to(target)   # the disk is back
    assert store.get("words", "coordinator/currtx") == b"7"
    assert store.list("words") == ["coordinator/currtx"]

def test_the_master_keeps_the_state_across_its_restart_and_never_unpickles_it(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path)})
    m = served(conf)
    blob = pickle.dumps({"txid": 12})
    m.op_trident_state_put(topology="words", key="coordinator/currtx", value=blob)
    m.op_trident_state_put(topology="words", key="spout/meta/12", value=b"not a pickle at all")
    again = served(conf)
    assert again.op_trident_state_get(topology="words", key="coordinator/currtx") == blob
    assert again.op_trident_state_get(topology="words", key="spout/meta/12") == b"not a pickle at all"
    assert again.op_trident_state_list(topology="words", prefix="spout/") == ["spout/meta/12"]
    again.op_trident_state_delete(topology="words", key="spout", prefix=True)
    assert again.op_trident_state_list(topology="words") == ["coordinator/currtx"]
    with pytest.raises(ValueError, match="not a topology name"):
        again.op_trident_state_get(topology="../x", key="k")
    with pytest.raises(TransactionalStateError, match="key 'k' is"):
        again.op_trident_state_put(topology="words", key="k", value=b"x" * (MAX_VALUE_BYTES + 1))


class _FlakyLink:
    """A master link that is unreachable for its first ``down`` calls."""

    def __init__(self, target, down):
        self.target, self.down, self.calls = target, down, 0

    def call(self, op, **args):
        self.calls += 1
        if self.calls <= self.down:
            raise RpcError("cannot reach the master")
        try:
            return getattr(self.target, f"op_{op}")(**args)
        except Exception as e:
            raise RemoteError(str(e), type(e).__name__) from e


def test_a_worker_retries_an_unreachable_master_then_gives_up():
    master = served(cluster_conf({}), store=MemoryStore.for_conf({}))  # LocalCluster's: in memory
    slept = []
    backend = MasterBackend(_FlakyLink(master, down=2), retries=2, interval=0.5, sleep=slept.append)
    s = BackedTransactionalState(backend, "words", "coordinator")
    s.put("currtx", 4)
    assert slept == [0.5, 0.5] and s.get("currtx") == 4
    down = MasterBackend(_FlakyLink(master, down=3), retries=2, interval=0.5, sleep=slept.append)
    with pytest.raises(RpcError):
        down.get("words", "coordinator/currtx")
    for i in range(MAX_KEYS - 1):  # a limit the master enforces comes back as the worker's own error
        master.op_trident_state_put(topology="full", key=f"k{i}", value=b"")
    backend.put("full", "last", b"")
    with pytest.raises(TransactionalStateError, match="key 'over' not added"):
        backend.put("full", "over", b"")


def test_a_stopping_worker_gives_up_a_state_call_it_would_send_again():
    """A coordinator's call retrying an unreachable master (Nimbus HA torn down, every master
    stopping) gives up as its worker stops. Before, it slept out storm.zookeeper.retry.times
    (5 x 1 s) on its executor's loop: the worker's stop abandoned that loop, still retrying,
    ("loops ... did not stop ... abandoned") and its cleanup never ran."""
    import threading
    import time

    from squall.worker.agent import WorkerAgent

    link = _FlakyLink(None, down=10**6)
    agent = WorkerAgent(link, "wc-1-1", "127.0.0.1:6700", 1, {"storm.zookeeper.retry.times": 5,
                                                              "storm.zookeeper.retry.interval": 1000},
                        make_transport=None)
    raised = []

    def call():
        try:
            agent.transactional_home.get("wc", "coordinator/currtx")
        except RpcError as e:
            raised.append(e)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert wait_until(lambda: link.calls >= 1, 10)
    stopped = time.monotonic()
    agent.stop()
    caller.join(3)
    assert not caller.is_alive(), "the call went on retrying after the worker stopped"
    assert time.monotonic() - stopped < 3 and link.calls == 1
    assert "trident_state_get not sent again: the worker is stopping (cannot reach the master)" in str(raised[0])


def test_the_master_refuses_the_state_to_a_launch_not_running_and_to_another_topology(tmp_path):
    """A worker says which launch it is; a copy of a launch the master replaced (left running
    on a supervisor it gave up on) would otherwise overwrite the coordinator state of the launch
    running now, and a worker could reach another topology's."""
    import cloudpickle

    from squall._transactional import LaunchRefusedError, WorkerLaunch
    from squall.cluster.master_records import LastBeat

    m = served(cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 1}))
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000])
    storm_id = m.op_submit(name="words", conf={}, topology=cloudpickle.dumps(opens_topology(tmp_path)))
    m.op_submit(name="other", conf={}, topology=cloudpickle.dumps(opens_topology(tmp_path)))
    topo = m.topologies["words"]
    slot = next(iter(topo.assignment))
    launch = topo.launch_ids[slot]
    link = _FlakyLink(m, down=0)
    worker = BackedTransactionalState(MasterBackend(link, caller=WorkerLaunch(storm_id, slot, launch)), "words", "c")
    worker.put("currtx", 4)
    assert worker.get("currtx") == 4 and worker.list() == ["currtx"]
    elsewhere = BackedTransactionalState(MasterBackend(link, caller=WorkerLaunch(storm_id, slot, launch)), "other", "c")
    with pytest.raises(TransactionalStateError, match="a worker of topology 'words' .* may not reach topology 'other'"):
        elsewhere.put("currtx", 1)
    with pytest.raises(LaunchRefusedError, match="not running now"):  # a coordinator stops on it
        MasterBackend(link, caller=WorkerLaunch("words-99-0", slot, launch)).get("words", "c/currtx")
    topo.slot(slot).heartbeat = LastBeat(0.0)  # it went silent: the master relaunches the slot
    m.monitor()
    assert topo.launch_ids[slot] == launch + 1
    with pytest.raises(LaunchRefusedError, match=f"launch {launch} .* not running now"):
        worker.put("currtx", 3)  # the old launch, still running somewhere
    relaunched = MasterBackend(link, caller=WorkerLaunch(storm_id, slot, launch + 1))
    assert BackedTransactionalState(relaunched, "words", "c").get("currtx") == 4


def test_a_write_applies_its_puts_and_deletes_in_order_in_one_call_to_the_master(tmp_path):
    """`TransactionalState.write`: one round trip to the master (a coordinator's keys of one
    step), the changes kept in their order, in the master's sealed files as the single puts are."""
    from squall._transactional import Delete, Put

    conf = cluster_conf({"storm.local.dir": str(tmp_path)})
    master = served(conf)
    link = _FlakyLink(master, down=0)
    s = BackedTransactionalState(MasterBackend(link), "words", "spout")
    s.put("meta/1", "one")
    s.put("meta/2", "two")
    calls = link.calls
    s.write([Delete("meta/1"), Put("meta/3", "three"), Put("meta/2", "again"), Delete("meta/3"), Put("meta/3", 3)])
    assert link.calls == calls + 1
    again = BackedTransactionalState(MasterBackend(_FlakyLink(served(conf), down=0)), "words", "spout")
    assert again.list() == ["meta/2", "meta/3"] and again.get("meta/2") == "again" and again.get("meta/3") == 3
    with pytest.raises(TransactionalStateError, match="key 'x' is"):  # refused before it leaves the worker
        s.write([Put("x", b"x" * MAX_VALUE_BYTES)])
    with pytest.raises(TransactionalStateError, match="'..'"):
        s.backend.write("words", [TxWrite("spout/../k", b"")])
    assert link.calls == calls + 1
    memory = MemoryTransactionalState()  # a backend kept in this process does the same
    memory.write([Put("a", 1), Put("b/c", 2), Delete("b")])
    assert memory.list() == ["a"]


def test_to_a_master_in_this_process_a_write_goes_as_its_records_with_no_wire_map():
    """LocalCluster's master link passes records (`RecordCalls`): a coordinator's write reaches
    the master as its `TxWrite`s, not encoded to maps and decoded again (each batch's save)."""
    from squall._transactional import Put
    from squall.cluster.inprocess import DirectMaster

    master = served(cluster_conf({}), store=MemoryStore.for_conf({}))

    class Link(DirectMaster):
        def __init__(self):
            super().__init__(master.master, on_change=lambda storm_id: None)
            self.seen = []

        def call(self, op, **args):
            self.seen.append(args.get("writes"))
            return super().call(op, **args)

    link = Link()
    s = BackedTransactionalState(MasterBackend(link), "words", "spout")
    s.write([Put("meta/1", "one")])
    assert s.get("meta/1") == "one"
    assert type(link.seen[0][0]) is TxWrite and link.seen[0][0].key == "spout/meta/1"


# --- LocalCluster ----------------------------------------------------------------------------------
def test_on_local_cluster_the_state_outlives_a_crashed_worker_and_the_topology(tmp_path):
    with LocalCluster() as cluster:
        cluster.submit_topology("opens", {}, opens_topology(tmp_path, crash_first=True))
        # the first open stored 1 and crashed its worker; the restarted worker's open read it
        assert wait_until(lambda: len(opens(tmp_path)) >= 2, 60), opens(tmp_path)
        first, second = opens(tmp_path)[:2]
        assert (first["n"], second["n"]) == (1, 2)
        assert second["keys"] == ["open/1", "open/2"] and first["storm_id"] == second["storm_id"]
        assert any("crash on purpose" in e["error"] for e in cluster.get_topology_info("opens")["errors"])
        cluster.kill_topology("opens", wait_secs=0)
        assert wait_until(lambda: "opens" not in cluster.get_topology_names(), 30)
        # submitted again under the same name: a new storm id, the same state
        cluster.submit_topology("opens", {}, opens_topology(tmp_path))
        assert wait_until(lambda: len(opens(tmp_path)) == 3, 60), opens(tmp_path)
        third = opens(tmp_path)[2]
        assert third["n"] == 3 and third["keys"] == ["open/1", "open/2", "open/3"]
        assert third["storm_id"] != first["storm_id"]
        # another name has its own
        cluster.submit_topology("others", {}, opens_topology(tmp_path))
        assert wait_until(lambda: len(opens(tmp_path)) == 4, 60), opens(tmp_path)
        assert opens(tmp_path)[3]["n"] == 1


def test_a_topology_whose_config_names_another_topology_keeps_its_own_state(tmp_path):
    # Storm's Nimbus sets topology.name to the submitted name whatever the Config says; a
    # Config copied from another topology's must not reach that topology's coordinator state
    with LocalCluster() as cluster:
        cluster.submit_topology("opens", {}, opens_topology(tmp_path))
        assert wait_until(lambda: len(opens(tmp_path)) == 1, 60), opens(tmp_path)
        cluster.submit_topology("copied", {"topology.name": "opens"}, opens_topology(tmp_path))
        assert wait_until(lambda: len(opens(tmp_path)) == 2, 60), opens(tmp_path)
        copied = opens(tmp_path)[1]
        assert copied["storm_id"].startswith("copied-")
        assert copied["n"] == 1 and copied["keys"] == ["open/1"], copied
