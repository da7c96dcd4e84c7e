"""The docs' Python examples run as a reader copies them, and say what they give.

tests/test_readme.py runs the README's quickstart, tests/examples/test_migrating.py the blocks of
docs/migrating.md and tests/trident/test_docs.py those of docs/trident.md. This file takes the
other pages' examples that run on a LocalCluster in a few seconds. A block that uses names the
page says come from elsewhere (the README's classes, an example's spout, "your" database bolt)
gets those names, and nothing else, before it runs; each test counts what the page claims.
The pages' blocks that need a cluster, Spark, a Kafka broker or a MasterClient are left out."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import types
from collections import Counter
from pathlib import Path

import pytest

from squall import BasicBolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout, SimulatedClock

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of ``page`` (README.md or docs/NAME.md), in order, those indented
    in a list item dedented."""
    found = re.findall(r"^( *)```python[^\n]*\n(.*?)^\1```$", (ROOT / page).read_text(), flags=re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(code) for _indent, code in found]


def block_with(page: str, text: str) -> str:
    """The one ```python block of ``page`` that contains ``text``."""
    found = [block for block in python_blocks(page) if text in block]
    assert len(found) == 1, f"{page}: {len(found)} blocks contain {text!r}"
    return found[0]


def run(code: str, page: str, namespace: dict) -> dict:
    """Execute a block as a reader pastes it, in ``namespace``; a failure names the page."""
    try:
        exec(compile(code, page, "exec"), namespace)  # noqa: S102 (running the page's code is the test)
    except Exception as e:
        raise AssertionError(f"{page}: the block failed: {type(e).__name__}: {e}\n{code}") from e
    return namespace


def readme_classes() -> dict:
    """The README quickstart's classes (SentenceSpout, SplitSentence, WordCount): what
    docs/concepts.md's and docs/cli.md's fragments use."""
    code = block_with("README.md", "class SentenceSpout")
    return run(code.split("builder = TopologyBuilder()")[0], "README.md", {"__name__": "readme"})


def printed_so_far() -> str:
    """What the test printed so far under ``capsys``, read without resetting it: a component's
    thread prints meanwhile, and ``readouterr`` (a read, then a reset) loses what is written
    between the two, part of a line included."""
    return sys.stdout.getvalue()


def test_every_testing_md_example_passes_as_the_pytest_test_it_is():
    """docs/testing.md says its examples are complete pytest tests: run each test function.
    The `shared_state_dir` block is left out: it needs a MasterClient (`client`)."""
    blocks = [block for block in python_blocks("docs/testing.md") if "shared_state_dir(" not in block]
    namespace = run("\n\n".join(blocks), "docs/testing.md", {"__name__": "testing_md"})
    tests = [name for name in namespace if name.startswith("test_") and callable(namespace[name])
             and getattr(namespace[name], "__module__", None) == "testing_md"]
    assert len(tests) >= 8, f"docs/testing.md lost its tests: {tests}"
    for name in tests:
        namespace[name]()


def test_the_drpc_md_local_example_prints_hello_exclaimed(capsys):
    run(block_with("docs/drpc.md", "LocalDRPC() as drpc, LocalCluster() as cluster"), "docs/drpc.md",
        {"__name__": "drpc_md"})
    assert capsys.readouterr().out == "hello!\n"


def test_the_metrics_md_parser_reports_every_tuple_to_the_printing_consumer(capsys, request):
    """The page's `Parser` and `PrintingConsumer` together: 10 tuples of 7 kind `a` and 3 kind
    `b`, body lengths 0..9, one 60 s bucket on simulated time."""
    # The consumer is made by its name in the worker (`module:Class`): the page's blocks run in
    # a module of their own, as a reader's file is one.
    module = types.ModuleType("squall_docs_metrics_md")
    sys.modules[module.__name__] = module
    request.addfinalizer(lambda: sys.modules.pop(module.__name__))
    namespace = run(block_with("docs/metrics.md", "class Parser"), "docs/metrics.md", module.__dict__)
    run(block_with("docs/metrics.md", "class PrintingConsumer"), "docs/metrics.md", namespace)
    run(block_with("docs/metrics.md", "conf.register_metrics_consumer(LoggingMetricsConsumer"), "docs/metrics.md",
        namespace)
    conf = namespace["conf"]
    conf.register_metrics_consumer(namespace["PrintingConsumer"], argument="doc")
    feeder = FeederSpout(Fields("kind", "body"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("in", feeder)
    builder.set_bolt("parse", namespace["Parser"]()).shuffle_grouping("in")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("metrics-md", conf, builder.create_topology())
        for i in range(10):
            feeder.feed(["a" if i < 7 else "b", "x" * i], msg_id=i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(10)))
        cluster.advance_cluster_time(61)

        def reported() -> dict:
            lines = [line.split(" ", 4) for line in printed_so_far().splitlines()]
            return {name: value for prefix, component, _task, name, value in
                    (line for line in lines if len(line) == 5)
                    if prefix == "doc" and component == "parse" and not name.startswith("__")}  # built-ins
        seen: dict = {}
        assert wait_until(lambda: seen.update(reported()) or len(seen) >= 3, 10), seen
    assert seen == {"parsed": "10", "by-kind": "{'a': 7, 'b': 3}", "mean-size": "4.5"}


def test_the_streams_md_example_prints_words_seen_at_least_5_times(capsys):
    """The page's code as written, but its 10 s sleep waits for the first window's lines."""
    code = block_with("docs/streams.md", "StreamBuilder()")
    assert code.count("    time.sleep(10)") == 1
    code = code.replace("    time.sleep(10)", "    printed(cluster)")
    out: list[str] = []

    def printed(cluster) -> None:
        assert wait_until(lambda: printed_so_far().endswith("\n"), 20), "streams.md's example printed nothing in 20 s"
    run(code, "docs/streams.md", {"__name__": "streams_md", "printed": printed})
    out.extend(capsys.readouterr().out.splitlines())  # the cluster has stopped: no thread prints now
    pairs = [ast.literal_eval(line) for line in out]
    words = {"nathan", "mike", "jackson", "golda", "bertels"}
    assert pairs and all(word in words and count >= 5 for word, count in pairs), out


class _SplitSentence(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for word in tup["sentence"].split():
            collector.emit([word])


_STATE_MD_COUNTS: Counter = Counter()
"""The last count `_LastCount` saw per word (its tasks share this module, on a LocalCluster)."""


class _LastCount(BasicBolt):
    def execute(self, tup, collector):
        _STATE_MD_COUNTS[tup["word"]] = max(_STATE_MD_COUNTS[tup["word"]], tup["count"])


def test_the_state_md_word_count_counts_every_word_once():
    """The page's stateful `WordCount`, after a spout and a split bolt as the page assumes
    (`builder`, `conf`, a `split` component): 100 sentences, every word counted once."""
    _STATE_MD_COUNTS.clear()
    feeder = FeederSpout(Fields("sentence"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("sentences", feeder)
    builder.set_bolt("split", _SplitSentence(), 2).shuffle_grouping("sentences")
    namespace = run(block_with("docs/state.md", "class WordCount(BaseStatefulBolt)"), "docs/state.md",
                    {"__name__": "state_md", "builder": builder, "conf": Config()})
    builder.set_bolt("last", _LastCount()).shuffle_grouping("count")
    sentences = ["the cow jumped over the moon", "an apple a day keeps the doctor away"]
    with LocalCluster() as cluster:
        cluster.submit_topology("state-md", namespace["conf"], builder.create_topology())
        for i in range(100):
            feeder.feed([sentences[i % 2]], msg_id=i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(100)))
    expected = Counter(word for i in range(100) for word in sentences[i % 2].split())
    assert _STATE_MD_COUNTS == expected


def test_the_windows_md_examples_build_their_topologies():
    """Each block of docs/windows.md builds, given what the page names: `RandomIntegerSpout`
    from examples/sliding_window.py, a clicks spout and Redis URL, four join sources. (The
    click-count block used to lack `declare_output_fields`: `create_topology` refused it,
    `[counts] subscribes from non-existent stream: [default] of component [per_window]`; and it
    imported neither `BaseStatefulWindowedBolt` nor `RedisStreamSinkBolt`.)"""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from sliding_window import RandomIntegerSpout
    finally:
        sys.path.remove(str(ROOT / "examples"))
    blocks = python_blocks("docs/windows.md")
    assert len(blocks) == 3, "docs/windows.md's examples changed: look at this test"
    first = run(blocks[0], "docs/windows.md", {"__name__": "windows_md", "RandomIntegerSpout": RandomIntegerSpout})
    first["builder"].create_topology()
    for block, sources in ((blocks[1], {"clicks": ("id", "user", "ts")}),
                           (blocks[2], {f"spout{i}": ("key1", "userId", "key3", "key4", "key2") for i in (1, 2, 3, 4)})):
        builder = TopologyBuilder()
        for name, fields in sources.items():
            builder.set_spout(name, FeederSpout(Fields(*fields)))
        namespace = dict(first, builder=builder, url="redis://127.0.0.1:6379/0")
        run(block, "docs/windows.md", namespace)
        builder.create_topology()


def test_the_concepts_and_cli_md_fragments_run_with_the_readmes_classes():
    """docs/concepts.md's first block and docs/cli.md's `build()` file use the README's spout
    and bolts by name."""
    run(block_with("docs/concepts.md", "set_num_tasks(4)"), "docs/concepts.md", readme_classes())
    namespace = run(block_with("docs/cli.md", "def build():"), "docs/cli.md", readme_classes())
    assert namespace["build"]().spouts.keys() == {"sentences"}
    assert namespace["conf"]["topology.max.spout.pending"] == 1000


@pytest.mark.parametrize("page", ["docs/configuration.md", "docs/trident-connectors.md", "docs/streamparse.md"])
def test_the_pages_self_contained_blocks_run(page):
    """Blocks that only import, configure and build (no cluster): each runs as written."""
    for block in python_blocks(page):
        run(block, page, {"__name__": "docs_page"})
