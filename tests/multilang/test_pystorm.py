"""pystorm's components from PyPI, unchanged, under ShellSpout and ShellBolt on LocalCluster:
every sentence the pystorm spout emits is acked back to it, and every word its bolt emits is
counted, over Storm's JSON wire and over MessagePack."""

from __future__ import annotations

import collections
import sys
import threading
from pathlib import Path

import pytest

from squall import Bolt, Config, Fields, LocalCluster, ShellBolt, ShellSpout, TopologyBuilder

from ..conftest import wait_until

pytest.importorskip("pystorm")

HERE = Path(__file__).parent / "with_pystorm"
SENTENCES = 60

WORDS: collections.Counter = collections.Counter()
_LOCK = threading.Lock()


class CountWords(Bolt):
    """squall's own bolt after the shell ones: counts every word (LocalCluster runs in this
    process, so the test reads the counts)."""

    def execute(self, tup):
        with _LOCK:
            WORDS[tup[0]] += 1
        self.collector.ack(tup)


def acked(path: Path) -> collections.Counter:
    """How many times the pystorm spout was told each sentence id was acked."""
    return collections.Counter(path.read_text().split()) if path.exists() else collections.Counter()


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_pystorm_spout_and_bolt_run_under_shell_components_and_every_tuple_is_counted(tmp_path, serializer):
    WORDS.clear()
    acks = tmp_path / "acks"
    b = TopologyBuilder()
    b.set_spout("sentences", ShellSpout([sys.executable, "sentences.py", serializer], ["sentence"], cwd=str(HERE)))
    b.set_bolt("split", ShellBolt([sys.executable, "split.py", serializer], ["word"], cwd=str(HERE)), 2) \
        .shuffle_grouping("sentences")
    b.set_bolt("count", CountWords(), 2).fields_grouping("split", Fields(["word"]))
    conf = Config()
    conf[Config.TOPOLOGY_MULTILANG_SERIALIZER] = serializer
    conf["test.sentences"] = SENTENCES  # read by the spout from the handshake's configuration
    conf["test.acks.file"] = str(acks)
    with LocalCluster() as cluster:
        cluster.submit_topology("pystorm", conf, b.create_topology())
        assert wait_until(lambda: len(acked(acks)) == SENTENCES, 30), sorted(acked(acks))
        info = cluster.get_topology_info("pystorm")
        assert info["errors"] == []
        assert wait_until(lambda: sum(WORDS.values()) == 5 * SENTENCES)

    # the shell bolts' reader and writer threads ended with their tasks (Storm's cleanup interrupts them)
    assert [t.name for t in threading.enumerate() if t.name.startswith(("ShellBolt [", "ShellSpout ["))] == []
    assert acked(acks) == collections.Counter(str(i) for i in range(SENTENCES))  # each once: nothing failed
    assert WORDS == collections.Counter({"the": SENTENCES, "quick": SENTENCES, "fox": SENTENCES,
                                         "jumps": SENTENCES, **{str(i): 1 for i in range(SENTENCES)}})
