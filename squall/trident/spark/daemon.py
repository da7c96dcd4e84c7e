"""Spark's Python daemon (``pyspark.daemon``) for Trident on Spark's engine, with pyspark
imported from its installed package: ``spark.python.daemon.module=squall.trident.spark.daemon``.

Spark starts its Python processes with ``pyspark.zip`` first on their ``PYTHONPATH``. Python
compiles a module it imports from a zip anew in every process (zipimport keeps no bytecode), and
every Python worker Spark forks imports pyspark.sql, and with it most of pyspark: in a py-spy
profile of W1 on Spark's engine (``bench.w1t_spark``), compiling pyspark's source was the largest
single cost of the Python workers. When the zip is the installed pyspark's own (a pip install:
``site-packages/pyspark/python/lib/pyspark.zip``, the same files), this daemon takes it and
py4j's zip off ``sys.path`` before anything imports pyspark, so the daemon and the workers it
forks import the compiled modules of the package. Squall's Trident modules, pyarrow, pandas and
pyspark's worker are imported here once, before the fork (they start no thread), so a worker
unpickles the bolts and runs an Arrow function without importing them; then every object so far is frozen out of the garbage collector (``gc.freeze``), which
pyspark's reused workers run in full after each task. A zip from another Spark (``SPARK_HOME``
elsewhere) is left first: its pyspark must match its JVM. Then it is pyspark's daemon, unchanged
(`pyspark.daemon.manager`). `launch` keeps the same rule for ``PYTHONPATH``, for the Python
processes Spark starts without this daemon (``launcher.py``).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys


def installed_first(path: list[str]) -> list[str]:
    """``path`` without the zips of the installed pyspark's own ``python/lib`` (pyspark.zip, py4j's):
    the same modules, which the installed package has compiled."""
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in path if not p.endswith(".zip")]
        spec = importlib.util.find_spec("pyspark")
    finally:
        sys.path[:] = saved
    if spec is None or spec.origin is None:
        return path
    own = os.path.join(os.path.dirname(spec.origin), "python", "lib") + os.sep
    return [p for p in path if not (p.endswith(".zip") and os.path.abspath(p).startswith(own))]


def without_own_zips(pythonpath: str, path: list[str]) -> str:
    """``pythonpath`` (a ``PYTHONPATH`` value) without the installed pyspark's own zips; ``path``
    (``sys.path``) is where the installed pyspark is looked for. Every other entry stays, in order."""
    entries = pythonpath.split(os.pathsep)
    kept = set(installed_first([*entries, *path]))
    return os.pathsep.join(p for p in entries if p in kept)


def launch(argv: list[str], forkserver: str | None = None, path: list[str] | None = None) -> None:
    """Run this interpreter with ``argv`` and the installed pyspark's zips off ``PYTHONPATH``: what
    the script of ``launcher.py`` (Spark's ``PYSPARK_PYTHON``) calls, loading this file by its path.
    ``forkserver``: the socket of squall's fork server (``forkserver.py``), which runs a
    ``-m MODULE`` or ``-c CODE`` as a fork of a process that has imported pyspark already; this
    process then waits for the fork and exits as it did. Where the server is not there or refuses, the interpreter
    runs as before. ``path``: where else to look for the installed pyspark (the script runs
    without site-packages on its own path)."""
    pythonpath = os.environ.get("PYTHONPATH")
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = without_own_zips(pythonpath, [*sys.path, *(path or [])])
    if forkserver is not None and argv[:1] in (["-m"], ["-c"]) and len(argv) >= 2 and os.path.exists(forkserver):
        spec = importlib.util.spec_from_file_location(
            "_squall_spark_forkserver", os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        code = module.run(forkserver, argv)
        if code is not None:
            os._exit(code)
    os.execv(sys.executable, [sys.executable, *argv])


def main() -> None:
    """Run pyspark's daemon with the installed pyspark first."""
    sys.path[:] = installed_first(sys.path)
    from pyspark.daemon import manager

    # Spark starts one daemon per worker module (pyspark's daemon takes it as its argument). Only
    # pyspark's own worker runs Trident's operations and the source's read: its daemon imports,
    # once before the fork, Trident's public modules (squall.trident loads them at first use) and
    # the two modules the workers unpickle functions and readers from. A Data Source's planning
    # workers (lookup_data_sources, create_data_source, plan_data_source_read, the streaming
    # source's runner) unpickle the source only: their daemons import that and no more.
    worker = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].startswith("pyspark") else "pyspark.worker"
    if worker != "pyspark.worker":
        importlib.import_module("squall.trident.spark.source")
    else:
        import squall.trident

        for name in squall.trident.__all__:
            getattr(squall.trident, name)
        importlib.import_module("squall.trident.spark.runner")
        importlib.import_module("squall.trident.spark.source")
        # what a worker running an Arrow function (mapInArrow, the Data Source's read) imports on
        # its first task: pyarrow and pandas took 1-2 s of CPU in each worker forked (py-spy)
        for module in ("pyarrow", "pandas", "pyspark.sql.pandas.serializers", "pyspark.worker"):
            try:
                importlib.import_module(module)
            except ImportError:
                pass  # an install without the trident-spark extra: the worker imports what it has

    # pyspark's reused worker runs gc.collect() after every task: with pyspark, pyarrow and
    # squall imported, walking those objects cost more than a W1 batch's own Python (py-spy).
    # What is frozen here is never collected (it lives as long as the process anyway), and a
    # worker's collections walk what it made since the fork.
    gc.freeze()
    manager()


if __name__ == "__main__":
    main()
