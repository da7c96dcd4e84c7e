"""sparse submit's ``-f`` (kill the running topology of that name first, ``--wait`` seconds
deactivated, and wait until it is gone) and ``-N NAME`` (submit under NAME), which a
streamparse project's deploy scripts use, on ``squall sparse submit`` to a running
``squall nimbus --host process``."""

from __future__ import annotations

from pathlib import Path

from squall.cli import main
from squall.cluster.client import MasterClient
from tests.conftest import wait_until
from tests.test_cli_cluster import Nimbus


def _ids(conf: dict) -> dict[str, str]:
    with MasterClient(conf) as master:
        return {t["name"]: t["id"] for t in master.list_topologies()}


def test_dash_f_replaces_the_running_topology_and_dash_n_submits_under_another_name(
        quickstart: Path, tmp_path: Path, capsys) -> None:
    nimbus = Nimbus(tmp_path)
    try:
        submit = ["sparse", "submit", "--config", str(nimbus.config), "--project", str(quickstart)]
        assert main(submit) == 0
        first = _ids(nimbus.conf)["wordcount"]
        capsys.readouterr()

        assert main(submit) == 1  # as sparse without -f: the name is taken
        assert "already exists on cluster" in capsys.readouterr().err

        assert main([*submit, "-f", "--wait", "0"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines() == ['Killing current "wordcount" topology.', "Killed.", "Submitted topology: wordcount"]
        second = _ids(nimbus.conf)["wordcount"]
        assert second != first  # the old one is gone, a new one runs under the name

        assert main([*submit, "-N", "wordcount-b"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines() == ['Deploying "wordcount" topology with name "wordcount-b"...',
                                    "Submitted topology: wordcount-b"]
        assert _ids(nimbus.conf) == {"wordcount": second, "wordcount-b": _ids(nimbus.conf)["wordcount-b"]}

        with MasterClient(nimbus.conf) as master:
            def counting() -> bool:  # both run: the replacement and the one under the new name
                return all(master.get_topology_info(n)["components"]["count_bolt"]["executed"] > 0
                           for n in ("wordcount", "wordcount-b"))

            assert wait_until(counting, 60, 0.2)
            for name in ("wordcount", "wordcount-b"):
                assert master.get_topology_info(name)["errors"] == []
                master.kill_topology(name, wait_secs=0)
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()


def test_dash_f_with_no_topology_of_that_name_just_submits(quickstart: Path, tmp_path: Path, capsys) -> None:
    nimbus = Nimbus(tmp_path)
    try:
        assert main(["sparse", "submit", "--config", str(nimbus.config), "--project", str(quickstart), "-f"]) == 0
        assert capsys.readouterr().out.splitlines() == ["Submitted topology: wordcount"]
        with MasterClient(nimbus.conf) as master:
            master.kill_topology("wordcount", wait_secs=0)
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()


def test_dash_f_with_a_replacement_the_master_refuses_kills_nothing(quickstart: Path, tmp_path: Path, capsys) -> None:
    """sparse's -f kills first and then submits: a replacement the master refuses leaves the
    cluster without either. squall's asks the master first, as if the running one were gone: a
    refused replacement says why and that nothing was killed, and the running topology goes on
    counting."""
    nimbus = Nimbus(tmp_path)
    try:
        submit = ["sparse", "submit", "--config", str(nimbus.config), "--project", str(quickstart)]
        assert main(submit) == 0
        running = _ids(nimbus.conf)["wordcount"]
        capsys.readouterr()
        assert main([*submit, "-f", "--wait", "0", "-o", "topology.message.timeout.secs=-5"]) == 1
        out, err = capsys.readouterr()
        assert "Killing" not in out and "topology.message.timeout.secs" in err, (out, err)
        assert "nothing was killed: the running topology 'wordcount' goes on" in err, err
        assert _ids(nimbus.conf) == {"wordcount": running}
        with MasterClient(nimbus.conf) as master:
            before = master.get_topology_info("wordcount")["components"]["count_bolt"]["executed"]
            assert wait_until(lambda: master.get_topology_info("wordcount")["components"]["count_bolt"]["executed"]
                              > before, 60, 0.2)
            # a good replacement still replaces it
            assert main([*submit, "-f", "--wait", "0"]) == 0
            assert capsys.readouterr().out.splitlines()[-1] == "Submitted topology: wordcount"
            assert _ids(nimbus.conf)["wordcount"] != running
            master.kill_topology("wordcount", wait_secs=0)
        assert nimbus.stop() == 0
    finally:
        nimbus.clean_up()
