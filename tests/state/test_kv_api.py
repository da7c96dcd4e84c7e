"""`KeyValueState` as a user calls it: which keys are one key, what the providers' settings
mean, and what a commit writes (the pure core, the file store and a real redis-server)."""

import subprocess
import sys
import textwrap

from squall.state import StateHome
from squall.state._kv import MemoryStore, StateCodec, TransactionalKeyValueState
from squall.state.file import FileStore, state_dir

KEY = b"k" * 32


def kv(store=None, conf=None):
    return TransactionalKeyValueState(store or MemoryStore(), StateCodec(conf or {}, "component [count] task 3"))


# --- keys that are equal are one key --------------------------------------------------------------------------

def test_keys_that_are_equal_are_one_key_whatever_order_their_sets_and_maps_were_built_in():
    s = kv()
    for i in range(100):
        s.put(frozenset([i, i + 8]), i)  # i and i + 8 share a slot: the set's order is its history
        s.put(("pair", {i + 8, i}), i)
        s.put({"b": i, "a": [i]}, i)
    for i in range(100):
        assert s.get(frozenset([i + 8, i])) == i
        assert s.get(("pair", {i, i + 8})) == i
        assert s.get({"a": [i], "b": i}) == i
    assert len(list(s)) == 300  # one entry per key, none twice
    keys = [k for k, _v in s]
    assert frozenset([3, 11]) in keys and type(keys[0]) is frozenset  # keys read back as they were put


def test_a_set_key_of_strings_is_found_by_a_worker_with_another_hash_seed(tmp_path):
    # the process host's restarted worker is a new interpreter, whose str hashes (and so a set's
    # order) differ: the key must still be found
    d = state_dir(tmp_path, "topo", "count-3")
    script = textwrap.dedent(f"""
        import sys
        from squall.state._kv import StateCodec, TransactionalKeyValueState
        from squall.state.file import FileStore
        s = TransactionalKeyValueState(FileStore({str(d)!r}, "count-3", {KEY!r}), StateCodec({{}}, "count"))
        if sys.argv[1] == "put":
            for i in range(50):
                s.put(frozenset([f"user{{i}}", f"other{{i}}", f"third{{i}}"]), i)
            s.prepare_commit(0)
            s.commit(0)
        else:
            found = [i for i in range(50) if s.get(frozenset([f"third{{i}}", f"user{{i}}", f"other{{i}}"])) == i]
            print(len(found), len(list(s)))
    """)
    env_base = {"PYTHONPATH": ":".join(p for p in sys.path if p)}
    subprocess.run([sys.executable, "-c", script, "put"], check=True, timeout=60,
                   env={**env_base, "PYTHONHASHSEED": "1"})
    out = subprocess.run([sys.executable, "-c", script, "get"], check=True, timeout=60, capture_output=True,
                         text=True, env={**env_base, "PYTHONHASHSEED": "2"}).stdout.split()
    assert out == ["50", "50"]
