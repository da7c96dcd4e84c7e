"""CPU per tuple of a Trident join's reducer, the per-tuple path of ``TridentTopology.join``
(docs/trident.md): two streams of ``--tuples`` tuples each, one join field and one other field
a side, run through the executor ``join`` builds (`squall.trident.processors.JoinExecutor` over
Storm's ``JoinerMultiReducer``) within one batch, emits counted and dropped. The left side's keys
are all distinct; half the right side's match a left key of their own index, half a random one,
so about 0.75 new groups a tuple: the per-group costs show as well as the per-tuple ones.
Prints the best of ``--repeat`` runs in ns a tuple and the rows emitted a run.

For a figure the machine's speed does not move, count instructions:
``valgrind --tool=cachegrind --cache-sim=no python -m bench.trident_join_micro --repeat N`` for
two N, the difference over the runs between (see docs/profiles/sessions.md, twenty-sixth session).

    python -m bench.trident_join_micro [--tuples 20000] [--repeat 15] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import time

from squall import Fields
from squall.trident.operation import TridentMultiReducerContext
from squall.trident.processors import JoinerMultiReducer, JoinExecutor, _View


class _Counting:
    """A collector that counts the rows it is given."""

    def __init__(self) -> None:
        self.rows = 0

    def emit(self, values: list) -> None:
        self.rows += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trident_join_micro", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=20_000, help="tuples a side (default 20,000)")
    parser.add_argument("--repeat", type=int, default=15, help="runs; the best is printed (default 15)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n, rnd = args.tuples, random.Random(args.seed)
    left_fields, right_fields = Fields("id", "a"), Fields("id2", "b")
    left = [_View(left_fields, [i, f"a{i}"]) for i in range(n)]
    right = [_View(right_fields, [rnd.randrange(n) if rnd.random() < 0.5 else i, f"b{i}"]) for i in range(n)]
    executor = JoinExecutor(JoinerMultiReducer([False, False], 1, [1, 1]), [Fields("id"), Fields("id2")],
                            [Fields("a"), Fields("b")], "join")
    executor.prepare({}, TridentMultiReducerContext([left_fields, right_fields], None))
    collector = _Counting()
    best = float("inf")
    for _ in range(args.repeat):
        collector.rows = 0
        start = time.perf_counter()
        state = executor.init(collector)
        for t in left:
            executor.execute(state, 0, t, collector)
        for t in right:
            executor.execute(state, 1, t, collector)
        executor.complete(state, collector)
        best = min(best, time.perf_counter() - start)
    if not args.repeat:
        print("join: no runs (the set-up alone, a baseline for instruction counts)")
        return
    print(f"join: {best / (2 * n) * 1e9:.0f} ns a tuple (best of {args.repeat}), {collector.rows} rows a run")


if __name__ == "__main__":
    main()
