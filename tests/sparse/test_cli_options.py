"""``squall sparse run|submit``'s own options read as sparse reads them: ``-o KEY=VALUE``, and
what a mistake in one says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from squall.cli import main


@pytest.fixture
def project(quickstart: Path, tmp_path: Path) -> Path:
    """A copy of the quickstart project."""
    return Path(shutil.copytree(quickstart, tmp_path / "wordcount"))


@pytest.mark.parametrize("verb", ["run", "submit"])
def test_a_dash_o_without_equals_names_dash_o(project: Path, capsys, verb: str) -> None:
    # before the fix: "-c 'topology.debug': expected KEY=VALUE, e.g. -c ..." for an option not given
    assert main(["sparse", verb, "--project", str(project), "-o", "topology.debug"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("squall: error: -o 'topology.debug': expected KEY=VALUE, e.g. -o topology.workers=2"), err


def _options_given_to_load(monkeypatch, *argv: str) -> dict:
    """The options ``squall sparse ARGV`` hands `squall.sparse.load`."""
    import squall.cli._sparse as sparse_cli
    seen: dict = {}

    def load(directory, name, *, env_name=None, options=None, multilang=False):
        seen.update(options or {})
        raise SystemExit(0)

    monkeypatch.setattr(sparse_cli, "load", load)
    with pytest.raises(SystemExit):
        main(["sparse", *argv])
    return seen


@pytest.mark.parametrize("verb", ["run", "submit"])
def test_dash_o_values_are_read_as_yaml_as_sparse_reads_them(project: Path, monkeypatch, verb: str) -> None:
    # ruamel's safe YAML 1.2, as streamparse's _StoreDictAction reads them; before the fix they
    # were read as JSON, else kept as text: 'False' (truthy), '[db1, db2]', '{rows: 5}'
    seen = _options_given_to_load(
        monkeypatch, verb, "--project", str(project), "-o", "myapp.dry_run=False", "-o", "myapp.hosts=[db1, db2]",
        "-o", "myapp.limits={rows: 5}", "-o", "myapp.flag=yes", "-o", "myapp.n=12", "-o", "myapp.none=")
    assert seen == {"myapp.dry_run": False, "myapp.hosts": ["db1", "db2"], "myapp.limits": {"rows": 5},
                    "myapp.flag": "yes", "myapp.n": 12, "myapp.none": None}


def test_a_dash_o_value_that_is_not_yaml_says_so(project: Path, capsys) -> None:
    assert main(["sparse", "run", "--project", str(project), "-o", "myapp.hosts=[db1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("squall: error: -o 'myapp.hosts=[db1': VALUE is not YAML (") and "\n" not in err, err


@pytest.mark.parametrize("verb", ["run", "submit"])
@pytest.mark.parametrize("flag", ["-d", "--debug"])
def test_dash_d_sets_topology_debug_as_sparse_does(project: Path, monkeypatch, verb: str, flag: str) -> None:
    # sparse run|submit -d/--debug: "Set topology.debug and produce debugging output"; before the
    # fix squall's --debug only showed tracebacks, and -d was refused
    seen = _options_given_to_load(monkeypatch, verb, "--project", str(project), flag)
    assert seen.get("topology.debug") is True


@pytest.mark.parametrize("verb", ["run", "submit"])
@pytest.mark.parametrize(("given", "debug"), [("false", False), ("true", True), ("False", False), ("TRUE", True)])
def test_dash_d_takes_a_value_as_sparse_does(project: Path, monkeypatch, verb: str, given: str, debug: bool) -> None:
    # sparse's -d is -d [OPTIONS] (topology.debug=VALUE): `sparse run -d false` turns off a Topology
    # config's topology.debug; squall said "unrecognized arguments: false"
    seen = _options_given_to_load(monkeypatch, verb, "--project", str(project), "-d", given)
    assert seen.get("topology.debug") is debug


def test_dash_d_with_a_value_not_true_or_false_says_so(project: Path, capsys) -> None:
    assert main(["sparse", "run", "--project", str(project), "-d", "maybe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("squall sparse run: error: argument -d/--debug: 'maybe' is not true or false (sparse's -d "
                   "sets topology.debug)")


def test_dash_d_still_shows_tracebacks(tmp_path: Path, capsys) -> None:
    assert main(["sparse", "run", "--project", str(tmp_path), "-d"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and f"no config.json in {tmp_path}" in err


def test_topology_debug_sets_pystorm_log_level_debug_as_sparse_does(project: Path) -> None:
    from squall.sparse import load
    assert load(project, options={"topology.debug": True}).conf["pystorm.log.level"] == "debug"
    assert load(project).conf.get("pystorm.log.level") != "debug"


@pytest.mark.parametrize("verb", ["run", "submit"])
def test_a_config_json_given_as_dash_dash_config_says_that_it_names_squall_yaml(project: Path, capsys,
                                                                               verb: str) -> None:
    # sparse's --config names config.json; squall's names the cluster's squall.yaml
    config = project / "config.json"
    timed = ["-t", "1"] if verb == "run" else []  # on main, run read it as squall.yaml and ran on
    assert main(["sparse", verb, "--project", str(project), "--config", str(config), *timed]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"squall: error: --config {config}: that is a streamparse config.json; squall's --config names "
                   f"the cluster's squall.yaml (docs/cli.md). The project's config.json is read from its "
                   f"directory: --project {project}")


def test_submit_inactive_is_refused_saying_what_to_do_instead(project: Path, capsys) -> None:
    # sparse's -i submits inactive; squall submits active, as squall jar refuses Flux's -i
    assert main(["sparse", "submit", "--project", str(project), "-i"]) == 2
    assert capsys.readouterr().err.strip() == ("squall: error: -i/--inactive: squall sparse submit submits active; "
                                               "run `squall deactivate NAME` after it")
