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


def test_a_shell_spout_with_acking_off_gets_its_acks_after_the_emit_that_made_them(tmp_path):
    """With acking off the engine acks a spout tuple inside its emit, while the spout's
    subprocess waits for that emit's task ids (storm.py's default; pystorm's when asked): the
    ack went to the subprocess first, which held it waiting for the ids, and nothing came back
    until the subprocess timeout crashed the worker, for ever. It now goes after the sync."""
    acks = tmp_path / "acks"
    b = TopologyBuilder()
    b.set_spout("sentences", ShellSpout([sys.executable, "sentences.py", "json"], ["sentence"], cwd=str(HERE)))
    b.set_bolt("count", CountWords()).shuffle_grouping("sentences")
    conf = Config()
    conf.set_num_ackers(0)
    conf[Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS] = 5
    conf["test.sentences"] = SENTENCES
    conf["test.acks.file"] = str(acks)
    conf["test.need.task.ids"] = True
    with LocalCluster() as cluster:
        cluster.submit_topology("unacked", conf, b.create_topology())
        assert wait_until(lambda: len(acked(acks)) == SENTENCES or cluster.get_topology_info("unacked")["errors"],
                          30), sorted(acked(acks))
        assert cluster.get_topology_info("unacked")["errors"] == []
    assert acked(acks) == collections.Counter(str(i) for i in range(SENTENCES))


def test_a_value_the_json_wire_cannot_carry_fails_its_tuple_and_no_other():
    """A str with a lone surrogate (what json.loads makes of a subprocess's "\\ud800", e.g. a
    JavaScript string cut inside an emoji) is no UTF-8: its encoding raised out of the shell
    bolt's execute and crashed the worker on every replay. It fails its own tuple only."""
    from .feeding import fed_builder

    b, feed, tracker = fed_builder("sentence")
    b.set_bolt("split", ShellBolt([sys.executable, "split.py", "json"], ["word"], cwd=str(HERE))) \
        .shuffle_grouping("feed")
    b.set_bolt("count", CountWords()).shuffle_grouping("split")  # split.py checks its first emit's task
    with LocalCluster() as cluster:
        cluster.submit_topology("surrogate", Config(), b.create_topology())
        feed.feed(["one two"], 1)
        feed.feed(["bad \ud800"], 2)
        feed.feed(["three four"], 3)
        assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in (1, 2, 3)), 30)
        errors = cluster.get_topology_info("surrogate")["errors"]
    assert tracker.is_acked(1) and tracker.is_failed(2) and tracker.is_acked(3)
    assert [e["fatal"] for e in errors] == [False] and "cannot be written as JSON" in errors[0]["error"]
