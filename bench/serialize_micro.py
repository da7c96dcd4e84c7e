"""Micro benchmark of `squall.engine.serialize`: ns per item to encode and decode a batch.

Batches (1000 items each, as a worker would send them to another):
- ``words_acked``: W1's split output, ``[word]`` with one root and one edge value each;
- ``words_untracked``: the same with acking off;
- ``acker``: acker messages ``(kind, root, val, spout_task)``;
- ``replies``: spout replies ``(kind, root, delta_secs)``;
- ``mixed``: W1 acking on as split sends it: ten words, then an ack of the sentence.

Decode includes re-creating the Tuples. Prints one line per batch; best of ``--repeat`` runs.

    python -m bench.serialize_micro [--n 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import random
import timeit

from squall._fields import Fields
from squall._tuple import Source, Tuple
from squall.engine.acker import ACK, ACKED, INIT
from squall.engine.serialize import Serializer

WORDS = ("the", "cow", "jumped", "over", "moon", "an", "apple", "a", "day", "keeps", "doctor", "away")


def batches(n: int, rng: random.Random) -> dict[str, list]:
    src = Source("split", "default", 3, Fields("word"))
    r64 = lambda: rng.getrandbits(64)  # noqa: E731
    words = [WORDS[rng.randrange(len(WORDS))] for _ in range(n)]
    mixed = []
    for i, w in enumerate(words):
        mixed.append((7 + i % 2, Tuple([w], src, r64(), r64())))
        if i % 10 == 9:
            mixed.append((1, (ACK, r64(), r64(), -1)))
    return {
        "words_acked": [(7 + i % 2, Tuple([w], src, r64(), r64())) for i, w in enumerate(words)],
        "words_untracked": [(7 + i % 2, Tuple([w], src)) for i, w in enumerate(words)],
        "acker": [(1, (INIT if i % 2 else ACK, r64(), r64(), 5 if i % 2 else -1)) for i in range(n)],
        "replies": [(5, (ACKED, r64(), rng.random())) for _ in range(n)],
        "mixed": mixed,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="items per batch")
    ap.add_argument("--repeat", type=int, default=7, help="runs; the best is printed")
    args = ap.parse_args(argv)
    sources = {(3, "default"): Source("split", "default", 3, Fields("word"))}
    ser = Serializer({}, lambda task, stream: sources[(task, stream)])
    for name, pairs in batches(args.n, random.Random(1)).items():
        items = [x for pair in pairs for x in pair]  # flat, as the transport queues them
        data = ser.encode_batch(items)
        loops = max(1, 200_000 // len(pairs))
        enc = min(timeit.repeat(lambda: ser.encode_batch(items), number=loops, repeat=args.repeat))
        dec = min(timeit.repeat(lambda: ser.decode_batch(data), number=loops, repeat=args.repeat))
        k = loops * len(pairs)
        print(f"{name:16s} items {len(pairs):5d}  encode {enc / k * 1e9:6.1f} ns/item  "
              f"decode {dec / k * 1e9:6.1f} ns/item  {len(data) / len(pairs):5.1f} B/item")


if __name__ == "__main__":
    main()
