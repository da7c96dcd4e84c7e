"""squall.trident.spark.launcher (issue 36 item 6): Spark's Python executable for a session squall
makes, a script that takes the installed pyspark's own zips off PYTHONPATH and runs the same
interpreter with the same arguments, so that the Python processes the driver JVM starts without
the daemon (the Data Source's planners) import the compiled pyspark. No Spark session needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.trident.spark.daemon import without_own_zips
from squall.trident.spark.launcher import use_installed_pyspark, write_script


def own_zips() -> list[str]:
    import pyspark

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    return [os.path.join(lib, name) for name in sorted(os.listdir(lib)) if name.endswith(".zip")]


def test_only_the_installed_pysparks_zips_leave_pythonpath_and_the_rest_keeps_its_order(tmp_path):
    own = own_zips()
    assert len(own) == 2  # pyspark.zip and py4j's
    other = "/opt/spark/python/lib/pyspark.zip"  # another Spark's: must match its JVM, so it stays
    pythonpath = os.pathsep.join([own[0], str(tmp_path), other, own[1], "/work/repo/extra.zip", ""])
    assert without_own_zips(pythonpath, sys.path) == os.pathsep.join([str(tmp_path), other, "/work/repo/extra.zip", ""])
    assert without_own_zips(str(tmp_path), sys.path) == str(tmp_path)


def test_the_script_runs_the_same_interpreter_with_the_same_arguments_and_a_stripped_pythonpath(tmp_path):
    script = write_script(str(tmp_path))
    own = own_zips()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*own, str(tmp_path)])}
    show = "import json, os, sys; print(json.dumps([sys.executable, sys.argv, os.environ['PYTHONPATH'], sys.path]))"
    out = subprocess.run([script, "-c", show, "one", "-m two"], env=env, capture_output=True, text=True, check=True)
    executable, argv, pythonpath, path = json.loads(out.stdout)
    assert executable == sys.executable
    assert argv == ["-c", "one", "-m two"]
    assert pythonpath == str(tmp_path)
    assert str(tmp_path) in path and not set(own) & set(path)


def test_the_launcher_is_set_only_where_the_user_chose_no_python_and_the_master_is_local():
    environ: dict[str, str] = {}
    script = use_installed_pyspark(master="local[1]", environ=environ, forkserver=False)
    assert script is not None and environ == {"PYSPARK_PYTHON": script} and os.access(script, os.X_OK)
    assert use_installed_pyspark(environ=environ) is None and environ["PYSPARK_PYTHON"] == script  # set: left alone
    mine = {"PYSPARK_PYTHON": "/usr/bin/python3"}
    assert use_installed_pyspark(environ=mine) is None and mine == {"PYSPARK_PYTHON": "/usr/bin/python3"}
    unset: dict[str, str] = {}
    assert use_installed_pyspark({"spark.pyspark.python": "/usr/bin/python3"}, environ=unset) is None
    # a script in this machine's temporary directory: executors elsewhere could not run it
    assert use_installed_pyspark(master="spark://10.0.0.1:7077", environ=unset) is None and unset == {}
