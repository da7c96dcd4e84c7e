"""sparse's ``kill`` and ``list`` in a streamparse project's directory, on squall: ``squall
sparse kill`` kills the project's topology (or ``-n NAME``) on the running master, ``squall
sparse list`` prints ``squall list``'s table."""

from __future__ import annotations

from pathlib import Path

from squall.cli import main
from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli_cluster import Nimbus


def test_sparse_kill_and_list_act_on_the_projects_topology(quickstart: Path, tmp_path: Path, capsys) -> None:
    nimbus = Nimbus(tmp_path)
    try:
        on = ["--config", str(nimbus.config), "--project", str(quickstart)]
        assert main(["sparse", "submit", *on]) == 0
        assert main(["sparse", "submit", *on, "-N", "other"]) == 0
        capsys.readouterr()

        assert main(["sparse", "list", "--config", str(nimbus.config)]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
        assert sorted(row[0] for row in rows) == ["other", "wordcount"]

        assert main(["sparse", "kill", *on, "--wait", "0"]) == 0  # the project's only topology
        assert capsys.readouterr().out == "Killed topology: wordcount\n"
        assert main(["sparse", "kill", *on, "-n", "other", "--wait", "0"]) == 0  # any name, as sparse
        assert capsys.readouterr().out == "Killed topology: other\n"
        with MasterClient(nimbus.conf) as master:
            assert wait_until(lambda: master.list_topologies() == [], 30, 0.1)

        assert main(["sparse", "list", "--config", str(nimbus.config)]) == 0
        assert capsys.readouterr().out.startswith("No topologies running.")
        assert main(["sparse", "kill", *on]) == 1
        assert capsys.readouterr().err.strip() == "squall: error: Topology 'wordcount' is not alive"
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()


def test_sparse_kill_in_a_project_of_several_topologies_needs_dash_n(tmp_path: Path, capsys) -> None:
    project = tmp_path / "two"
    (project / "topologies").mkdir(parents=True)
    (project / "config.json").write_text('{"topology_specs": "topologies/", "envs": {"prod": {}}}')
    for name in ("a", "b"):
        (project / "topologies" / f"{name}.py").write_text("")
    assert main(["sparse", "kill", "--project", str(project)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"squall: error: more than one topology definition in {project / 'topologies'} (a, b): "
                   f"choose one with -n NAME")
