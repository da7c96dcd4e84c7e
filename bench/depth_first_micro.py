"""Micro benchmark: W1's split and count run breadth first (a round's words queued, then counted,
as squall's loop runs them) against depth first (each word counted as it is split, as an engine
that called the next bolt from the emit would), with squall's `Tuple` and W1's own bolts
(`bench.w1_wordcount.SplitSentence` and `WordCount`).

It bounds what calling a same-loop bolt straight from the emit could give W1 on one worker before
anyone builds it (docs/profiles/w1-one-worker.md, 2026-12-03). Both ways here drain their queues
in Python, where squall's loop drains them in C, so the gap it prints is an upper bound.

    python -m bench.depth_first_micro [--n 300000] [--repeat 3]

Prints sentences/s for each way and, breadth first, for spout bursts of 1 to 256 sentences.
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace

from squall._fields import Fields
from squall._tuple import Source, Tuple

from .corpus import WORDS_PER_SENTENCE, ensure_corpus, iter_sentences
from .w1_wordcount import SplitSentence, WordCount

SENTENCES = Source("spout", "default", 1, Fields("sentence"))
WORDS = Source("split", "default", 2, Fields("word"))


_NOWHERE = SimpleNamespace(emit=lambda values: None)  # a collector for the count: nobody subscribes


def _bolts() -> tuple[SplitSentence, WordCount]:
    """W1's own split and count bolts, the count prepared as a task with no output directory."""
    count = WordCount()
    count.prepare({}, SimpleNamespace(get_this_task_id=lambda: 1))
    return SplitSentence(), count


def breadth_first(sentences: list[str], burst: int = 64) -> dict[str, int]:
    """A burst of sentences queued; the words split from the last burst counted, then this
    burst split: the order of a squall loop's round (count drained before split)."""
    split, count = _bolts()
    to_split: deque[Tuple] = deque()
    to_count: deque[Tuple] = deque()
    to_word = SimpleNamespace(emit=lambda values: to_count.append(Tuple(values, WORDS, 0, 0, 0)))

    it = iter(sentences)
    while True:
        n = 0
        for s in it:
            to_split.append(Tuple([s], SENTENCES, 0, 0, 0))
            n += 1
            if n == burst:
                break
        while to_count:
            count.execute(to_count.popleft(), _NOWHERE)
        if not n and not to_split:
            return count.counts
        while to_split:
            split.execute(to_split.popleft(), to_word)


def depth_first(sentences: list[str]) -> dict[str, int]:
    """Each word counted inside the split's emit."""
    split, count = _bolts()
    to_word = SimpleNamespace(emit=lambda values: count.execute(Tuple(values, WORDS, 0, 0, 0), _NOWHERE))

    for s in sentences:
        split.execute(Tuple([s], SENTENCES, 0, 0, 0), to_word)
    return count.counts


def _rate(run: Callable[[], dict[str, int]], n: int) -> float:
    start = time.perf_counter()
    counts = run()
    elapsed = time.perf_counter() - start
    if sum(counts.values()) != n * WORDS_PER_SENTENCE:
        raise RuntimeError(f"counted {sum(counts.values())} words of {n * WORDS_PER_SENTENCE}")
    return n / elapsed


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.depth_first_micro", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300_000, help="sentences (default 300,000)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    sentences = list(iter_sentences(ensure_corpus(args.n)))
    for _ in range(args.repeat):  # alternated, so that the machine's swings fall on both
        print(f"breadth first (burst 64) {_rate(lambda: breadth_first(sentences), args.n):10,.0f} sentences/s")
        print(f"depth first              {_rate(lambda: depth_first(sentences), args.n):10,.0f} sentences/s")
    for burst in (1, 4, 16, 64, 256):
        rate = _rate(lambda b=burst: breadth_first(sentences, b), args.n)
        print(f"breadth first, burst {burst:3d}  {rate:10,.0f} sentences/s")


if __name__ == "__main__":
    main()
