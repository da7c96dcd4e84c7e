"""The README stays true: its `squall` commands parse and name files that exist, the files and
pages it names exist, and its quickstart runs (issue 37 item 6). The main job itself runs, from
an installed wheel, in scripts/check-wheel.sh."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from squall.cli import _create_arg_parser

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PLACEHOLDERS = {"my_topology.py"}  # the README's example of a user's own file, said to be one


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.S | re.M)


def squall_commands() -> list[list[str]]:
    commands = []
    for block in blocks("sh"):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part)
                if words[:1] == ["squall"]:
                    commands.append(words[1:])
    return commands


def test_the_readme_has_the_main_job_and_the_test_command():
    assert ["local", "examples/word_count.py", "--ttl", "30"] in squall_commands()
    assert any("&& scripts/test" in block for block in blocks("sh"))


def test_ci_runs_the_readmes_test_command():
    """.ci/run runs the suite as the README says (scripts/test), and the script exists."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "&& scripts/test ||" in ci and "python -m pytest" not in ci
    assert os.access(ROOT / "scripts" / "test", os.X_OK)


@pytest.mark.parametrize("argv", squall_commands(), ids=" ".join)
def test_each_squall_command_of_the_readme_parses_and_names_a_file_that_exists(argv):
    args = _create_arg_parser().parse_args(argv)  # a usage error raises SystemExit
    file = getattr(args, "file", None)
    assert file is None or file in PLACEHOLDERS or (ROOT / file).is_file(), f"squall {' '.join(argv)}: no {file}"


def test_the_files_and_pages_the_readme_names_exist():
    named = set(re.findall(r"\b((?:scripts|examples|squall|docs)/[\w/-]+\.(?:py|sh|c|md))\b", README))
    named |= {link.split("#")[0] for link in re.findall(r"\]\(([^)#:]+(?:#[^)]*)?)\)", README)}
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"the README names files that do not exist: {missing}"
    for page, anchor in re.findall(r"\]\((docs/[\w-]+\.md)#([\w-]+)\)", README):
        headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(), flags=re.M)
        slugs = {re.sub(r"[^\w -]", "", h.lower()).replace(" ", "-") for h in headings}
        assert anchor in slugs, f"{page} has no heading for #{anchor}"


def test_the_quickstart_runs_and_counts_words(capsys):
    """The quickstart's code as written, but for its 5 s sleep, which here waits until the count
    bolt has acked words (on a loaded machine 5 s may not be enough, and on a quiet one it is
    more than needed)."""
    code, = [block for block in blocks("python") if "LocalCluster" in block]
    assert code.count("    time.sleep(5)\n") == 1

    def counted(cluster) -> None:
        def acked() -> int:
            return cluster.get_topology_info("word-count")["components"]["count"]["acked"]
        assert wait_until(lambda: acked() > 0, 60, 0.05), "the quickstart's count bolt acked nothing in 60 s"

    exec(compile(code.replace("    time.sleep(5)\n", "    counted(cluster)\n"), "README.md", "exec"),
         {"__name__": "quickstart", "counted": counted})
    rows = {line.split()[0]: dict(field.split("=") for field in line.split()[1:])
            for line in capsys.readouterr().out.splitlines() if "emitted=" in line}
    assert set(rows) == {"sentences", "split", "count"}
    assert int(rows["count"]["acked"]) > 0 and int(rows["sentences"]["emitted"]) > 0
