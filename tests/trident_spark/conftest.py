"""Trident on Spark's engine: one SparkSession for the whole directory (``spark``, package-scoped:
a cold session and its first query cost 30-40 s on a loaded machine, a warm query 3-5 s), Spark's
Python workers given the repository on their path (they import tests.trident_spark.ops), and
started as ``squall trident`` starts them: through squall's launcher and fork server."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pandas")
pytest.importorskip("deltalake")

REPO = Path(__file__).resolve().parents[2]


# What makes a local session start and run small batches fast on 2 cores: no UI, 2 shuffle
# partitions, no adaptive planning, no Hive catalog, and driver and executor JVMs (a standalone
# cluster's) with the client compiler only and the serial collector (JIT threads otherwise take
# half the CPU for the first minute).
# Spark's Python workers are reused (its default, said here since the tests rely on it: a batch
# after the first does not start Python again).
FAST_SPARK = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.python.worker.reuse": "true",
    # the installed, compiled pyspark in Spark's Python processes, not pyspark.zip's source
    "spark.python.daemon.module": "squall.trident.spark.daemon",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


# two threads; a failed task tried up to 4 times in all, as a cluster retries one
SPARK_MASTER = "local[2,4]"


def with_repo_on_pythonpath(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's) with the repository first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="package")
def spark():
    """The directory's SparkSession on local[2,4] (two threads; a task tried up to 4 times, as a
    cluster retries one, for test_word_count's killed Python worker); stopped after the package,
    then its fork server."""
    os.environ["PYTHONPATH"] = with_repo_on_pythonpath()["PYTHONPATH"]
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from squall.trident.spark.launcher import FORKSERVER_SOCKET, start_forkserver, write_script

    # getOrCreate would hand back a SparkContext that an earlier test left running in this
    # process (tests/trident/test_docs.py runs a docs block that builds one on local[2]), with its
    # master and settings, not these: on local[2] a task is tried once, and test_word_count's
    # killed Python worker fails the query instead of being retried. A leftover is stopped first.
    leftover = SparkContext._active_spark_context
    if leftover is not None:
        leftover.stop()
    builder = SparkSession.builder.master(SPARK_MASTER).appName("trident-spark-tests")
    for key, value in FAST_SPARK.items():
        builder = builder.config(key, value)
    # Spark waits a fixed 10 s (not a setting) for a Python process it starts to connect back;
    # a fresh interpreter importing pyspark and squall outlasted that on a loaded machine. Forked
    # from the fork server they start in milliseconds, as under `squall trident`. The SparkContext
    # reads PYSPARK_PYTHON once, when it is made, so it is set only around that: the other Spark
    # tests in this process (tests/spark's SparkCluster) choose their own.
    directory = tempfile.mkdtemp(prefix="squall-spark-python-")  # short: a Unix socket's path
    socket_path = os.path.join(directory, FORKSERVER_SOCKET)
    server = start_forkserver(socket_path)
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = write_script(directory, socket_path)
    session = None
    try:
        try:
            session = builder.getOrCreate()
        finally:
            if before is None:
                del os.environ["PYSPARK_PYTHON"]
            else:
                os.environ["PYSPARK_PYTHON"] = before
        assert session.sparkContext.master == SPARK_MASTER, session.sparkContext.master
        session.sparkContext.setLogLevel("ERROR")
        yield session
    finally:
        if session is not None:
            session.stop()
        _stop_forkserver(server)
        shutil.rmtree(directory, ignore_errors=True)


def _stop_forkserver(server: subprocess.Popen) -> None:
    """End the fork server: its stdin closed, it ends after the processes it forked."""
    if server.stdin is not None:
        server.stdin.close()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def is_spark_python_worker(pid: int) -> bool:
    """Whether ``pid`` is one of Spark's Python processes, not this one: its command line is
    pyspark's, or squall's fork server's, which Spark's Python processes are forked from."""
    if pid == os.getpid():
        return False
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return "pyspark" in cmd or "squall.trident.spark.forkserver" in cmd


def write_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` (through a hidden file first when it is new, so a spout
    listing the directory never sees half of it)."""
    text = "".join(line + "\n" for line in lines)
    if path.exists():
        with path.open("a") as f:
            f.write(text)
        return
    tmp = path.with_name("." + path.name)
    tmp.write_text(text)
    os.replace(tmp, path)


def expected_counts(lines: list[str]) -> dict[str, int]:
    """Every word of ``lines`` counted (the gate lines of ops.Split count nothing)."""
    return dict(Counter(w for line in lines if not line.startswith("hold:") for w in line.split()))


def delta_counts(table: Path) -> dict[str, int]:
    """word -> count as the Delta table holds it now."""
    from deltalake import DeltaTable

    if not (table / "_delta_log").exists():
        return {}
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return {r["word"]: r["value"] for r in rows}


def sentences(n: int, seed: int) -> list[str]:
    """``n`` sentences of a few words each, the same for the same seed."""
    import random

    rnd = random.Random(seed)
    words = ["the", "cow", "jumped", "over", "moon", "to", "be", "or", "not", "storm", "spark", "trident"]
    return [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 6))) for _ in range(n)]


def read_batch(reader, start, end) -> list:
    """The tuples a Trident spout's Spark source reader gives for the micro-batch ``start`` to
    ``end``, read partition by partition as Spark's tasks read them."""
    from squall.trident.spark.rows import loads  # needs pyspark's Arrow: only where a test reads

    return [loads(row) for p in reader.partitions(start, end) for rb in reader.read(p)
            for row in rb.column(0).to_pylist()]


def dead_letter_lines(caplog) -> list[str]:
    """The log lines about dead letters that ``caplog`` caught, sorted."""
    return sorted(r.getMessage() for r in caplog.records if "dead letter" in r.getMessage())


def count_lines_live(spark, tmp_path: Path, lines: list[str], translator, max_batch_records: int = 3) -> dict:
    """Counts per line of ``lines`` (one file) as a live Trident query on Spark counts them:
    a `FileTridentSpout` with ``translator``, grouped by line into a `Count` in the driver's
    `MemoryMapState`, run until it has read everything."""
    from squall import Fields
    from squall.external.trident_files import FileTridentSpout
    from squall.trident import MemoryMapState, TridentTopology
    from squall.trident.builtin import Count
    from squall.trident.spark import start

    directory = tmp_path / "in"
    directory.mkdir()
    write_lines(directory / "a.txt", lines)
    factory = MemoryMapState.factory()  # the driver's: read here, in the driver process
    topology = TridentTopology()
    topology.new_stream("lines", FileTridentSpout(str(directory), ["line"], translator=translator,
                                                  max_batch_records=max_batch_records)) \
        .group_by(Fields("line")).persistent_aggregate(factory, Count(), Fields("count"))
    query = start(topology, spark, str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return dict(factory.make_state({}, None, 0, 1).get_tuples())
