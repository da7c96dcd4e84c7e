"""Fixtures for the example tests: the example modules, loaded from ``examples/`` by path (it
is not a package, as a user's topology file is not), and a LocalCluster per test."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

from squall import LocalCluster

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture, for the Redis example

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as module ``squall_example_<name>`` (once); ``name`` may
    name a file in a folder (``storm_starter/single_join``: ``squall_example_storm_starter_single_join``)."""
    mod_name = f"squall_example_{name.replace('/', '_')}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # so its classes pickle by reference, like any imported module's
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def redis_word_count() -> ModuleType:
    """``examples/redis_word_count.py`` (skipped without the redis library)."""
    pytest.importorskip("redis", reason="the redis library is not installed: pip install -e '.[redis]'")
    return load_example("redis_word_count")


@pytest.fixture(scope="session")
def word_count() -> ModuleType:
    """``examples/word_count.py``."""
    return load_example("word_count")


@pytest.fixture(scope="session")
def exclamation() -> ModuleType:
    """``examples/exclamation.py``."""
    return load_example("exclamation")


@pytest.fixture(scope="session")
def rolling() -> ModuleType:
    """``examples/rolling_top_words.py``."""
    return load_example("rolling_top_words")


@pytest.fixture(scope="session")
def sliding_window() -> ModuleType:
    """``examples/sliding_window.py``."""
    return load_example("sliding_window")


@pytest.fixture(scope="session")
def sliding_tuple_ts() -> ModuleType:
    """``examples/sliding_tuple_ts.py``, which imports ``sliding_window`` from beside it (as
    ``python FILE`` and ``squall local FILE`` allow, with FILE's directory on the path)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        return load_example("sliding_tuple_ts")
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.fixture(scope="session")
def clicks_per_window() -> ModuleType:
    """``examples/clicks_per_window.py`` (skipped without the redis library), which imports
    ``redis_word_count`` from beside it; imported under its own name, as ``squall`` imports a
    topology file (the Spark host ships a module as its file, which workers import by its stem)."""
    pytest.importorskip("redis", reason="the redis library is not installed: pip install -e '.[redis]'")
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module("clicks_per_window")
    finally:
        sys.path.remove(str(EXAMPLES))


def _squall_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("squall")]


@pytest.fixture
def cluster():
    """A fresh LocalCluster; after the test it is shut down and must leave no squall thread."""
    before = set(threading.enumerate())
    c = LocalCluster()
    try:
        yield c
    finally:
        c.shutdown()
    assert wait_until(lambda: not _squall_threads(before), 10), \
        f"threads leaked by the test's topologies: {_squall_threads(before)}"


class StubContext:
    """The little of `TopologyContext` the example spouts use, for calling them directly."""

    def __init__(self, task_id: int = 1, task_index: int = 0) -> None:
        self.task_id = task_id
        self.task_index = task_index

    def get_this_task_id(self) -> int:
        """The task id given."""
        return self.task_id

    def get_this_task_index(self) -> int:
        """The task index given."""
        return self.task_index


class RecordingCollector:
    """A spout collector that records ``(values, msg_id)`` per emit, for calling spouts directly."""

    def __init__(self) -> None:
        self.emitted: list[tuple[list, object]] = []

    def emit(self, values, msg_id=None, stream="default"):
        """Record the emit; it went to one (imaginary) task."""
        self.emitted.append((list(values), msg_id))
        return [1]


@pytest.fixture(scope="session")
def stateful() -> ModuleType:
    """``examples/stateful_topology.py``."""
    return load_example("stateful_topology")
