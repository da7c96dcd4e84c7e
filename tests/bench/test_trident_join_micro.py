"""bench.trident_join_micro joins what plain Python joins (its timing is not checked here)."""

from __future__ import annotations

import random

from bench import trident_join_micro


def test_the_micro_benchmark_emits_every_matching_pair(capsys) -> None:
    trident_join_micro.main(["--tuples", "300", "--repeat", "2", "--seed", "7"])
    rnd = random.Random(7)
    right = [rnd.randrange(300) if rnd.random() < 0.5 else i for i in range(300)]
    pairs = sum(1 for key in right if 0 <= key < 300)  # every left key 0-299 appears once
    assert f", {pairs} rows a run" in capsys.readouterr().out
