"""docs/migrating.md's examples (examples/migrating/): the Python topology with a ShellBolt and
the Flux file with a FluxShellBolt each run, in process (every word of every sentence split and
counted once) and by `squall local` as the doc runs them (every sentence acked, none failed);
and each fenced block of the doc marked with a file's name is that file's text, so the doc and
the files cannot drift apart."""

from __future__ import annotations

import importlib
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from squall import ShellBolt, flux
from squall.testing import complete_topology, read_tuples

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "migrating"
DOC = ROOT / "docs" / "migrating.md"
FILES = ["word_count_topology.py", "words.py", "multilang/splitsentence.py", "wordcount.yaml"]

# ```python examples/migrating/words.py ... ```: the language, then the file the block is
_BLOCK = re.compile(r"^```\w+ (examples/migrating/\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _check_counts(result, sentences):
    """Every word of every sentence went through split once and was counted once, in order."""
    words = [w for s in sentences for w in s.split()]
    assert Counter(w for [w] in read_tuples(result, "split")) == Counter(words)
    counted = read_tuples(result, "count")
    assert len(counted) == len(words)
    last = {}
    for word, n in counted:  # each word's counts are 1, 2, ... on its one task (FIELDS grouping)
        assert n == last.get(word, 0) + 1
        last[word] = n
    assert last == dict(Counter(words))


@pytest.fixture
def on_path():
    """examples/migrating first on sys.path, as `squall local FILE` puts FILE's directory."""
    sys.path.insert(0, str(HERE))
    yield
    sys.path.remove(str(HERE))
    for name in ("words", "word_count_topology"):
        sys.modules.pop(name, None)


def _squall_local_until_acked(file: str, name: str, sentences: int) -> str:
    """Run `squall local FILE` in examples/migrating as the doc does, read its once-a-second
    lines until the spout's every sentence is acked, stop it with SIGTERM (as Ctrl-C); its
    output. The spout's acked and failed counts are exact (docs/cli.md)."""
    proc = subprocess.Popen([sys.executable, "-m", "squall", "local", file], cwd=HERE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(60, proc.kill)  # a hung run fails the test below, not the suite
    watchdog.start()
    done = re.compile(rf"spout \(spout\): emitted={sentences} .*acked={sentences} failed=0")
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[") and f" {name} " in line and done.search(line):
                proc.send_signal(signal.SIGTERM)
                break
        lines.extend(proc.stdout)
        assert proc.wait() == 0, "".join(lines)
    finally:
        watchdog.cancel()
        proc.kill()
    return "".join(lines)


def _assert_summary(out: str, name: str, sentences: int) -> None:
    """The run's summary: every sentence emitted once and acked, none failed, no error."""
    assert f"Summary of topology {name}" in out, out
    row = re.search(r"^ +spout +spout +1 +1 +(\d+) +(\d+) +(\d+) ", out, re.MULTILINE)
    assert row and tuple(map(int, row.groups())) == (sentences, sentences, 0), out
    assert "errors: none" in out, out


def test_the_python_topology_runs_its_shell_bolt_and_counts_every_word(on_path):
    example = importlib.import_module("word_count_topology")
    topology = example.build()
    assert isinstance(topology.components["split"].obj, ShellBolt)
    source = {"spout": [[s] for s in example.SENTENCES]}  # the same sentences, each completed

    result = complete_topology(None, topology, source, storm_conf=example.conf, timeout_secs=30)

    _check_counts(result, example.SENTENCES)


def test_the_flux_file_runs_its_shell_bolt_unchanged_and_counts_every_word(on_path):
    loaded = flux.load(HERE / "wordcount.yaml")
    from squall.flux.shell import FluxShellBolt
    assert isinstance(loaded.topology.components["split"].obj, FluxShellBolt)
    sentences = loaded.topology.components["spout"].obj.sentences
    assert len(sentences) == 2

    result = complete_topology(None, loaded.topology, {"spout": [[s] for s in sentences]},
                               storm_conf=loaded.conf, timeout_secs=30)

    _check_counts(result, sentences)


def test_the_example_spout_sends_each_sentence_once_and_a_failed_one_again(on_path):
    from words import SentenceSpout

    from .conftest import RecordingCollector, StubContext
    spout, collector = SentenceSpout(["a b", "c"]), RecordingCollector()
    spout.open({}, StubContext(), collector)
    for _ in range(4):
        spout.next_tuple()
    assert collector.emitted == [(["a b"], 0), (["c"], 1)]
    spout.ack(0)
    spout.fail(1)
    spout.next_tuple()
    spout.next_tuple()
    assert collector.emitted[2:] == [(["c"], 1)]


@pytest.mark.parametrize("file, name", [("word_count_topology.py", "word_count_topology"),
                                        ("wordcount.yaml", "migrating-wordcount")])
def test_squall_local_runs_each_file_as_the_doc_says_and_every_sentence_is_acked(file, name):
    sentences = 4 if file.endswith(".py") else 2
    _assert_summary(_squall_local_until_acked(file, name, sentences), name, sentences)


def test_squall_local_dry_run_prints_the_flux_files_topology():
    out = subprocess.run([sys.executable, "-m", "squall", "local", "wordcount.yaml", "--dry-run"],
                         cwd=HERE, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "split --FIELDS(word)--> count" in out.stdout


def test_every_example_file_is_in_the_doc_as_it_is():
    blocks = _BLOCK.findall(DOC.read_text())
    named = [name for name, _ in blocks]
    assert sorted(named) == sorted(f"examples/migrating/{f}" for f in FILES), named
    for name, text in blocks:
        assert text == (ROOT / name).read_text(), f"docs/migrating.md's block of {name} differs from the file"


def _slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    return re.sub(r"[^\w -]", "", heading.lower()).replace(" ", "-")


def test_each_squall_command_of_the_doc_parses_and_names_a_file_that_exists():
    from squall.cli import _create_arg_parser
    commands = 0
    for block in re.findall(r"^```sh\n(.*?)^```$", DOC.read_text(), flags=re.MULTILINE | re.DOTALL):
        cwd = ROOT
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["cd"] and (ROOT / words[1]).is_dir():
                cwd = ROOT / words[1]
            if words[:1] != ["squall"]:
                continue
            commands += 1
            args = _create_arg_parser().parse_args(words[1:])  # a usage error raises SystemExit
            file = getattr(args, "file", None)
            in_quickstart = file is not None and file.startswith("topologies/")  # sparse quickstart's project
            assert file is None or in_quickstart or (cwd / file).is_file(), f"{line}: no {cwd / file}"
    assert commands >= 10


def test_each_link_of_the_doc_names_a_page_and_heading_that_exist():
    text = DOC.read_text()
    for page, anchor in re.findall(r"\]\(([\w-]*(?:\.md)?)(?:#([\w-]+))?\)", text):
        target = DOC.parent / page if page else DOC
        assert target.is_file(), f"docs/migrating.md links {page}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"{target.name} has no heading for #{anchor}"
