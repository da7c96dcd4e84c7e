"""`python -m bench peers`: every system of a round on the same corpus, checked against the same
reference counts, and the report's rows (issue 14, item 4). Tiny N: this checks the harness, not
speed (timings go in bench/)."""

from __future__ import annotations

import importlib.util

import pytest

from bench import peers
from bench.corpus import ensure_corpus, reference_counts

N = 2000


def _systems(*keys: str) -> tuple[peers.System, ...]:
    return tuple(s for s in peers.SYSTEMS if s.arg in keys or f"{s.kind}-{s.arg}" in keys)


def _needs(module: str, pip: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: {pip}")


def _check_round(results, skipped, systems) -> None:
    assert skipped == {}
    assert [r.system for r in results] == [s.name for s in systems]
    for r in results:
        assert r.correct, r
        assert r.sentences_per_s is not None and r.sentences_per_s > 0
        assert r.ratio is not None and r.ratio > 0
    assert results[0].system == "baseline loop" and results[0].ratio == 1.0
    table = peers.round_table(results).splitlines()
    assert table[0] == "| system | sentences/s | x loop | correct |"
    assert [row.split(" | ")[0].lstrip("| ") for row in table[2:]] == [s.name for s in systems]
    assert all(row.endswith("| yes |") for row in table[2:])
    medians = peers.median_table(results).splitlines()
    assert [row.split(" | ")[0].lstrip("| ") for row in medians[2:]] == [s.name for s in systems]
    assert all(row.endswith("| yes | 1 |") for row in medians[2:])


def test_loop_and_squall_acking_on_and_off_are_correct(tmp_path):
    systems = _systems("loop", "squall-on", "squall-off")
    assert len(systems) == 3
    results, skipped = peers.run(N, 1, systems, corpus_dir=tmp_path / "corpus", echo=None)
    _check_round(results, skipped, systems)


def test_bytewax_is_correct(tmp_path):
    _needs("bytewax", "pip install 'bytewax>=0.19'")
    systems = _systems("loop", "bytewax")
    results, skipped = peers.run(N, 1, systems, corpus_dir=tmp_path / "corpus", echo=None)
    _check_round(results, skipped, systems)


def test_spark_sql_and_udf_splits_are_correct(tmp_path):
    # in this process, one JVM for both (the harness path of a peer is the Bytewax test's): a
    # fresh interpreter per split would start the JVM twice for a 2,000-sentence corpus
    _needs("pyspark", "pip install 'pyspark>=3.5'")
    directory = ensure_corpus(N, tmp_path / "corpus")
    reference = reference_counts(directory)
    for key in ("spark-sql", "spark-udf"):
        wall, counts, version = peers.measure_peer(key, directory)
        assert counts == reference, key
        assert wall > 0 and version


def test_counts_that_differ_from_the_reference_mark_the_run_incorrect(tmp_path):
    directory = ensure_corpus(N, tmp_path / "corpus")
    reference = dict(reference_counts(directory))
    word = next(iter(reference))
    reference[word] += 1
    (loop,) = _systems("loop")
    rate, correct, _, note = peers.run_system(loop, N, directory, reference)
    assert rate is not None and rate > 0 and note is None
    assert correct is False
    table = peers.round_table([peers.Result(1, loop.name, rate, 1.0, correct)])
    assert table.splitlines()[2].endswith("| NO |")


def test_a_missing_library_leaves_the_system_out_with_its_pip_command():
    (bytewax,) = _systems("bytewax")
    why = peers.missing(bytewax, find_spec=lambda name: None)
    assert why == "bytewax is not installed: pip install 'bytewax>=0.19'"
    (loop,) = _systems("loop")
    assert peers.missing(loop, find_spec=lambda name: None) is None
    table = peers.median_table([], {bytewax.name: why})
    assert f"| {bytewax.name} | - | - | not run: {why} | 0 |" in table


def test_a_failing_peer_is_reported_incorrect_with_its_error(tmp_path):
    directory = ensure_corpus(N, tmp_path / "corpus")
    broken = peers.System("broken", "peer", "no-such-peer")
    rate, correct, _, note = peers.run_system(broken, N, directory, reference_counts(directory))
    assert rate is None and correct is False
    assert "no-such-peer" in note
