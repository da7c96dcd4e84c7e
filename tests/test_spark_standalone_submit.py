"""The pure parts of squall's highly available run on Spark (no JVM): the command that submits
a supervised driver to a standalone master, and ``squall jar --host spark`` resuming a
topology that its master recovered rather than submitting it again. The real cluster's test is
tests/spark/test_spark_standalone_ha.py."""

import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from squall.cli._cluster import _ToCluster
from squall.cli.spark_standalone import CLIENT, SPARK_SUBMIT, driver_command, parse
from squall.cluster.spark import EXIT_SPARK_GONE, SparkCluster, exit_if_spark_gone


def test_the_driver_command_runs_squall_jar_in_client_mode_inside_a_supervised_standalone_driver(tmp_path):
    import squall.cli.spark_submit as entry
    cmd = driver_command("spark://m:7077", ["--config", "c.yaml", "t.py"], spark_submit_args=["--conf", "a=b"],
                         driver_memory="512m", home=tmp_path, jar="file:/j.jar")
    assert cmd[:2] == [str(tmp_path / "bin" / "spark-class"), CLIENT]
    launch = cmd.index("launch")
    assert cmd[2:launch] == ["--supervise", "--cores", "1", "--memory", "512m"]
    assert cmd[launch + 1:] == ["spark://m:7077", "file:/j.jar", SPARK_SUBMIT, "--master", "spark://m:7077",
                                "--deploy-mode", "client", "--conf", "a=b", str(Path(entry.__file__).resolve()),
                                "--config", "c.yaml", "t.py"]
    assert "--supervise" not in driver_command("spark://m:7077", ["t.py"], supervise=False, home=tmp_path, jar="x")


def test_the_driver_command_refuses_what_is_not_a_standalone_master(tmp_path):
    with pytest.raises(ValueError, match=r"spark://HOST:PORT.*'yarn'"):
        driver_command("yarn", ["t.py"], home=tmp_path, jar="x")


def test_the_arguments_split_at_the_double_dash():
    args, spark, squall = parse(["--master", "spark://m:7077", "--supervise", "--conf", "k=v", "--", "-c", "x=1",
                                 "t.py", "arg"])
    assert (args.master, args.supervise, spark, squall) == ("spark://m:7077", True, ["--conf", "k=v"],
                                                            ["-c", "x=1", "t.py", "arg"])
    with pytest.raises(SystemExit, match="expected -- between"):
        parse(["--master", "spark://m:7077", "t.py"])
    with pytest.raises(SystemExit, match="FILE is missing"):
        parse(["--master", "spark://m:7077", "--"])


class _Cluster:
    """What `_ToCluster` uses of a `SparkCluster`, recording the calls."""

    def __init__(self, recovered):
        self.recovered = recovered
        self.conf = {"storm.local.dir": "/shared/storm-local"}
        self.calls = []

    def list_topologies(self):
        return [{"name": name, "id": f"{name}-1-100"} for name in self.recovered]

    def ship_modules(self, topology):
        self.calls.append(("ship", topology))

    def submit_topology(self, name, conf, topology):
        self.calls.append(("submit", name))


def test_squall_jar_on_spark_resumes_a_topology_its_master_recovered_and_submits_a_new_one(capsys):
    cluster = _Cluster(["running"])
    target = _ToCluster(cluster)
    target.submit_topology("running", {}, "topology-object")
    target.submit_topology("new", {}, "other")
    assert cluster.calls == [("ship", "topology-object"), ("submit", "new")]
    assert capsys.readouterr().out.splitlines() == [
        "Resumed topology: running (running-1-100, recovered from /shared/storm-local)",
        "Submitted topology: new"]
    assert target.names == ["running", "new"]  # the driver's own: it waits on and kills only these


def test_a_jar_driver_refuses_recovered_topologies_its_file_does_not_submit_and_resumes_those_it_does():
    """A driver started again (--supervise) finds its FILE's topologies and resumes them; one
    started on another master's storm.local.dir would run that master's topologies and kill
    them at its end: it refuses, naming them (FILE's names are asked for only then)."""
    from squall.cli._cluster import _refuse_others
    from squall.cli._options import UserError
    asked = []

    def names():
        asked.append(1)
        return ["mine"]
    _refuse_others([], names, "t.py", "/shared/storm-local")
    assert asked == []  # nothing recovered: FILE runs as usual, against the started master
    _refuse_others(["mine"], names, "t.py", "/shared/storm-local")
    with pytest.raises(UserError) as e:
        _refuse_others(["a", "mine", "z"], names, "t.py", "/shared/storm-local")
    said = str(e.value)
    assert said.startswith("storm.local.dir /shared/storm-local holds topologies a, z, which t.py does not submit"), said
    assert "-c storm.local.dir=DIR" in said and "`squall nimbus --host spark` there, which resumes them" in said


def test_a_jar_driver_learns_what_its_file_submits_by_running_it_once(tmp_path, capsys):
    """FILE (run as __main__, which may submit anything) runs once: against a recorder when
    the names are needed before the master may start, its submissions replayed after."""
    from squall.cli._cluster import _FileOnSpark
    file = tmp_path / "two.py"
    file.write_text("import pathlib, sys\n"
                    "from squall import StormSubmitter\n"
                    "with open(sys.argv[1], 'a') as f: f.write('ran\\n')\n"
                    "StormSubmitter.submit_topology('one', {'k': 1}, 'topology-1')\n"
                    "StormSubmitter.submit_topology('two', {}, 'topology-2')\n")
    ran = tmp_path / "ran.txt"
    args = SimpleNamespace(name=None, args=[str(ran)])
    on_spark = _FileOnSpark(args, file, {"o": 2}, None)
    assert on_spark.names() == ["one", "two"] and on_spark.names() == ["one", "two"]
    cluster = _Cluster(["two"])
    target = _ToCluster(cluster)
    on_spark.submit(target)
    assert ran.read_text() == "ran\n"
    assert cluster.calls == [("submit", "one"), ("ship", "topology-2")]
    assert target.names == ["one", "two"]


class _Jvm:
    """pyspark's ``sc._jsc``: a live JVM's context, or a gateway whose JVM is gone."""

    def __init__(self, alive):
        self.alive = alive

    def sc(self):
        if not self.alive:
            raise ConnectionRefusedError("the gateway's JVM is gone")  # py4j's Py4JNetworkError, in life
        return SimpleNamespace(isStopped=lambda: False)


def _cluster_on(jvm, tmp_path):
    cluster = SparkCluster.__new__(SparkCluster)  # only what the check reads
    cluster.spark = SimpleNamespace(sparkContext=SimpleNamespace(_jsc=jvm))
    cluster.conf = {"storm.local.dir": "/shared/storm-local"}
    cluster._tmp = tempfile.TemporaryDirectory(prefix="squall-ship-", dir=tmp_path)  # as `_start` makes it
    (Path(cluster._tmp.name) / "mypkg.zip").write_bytes(b"PK")
    return cluster


def test_a_driver_whose_spark_jvm_is_gone_ends_at_once_and_one_whose_jvm_lives_goes_on(tmp_path):
    """Else its Python side would hold the master's port from the driver Spark starts again.
    The one that ends removes the user's zipped packages (``os._exit`` runs no finaliser: each
    driver started again left one more ``squall-ship-*``)."""
    exits = []
    alive = _cluster_on(_Jvm(alive=True), tmp_path)
    exit_if_spark_gone(alive, exits.append)
    assert exits == [] and Path(alive._tmp.name).is_dir()
    gone = _cluster_on(_Jvm(alive=False), tmp_path)
    exit_if_spark_gone(gone, exits.append)
    assert exits == [EXIT_SPARK_GONE]
    assert not Path(gone._tmp.name).exists(), list(Path(gone._tmp.name).iterdir())


def test_a_sigkilled_drivers_zipped_packages_are_removed_by_the_next_driver_on_the_machine(tmp_path):
    """A driver SIGKILLed (``kill -9``, a lost machine, a supervised restart) cannot remove its
    ``squall-ship-*`` directory: a chaos run on a standalone cluster (scripts/chaos.py --host
    spark) left one per kill of the driver, 20 over 8 runs. The next driver removes those whose
    maker is dead, not a live driver's, nor another kind of directory."""
    import subprocess
    import sys

    from squall.cluster.shipping import make_ship_dir, remove_orphaned_ship_dirs
    code = ("import os, signal, sys; from squall.cluster.shipping import make_ship_dir; "
            "d = make_ship_dir(sys.argv[1]); print(d.name, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    driver = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                            check=False, capture_output=True, text=True)
    assert driver.returncode == -9, driver.stderr
    dead = driver.stdout.strip()
    (Path(dead) / "mypkg.zip").write_bytes(b"PK")
    live = make_ship_dir(str(tmp_path))  # this process's: a driver that runs
    (tmp_path / "squall-ship-plain").mkdir()  # not named by a driver (squall trident's): not ours to judge
    assert Path(dead).is_dir() and Path(dead).name.startswith("squall-ship-")
    assert remove_orphaned_ship_dirs(str(tmp_path)) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(live.name).name, "squall-ship-plain"])
    live.cleanup()


def test_a_live_drivers_zipped_packages_in_another_pid_namespace_are_left_alone(tmp_path):
    """A driver in a container that shares this machine's temporary directory names its
    ``squall-ship-*`` directory by a pid of its own namespace, which here is another process:
    the next driver out here must not take it for a dead driver's."""
    import shutil
    import subprocess
    import sys

    from squall.cluster.shipping import remove_orphaned_ship_dirs
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    code = ("import sys; from squall.cluster.shipping import make_ship_dir; "
            "d = make_ship_dir(sys.argv[1]); print(d.name, flush=True); sys.stdin.read()")
    driver = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        made = driver.stdout.readline().strip()
        if not made:
            pytest.skip(f"cannot make a pid namespace here: {driver.stderr.read()[-300:]}")
        assert remove_orphaned_ship_dirs(str(tmp_path)) == []
        assert Path(made).is_dir()
    finally:
        driver.stdin.close()
        driver.wait(10)
