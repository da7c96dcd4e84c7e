"""Spark's Python daemon (``pyspark.daemon``) for Trident on Spark's engine, with pyspark
imported from its installed package: ``spark.python.daemon.module=squall.trident.spark.daemon``.

Spark starts its Python processes with ``pyspark.zip`` first on their ``PYTHONPATH``. Python
compiles a module it imports from a zip anew in every process (zipimport keeps no bytecode), and
every Python worker Spark forks imports pyspark.sql, and with it most of pyspark: in a py-spy
profile of W1 on Spark's engine (``bench.w1t_spark``), compiling pyspark's source was the largest
single cost of the Python workers. When the zip is the installed pyspark's own (a pip install:
``site-packages/pyspark/python/lib/pyspark.zip``, the same files), this daemon takes it and
py4j's zip off ``sys.path`` before anything imports pyspark, so the daemon and the workers it
forks import the compiled modules of the package. Squall's Trident modules are imported here
once, before the fork (they start no thread), so a worker unpickles the bolts without importing
them. A zip from another Spark (``SPARK_HOME`` elsewhere) is left first: its pyspark must match
its JVM. Then it is pyspark's daemon, unchanged (`pyspark.daemon.manager`).
"""

from __future__ import annotations

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


def main() -> None:
    """Run pyspark's daemon with the installed pyspark first."""
    sys.path[:] = installed_first(sys.path)
    from pyspark.daemon import manager

    import squall.trident  # noqa: F401 (imported once, before the daemon forks its workers)

    manager()


if __name__ == "__main__":
    main()
