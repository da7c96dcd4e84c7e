"""Tiny-size checks of the W1 corpus generator and its baseline (the full size is a benchmark)."""

import sys
from pathlib import Path

# bench/ is not an installed package (only squall* is), and rootdir-based discovery puts this
# file's directory, not the repository root, on sys.path; without this a bare `pytest` fails.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.corpus import (  # noqa: E402
    baseline_wordcount,
    claim_sentences,
    corpus_files,
    ensure_corpus,
    iter_sentences,
    reference_counts,
)


def _all_bytes(directory):
    return b"".join(path.read_bytes() for path in corpus_files(directory))


def test_generation_is_deterministic(tmp_path):
    first = ensure_corpus(2000, tmp_path / "a")
    second = ensure_corpus(2000, tmp_path / "b")
    assert [p.name for p in corpus_files(first)] == ["part-00000.txt"]
    assert _all_bytes(first) == _all_bytes(second)
    assert reference_counts(first) == reference_counts(second)


def test_second_call_reuses_the_corpus(tmp_path):
    directory = ensure_corpus(2000, tmp_path / "c")
    before = {p: p.stat().st_mtime_ns for p in corpus_files(directory)}
    assert ensure_corpus(2000, directory) == directory
    assert {p: p.stat().st_mtime_ns for p in corpus_files(directory)} == before
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # no temp directory left behind


def test_sentences_have_ten_words(tmp_path):
    directory = ensure_corpus(2000, tmp_path / "c")
    sentences = list(iter_sentences(directory))
    assert len(sentences) == 2000
    assert all(len(s.split(" ")) == 10 for s in sentences)
    assert all(w.startswith("w") and 0 <= int(w[1:]) < 10_000 for s in sentences for w in s.split(" "))
    assert _all_bytes(directory).endswith(b"\n")


def test_files_hold_ten_thousand_lines(tmp_path):
    directory = ensure_corpus(25_000, tmp_path / "c")
    files = corpus_files(directory)
    assert [p.name for p in files] == ["part-00000.txt", "part-00001.txt", "part-00002.txt"]
    assert [p.read_bytes().count(b"\n") for p in files] == [10_000, 10_000, 5_000]
    # The split into files must not change the stream: a prefix of a longer corpus is the same.
    small = ensure_corpus(2000, tmp_path / "small")
    assert _all_bytes(directory).startswith(_all_bytes(small))


def test_readers_that_claim_files_read_every_sentence_once_between_them(tmp_path):
    """Two readers sharing a claims directory, advanced unevenly as two spouts of unequal speed
    would be, read disjoint whole files, every sentence once, and the faster one more files."""
    directory = ensure_corpus(45_000, tmp_path / "c")  # 5 files
    fast, slow = claim_sentences(directory, tmp_path / "claims"), claim_sentences(directory, tmp_path / "claims")
    got_fast, got_slow = [], []
    for fast_sentence in fast:
        got_fast.append(fast_sentence)
        if len(got_fast) % 3 == 0:  # the slow one reads a sentence for the fast one's three
            got_slow.extend(s for s in [next(slow, None)] if s is not None)
    got_slow.extend(slow)
    assert sorted(got_fast + got_slow) == sorted(iter_sentences(directory))
    by_file = [list(iter_sentences(directory, i, 5)) for i in range(5)]
    assert sorted(map(len, by_file)) == [5_000, 10_000, 10_000, 10_000, 10_000]
    for sentences in by_file:  # each file whole in one reader
        assert set(sentences) <= set(got_fast) or set(sentences) <= set(got_slow)
    assert len(got_fast) > len(got_slow)
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == [p.name for p in corpus_files(directory)]


def test_baseline_matches_reference(tmp_path):
    directory = ensure_corpus(25_000, tmp_path / "c")
    counts = reference_counts(directory)
    assert sum(counts.values()) == 250_000
    assert baseline_wordcount(directory) == counts
