"""sparse's verbs and options that ``squall sparse`` has no use for, as a streamparse user's
commands and deploy scripts carry them: each is answered by name (what squall does instead),
not with argparse's ``invalid choice: 'tail'`` or ``unrecognized arguments: --timeout 7000``."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.cli import main
from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli_cluster import Nimbus


@pytest.mark.parametrize(("given", "instead"), [
    (["tail", "-n", "wordcount", "-f"], "`squall logs NAME [-c COMPONENT] [-n LINES]`"),
    (["stats", "--all"], "`squall monitor NAME`"),
    (["visualize"], "`squall ui` draws it"),
    (["update_virtualenv", "-e", "prod"], "there is no virtualenv to build"),
    (["jar"], "there is no jar to build"),
])
def test_a_sparse_verb_squall_sparse_has_not_names_the_squall_command_instead(capsys, given: list[str],
                                                                               instead: str) -> None:
    assert main(["sparse", *given]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"squall: error: sparse {given[0]} has no squall sparse verb: {instead}"), err
    assert "\n" not in err


@pytest.mark.parametrize(("given", "why"), [
    (["-r", "requirements.txt"], "squall installs no packages on the workers: install them where the workers "
                                 "run (pip install -r FILE), then submit without -r"),
    (["-j", "build/wordcount.jar"], "squall runs no JVM and submits no jar"),
    (["--remote_jar_path", "/srv/wordcount.jar"], "squall runs no JVM and submits no jar"),
])
def test_a_sparse_submit_option_that_would_change_what_runs_is_refused_naming_it(quickstart: Path, capsys,
                                                                                 given: list[str],
                                                                                 why: str) -> None:
    # no master is reached: the refusal comes first, and --timeout alongside is not what stops it
    assert main(["sparse", "submit", "--project", str(quickstart), "--timeout", "7000", *given]) == 2
    err = capsys.readouterr().err.strip()
    option = next(o for o in ("-r/--requirements", "-j/--local_jar_path", "-R/--remote_jar_path")
                  if given[0] in o.split("/"))
    assert err.startswith(f"squall: error: {given[0]}: sparse submit's {option} is refused: {why}"), err


def test_sparse_options_for_jars_virtualenvs_and_nimbus_are_taken_with_a_note(quickstart: Path, tmp_path: Path,
                                                                               capsys) -> None:
    """A deploy script's ``sparse submit -e prod --timeout 30000 --pool_size 4 ...``, ``sparse
    list -e prod`` and ``sparse kill --timeout ...`` run on squall as they are: the topology is
    submitted, listed and killed, each option said once to be unused and why."""
    nimbus = Nimbus(tmp_path)
    try:
        on = ["--config", str(nimbus.config), "--project", str(quickstart)]
        assert main(["sparse", "submit", *on, "-e", "prod", "--timeout", "30000", "--pool_size", "4",
                     "--overwrite_virtualenv", "--user", "storm", "-u"]) == 0
        out, err = capsys.readouterr()
        assert out.strip() == "Submitted topology: wordcount"
        assert err.splitlines() == [
            "squall sparse submit: --timeout is not used: it is how long sparse waits for Nimbus's Thrift port; "
            "squall's client keeps its own timeouts",
            "squall sparse submit: --pool_size is not used: it sizes sparse's SSH pool for building virtualenvs; "
            "squall builds none: squall ships the project's src/ with the topology",
            "squall sparse submit: --overwrite_virtualenv is not used: squall builds no virtualenv: squall ships "
            "the project's src/ with the topology",
            "squall sparse submit: --user is not used: it is the sudo user that builds virtualenvs; squall builds "
            "none: squall ships the project's src/ with the topology",
            "squall sparse submit: -u is not used: squall builds no jar: squall ships the project's src/ with the "
            "topology",
        ]

        assert main(["sparse", "list", *on, "-e", "prod", "--timeout", "7000"]) == 0
        out, err = capsys.readouterr()
        assert [line.split()[0] for line in out.splitlines()[2:] if line.strip()] == ["wordcount"]
        assert err.startswith("squall sparse list: --timeout is not used")
        assert main(["sparse", "list", *on, "-e", "dev"]) == 1  # -e is checked, as kill's
        assert capsys.readouterr().err.strip() == (f"squall: error: {quickstart / 'config.json'} has no env 'dev' "
                                                   f"(it has: prod)")

        assert main(["sparse", "kill", *on, "-e", "prod", "--timeout", "7000", "--wait", "0"]) == 0
        out, err = capsys.readouterr()
        assert out == "Killed topology: wordcount\n"
        assert err.startswith("squall sparse kill: --timeout is not used")
        with MasterClient(nimbus.conf) as master:
            assert wait_until(lambda: master.list_topologies() == [], 30, 0.1)
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()
