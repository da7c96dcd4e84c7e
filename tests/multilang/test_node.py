"""A bolt in another language, Node.js, speaking the protocol as written by hand in
``node/splitter.js``, under ShellBolt on LocalCluster: every sentence fed is acked, every word it
emits is counted, and the words it reports through the ``metrics`` command reach the metric the
component registered."""

from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from squall import Bolt, Config, LocalCluster, ShellBolt

from ..conftest import wait_until
from .feeding import fed_builder

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node (Node.js) on PATH")

HERE = Path(__file__).parent / "node"
SENTENCES = 40

WORDS: collections.Counter = collections.Counter()
REPORTED: list = []  # what the subprocess sent through "metrics"
_LOCK = threading.Lock()


class CountWords(Bolt):
    def execute(self, tup):
        with _LOCK:
            WORDS[tup[0]] += 1
        self.collector.ack(tup)


class WordsReported:
    """A metric a shell component updates (Storm's IShellMetric): every ``metrics`` command's
    params reach ``update_metric_from_rpc``."""

    def update_metric_from_rpc(self, params):
        REPORTED.append(params)

    def get_value_and_reset(self):
        return None


class NodeSplitter(ShellBolt):
    """As a Storm user subclasses ShellBolt to register the metrics its script reports."""

    def prepare(self, conf, context, collector):
        context.register_metric("words", WordsReported(), 60)
        super().prepare(conf, context, collector)


def test_a_node_bolt_speaking_the_protocol_splits_every_sentence_and_every_word_is_counted(caplog):
    caplog.set_level("INFO", logger="squall.multilang")
    WORDS.clear()
    REPORTED.clear()
    b, feed, tracker = fed_builder("sentence")
    # resources: node/ travels with the topology, and each task's subprocess runs in a copy of it
    b.set_bolt("split-node", NodeSplitter([NODE, "splitter.js"], ["word"], resources=HERE), 2).shuffle_grouping("feed")
    b.set_bolt("count", CountWords()).shuffle_grouping("split-node")
    with LocalCluster() as cluster:
        cluster.submit_topology("node", Config(), b.create_topology())
        for i in range(SENTENCES):
            feed.feed([f"a node said {i}"], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(SENTENCES)), 30)
        assert not any(tracker.is_failed(i) for i in range(SENTENCES))
        assert cluster.get_topology_info("node")["errors"] == []

    assert WORDS == collections.Counter({"a": SENTENCES, "node": SENTENCES, "said": SENTENCES,
                                         **{str(i): 1 for i in range(SENTENCES)}})
    assert sorted(REPORTED) == [4] * SENTENCES
    # the copies of its resources went with the subprocesses
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith("squall-multilang-split-node-")]
    # its "log" command, in the worker's log: each task's subprocess got that task's context
    logged = [re.fullmatch(r"ShellLog ShellBolt \[split-node\] task (\d+) pid \d+: splitter split-node task (\d+) ready",
                           r.getMessage()) for r in caplog.records if "ShellLog" in r.getMessage()]
    assert len(logged) == 2 and all(m and m[1] == m[2] for m in logged)
