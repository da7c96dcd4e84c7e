"""Word count over a stream of tweets, the running example of the Storm paper.

    sentences (SentenceSpout) --shuffle--> split (SplitSentence) --fields("word")--> count (WordCount)

The spout cycles forever over a built-in list of tweet-like sentences. It is a reliable spout:
each sentence is emitted with a message id, kept until acked, and emitted again if it fails or
times out. ``split`` turns a sentence into lowercase words; ``count`` keeps a running count per
word and, on every tick tuple, emits ``[word, count]`` for the words whose count changed since
the previous tick.

Run it for ten seconds on a local cluster::

    python examples/word_count.py

or through the command line (``squall local examples/word_count.py``), which uses `build` and
`conf`.
"""

from __future__ import annotations

import re
import sys
import time
from collections import deque
from typing import Any, TextIO

from squall import (BasicBolt, Bolt, Config, Fields, LocalCluster, Spout, StormTopology,
                    TopologyBuilder, is_tick_tuple)

SENTENCES = [
    "Just setting up my stream processing cluster #storm",
    "The cow jumped over the moon",
    "An apple a day keeps the doctor away",
    "Four score and seven years ago",
    "Snow white and the seven dwarfs",
    "I am at two with nature",
    "Real-time word counts are the hello world of stream processing",
    "@nathanmarz the topology is running on my laptop!",
    "Tuples in, tuples out: every tuple acked #reliability",
    "Coffee first, then streams, then more coffee",
]
"""The tweets `SentenceSpout` cycles over by default."""

EMIT_FREQUENCY_SECS = 2
"""Default seconds between two emissions of changed counts by `WordCount`."""

_WORD_RE = re.compile(r"[#@]?[\w']+")


class SentenceSpout(Spout):
    """Emits sentences from a list, cycling forever, each with a message id.

    Storm only replays what the spout itself replays: a sentence stays in ``pending`` until its
    tuple tree is acked, and a failed (or timed-out) sentence is queued to be emitted again,
    with the same message id, before any new one. Each task starts at a different offset in
    the list, so parallel tasks do not emit in lockstep.

    Args:
        sentences: the sentences to cycle over (default: `SENTENCES`).
    """

    def __init__(self, sentences: list[str] | None = None) -> None:
        self.sentences = list(SENTENCES if sentences is None else sentences)
        if not self.sentences:
            raise ValueError("SentenceSpout needs at least one sentence")

    def declare_output_fields(self, declarer) -> None:
        """One field, ``sentence``."""
        declarer.declare(Fields("sentence"))

    def open(self, conf, context, collector) -> None:
        """Start at this task's offset with nothing pending."""
        super().open(conf, context, collector)
        self.pending: dict[int, str] = {}
        self.to_replay: deque[int] = deque()
        self._next_seq = 0
        self._index = context.get_this_task_index()

    def next_tuple(self) -> None:
        """Emit one sentence: a failed one if any is waiting, else the next in the cycle."""
        while self.to_replay:
            msg_id = self.to_replay.popleft()
            sentence = self.pending.get(msg_id)
            if sentence is not None:  # acked after it failed (a late ack): nothing to replay
                self.collector.emit([sentence], msg_id)
                return
        sentence = self.sentences[self._index % len(self.sentences)]
        self._index += 1
        msg_id = self._next_seq
        self._next_seq += 1
        self.pending[msg_id] = sentence
        self.collector.emit([sentence], msg_id)

    def ack(self, msg_id: Any) -> None:
        """The sentence was fully processed: forget it."""
        self.pending.pop(msg_id, None)

    def fail(self, msg_id: Any) -> None:
        """The sentence failed or timed out: emit it again."""
        if msg_id in self.pending:
            self.to_replay.append(msg_id)


def split_words(sentence: str) -> list[str]:
    """The lowercase words of ``sentence``; hashtags and mentions keep their ``#``/``@``.

    >>> split_words("The cow jumped, over #Storm!")
    ['the', 'cow', 'jumped', 'over', '#storm']
    """
    return _WORD_RE.findall(sentence.lower())


class SplitSentence(BasicBolt):
    """Splits each sentence into lowercase words, one tuple per word, anchored to the sentence."""

    def declare_output_fields(self, declarer) -> None:
        """One field, ``word``."""
        declarer.declare(Fields("word"))

    def execute(self, tup, collector) -> None:
        """Emit every word of the sentence; `BasicBolt` anchors the emits and acks the input."""
        for word in split_words(tup.get_value_by_field("sentence")):
            collector.emit([word])


class WordCount(Bolt):
    """Counts words and, on each tick, emits ``[word, count]`` for the words that changed.

    Fields grouping on ``word`` sends every occurrence of a word to the same task, so each task
    owns the full count of its words. Counts are emitted in batches on ticks rather than per
    input, as a real dashboard would be fed; those emits are unanchored, since a running
    total is not the product of any one input tuple. Every input, ticks included, is acked.

    Args:
        emit_frequency_secs: seconds between ticks (``topology.tick.tuple.freq.secs`` of this
            component).
    """

    def __init__(self, emit_frequency_secs: float = EMIT_FREQUENCY_SECS) -> None:
        self.emit_frequency_secs = emit_frequency_secs

    def get_component_configuration(self) -> dict[str, Any]:
        """Ask for a tick tuple every ``emit_frequency_secs``."""
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.emit_frequency_secs}

    def declare_output_fields(self, declarer) -> None:
        """Fields ``word`` and ``count``."""
        declarer.declare(Fields("word", "count"))

    def prepare(self, conf, context, collector) -> None:
        """Start with no counts."""
        super().prepare(conf, context, collector)
        self.counts: dict[str, int] = {}
        self.changed: set[str] = set()

    def execute(self, tup) -> None:
        """Count a word, or on a tick emit the counts changed since the last tick."""
        if is_tick_tuple(tup):
            for word in sorted(self.changed):
                self.collector.emit([word, self.counts[word]])
            self.changed.clear()
        else:
            word = tup.get_value_by_field("word")
            self.counts[word] = self.counts.get(word, 0) + 1
            self.changed.add(word)
        self.collector.ack(tup)


def make_builder(spout: Spout | None = None, *,
                 emit_frequency_secs: float = EMIT_FREQUENCY_SECS) -> TopologyBuilder:
    """The word count topology's builder, so a test can add components before creating it.

    Args:
        spout: the ``sentences`` spout (default: a `SentenceSpout` over `SENTENCES`); it must
            declare a ``sentence`` field.
        emit_frequency_secs: tick frequency of ``count``.
    """
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout if spout is not None else SentenceSpout(), 1)
    builder.set_bolt("split", SplitSentence(), 4).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(emit_frequency_secs), 4).fields_grouping("split", Fields("word"))
    return builder


def build(spout: Spout | None = None, *, emit_frequency_secs: float = EMIT_FREQUENCY_SECS) -> StormTopology:
    """The word count topology (see `make_builder` for the arguments)."""
    return make_builder(spout, emit_frequency_secs=emit_frequency_secs).create_topology()


conf = Config()
"""The topology's configuration: 2 workers, and a bound on sentences in flight per spout task
(without it, a spout that never runs dry would flood the bolts)."""
conf.set_num_workers(2)
conf.set_max_spout_pending(500)
conf.set_message_timeout_secs(30)


def print_counts(info: dict[str, Any], out: TextIO | None = None) -> None:
    """Print the per-component counts of a `LocalCluster.get_topology_info` dict to ``out``
    (default: the current ``sys.stdout``)."""
    out = out if out is not None else sys.stdout
    cols = ("type", "executors", "tasks", "emitted", "transferred", "acked", "failed", "executed")
    print(f"topology {info['name']} ({info['status']}, up {info['uptime_secs']:.1f}s)", file=out)
    print(f"{'component':<20}" + "".join(f"{c:>12}" for c in cols), file=out)
    for cid, comp in sorted(info["components"].items()):
        print(f"{cid:<20}" + "".join(f"{comp[c]!s:>12}" for c in cols), file=out)
    for err in info.get("errors", []):
        print(f"error in {err['component']}: {err['error']}", file=out)


def main(run_secs: float = 10.0) -> None:
    """Run the topology on a `LocalCluster` for ``run_secs`` seconds and print its counts."""
    with LocalCluster() as cluster:
        cluster.submit_topology("word-count", conf, build())
        time.sleep(run_secs)
        print_counts(cluster.get_topology_info("word-count"))
        cluster.kill_topology("word-count", wait_secs=0)


if __name__ == "__main__":
    main()
