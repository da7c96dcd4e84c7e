"""The project ``sparse quickstart`` makes, unchanged, on squall: ``squall sparse run`` runs its
word count; its WordCountBolt, run in process, counts every word it is given."""

from __future__ import annotations

import collections
from pathlib import Path

from squall import LocalCluster
from squall.cli import main
from squall.multilang import ShellBolt, ShellSpout
from squall.sparse import SparseBolt, SparseSpout, load
from squall.testing import complete_topology, read_tuples
from tests.conftest import wait_until


def test_squall_sparse_run_runs_the_quickstart_word_count(quickstart: Path, capsys) -> None:
    status = main(["sparse", "run", "-t", "2", "--project", str(quickstart)])

    out = capsys.readouterr().out
    assert status == 0, out
    summary = out[out.index("Summary of topology wordcount"):]
    rows = {line.split()[0]: line.split() for line in summary.splitlines()[2:4]}
    assert rows["word_spout"][1] == "spout" and int(rows["word_spout"][4]) > 0  # emitted
    assert rows["count_bolt"][1] == "bolt" and rows["count_bolt"][2] == "2"  # par=2 in its topology file
    assert int(rows["count_bolt"][7]) > 0  # executed
    assert "errors: none" in summary


def test_the_quickstart_topology_counts_every_word(quickstart: Path) -> None:
    loaded = load(quickstart)
    assert loaded.name == "wordcount"
    assert isinstance(loaded.topology.components["word_spout"].obj, SparseSpout)
    assert isinstance(loaded.topology.components["count_bolt"].obj, SparseBolt)
    words = [w for i in range(300) for w in ("dog", "cat", "zebra", "elephant")[: i % 4 + 1]]  # 750 words

    with LocalCluster() as cluster:
        result = complete_topology(cluster, loaded.topology, {"word_spout": [[w] for w in words]},
                                   storm_conf=loaded.conf)

    counts = collections.Counter(words)
    emitted = read_tuples(result, "count_bolt")
    assert len(emitted) == len(words)  # one [word, count] per word, each input acked (complete_topology)
    last = {word: count for word, count in emitted}  # fields grouping: a word's counts come from one task
    assert last == {w: n * (10 if w == "dog" else 1) for w, n in counts.items()}  # the bolt counts a dog as 10



def test_over_multilang_its_components_run_as_streamparse_run_processes(quickstart: Path) -> None:
    loaded = load(quickstart, multilang=True)
    components = loaded.topology.components
    assert isinstance(components["word_spout"].obj, ShellSpout) and isinstance(components["count_bolt"].obj, ShellBolt)

    with LocalCluster() as cluster:
        cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)

        def counted() -> bool:
            bolt = cluster.get_topology_info(loaded.name)["components"]["count_bolt"]
            return bolt["executed"] >= 100 and bolt["emitted"] >= 100

        assert wait_until(counted, 60)
        assert cluster.get_topology_info(loaded.name)["errors"] == []


def test_squall_local_given_the_projects_topology_file_runs_it(quickstart: Path, capsys) -> None:
    status = main(["local", str(quickstart / "topologies" / "wordcount.py"), "--ttl", "2"])

    out = capsys.readouterr().out
    assert status == 0, out
    summary = out[out.index("Summary of topology wordcount"):]
    rows = {line.split()[0]: line.split() for line in summary.splitlines()[2:4]}
    assert int(rows["word_spout"][4]) > 0 and int(rows["count_bolt"][7]) > 0  # emitted, executed
    assert "errors: none" in summary
