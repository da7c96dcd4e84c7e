"""Each example runs as a script: ``main`` runs it on a LocalCluster and prints its counts."""

from __future__ import annotations

import pytest

from squall import Config

from .conftest import load_example


@pytest.mark.parametrize("name, components", [
    ("word_count", ["count", "sentences", "split"]),
    ("exclamation", ["exclaim1", "exclaim2", "word"]),
    ("rolling_top_words", ["counter", "finalRanker", "intermediateRanker", "word"]),
])
def test_main_runs_the_topology_and_prints_per_component_counts(name, components, capsys):
    module = load_example(name)
    assert isinstance(module.conf, Config)
    module.main(run_secs=0.5)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"topology {name.replace('_', '-')} (ACTIVE")
    assert lines[1].split()[:3] == ["component", "type", "executors"]
    assert [line.split()[0] for line in lines[2:]] == components
    spout = next(line.split() for line in lines[2:] if line.split()[1] == "spout")
    assert int(spout[4]) > 0, "the spout emitted nothing in half a second"
    assert not any(line.startswith("error") for line in lines)
