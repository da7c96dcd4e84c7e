"""``squall local|jar FILE.yaml``: Flux's options, --dry-run, errors as one line, and one real
run of ``squall local`` in a subprocess that counts every sentence and word."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

from squall.cli import main
from squall.cli._flux import FluxOptions, FluxRun, sleep_seconds
from squall.cli._options import UserError

from .conftest import FILES

REPO = Path(__file__).resolve().parents[2]


def test_squall_local_runs_a_filtered_flux_file_and_counts_every_record():
    env = {**os.environ, "FLUX_SENTENCE": "iota kappa", "FLUX_GREETING": "hello"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "squall", "local", str(FILES / "filtered.yaml"), "--filter",
         str(FILES / "dev.properties"), "-e", "-c", "topology.stats.sample.rate=1.0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the plain view: one line a second; stop once all 3 sentences are acked
            lines.append(line)
            if len(lines) > 120:  # two minutes of lines: it is not coming
                break
            if "spout (spout): emitted=3 " in line and " acked=3 " in line and "count (bolt)" in line \
                    and "executed=8" in line:
                break
        proc.send_signal(signal.SIGTERM)  # squall local's summary, as after Ctrl-C
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines) + out
    assert proc.returncode == 0, err
    assert "Topology Name: flux-filtered" in text and "split --FIELDS(word)--> count" in text  # Flux's details
    summary = out[out.index("Summary of topology flux-filtered"):]
    rows = {r.split()[0]: r.split() for r in summary.splitlines()[2:6]}
    # component type executors tasks emitted acked failed executed
    assert rows["spout"][4:7] == ["3", "3", "0"]
    assert rows["split"][7] == "3" and rows["split"][4] == "8"  # 2 + 3 + 3 words
    assert rows["count"][2] == "2" and rows["count"][7] == "8"  # ${count.parallelism} executors
    assert "errors: none" in summary


def test_dry_run_prints_the_topology_and_runs_nothing(capsys):
    assert main(["local", str(FILES / "wordcount.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == ["---------- TOPOLOGY DETAILS ----------", "Topology Name: flux-wordcount",
                                    "--------------- SPOUTS ---------------",
                                    "sentence-spout [1] (flux_words.SentenceSpout)"]
    assert "split --LOCAL_OR_SHUFFLE--> log  # split --> log" in out
    assert "Summary" not in out


def test_a_dry_run_warns_of_a_misspelled_configuration_key(tmp_path, capsys):
    """A dry run checks what submitting checks: a key that is a typo of a known one (Storm would
    pass it through and it would do nothing) is named, with the key meant."""
    text = (FILES / "wordcount.yaml").read_text()
    assert "config:" in text
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace("config:", "config:\n  topology.max.spout.pendng: 50", 1))
    assert main(["local", str(path), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "topology configuration key 'topology.max.spout.pendng' is unknown and used by nothing; did you mean " \
           "'topology.max.spout.pending'?" in err


def test_what_reading_the_file_warns_of_is_a_squall_warning_line(capsys):
    """An included file's own includes are ignored (as Flux does): said as the command's other
    warnings are, naming the included file and what it includes."""
    assert main(["local", str(FILES / "includes.yaml"), "--dry-run", "-q"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        ("squall: warning: includes.yaml:3: includes[0].file: the includes of include_common.yaml (never_read.yaml) "
         "are ignored: Flux reads includes one level deep")]


def test_a_dry_run_refuses_what_a_submission_refuses_naming_the_line(tmp_path, capsys):
    """--dry-run makes the checks of a submission (here Storm's: a count window longer than
    topology.max.spout.pending would never fill), named at the key's line as the file's own
    mistakes are, as squall local and jar name it."""
    path = tmp_path / "windows.yaml"
    path.write_text((FILES / "windowing.yaml").read_text().replace(
        "  topology.workers: 1\n", "  topology.workers: 1\n  topology.max.spout.pending: 4\n"))

    assert main(["local", str(path), "--dry-run", "-q"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "squall: error: windows.yaml:18: config.topology.max.spout.pending: the topology is refused at submit: "
        "Component [bolt-1]: Window count (length + sliding interval) value 8 is more than "
        "topology.max.spout.pending value 4: the spouts would stop before the window fills")


def test_jar_takes_flux_options_after_the_file_and_a_dry_run_needs_no_master(capsys):
    assert main(["jar", "--name", "renamed", str(FILES / "topology_source.yaml"), "-d"]) == 0
    out = capsys.readouterr().out
    assert "Topology Name: renamed" in out and "Topology Source: flux_words.ExistingTopology.getTopology" in out
    assert "count [2] (bolt: WordCounter)" in out


def test_a_resource_is_found_on_sys_path(capsys):
    assert main(["local", "-R", "wordcount.yaml", "--dry-run"]) == 0  # tests/flux/files is on sys.path
    assert "Topology Name: flux-wordcount" in capsys.readouterr().out
    assert main(["local", "-R", "no/such.yaml", "--dry-run"]) == 1
    assert "no/such.yaml: no such resource on sys.path (-R/--resource)" in capsys.readouterr().err


def test_with_a_resource_the_filter_file_is_a_resource_too(tmp_path, monkeypatch, capsys):
    """Flux's ``-R`` loads ``--filter`` from the classpath too (``Flux.java``: parseProperties(filter, true))."""
    monkeypatch.chdir(tmp_path)  # no dev.properties here: only sys.path has it
    monkeypatch.setenv("FLUX_GREETING", "hello")
    monkeypatch.setenv("FLUX_SENTENCE", "iota kappa")
    assert main(["local", "-R", "filtered.yaml", "--filter", "dev.properties", "-e", "--dry-run"]) == 0
    assert "Topology Name: flux-filtered" in capsys.readouterr().out


def test_dry_run_warns_of_a_component_key_the_topology_config_overrides(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text((FILES / "wordcount.yaml").read_text().replace(
        "config:\n", "config:\n  topology.tick.tuple.freq.secs: 5\n", 1).replace(
        '    className: "flux_words.WordCounter"\n',
        '    className: "flux_words.WordCounter"\n    config:\n      topology.tick.tuple.freq.secs: 1\n', 1))
    assert main(["local", str(path), "--dry-run", "-q"]) == 0
    err = capsys.readouterr().err
    assert "sets 'topology.tick.tuple.freq.secs' to 1, but the topology's Config sets it to 5, which wins" in err


def test_a_mistake_in_the_file_is_one_line_naming_file_line_and_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text('spouts:\n  - id: "s"\n    className: "flux_words.SentenceSpout"\n    parallelism: two\n')
    assert main(["local", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == "squall: error: bad.yaml:4: spouts[0].parallelism: 's': expected an integer of at least 1, got 'two'\n"


def test_flux_options_are_refused_for_a_python_file_and_unknown_ones_after_a_flux_file(tmp_path, capsys):
    py = tmp_path / "topo.py"
    py.write_text("")
    assert main(["local", str(py), "-e", "--filter", "x.properties"]) == 2
    assert "--filter, --env-filter: Flux's options go with a Flux FILE.yaml" in capsys.readouterr().err
    assert main(["jar", str(FILES / "wordcount.yaml"), "--dry-run", "--frobnicate"]) == 2
    assert "a Flux file takes Flux's options after it, not '--frobnicate'" in capsys.readouterr().err
    # `--config` where a Storm user puts it, after the file: the error said only that it was refused
    assert main(["jar", str(FILES / "wordcount.yaml"), "-e", "--config", "squall.yaml"]) == 2
    assert ("not '--config squall.yaml'; squall's own options go before FILE: squall jar --config ... FILE.yaml "
            "--filter ... (docs/flux.md)") in capsys.readouterr().err


class Recording:
    """A target that records what is submitted to it."""

    def __init__(self):
        self.calls = []

    def submit_topology(self, name, conf, topology, **kwargs):
        self.calls.append((name, conf, kwargs))


def test_inactive_submits_inactive_and_c_overrides_the_files_config():
    from squall import flux
    loaded = flux.load(FILES / "wordcount.yaml")
    target = Recording()

    FluxRun(FILES / "wordcount.yaml", FluxOptions(inactive=True), loaded).submit(
        target, {"topology.workers": 2}, None)
    FluxRun(FILES / "wordcount.yaml", FluxOptions(), loaded).submit(target, {}, "other")

    assert target.calls == [
        ("flux-wordcount", {"topology.workers": 2, "topology.max.spout.pending": 50}, {"initial_status": "INACTIVE"}),
        ("other", {"topology.workers": 1, "topology.max.spout.pending": 50}, {})]


def test_inactive_is_refused_by_jar(capsys):
    assert main(["jar", str(FILES / "wordcount.yaml"), "-i"]) == 2
    assert "-i/--inactive: squall jar submits active" in capsys.readouterr().err




def test_sleep_is_squall_locals_ttl_in_milliseconds():
    assert sleep_seconds(FluxOptions(sleep="1500")) == 1.5
    assert sleep_seconds(FluxOptions()) is None
    for bad in ("0", "-3", "soon"):
        try:
            sleep_seconds(FluxOptions(sleep=bad))
        except UserError as e:
            assert f"--sleep: expected a positive number of milliseconds, got {bad!r}" == str(e)
        else:
            raise AssertionError(f"--sleep {bad} was taken")


def test_squall_local_shows_what_loginfobolt_logs():
    """LogInfoBolt exists to show tuples; `squall local` showed squall's warnings only, so Storm's
    simple_wordcount.yaml ran without a line of its output."""
    proc = subprocess.run([sys.executable, "-m", "squall", "local", str(FILES / "storm_simple_wordcount.yaml"),
                           "--ttl", "3", "-q"], check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    logged = [line for line in proc.stderr.splitlines() if line.startswith("INFO squall.flux.wrappers: ")]
    assert logged, proc.stderr
    counts: dict[str, list[int]] = {}
    for line in logged:  # "... source: bolt-1:2, stream: default, id: ..., ['mike', 3]"
        word, count = ast.literal_eval(line[line.rindex(", [") + 2:])
        counts.setdefault(word, []).append(count)
    # every [word, count] TestWordCounter emitted was logged, in order
    assert all(c == list(range(1, len(c) + 1)) for c in counts.values()), counts
