"""examples/trident_word_count.py (Storm's TridentWordCount): every DRPC answer it prints while
the topology runs is exactly the sum of the asked words' counts after a whole number of the
cycling spout's batches, and that number never goes back from one call to the next."""

from __future__ import annotations

import json
import re
from collections import Counter

from squall import StormTopology

from .conftest import load_example

LINE = re.compile(r"^DRPC words\('(?P<query>[^']*)'\) -> (?P<result>\S+)   \((?P<note>[^)]*)\)$")


def sums_by_batches(sentences: list[str], batch_size: int, query: str, batches: int) -> list[int]:
    """The answer to ``query`` after 0, 1, ..., ``batches`` batches, computed here from the
    sentences alone: batch k (from 1) is the k-th slice of ``batch_size`` sentences, cycling."""
    slices = [sentences[i:i + batch_size] for i in range(0, len(sentences), batch_size)]
    counts: Counter = Counter()
    out = [0]
    for k in range(batches):
        counts.update(w for s in slices[k % len(slices)] for w in s.split(" "))
        out.append(sum(counts[w] for w in query.split(" ")))
    return out


def test_build_topology_gives_the_trident_topology_with_its_drpc_stream():
    ex = load_example("trident_word_count")
    topology = ex.build_topology(None)
    assert isinstance(topology, StormTopology)
    assert {"$mastercoord-bg0", "drpc-return-words"} <= set(topology.bolts) | set(topology.spouts)


def test_every_printed_answer_is_the_counts_of_whole_batches_and_never_goes_back(capsys):
    ex = load_example("trident_word_count")
    queries = ["cat the dog jumped", "the"]
    ex.main(["--secs", "1.5", "--every", "0.1", "--query", queries[0], "--query", queries[1]])
    lines = capsys.readouterr().out.splitlines()
    answers = [LINE.match(line) for line in lines[:-1]]
    assert all(answers), lines
    assert [m["query"] for m in answers] == queries * (len(answers) // 2), lines
    expected = {q: sums_by_batches(ex.SENTENCES, 3, q, 10_000) for q in queries}
    seen = 0
    for m in answers:
        [[total]] = json.loads(m["result"])
        # the sums grow with every batch, so the answer names its number of batches exactly
        assert total in expected[m["query"]], m.group(0)
        k = expected[m["query"]].index(total)
        assert k >= seen, f"{m.group(0)}: {k} batches after a call that saw {seen}"
        assert m["note"] == f"the counts of {k} batch{'' if k == 1 else 'es'}", m.group(0)
        seen = k
    # the second call of a round is a later batch than the first, which committed one batch
    assert seen >= 1, lines
    sentences = sum(len(ex.SENTENCES[0:3]) if b % 2 == 0 else len(ex.SENTENCES[3:]) for b in range(seen))
    assert lines[-1] == (f"summary: {len(answers)} DRPC calls in 1.5 s; the last answer showed {seen} batch{'' if seen == 1 else 'es'} "
                         f"({sentences} sentences) counted; every answer was the counts of whole batches: yes")
