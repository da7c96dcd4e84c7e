"""The W1 word-count corpus, generated exactly as BENCHMARKS.md specifies, and its baseline.

Other stream processors are measured on the same bytes, so the generator must reproduce the
published check values bit for bit; `python -m bench.corpus --n 1000000` verifies them.

Usage:
    python -m bench.corpus --n 1000000              # generate (once) and check
    python -m bench.corpus --n 1000000 --baseline   # also time the hand-written loop
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

VOCAB_SIZE = 10_000
WORDS_PER_SENTENCE = 10
LINES_PER_FILE = 10_000
CHUNK_WORDS = 100_000
SEED = 42
REFERENCE_NAME = "reference.json"

# Published in BENCHMARKS.md for N = 1,000,000; other sizes have no external check values.
EXPECTED = {
    1_000_000: {
        "sha256_files": "8ccb3fcb475810f88493ba5cd847733016853e4e4d25fad2d4b7967d74831884",
        "w0": 1_023_480,
        "sha256_counts": "e11b28e7dfa8c5aa52a39f422d1cbf2d0b6740997938b3009bed2db5a5f0fd71",
    },
}

_DATA_ROOT = Path(__file__).resolve().parent / ".data"


def _vocabulary() -> tuple[list[str], list[float]]:
    """Returns the vocabulary and its cumulative weights.

    Returns:
        The words w0..w9999 and the running sums of their weights 1/(i+1).
    """
    vocab = [f"w{i}" for i in range(VOCAB_SIZE)]
    # The plain left-to-right float sum of itertools.accumulate is the variant that reproduces
    # the published hashes (checked for N = 1,000,000 on the first try); any other summation
    # order shifts the last bits of the boundaries and therefore some drawn words.
    cum_weights = list(itertools.accumulate([1 / (i + 1) for i in range(VOCAB_SIZE)]))
    return vocab, cum_weights


def generate_sentences(n_sentences: int) -> Iterator[str]:
    """Yields the W1 sentences in order, without newlines.

    Args:
        n_sentences: How many sentences to produce.

    Yields:
        Sentence k: words 10k..10k+9 of the stream joined by single spaces.
    """
    vocab, cum_weights = _vocabulary()
    rng = random.Random(SEED)
    remaining = n_sentences * WORDS_PER_SENTENCE
    while remaining:
        # choices() draws one random() per word, so chunking does not change the stream; chunks
        # just bound memory. A chunk is a whole number of sentences (100,000 / 10).
        k = min(CHUNK_WORDS, remaining)
        words = rng.choices(vocab, cum_weights=cum_weights, k=k)
        remaining -= k
        for i in range(0, k, WORDS_PER_SENTENCE):
            yield " ".join(words[i : i + WORDS_PER_SENTENCE])


def _counts_digest(counts: dict[str, int]) -> str:
    """Returns the sha256 of the lines "<word> <count>\\n" sorted by word (plain string sort)."""
    text = "".join(f"{word} {counts[word]}\n" for word in sorted(counts))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _write_corpus(n_sentences: int, directory: Path) -> dict:
    """Writes the corpus files and reference.json into an existing, empty directory.

    Args:
        n_sentences: Number of sentences.
        directory: Where to write.

    Returns:
        The reference record that was stored.
    """
    file_hash = hashlib.sha256()
    counts: Counter[str] = Counter()
    sentences = generate_sentences(n_sentences)
    for index in itertools.count():
        batch = list(itertools.islice(sentences, LINES_PER_FILE))
        if not batch:
            break
        data = ("\n".join(batch) + "\n").encode("ascii")
        # Binary mode so no platform newline translation can change the bytes peers read.
        (directory / f"part-{index:05d}.txt").write_bytes(data)
        file_hash.update(data)
        for sentence in batch:
            counts.update(sentence.split(" "))
    ordered = {word: counts[word] for word in sorted(counts)}
    reference = {
        "n": n_sentences,
        "counts": ordered,
        "sha256_files": file_hash.hexdigest(),
        "sha256_counts": _counts_digest(ordered),
    }
    # Written last: a directory with reference.json is a finished corpus.
    (directory / REFERENCE_NAME).write_text(json.dumps(reference), encoding="ascii")
    return reference


def _read_reference(directory: Path) -> dict:
    with open(directory / REFERENCE_NAME, encoding="ascii") as f:
        return json.load(f)


def ensure_corpus(n_sentences: int, directory: str | Path | None = None) -> Path:
    """Returns a directory holding the W1 corpus of n_sentences, generating it only once.

    Args:
        n_sentences: Number of sentences (N); must be positive.
        directory: Where the corpus lives; defaults to bench/.data/w1-<N>/ next to this module.

    Returns:
        The corpus directory (part-*.txt files plus reference.json).

    Raises:
        ValueError: If n_sentences is not positive, or the directory holds a corpus of another N.
    """
    if n_sentences <= 0:
        raise ValueError(f"n_sentences must be positive, got {n_sentences}")
    target = Path(directory) if directory is not None else _DATA_ROOT / f"w1-{n_sentences}"
    if (target / REFERENCE_NAME).exists():
        stored = _read_reference(target)["n"]
        if stored != n_sentences:
            raise ValueError(f"{target} holds a corpus of N={stored}, not N={n_sentences}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename into place, so a crashed or interrupted run never
    # leaves a half corpus under the real name (same parent keeps the rename atomic).
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        _write_corpus(n_sentences, tmp)
        if target.exists() and not any(target.iterdir()):
            target.rmdir()  # An empty directory (e.g. a fresh tmp_path child) may be replaced.
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process finished first; its corpus is byte-identical, so use it.
            if not (target / REFERENCE_NAME).exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return ensure_corpus(n_sentences, target)


def corpus_files(directory: str | Path) -> list[Path]:
    """Returns the corpus files of a directory in order.

    Args:
        directory: A corpus directory from ensure_corpus.

    Returns:
        The part-*.txt paths, sorted (zero-padded names sort in sentence order).
    """
    return sorted(Path(directory).glob("part-*.txt"))


def iter_sentences(directory: str | Path, share: int = 0, shares: int = 1) -> Iterator[str]:
    """Yields the sentences of a corpus lazily, one file open at a time.

    Args:
        directory: A corpus directory from ensure_corpus.
        share, shares: read only the files whose index is ``share`` modulo ``shares`` (a spout
            task's disjoint part of the corpus, as a partitioned source gives each task its own).

    Yields:
        Each line without its trailing newline.
    """
    for path in corpus_files(directory)[share::shares]:
        yield from _file_sentences(path)


def _file_sentences(path: Path) -> Iterator[str]:
    """The lines of one corpus file, read lazily, without their newlines."""
    with open(path, encoding="ascii", newline="\n") as f:
        for line in f:
            yield line[:-1]  # Every line, the last included, ends with exactly one "\n".


def claim_sentences(directory: str | Path, claims: str | Path) -> Iterator[str]:
    """Yields the sentences of the corpus files this reader claims, one file at a time, as
    storm-hdfs's ``HdfsSpout`` reads a directory: before reading a file, a reader claims it by
    creating its lock file in ``claims`` (``O_CREAT | O_EXCL``: exactly one reader of all the
    processes sharing ``claims`` succeeds), and it skips the files another reader claimed. So the
    readers' files are disjoint, as with `iter_sentences`' fixed shares, but a reader that keeps
    up reads more of them: no worker idles at the end while another still has its share to read.

    Args:
        directory: A corpus directory from ensure_corpus.
        claims: A directory for the lock files, new for each run (made if missing), shared by
            every reader of that run.

    Yields:
        Each line of each claimed file without its trailing newline.
    """
    claims = Path(claims)
    claims.mkdir(parents=True, exist_ok=True)
    for path in corpus_files(directory):
        try:
            os.close(os.open(claims / path.name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue  # another reader has it
        yield from _file_sentences(path)


def reference_counts(directory: str | Path) -> dict[str, int]:
    """Returns the word counts recorded when the corpus was generated.

    Args:
        directory: A corpus directory from ensure_corpus.

    Returns:
        Word -> number of occurrences (words that never occur are absent).
    """
    return _read_reference(Path(directory))["counts"]


def baseline_wordcount(directory: str | Path) -> dict[str, int]:
    """Counts words with the hand-written baseline loop.

    The ratio squall / baseline is what benchmarks report, so this is the fastest honest plain
    loop: the same files, one sentence at a time, split on " ", dict increment; no Counter or
    other C-level bulk counting that an engine processing tuples one by one could not use.

    Args:
        directory: A corpus directory from ensure_corpus.

    Returns:
        Word -> number of occurrences.
    """
    counts: dict[str, int] = {}
    get = counts.get  # Bound once: the attribute lookup would otherwise run per word.
    for path in corpus_files(directory):
        with open(path, encoding="ascii", newline="\n") as f:
            for line in f:
                for word in line[:-1].split(" "):
                    counts[word] = get(word, 0) + 1
    return counts


def check_values(directory: str | Path) -> dict:
    """Recomputes the three check values from the files on disk.

    Args:
        directory: A corpus directory from ensure_corpus.

    Returns:
        {"sha256_files", "w0", "sha256_counts"} computed from the bytes, not from reference.json.
    """
    file_hash = hashlib.sha256()
    counts: Counter[str] = Counter()
    for path in corpus_files(directory):
        data = path.read_bytes()
        file_hash.update(data)
        counts.update(data.decode("ascii").split())
    return {
        "sha256_files": file_hash.hexdigest(),
        "w0": counts["w0"],
        "sha256_counts": _counts_digest(counts),
    }


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the corpus, print its check values and optionally time the baseline.

    Args:
        argv: Arguments (defaults to sys.argv[1:]).

    Returns:
        0 if the check values (and baseline counts) match, 1 otherwise.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="number of sentences (N)")
    parser.add_argument("--dir", default=None, help="corpus directory (default bench/.data/w1-N)")
    parser.add_argument("--baseline", action="store_true", help="also time the baseline loop")
    parser.add_argument("--repeat", type=int, default=3, help="baseline runs; the median is shown")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    directory = ensure_corpus(args.n, args.dir)
    print(f"corpus: {directory} ({len(corpus_files(directory))} files, "
          f"{time.perf_counter() - start:.1f} s to ensure)")

    ok = True
    values = check_values(directory)
    stored = _read_reference(directory)
    expected = EXPECTED.get(args.n)
    for key, value in values.items():
        if expected is not None:
            match = value == expected[key]
            verdict = "MATCH" if match else f"MISMATCH (expected {expected[key]})"
        else:
            # No published value: at least prove the files still agree with reference.json.
            match = value == (stored["counts"].get("w0", 0) if key == "w0" else stored[key])
            verdict = "matches reference.json" if match else "DIFFERS from reference.json"
        ok &= match
        print(f"{key:14} {value}  {verdict}")

    if args.baseline:
        reference = stored["counts"]
        times = []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            counts = baseline_wordcount(directory)
            times.append(time.perf_counter() - t0)
            correct = counts == reference
            ok &= correct
        wall = sorted(times)[len(times) // 2]
        print(f"baseline: median of {len(times)} runs {wall:.3f} s, "
              f"{args.n / wall:,.0f} sentences/s, {args.n * WORDS_PER_SENTENCE / wall:,.0f} words/s, "
              f"correct={correct}  (runs: {', '.join(f'{t:.3f}' for t in times)})")

    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
