"""Spark's Python executable for Trident on Spark's engine, with pyspark imported from its
installed package: ``PYSPARK_PYTHON`` set to a small script that takes the installed pyspark's own
zips off ``PYTHONPATH`` and then runs the same interpreter with the same arguments.

``squall.trident.spark.daemon`` does this for the daemon and the workers it forks, but the driver
JVM also starts Python processes of its own, one after another, without squall's daemon: the
Python Data Source's lookup, creation and read planning (under ``pyspark.daemon``) and the
streaming source's runner, which ``start()`` waits for before the first batch. Each starts with ``pyspark.zip`` first on its
``PYTHONPATH`` and compiles the pyspark it imports anew (zipimport keeps no bytecode). The script
reaches them because pyspark gives every Python function, the Data Source among them, the
SparkContext's ``pythonExec``: ``PYSPARK_PYTHON`` when the context is made.

The script loads ``daemon.py`` by its file (not the ``squall`` package, which would cost more
than it saves) and calls its `launch`, which keeps `installed_first`'s rule: a zip from another Spark
(``SPARK_HOME`` elsewhere) stays first. The script lives in a private temporary directory of the
driver, so it is set only for a local master (``local``, ``local[N]``...): an executor on another
machine could not run it. An unset master counts as local (pyspark's default, unless a
``spark-defaults.conf`` says otherwise).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from typing import Any

# -IS: no site (its .pth files cost more than the rest of this script) and no PYTHON* variables
# (Spark's PYTHONPATH starts with zips every import here would search first); the driver's
# path says where the installed pyspark is, which the interpreter run or forked finds
_SCRIPT = """#!{python} -IS
# squall's Spark Python launcher (squall/trident/spark/launcher.py): the installed pyspark first,
# a fork of squall's fork server where there is one
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_squall_spark_daemon", {daemon!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.launch(sys.argv[1:], {forkserver!r}, {path!r})
"""

FORKSERVER_SOCKET = "forkserver.sock"
"""The fork server's socket, in the launcher script's directory."""


def write_script(directory: str, forkserver: str | None = None) -> str:
    """Write the launcher script (executable) into ``directory``; return its path. ``forkserver``:
    the socket of a fork server (`start_forkserver`) the script asks first."""
    path = os.path.join(directory, "squall-spark-python")
    # by its file: importing the squall package would cost more than the script saves
    daemon = os.path.join(os.path.dirname(os.path.abspath(__file__)), "daemon.py")
    with open(path, "w") as f:
        f.write(_SCRIPT.format(python=sys.executable, daemon=daemon, forkserver=forkserver,
                               path=[p for p in sys.path if p and not p.endswith(".zip") and os.path.isdir(p)]))
    os.chmod(path, 0o700)
    return path


def start_forkserver(path: str, environ: Mapping[str, str] = os.environ) -> subprocess.Popen:
    """Start squall's fork server (``forkserver.py``) listening at ``path``, in this process's
    directory with ``environ`` and the hash seed pyspark gives its Python processes; it ends
    when this process does (its stdin, a pipe from here, closes), after the processes it forked."""
    env = dict(environ)
    env["PYTHONHASHSEED"] = environ.get("PYTHONHASHSEED", "0")  # as pyspark's SparkContext sets it
    server = subprocess.Popen([sys.executable, "-m", "squall.trident.spark.forkserver", path],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    atexit.register(_close_stdin, server)
    return server


def _close_stdin(server: subprocess.Popen) -> None:
    if server.stdin is not None:
        server.stdin.close()


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs the executors in this process (``local``, ``local[N]``, ``local[N,F]``)."""
    return master is None or master == "local" or master.startswith("local[")


def use_installed_pyspark(spark_conf: Mapping[str, Any] | None = None, master: str | None = None,
                          environ: MutableMapping[str, str] = os.environ, forkserver: bool = True) -> str | None:
    """Set ``PYSPARK_PYTHON`` in ``environ`` to the launcher before a SparkSession is made; return
    the script's path, or None when left alone: the user chose a Python (``PYSPARK_PYTHON``,
    ``spark.pyspark.python``) or the master is not local. ``forkserver``: also start squall's fork
    server (``forkserver.py``), which imports pyspark, pyarrow, pandas and Trident while the JVM
    starts, and from which the launcher forks Spark's Python processes. The script's directory is
    removed at exit (a driver killed by SIGKILL leaves it behind: one small file)."""
    if environ.get("PYSPARK_PYTHON") or (spark_conf or {}).get("spark.pyspark.python") or not is_local(master):
        return None
    directory = tempfile.mkdtemp(prefix="squall-spark-python-")
    atexit.register(shutil.rmtree, directory, True)
    socket_path = os.path.join(directory, FORKSERVER_SOCKET) if forkserver else None
    environ["PYSPARK_PYTHON"] = path = write_script(directory, socket_path)
    if socket_path is not None:
        start_forkserver(socket_path, environ)
    return path
