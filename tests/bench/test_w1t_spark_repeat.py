"""bench.w1t_spark's repeated runs: the ways' order alternates, and each way's figure is its
median run (no Spark here: the choice of runs only)."""

from __future__ import annotations

import pytest

from bench.w1t_spark import WAYS, median_run, run, way_order


def test_the_ways_run_in_turn_and_reversed_every_other_repeat_so_none_is_always_first():
    orders = [way_order(r) for r in range(4)]
    assert orders == [WAYS, WAYS[::-1], WAYS, WAYS[::-1]]
    assert {o[0] for o in orders} == {WAYS[0], WAYS[-1]}
    assert all(sorted(o) == sorted(WAYS) for o in orders)


def test_a_ways_figure_is_its_median_run_with_every_run_beside_it():
    runs = [{"wall_s": w, "cpu_s": c, "sentences_per_s": 100 / w, "correct": True}
            for w, c in ((12.0, 30.0), (10.0, 31.0), (20.0, 40.0))]
    chosen = median_run(runs)
    assert chosen["wall_s"] == 12.0 and chosen["sentences_per_s"] == 100 / 12.0
    assert chosen["runs_wall_s"] == [12.0, 10.0, 20.0] and chosen["runs_cpu_s"] == [30.0, 31.0, 40.0]
    # of an even number, the slower of the middle two: the figure never flatters
    assert median_run(runs[:2])["wall_s"] == 12.0
    assert median_run(runs[:1]) == runs[0]  # one run: as it was, nothing added


def test_one_wrong_run_makes_the_ways_figure_wrong():
    runs = [{"wall_s": 1.0 + i, "cpu_s": 1.0, "correct": i != 2} for i in range(3)]
    assert median_run(runs)["correct"] is False


def test_repeats_are_refused_where_the_ways_share_one_jvm():
    with pytest.raises(ValueError, match="repeat 2.*shared"):
        run(jvm="shared", repeat=2)
    with pytest.raises(ValueError, match="repeat 0"):
        run(repeat=0)
