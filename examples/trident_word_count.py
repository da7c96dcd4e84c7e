"""Trident word count queried through DRPC (Storm's storm-starter ``TridentWordCount``).

    spout1 (FixedBatchSpout, cycling) -> each(Split) -> group_by(word)
        -> persistent_aggregate(MemoryMapState, Count) = the word counts
    DRPC "words" -> each(Split) -> group_by(word) -> state_query(word counts, MapGet)
        -> each(FilterNull) -> aggregate(Sum) = the sum of the counts of the words asked

The spout emits five sentences over and over, three per batch. Every batch updates the counts
exactly once, and a DRPC call (itself a batch of the same topology) reads each of the counts'
4 partitions between two of its commits. This example prints each answer with the number of
batches it shows, and checks that it is a whole number: on this LocalCluster it always was, but
the partitions commit a txid one after another, so on the process and Spark hosts an answer
whose words sit in different partitions may count a batch in one and not yet in another
(docs/trident.md, "Guarantees": keep a state in one partition for whole-batch answers).

Run it (about five seconds on a LocalCluster)::

    python examples/trident_word_count.py
    python examples/trident_word_count.py --secs 10 --query "the man" --query "to be"

It defines no ``build()`` for ``squall local``: a DRPC stream on a LocalCluster needs the
`LocalDRPC` its caller holds, so `main` makes both. ``build_topology(None)`` is the topology for
the process and Spark hosts, whose DRPC servers (``drpc.servers``) take the calls of
`squall.drpc.DRPCClient` (docs/drpc.md).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Sequence

from squall import Config, Fields, LocalCluster, StormTopology
from squall.trident import (BaseFunction, Count, FilterNull, FixedBatchSpout, LocalDRPC, MapGet, MemoryMapState,
                            Sum, TridentTopology)

SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]
BATCH_SIZE = 3  # sentences per batch, as Storm's example
FUNCTION = "words"  # the DRPC function the query stream serves
QUERIES = ["cat the dog jumped"]  # Storm's query: "cat" and "dog" are never counted


class Split(BaseFunction):
    """Emits each space-separated word of the sentence (Storm's ``Split``)."""

    def execute(self, tuple, collector) -> None:  # noqa: A002 (Storm's name)
        for word in tuple.get_string(0).split(" "):
            collector.emit([word])


def sentence_spout() -> FixedBatchSpout:
    """The sentences, `BATCH_SIZE` a batch, cycling forever."""
    spout = FixedBatchSpout(Fields("sentence"), BATCH_SIZE, *([s] for s in SENTENCES))
    spout.set_cycle(True)
    return spout


def build_topology(drpc: LocalDRPC | None) -> StormTopology:
    """The topology (Storm's ``buildTopology``). Its DRPC stream takes calls from ``drpc``, or,
    given None on the process or Spark host, from the cluster's ``drpc.servers``."""
    topology = TridentTopology()
    word_counts = topology.new_stream("spout1", sentence_spout()) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")) \
        .parallelism_hint(4)  # Storm's example says 16; 4 partitions suit a laptop's LocalCluster
    topology.new_drpc_stream(FUNCTION, drpc) \
        .each(Fields("args"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .state_query(word_counts, Fields("word"), MapGet(), Fields("count")) \
        .each(Fields("count"), FilterNull()) \
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    return topology.build()


conf = Config()


def batch_words(txid: int) -> list[str]:
    """The words of batch ``txid``, as the spout emits it (the same on every replay)."""
    return [w for (sentence,) in sentence_spout().batch(txid) for w in sentence.split(" ")]


def batches_shown(query: str, answer: int, at_least: int = 0) -> int | None:
    """The least number of committed batches (``at_least`` or more) whose counts of the words of
    ``query`` sum to ``answer``, or None if no whole number of batches gives it."""
    words = query.split(" ")
    if not set(words) & {w for s in SENTENCES for w in s.split(" ")}:
        return at_least if answer == 0 else None  # never counted: 0 whatever the batches
    counts = Counter(w for txid in range(1, at_least + 1) for w in batch_words(txid))
    k = at_least
    while (total := sum(counts[w] for w in words)) < answer:
        k += 1
        counts.update(batch_words(k))
    return k if total == answer else None


def batches(k: int) -> str:
    """``"1 batch"``, ``"2 batches"``."""
    return f"{k} batch" if k == 1 else f"{k} batches"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the topology on a LocalCluster, query it through a LocalDRPC while it runs, print each
    answer and a summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--secs", type=float, default=5.0, help="how long to run and query (default 5)")
    p.add_argument("--every", type=float, default=0.5, help="seconds between rounds of queries (default 0.5)")
    p.add_argument("--query", action="append", help=f"words to ask for (default {QUERIES[0]!r}); repeatable")
    args = p.parse_args(argv)
    queries = args.query or QUERIES
    shown = {q: 0 for q in queries}
    calls = 0
    whole = True
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        cluster.submit_topology("trident-word-count", conf, build_topology(drpc))
        start = time.monotonic()
        while time.monotonic() - start < args.secs:
            for q in queries:
                result = drpc.execute(FUNCTION, q)  # the JSON of the result tuples: "[[12]]"
                calls += 1
                [[total]] = json.loads(result)
                k = batches_shown(q, total, shown[q])
                whole = whole and k is not None
                shown[q] = k if k is not None else shown[q]
                where = f"the counts of {batches(k)}" if k is not None else "NOT the counts of whole batches"
                print(f"DRPC {FUNCTION}({q!r}) -> {result}   ({where})", flush=True)
            time.sleep(args.every)
        cluster.kill_topology("trident-word-count", wait_secs=0)
    last = max(shown.values())
    sentences = sum(len(sentence_spout().batch(txid)) for txid in range(1, last + 1))
    print(f"summary: {calls} DRPC calls in {args.secs:g} s; the last answer showed {batches(last)} "
          f"({sentences} sentences) counted; every answer was the counts of whole batches: "
          f"{'yes' if whole else 'no'}")


if __name__ == "__main__":
    main()
