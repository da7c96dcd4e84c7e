"""Shared test helpers: polling with a deadline instead of fixed sleeps, finding the processes a
test's cluster started, and a local Spark session for tests that read squall's output; which
tests start Spark (the ``spark`` mark), and how the rest is shared out between pytest-xdist's
workers (scripts/test: ``-n 2``, the ``spark`` tests one at a time in one worker)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def wait_until(pred: Callable[[], object], timeout: float = 30.0, interval: float = 0.01) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass; return its last truth value.

    The default ``timeout`` only guards against a hang: a test passes as soon as ``pred`` holds,
    so it costs nothing on a quiet machine, and on one shared by a parallel run (or other work)
    a remote host's worker restart can take more than 10 s (tests/acceptance's rebalance on
    Spark did, at load 19). A wait for something that must *not* happen names its window.

    Use it as ``assert wait_until(lambda: tracker.is_acked(1))`` for things that must happen,
    and as ``assert not wait_until(lambda: tracker.is_failed(1), 1.0)`` for things that must
    not happen within a window.
    """
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return bool(pred())
        time.sleep(interval)


QUICK_CRASH_BACKOFF = {"squall.worker.crash.backoff.secs": 0.002}
"""For clusters (LocalCluster's conf, the process host's) whose worker a poison record kills
again and again: restarted after 0, 0.002, 0.004, 0.008 ... s instead of 0, 1, 2, 4 ... s. A
poison record of a Redis Streams or file spout costs a death more since suspects go in groups
(`squall.external.retry.SUSPECT_GROUPS`): three such records with max_retries 0, nine deaths in a
row, wait 0.5 s in all instead of 511. These tests count records and deaths, not the wait: with
0.02 s (5.1 s in all, the last waits 0.6, 1.3 and 2.6 s) each such test waited 3.5-4.5 s more.
On the process host a restart still waits for the master's next sync (0.2 s, `FAST_SYNC`); the
backoff is still taken (a wait is set and the slot held), only shorter."""


def stable_id(value: object) -> str:
    """A parametrized test's id for ``value`` that every process gives it alike: ``repr`` but
    with a set's members sorted by their own ids and no object address. pytest-xdist's workers
    collect on their own and must agree on every id; a set's ``repr`` follows the process's hash
    seed and an object's default ``repr`` its address."""
    if isinstance(value, (set, frozenset)):
        members = ", ".join(sorted(stable_id(v) for v in value))
        if isinstance(value, frozenset):
            return f"frozenset({{{members}}})" if value else "frozenset()"
        return f"{{{members}}}" if value else "set()"
    if isinstance(value, list):
        return "[" + ", ".join(stable_id(v) for v in value) + "]"
    if isinstance(value, tuple) and type(value) is tuple:
        return "(" + ", ".join(stable_id(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{stable_id(k)}: {stable_id(v)}" for k, v in value.items()) + "}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def processes_mentioning(marker: str) -> dict[int, str]:
    """pid -> command line of this machine's processes (other than this one) whose command line
    contains ``marker``, such as a test's own ``storm.local.dir``."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd:
            out[int(d.name)] = cmd
    return out


@pytest.fixture(scope="module")
def spark():
    """A local Spark session (one core) for tests that read what squall wrote as a Spark job
    would; stopped after the module. Skipped without pyspark."""
    pyspark = pytest.importorskip("pyspark.sql")
    session = (pyspark.SparkSession.builder.master("local[1]").appName("squall-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .getOrCreate())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper server (`tests.zookeeper_server`) for a whole module, on a free loopback
    port; stopped after it. Skipped, saying why, where it cannot run."""
    from .zookeeper_server import ZooKeeperServer, missing
    why = missing()
    if why:
        pytest.skip(why)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_zookeeper(tmp_path):
    """A ZooKeeper server of the test's own, to stop and start (request it before a cluster's
    fixture, so that the masters stop before it does). Skipped, saying why, where it cannot run."""
    from .zookeeper_server import ZooKeeperServer, missing
    why = missing()
    if why:
        pytest.skip(why)
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        yield server
    finally:
        server.stop()


# --- which tests start Spark ------------------------------------------------------------------
# scripts/test (the README's and CI's command) runs the whole suite on two pytest-xdist workers,
# with the tests that start Spark all in one group (`SPARK_GROUP`): one at a time, in one
# worker, while the other worker runs the rest. Two workers each starting Spark (its JVMs,
# executors and Python workers) starved each other's executors and failed (the suite with the
# Spark tests in groups of their own took 30 min). A test starts Spark when it is in one of
# these directories or files, asks for one of these fixtures, or is an acceptance test run on
# the Spark host; in an xdist worker, a test without the mark that leaves pyspark's JVM running
# fails, naming this list (see `pytest_runtest_teardown`).
SPARK_PATHS = ("tests/spark/", "tests/trident_spark/", "tests/bench/test_spark_host.py",
               "tests/examples/test_events_to_delta.py",
               "tests/bench/test_peers.py::test_spark_sql_and_udf_splits_are_correct")
"""Node id prefixes of the tests that start Spark themselves (a cluster, a driver, a session)."""

SPARK_FIXTURES = frozenset({"spark", "spark_cluster", "spark_host"})
"""Fixtures that start a Spark session: the root and tests/trident_spark's ``spark``, a module's
``spark_cluster`` (tests/spark), the acceptance package's ``spark_host``."""


def starts_spark(item: pytest.Item) -> bool:
    """Whether ``item`` starts Spark (see the note above)."""
    if item.nodeid.startswith(SPARK_PATHS) or SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return item.nodeid.startswith("tests/acceptance/") and callspec is not None \
        and callspec.params.get("cluster") == "spark"


def _spark_jvm_started() -> bool:
    """pyspark has started its JVM in this process (it stays until the process ends, after
    ``SparkSession.stop``): a test ran Spark here."""
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    return context is not None and getattr(context.SparkContext, "_gateway", None) is not None


def _forget_stopped_sessions_settings() -> None:
    """Once no Spark session runs in this process, clear the ``spark.*`` Java system properties.

    pyspark launches its JVM once per process, with the first session's settings given to
    spark-submit, which makes them system properties; every later SparkConf reads them as
    defaults. So the first Spark test's settings leaked into every later one's session:
    tests/trident_spark's ``spark.python.daemon.module`` ran tests/spark's workers under
    squall's daemon (whose processes its helpers did not recognise), and the Spark host's
    ``spark.pyspark.python`` replaced tests/trident_spark's launcher. Each session now starts
    from its own settings (only the JVM's launch-only ones, its memory and class path, stay the
    first session's)."""
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    if context is None or context.SparkContext._jvm is None or context.SparkContext._active_spark_context:
        return
    with contextlib.suppress(Exception):  # a gateway gone (a test stopped it) has nothing to clear
        system = context.SparkContext._jvm.java.lang.System
        for key in list(system.getProperties().stringPropertyNames()):
            if key.startswith("spark."):
                system.clearProperty(key)


_marked_spark_ran = False  # in this process: after one, pyspark's JVM is expected to run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """In an xdist worker (the parallel part of scripts/test): fail the first test without the
    ``spark`` mark after which pyspark's JVM runs (while no marked test ran in this worker), so
    that a test that starts Spark is not missed by `starts_spark` and run beside another. After
    the last of a run of ``spark`` tests (all of `SPARK_GROUP` in a worker), stop the standalone
    cluster they may have shared (tests/spark/standalone.py's `shared`)."""
    global _marked_spark_ran
    _watch_for_a_hang(item)
    outcome = yield
    if item.get_closest_marker("spark") is not None:
        _marked_spark_ran = True
        _forget_stopped_sessions_settings()
        standalone = sys.modules.get("tests.spark.standalone")
        if standalone is not None and (nextitem is None or nextitem.get_closest_marker("spark") is None):
            standalone.stop_shared()
    elif hasattr(item.config, "workerinput") and not _marked_spark_ran and _spark_jvm_started():
        outcome.force_exception(AssertionError(
            f"{item.nodeid} (or a fixture it shares) started Spark but has no spark mark: add it to "
            "tests/conftest.py's SPARK_PATHS or SPARK_FIXTURES, so that it runs in SPARK_GROUP, one at a time"))


# --- pytest-xdist: which tests run in the same worker, and in what order ----------------------
# Under ``--dist loadgroup`` a group is one unit of work: its tests run in one worker, in order.
# Each module is a group of its own (its module-scoped servers start once, as in a serial run),
# but the tests that ask for a fixture wider than a module that starts a server are one group,
# or each worker would start it. Every test that starts Spark is in one group, `SPARK_GROUP`,
# handed out first: it is the longest (about 11 min here), and xdist gives a worker more work
# only when it has 2 tests left, so the other worker runs everything else meanwhile.
SPARK_GROUP = "spark"
"""The group of the tests with the ``spark`` mark: one worker runs them in file order, and the
package- and module-scoped Spark sessions and clusters each start once."""

REMOTE_HOST_GROUP = "tests/acceptance:process_host"
"""The group of the acceptance tests run on the process host: the package's one master and
supervisor (tests/acceptance/conftest.py). The Spark host's are in `SPARK_GROUP`."""

LONG_FIRST = ("tests/test_native.py", "tests/test_cli_cluster.py", "tests/acceptance/",
              "tests/process/", "tests/bench/", "tests/examples/", "tests/cluster/", "tests/ui/", "tests/external/")
"""Where the long groups are, handed out first (in this order) so that the last minutes of a
run are not one long group on one worker while the other waits. Only the order of the work
changes; a group left out here just comes later."""


def xdist_group_of(item: pytest.Item) -> str:
    """The group ``item`` runs in under ``--dist loadgroup`` (see the note above). xdist appends
    it to the test's id after an ``@``: a name holds no ``@`` and no ``]``."""
    if item.get_closest_marker("spark") is not None:
        return SPARK_GROUP
    path = item.nodeid.split("::")[0]
    host = getattr(item, "callspec", None) and item.callspec.params.get("cluster")
    if path.startswith("tests/acceptance/") and host == "process":
        return REMOTE_HOST_GROUP
    return path


def _order(item: pytest.Item) -> int:
    if item.get_closest_marker("spark") is not None:
        return -1  # SPARK_GROUP first
    return next((i for i, where in enumerate(LONG_FIRST) if item.nodeid.startswith(where)), len(LONG_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``spark`` mark of the tests that start Spark (`starts_spark`); in a pytest-xdist
    worker, each test's ``xdist_group`` (a test that names its own keeps it) and the long groups
    first. tryfirst: ``-m`` and xdist read the marks after this hook."""
    for item in items:
        if starts_spark(item):
            item.add_marker(pytest.mark.spark)
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
    # stable: each file keeps its order; a group's place is where its first test is
    items.sort(key=_order)


# --- a test that hangs past its timeout -------------------------------------------------------
# pytest-timeout's alarm (``timeout`` in pyproject.toml, or a test's mark) fires once, in Python:
# a teardown that hangs after it fired, or a call stuck in C code that never returns to the
# interpreter, held a worker until CI's 90-minute limit with nothing printed (stop 77: the run
# ended "[100%] ......Terminated"). faulthandler's own C thread needs no GIL: past twice the
# test's timeout and a minute in one phase (setup, call, teardown), it writes every thread's
# stack to the real stderr and ends the worker, which pytest-xdist reports as crashed while
# running that test. Armed again at each phase: pytest cancels faulthandler's timer whenever a
# phase fails (its pytest_exception_interact), the timeout's failure among them.
#
# xdist then hands the test's group, the crashed test first, to a new worker: a test that hangs
# every time would end worker after worker. So each worker writes the test it is in to a file
# of this run's; a test that a worker gone before us was in fails at once instead.
_HANG_GRACE_SECS = 60.0
_hang_stderr: int | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _hang_stderr
    if _hang_stderr is None:
        # fd 2 before any test's capture replaces it (pytest's own faulthandler plugin does so too)
        _hang_stderr = os.dup(2)


def _timeout_of(item: pytest.Item) -> float:
    """The pytest-timeout limit of ``item``, read as pytest-timeout reads it: its mark's, else
    ``--timeout``, else ``PYTEST_TIMEOUT``, else the ini's (0: none). Without pytest-timeout
    (``-p no:timeout``) there is none: its ini key is unknown then, and asking for it raised in
    every test's setup; a larger ``PYTEST_TIMEOUT`` ignored had its tests killed at twice the
    ini's."""
    config = item.config
    if not config.pluginmanager.has_plugin("timeout"):
        return 0.0
    mark = item.get_closest_marker("timeout")
    given = None
    if mark is not None and mark.args:
        given = mark.args[0]
    elif mark is not None and "timeout" in mark.kwargs:
        given = mark.kwargs["timeout"]
    if given is None:  # (a mark's None, as pytest-timeout takes it: the default)
        given = config.getoption("timeout", None)
    if given is None:
        given = os.environ.get("PYTEST_TIMEOUT") or None
    if given is None:
        given = config.getini("timeout") or 0
    return float(given)


def _in_test_files(config: pytest.Config) -> Path | None:
    """This run's directory of the tests its xdist workers are in, a file per worker's pid (in
    the base temporary directory the workers share, which pytest removes a few runs later)."""
    basetemp = config.option.basetemp
    if not hasattr(config, "workerinput") or not basetemp:
        return None
    directory = Path(basetemp).parent / "in-test"
    directory.mkdir(exist_ok=True)
    return directory


def _watch_for_a_hang(item: pytest.Item) -> None:
    """Arm faulthandler's timer for the phase of ``item`` about to run (see the note above)."""
    import faulthandler
    timeout = _timeout_of(item)
    if timeout > 0 and _hang_stderr is not None:
        faulthandler.dump_traceback_later(2 * timeout + _HANG_GRACE_SECS, exit=True, file=_hang_stderr)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    directory = _in_test_files(item.config)
    if directory is not None:
        for other in directory.iterdir():
            if other.name != str(os.getpid()) and other.read_text() == item.nodeid:
                pytest.fail(f"{item.nodeid} ended the pytest-xdist worker it ran in (pid {other.name}): it "
                            "crashed it, or hung (then its threads' stacks are printed above); not run again",
                            pytrace=False)
        (directory / str(os.getpid())).write_text(item.nodeid)
    _watch_for_a_hang(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _watch_for_a_hang(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    try:
        yield
    finally:
        import faulthandler
        faulthandler.cancel_dump_traceback_later()
        directory = _in_test_files(item.config)
        if directory is not None:
            (directory / str(os.getpid())).write_text("")


# --- pytest-xdist 3.8.0: a crashed worker's replacement left idle --------------------------------
# Under --dist loadgroup, when a worker crashes (the hang watch above ends it, a test kills its own
# process), LoadScopeScheduling.remove_node puts the worker's whole workload back on the queue,
# the groups it had finished too: handed to a worker later they are empty (`send_runtest_some([])`),
# nothing of them completes, and a worker is only given more when a test of its completes. And a
# worker runs a test only once it knows the next one or that none follows, so one handed a single
# test and nothing after it waits for ever. Either way every worker ends idle and the run hangs
# until CI's limit (pytest-xdist issues 1323, 1327, 1378; fixed upstream after 3.8.0, the newest
# release here). Seen here: the hang watch ended a worker at 99%, its replacement sat idle, and the
# run hung, as stop 77's CI run had ("[100%] ......Terminated").
try:
    from xdist.scheduler import LoadGroupScheduling
except ImportError:  # pragma: no cover (pytest-xdist is in the test extra)
    LoadGroupScheduling = None


if LoadGroupScheduling is not None:
    class _LoadGroupAfterCrash(LoadGroupScheduling):
        """pytest-xdist's loadgroup, with a crashed worker's finished groups dropped and no
        worker left holding one test with nothing to follow it (the note above)."""

        def remove_node(self, node):
            workload = self.assigned_work.get(node, {})
            for group in [g for g, tests in workload.items() if all(tests.values())]:
                del workload[group]  # finished before the crash: nothing in it runs again
            return super().remove_node(node)

        def _assign_work_unit(self, node):
            while self.workqueue:
                group, tests = next(iter(self.workqueue.items()))
                if not all(tests.values()):
                    try:
                        super()._assign_work_unit(node)
                    except OSError:
                        # the worker died since its last message (it ran its first group and
                        # crashed while this call sent its second; seen once in CI: "cannot send
                        # (already closed?)", an INTERNALERROR that ended the run). The group is
                        # in its assigned work, unfinished: its crash, heard next, puts it back.
                        pass
                    return
                del self.workqueue[group]  # nothing left to run in it

        def _reschedule(self, node):
            super()._reschedule(node)
            # a worker with one test to run waits to hear of the next: it gets another group, or
            # is told that none follows
            if not node.shutting_down and node in self.assigned_work \
                    and self._pending_of(self.assigned_work[node]) == 1:
                if self.workqueue:
                    self._assign_work_unit(node)
                if not self.workqueue:
                    try:
                        node.shutdown()
                    except OSError:
                        pass  # it died meanwhile, as above: nothing to tell it

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadgroup":
            return _LoadGroupAfterCrash(config, log)
        return None
