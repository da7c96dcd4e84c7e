"""bench/depth_first_micro.py: both orders count every word of the corpus, as the reference does
(a micro benchmark whose two ways counted differently would compare nothing)."""

from __future__ import annotations

from bench import depth_first_micro
from bench.corpus import ensure_corpus, iter_sentences, reference_counts


def test_breadth_and_depth_first_count_every_word_as_the_reference(tmp_path):
    corpus = ensure_corpus(3_000, tmp_path / "corpus")
    sentences = list(iter_sentences(corpus))
    expected = reference_counts(corpus)
    assert len(sentences) == 3_000
    assert depth_first_micro.depth_first(sentences) == expected
    for burst in (1, 64, 5_000):  # a burst larger than the corpus: one round splits it all
        assert depth_first_micro.breadth_first(sentences, burst) == expected


def test_the_micro_bench_prints_both_ways_and_each_burst(capsys):
    depth_first_micro.main(["--n", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "breadth first (burst 64)" in out and "depth first" in out
    assert all(f"burst {b:3d}" in out for b in (1, 4, 16, 64, 256))
