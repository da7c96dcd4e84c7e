"""Flux files run on a LocalCluster: Storm's flux-examples word count with Python classes,
counting every word of every sentence, with components, refs, properties, configMethods,
factories, includes, filtering, a topologySource, grouping types and a shell bolt."""

from __future__ import annotations

import operator
import shutil
import sys
from collections import Counter

import pytest

from squall import flux

from ..conftest import wait_until
from .conftest import FILES

STOP = {"the", "a", "an"}


def words(sentences, lower=False, stop=frozenset()):
    """What the word count should count."""
    return Counter(w for s in sentences for w in (s.lower() if lower else s).split() if w not in stop)


def run(cluster, loaded, sink, sentences, **submit):
    """Submit ``loaded``, wait until every sentence is acked, kill it; the sink's module."""
    import flux_words
    flux_words.reset(sink)
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology, **submit)
    try:
        assert wait_until(lambda: len(flux_words.ACKED[sink]) == len(sentences), 30), \
            f"acked {sorted(flux_words.ACKED[sink])} of {len(sentences)}"
        assert flux_words.FAILED[sink] == set()
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    return flux_words


def test_storms_word_count_with_components_refs_properties_and_config_methods_counts_every_word(cluster):
    loaded = flux.load(FILES / "wordcount.yaml")
    morning = ["the cow jumped over the moon", "an apple a day keeps the doctor away"] * 3  # property repeat: 3
    evening = ["four score and seven years ago", "snow white and the seven dwarfs"]
    assert loaded.name == "flux-wordcount"
    assert loaded.conf == {"topology.workers": 1, "topology.max.spout.pending": 50}
    spec = loaded.topology.components
    assert (spec["split"].parallelism, spec["count"].parallelism, spec["count"].conf["topology.tasks"]) == (2, 3, 4)
    assert type(spec["log"].obj).__module__ == "squall.flux.wrappers"  # Flux's LogInfoBolt

    fw = run(cluster, loaded, "wordcount", morning + evening)

    # the ref'd StopWords (made by its factory) dropped, lower-cased (a property), split at the config method's " "
    assert fw.COUNTS["wordcount"] == words(morning + evening, lower=True, stop=STOP)
    assert sum(fw.COUNTS["wordcount"].values()) == 38
    tasks_of = {}
    for word, task in fw.TASKS["wordcount"]:
        tasks_of.setdefault(word, set()).add(task)
    assert all(len(t) == 1 for t in tasks_of.values())  # FIELDS on word: one task per word


def test_properties_and_environment_filtering_fill_the_file_before_it_is_read(cluster):
    loaded = flux.load(FILES / "filtered.yaml", filter_file=FILES / "dev.properties", env_filter=True,
                       environ={"FLUX_SENTENCE": "iota kappa", "FLUX_GREETING": "hello"})
    sentences = ["iota kappa", "gamma delta epsilon", "zeta eta theta"]  # env, list item [1], a continued line
    assert loaded.name == "flux-filtered"
    assert loaded.conf == {"topology.workers": 1, "flux.greeting": "hello"}  # ${workers} read as YAML: the int 1
    assert loaded.topology.components["count"].parallelism == 2

    fw = run(cluster, loaded, "filtered", sentences)

    assert fw.COUNTS["filtered"] == words(sentences)


def test_includes_merge_as_flux_does_and_the_result_runs(cluster, caplog):
    definition = flux.read(FILES / "includes.yaml")
    assert definition.name == "flux-includes"  # override: false keeps this file's name
    # this file's 10 beat include_common's 99 (override: false); the resource's 20 beat both (override: true)
    assert definition.config == {"topology.max.spout.pending": 20, "topology.message.timeout.secs": 30}
    assert list(definition.bolts) == ["split", "count"] and definition.bolts["split"].parallelism == 3
    assert [s.name for s in definition.streams] == ["split --> count", "spout --> split"]
    assert "includes[0].file: the includes of include_common.yaml (never_read.yaml) are ignored" in caplog.text

    loaded = flux.build(definition)
    sentences = ["one two three", "four five"]
    fw = run(cluster, loaded, "includes", sentences)
    assert fw.COUNTS["includes"] == words(sentences)


def test_a_topology_source_builds_the_topology_from_the_files_config(cluster):
    loaded = flux.load(FILES / "topology_source.yaml")
    assert sorted(loaded.topology.components) == ["count", "split", "spout"]

    fw = run(cluster, loaded, "source", ["red green", "blue red"])

    assert fw.COUNTS["source"] == Counter({"red": 2, "green": 1, "blue": 1})


def test_each_flux_grouping_type_routes_as_storms(cluster):
    loaded = flux.load(FILES / "groupings.yaml")
    sentences = ["a b c", "c d e f", "g"]
    expected = words(sentences)

    fw = run(cluster, loaded, "groupings", sentences)

    assert fw.COUNTS["custom"] == expected and len({t for _, t in fw.TASKS["custom"]}) == 1  # FirstTask(1)
    assert fw.COUNTS["all"] == Counter({w: 2 * n for w, n in expected.items()})  # ALL: both tasks
    assert len({t for _, t in fw.TASKS["all"]}) == 2
    assert fw.COUNTS["global"] == expected and len({t for _, t in fw.TASKS["global"]}) == 1
    assert fw.COUNTS["none"] == expected


def test_a_flux_shell_bolt_runs_a_multilang_subprocess(cluster):
    pytest.importorskip("squall.multilang")
    loaded = flux.load(FILES / "shell.yaml", env_filter=True, environ={"PYTHON": shutil.which("python3") or sys.executable})
    from squall.flux.shell import FluxShellBolt
    from squall.multilang import ShellBolt
    bolt = loaded.topology.components["splitsentence"]
    assert isinstance(bolt.obj, FluxShellBolt) and isinstance(bolt.obj, ShellBolt)
    assert bolt.conf["flux.shell.note"] == "set by Flux"  # addComponentConfig, a configMethod
    assert [f[0] for f in bolt.obj.resources.files] == ["sentence_spout.py", "split_sentence.py"]  # files/multilang
    sentences = ["the quick brown fox", "jumps over the lazy dog"]

    fw = run(cluster, loaded, "shell", sentences)

    assert fw.COUNTS["shell"] == words(sentences)


def test_a_shell_bolt_without_a_resources_property_runs_in_the_resources_directory_beside_the_file(cluster):
    """Storm's layout: its multilang.yaml names no resources, the jar's resources/ is where its
    shell bolt runs; the script was looked for in the worker's directory and not found."""
    pytest.importorskip("squall.multilang")
    loaded = flux.load(FILES / "storm_layout" / "multilang.yaml", env_filter=True,
                       environ={"PYTHON": shutil.which("python3") or sys.executable})
    bolt = loaded.topology.components["splitsentence"].obj
    assert [f[0] for f in bolt.resources.files] == ["split_sentence.py"]  # storm_layout/resources/
    sentences = ["the quick brown fox", "jumps over the lazy dog"]

    fw = run(cluster, loaded, "storm-layout", sentences)

    assert fw.COUNTS["storm-layout"] == words(sentences)


def test_a_flux_shell_spout_feeds_a_python_bolt(cluster):
    pytest.importorskip("squall.multilang")
    import flux_words
    loaded = flux.load(FILES / "shell_spout.yaml", env_filter=True,
                       environ={"PYTHON": shutil.which("python3") or sys.executable, "FLUX_FILES": str(FILES)})
    flux_words.reset("shell-spout")
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    try:  # the acks go back to the subprocess: the words counted are what the test can see
        assert wait_until(lambda: sum(flux_words.COUNTS["shell-spout"].values()) == 6, 30)
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    assert flux_words.COUNTS["shell-spout"] == Counter({"blue": 3, "green": 2, "red": 1})


def test_storms_windowing_example_gives_count_windows_by_ref_to_a_config_method(cluster):
    import flux_words
    loaded = flux.load(FILES / "windowing.yaml")
    flux_words.reset("windowing")
    flux_words.WINDOWS.pop("windowing", None)
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    try:
        # a window of the last 5 every 3 tuples: 4 windows for 12 tuples (the last ones stay in
        # the window, unacked, until later tuples push them out)
        assert wait_until(lambda: len(flux_words.WINDOWS.get("windowing", [])) == 4, 30)
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    w = [f"w{i}" for i in range(1, 13)]
    assert flux_words.WINDOWS["windowing"] == [w[0:3], w[1:6], w[4:9], w[7:12]]


def test_storms_join_bolt_by_its_java_class_name_joins_in_count_windows(cluster):
    """org.apache.storm.bolt.JoinBolt in a Flux file (its Selector by name, Java's config method
    names) is squall's JoinBolt: one tumbling window of all six rows, joined as SQL would."""
    import flux_words
    loaded = flux.load(FILES / "join.yaml")
    flux_words.JOINED.pop("join", None)
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    expected = [{"users:userId": 1, "name": "ann", "price": 10}, {"users:userId": 1, "name": "ann", "price": 11},
                {"users:userId": 3, "name": "cy", "price": 30}]
    key = operator.itemgetter("users:userId", "price")
    try:
        assert wait_until(lambda: len(flux_words.JOINED.get("join", [])) >= len(expected), 30), flux_words.JOINED
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    assert sorted(flux_words.JOINED["join"], key=key) == expected


def test_storms_simple_wordcount_runs_as_it_is_with_storms_test_spout_and_counter(cluster, caplog):
    """Storm's flux-examples file unchanged: org.apache.storm.testing's TestWordSpout and
    TestWordCounter name squall.testing's (they were 'unknown class ... no module org')."""
    from squall.testing import TestWordCounter, TestWordSpout
    caplog.set_level("INFO", logger="squall.flux.wrappers")
    loaded = flux.load(FILES / "storm_simple_wordcount.yaml")
    spec = loaded.topology.components
    assert type(spec["spout-1"].obj) is TestWordSpout and type(spec["bolt-1"].obj) is TestWordCounter

    def logged():  # what LogInfoBolt logged: the counter's [word, count] tuples
        return [r.args[0].values for r in list(caplog.records) if r.name == "squall.flux.wrappers"]
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    try:
        assert wait_until(lambda: len(logged()) >= 8, 30)  # a word every 100 ms
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    counts: dict[str, list[int]] = {}
    for word, count in logged():
        counts.setdefault(word, []).append(count)
    assert set(counts) <= {"nathan", "mike", "jackson", "golda", "bertels"}  # Storm's TestWordSpout's
    # the counter counted each word it got once, and LogInfoBolt got every count it emitted
    assert all(sorted(c) == list(range(1, len(c) + 1)) for c in counts.values()), counts
