"""squall in cluster deploy mode on a Spark standalone master, supervised: the driver (and so
the master, Storm's Nimbus) runs on one of the cluster's workers, and Spark starts it again
when it dies::

    python -m squall.cli.spark_standalone --master spark://HOST:7077 --supervise \\
        [--driver-cores N] [--driver-memory MEM] [--jar URL] [SPARK-SUBMIT OPTION ...] \\
        -- [squall jar option ...] FILE [ARG ...]

``spark-submit --deploy-mode cluster`` refuses Python applications on a standalone master
("Cluster deploy mode is currently not supported for python applications on standalone
clusters"), but the standalone master's own driver launcher does not care what the driver
runs. So this submits, with Spark's ``org.apache.spark.deploy.Client`` (what spark-submit's
cluster mode uses), a driver whose main class is ``SparkSubmit`` in client mode running
squall's entry file (`squall.cli.spark_submit`): the master's worker runs it, and with
``--supervise`` runs it again whenever it exits with a failure. The restarted ``squall jar``
finds its topology in ``storm.local.dir`` and resumes it rather than submitting it again
(docs/spark.md, "Highly available").

Paths (FILE, the entry file, ``storm.local.dir``, the ``--jar``) are read on the worker that
runs the driver, in a work directory of its own, not here: give them absolute, and the same on
every worker (a shared filesystem, the same install). The environment of this command is the driver's (Spark's Client passes it on):
``PYSPARK_PYTHON`` defaults to this Python.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CLIENT = "org.apache.spark.deploy.Client"
SPARK_SUBMIT = "org.apache.spark.deploy.SparkSubmit"


def spark_home() -> Path:
    """``SPARK_HOME``, else the pyspark package (pip's pyspark carries ``bin/`` and ``jars/``)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home)
    import pyspark
    return Path(pyspark.__file__).parent


def default_jar(home: Path) -> str:
    """A jar for the driver's description, which Spark's standalone master requires and the
    worker copies into the driver's directory: Spark's smallest own jar (``spark-tags``),
    which every worker with Spark installed at the same path has. Nothing is loaded from it."""
    jars = sorted((home / "jars").glob("spark-tags_*.jar"))
    if not jars:
        raise SystemExit(f"squall: error: no spark-tags jar in {home / 'jars'}: pass --jar URL (any jar every "
                         f"worker can fetch)")
    return jars[0].as_uri()


def driver_command(master: str, squall_args: Sequence[str], *, spark_submit_args: Sequence[str] = (),
                   supervise: bool = True, driver_cores: int = 1, driver_memory: str = "1g",
                   home: Path | None = None, jar: str | None = None) -> list[str]:
    """The command that asks the standalone ``master`` (``spark://HOST:PORT``) to run a driver
    that runs ``squall jar --host spark SQUALL_ARGS`` in client mode, with
    ``spark_submit_args`` (``--conf``, ``--total-executor-cores``, ``--py-files``, ...)."""
    if not master.startswith("spark://"):
        raise ValueError(f"--master: a standalone master's URL (spark://HOST:PORT) is needed, got {master!r}")
    from . import spark_submit
    home = home or spark_home()
    return [str(home / "bin" / "spark-class"), CLIENT, *(["--supervise"] if supervise else []),
            "--cores", str(driver_cores), "--memory", driver_memory, "launch", master, jar or default_jar(home),
            SPARK_SUBMIT, "--master", master, "--deploy-mode", "client", *spark_submit_args,
            str(Path(spark_submit.__file__).resolve()), *squall_args]


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    """This command's options, spark-submit's (before ``--``) and squall jar's (after)."""
    if "--" not in argv:
        raise SystemExit("squall: error: expected -- between the Spark options and squall jar's FILE "
                         "(... -- [squall jar option ...] FILE [ARG ...])")
    cut = argv.index("--")
    ours = argparse.ArgumentParser(prog="python -m squall.cli.spark_standalone",
                                   description="Run squall jar --host spark as a driver of a Spark standalone "
                                               "cluster (cluster deploy mode)")
    ours.add_argument("--master", required=True, help="the standalone master, spark://HOST:PORT")
    ours.add_argument("--supervise", action="store_true", help="Spark restarts the driver when it fails")
    ours.add_argument("--driver-cores", type=int, default=1, help="cores for the driver (default 1)")
    ours.add_argument("--driver-memory", default="1g", help="memory for the driver (default 1g)")
    ours.add_argument("--jar", help="a jar URL every worker can fetch (default: Spark's spark-tags jar)")
    args, spark_args = ours.parse_known_args(argv[:cut])
    if not argv[cut + 1:]:
        raise SystemExit("squall: error: FILE is missing after --")
    return args, spark_args, argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    """Submit; Spark's Client prints the driver's id (``driver-...``) and its state."""
    args, spark_args, squall_args = parse(sys.argv[1:] if argv is None else argv)
    try:
        command = driver_command(args.master, squall_args, spark_submit_args=spark_args, supervise=args.supervise,
                                 driver_cores=args.driver_cores, driver_memory=args.driver_memory, jar=args.jar)
    except ValueError as e:
        raise SystemExit(f"squall: error: {e}") from None
    env = {**os.environ}
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # the driver's Python, and its executors'
    env.setdefault("PYSPARK_DRIVER_PYTHON", env["PYSPARK_PYTHON"])
    return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
