"""What a Spark driver says when it cannot do what was asked: a second master on a taken port
(JVM-less: the master's thread alone)."""

import socket

import pytest

from squall._errors import SquallError


def test_a_master_whose_port_is_taken_says_a_second_master_needs_its_own_storm_local_dir(tmp_path):
    """Not "nimbus.thrift.port: 0 takes any free port": a second master on the first one's
    storm.local.dir, on another port, resumed and ran every topology a second time."""
    from squall.cluster.master import Master
    from squall.cluster.spark import _MasterThread
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    local_dir = tmp_path / "storm-local"
    try:
        with pytest.raises(SquallError) as e:
            _MasterThread(Master({"storm.local.dir": str(local_dir), "nimbus.host": "127.0.0.1",
                                  "nimbus.thrift.port": port}))
    finally:
        taken.close()
    said = str(e.value)
    assert f"cannot listen on 127.0.0.1:{port}" in said, said
    assert f"a master already running on storm.local.dir {local_dir}" in said, said
    assert "a second master needs its own storm.local.dir" in said, said
    assert "port: 0" not in said and "any free port" not in said, said


_PY4J_FAILURE = """An error occurred while calling o47.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (10.0.0.7 executor 1): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1231, in main
    func, profiler, deserializer, serializer = read_command(pickleSer, infile)
  File "/usr/lib/python3/site-packages/squall/_config.py", line 19, in <module>
    import yaml
ModuleNotFoundError: No module named 'yaml'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:784)

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\t... 31 more
"""


def test_a_failed_worker_jobs_python_traceback_is_kept_without_the_jvms_frames():
    """pyspark 3.5's Py4JJavaError (pyspark 4's PythonException is tested on a real executor in
    test_spark_host.py): the executor's traceback, to its last line, is the worker's output."""
    from squall.cluster.spark import spark_failure
    out = spark_failure(RuntimeError(_PY4J_FAILURE))
    assert out.splitlines()[0] == "Traceback (most recent call last):", out
    assert out.splitlines()[-1] == "ModuleNotFoundError: No module named 'yaml'", out
    assert "import yaml" in out and "PythonRunner.scala" not in out, out
    cancelled = "Job 3 cancelled part of cancelled job group squall-wc-1-1-w0-g1\n\tat org.apache.X.y(Z.scala:1)"
    assert spark_failure(RuntimeError(cancelled)) == "Job 3 cancelled part of cancelled job group squall-wc-1-1-w0-g1"
    assert spark_failure(RuntimeError("")) == "RuntimeError"


_CRASH = ("Python worker exited unexpectedly (crashed). Consider setting "
          "'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler.enabled' "
          "configuration to 'true' for the better Python traceback.")
# a worker's Python process that died without a Python traceback (os._exit, a segfault, SIGKILL):
# pyspark 4.3's Py4JJavaError, its frames from a real local-cluster run (fewer of them)
_PY4J_CRASH = f"""An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor 0): org.apache.spark.SparkException: \
{_CRASH}
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:1136)
\tat org.apache.spark.api.python.PythonRunner$$anon$5.read(PythonRunner.scala:1647)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: java.io.EOFException
\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)
\tat org.apache.spark.api.python.PythonRunner$$anon$5.read(PythonRunner.scala:1632)
\t... 22 more

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: org.apache.spark.SparkException: {_CRASH}
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:1136)
Caused by: java.io.EOFException
\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)
\t... 22 more
"""


def test_a_crashed_python_workers_failure_ends_with_sparks_word_for_it_not_a_bare_jvm_cause():
    """The master's error shows the last line of a worker's output: for a Python worker that
    died without a traceback that was ``Caused by: java.io.EOFException`` (said twice: the
    executor's stack and the driver's). It is Spark's own line, which says what happened, once."""
    from squall.cluster.spark import spark_failure
    out = spark_failure(RuntimeError(_PY4J_CRASH))
    assert out.splitlines()[-1].endswith(f"(127.0.0.1 executor 0): org.apache.spark.SparkException: {_CRASH}"), out
    assert "EOFException" not in out and "Driver stacktrace" not in out and out.count("exited unexpectedly") == 1, out
    # a cause with a message is kept: it is the why
    said = spark_failure(RuntimeError("Job aborted\nCaused by: java.io.IOException: No space left on device"))
    assert said.splitlines()[-1] == "Caused by: java.io.IOException: No space left on device", said


# an executor JVM SIGKILLed on a standalone cluster while it ran a worker's task (the explore of
# 2026-12-07, run 1: pyspark 4's Py4JJavaError, frames shortened)
_PY4J_EXECUTOR_KILLED = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (127.0.0.1 executor 0): ExecutorLostFailure \
(executor 0 exited caused by one of the running tasks) Reason: Command exited with code 137
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\t... 31 more
"""


def _worker_error(output: str, status: int | None = None) -> str:
    """The master's error for a Spark worker that ended so (started, not asked to stop)."""
    from squall._nimbus import EXIT_LOST, WorkerExit
    from squall.cluster.worker_ends import exit_error
    ex = WorkerExit("t-1-1", "spark:0", 2, EXIT_LOST if status is None else status, True, output)
    return exit_error("spark:0", ex, 0.0, started=True).error


def test_a_worker_killed_with_its_executor_says_the_executor_was_killed_by_sigkill_and_what_that_means():
    """It read "worker on spark:0 was lost by its host, without an exit status, without being
    asked to stop: : org.apache.spark.SparkException: ... Reason: Command exited with code 137":
    Py4J's ": " doubled the colon, "without an exit status" stood beside Spark's exit code, and
    nothing said what 137 (SIGKILL) usually means, as the Python worker's own SIGKILL does."""
    from squall.cluster.spark import spark_failure
    out = spark_failure(RuntimeError(_PY4J_EXECUTOR_KILLED))
    assert not any(line.startswith(":") for line in out.splitlines()), out
    assert out.splitlines()[0].startswith("An error occurred while calling"), out
    assert out.splitlines()[1].startswith("org.apache.spark.SparkException: Job aborted"), out
    assert "Driver stacktrace" not in out and "DAGScheduler" not in out, out
    assert _worker_error(out) == (
        "worker on spark:0 was lost by its host without being asked to stop: its Spark executor 0 was killed by "
        "SIGKILL (the kernel's OOM killer, or a kill -9), and the worker with it (Spark: Command exited with code 137)")
    # the Python worker's own SIGKILL (its task's watch saw the signal) reads the same way
    assert _worker_error("no output", -9).startswith(
        "worker on spark:0 was killed by SIGKILL (the kernel's OOM killer, or a kill -9) without being asked to stop")


@pytest.mark.parametrize(("reason", "said"), [
    ("Command exited with code 139", "was killed by SIGSEGV (a crash in native code: an extension module or a "
                                     "library's C code), and the worker with it (Spark: Command exited with code 139)"),
    ("Command exited with code 1", "exited with status 1, and the worker with it (Spark: Command exited with code 1)"),
    ("Worker lost", "was lost (Worker lost)"),
])
def test_an_executor_lost_otherwise_is_said_as_spark_says_it(reason, said):
    from squall.cluster.spark import spark_failure
    text = _PY4J_EXECUTOR_KILLED.replace("Command exited with code 137", reason)
    if reason == "Worker lost":
        text = text.replace("exited caused by one of the running tasks", "exited unrelated to the running tasks")
    assert spark_failure(RuntimeError(text)).splitlines()[-1] == f"its Spark executor 0 {said}"


@pytest.fixture
def no_session(monkeypatch):
    """A Spark session started is this test's failure (and no JVM is left in the process)."""
    from pyspark.sql import SparkSession

    def started(self):
        raise AssertionError("a Spark session (and its JVM) was started for a master URL Spark refuses")
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", started)


def test_squall_jar_with_a_master_url_spark_refuses_names_the_url_not_java(no_session, tmp_path, capsys):
    """A user's typo in ``--spark-master``: spark-submit refused it by exiting before pyspark heard
    from its JVM, and squall said ``Spark could not start its JVM (...); check that JAVA_HOME or the
    java on PATH is a Java that pyspark supports``, with Java installed and fine."""
    from squall.cli import main
    topology = tmp_path / "topo.py"
    topology.write_text("raise SystemExit('the topology file is not run for a bad master URL')\n")
    code = main(["jar", str(topology), "--host", "spark", "--spark-master", "bogus",
                 "-c", f"storm.local.dir={tmp_path / 'storm-local'}"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "squall: error: the Spark master 'bogus' is not a master URL Spark accepts" in err, err
    assert "local[N]" in err and "spark://HOST:PORT" in err and "Java" not in err, err


@pytest.mark.parametrize(("master", "why"), [
    ("local[x]", "not a form Spark knows"),  # was a Py4JJavaError from JavaSparkContext's constructor
    ("local[0]", "no thread"),
    ("spark://127.0.0.1", "HOST:PORT"),  # no port: "Invalid master URL", from inside the JVM
    ("spark://h1:7077,h2", "HOST:PORT"),
    ("127.0.0.1:7077", "not a form Spark knows"),
])
def test_a_master_url_spark_refuses_is_refused_naming_it_before_a_session_starts(no_session, tmp_path, master, why):
    from squall.cluster.spark import SparkCluster
    with pytest.raises(SquallError) as e:
        SparkCluster(master=master, conf={"storm.local.dir": str(tmp_path / "storm-local"), "nimbus.thrift.port": 0})
    said = str(e.value)
    assert f"the Spark master {master!r} is not a master URL Spark accepts" in said and why in said, said


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local[*, 4]",
                                    "local-cluster[2,1,1024]", "local-cluster[ 2 , 1 , 1024 ]",
                                    "spark://127.0.0.1:7077", "spark://h1:7077,h2:7077", "spark://[::1]:7077",
                                    "yarn", "k8s://https://api:443"])
def test_every_master_url_spark_accepts_passes_the_check(master):
    from squall.cluster.spark import check_master
    check_master(master)


# pyspark 4.3's Py4JJavaError when the standalone master at the URL never answered: Spark's client
# tried 3 times, 20 s apart, logged "All masters are unresponsive! Giving up." and stopped the
# context, and the session was then made on it (from a real run against spark://127.0.0.1:1)
_STOPPED = """An error occurred while calling None.org.apache.spark.sql.classic.SparkSession.
: java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
This stopped SparkContext was created at:

org.apache.spark.api.java.JavaSparkContext.<init>(JavaSparkContext.scala:58)
java.base/jdk.internal.reflect.NativeConstructorAccessorImpl.newInstance0(Native Method)
py4j.ClientServerConnection.run(ClientServerConnection.java:108)
java.base/java.lang.Thread.run(Thread.java:840)

And it was stopped at:


The currently active SparkContext was created at:

(No active SparkContext.)
"""


def test_a_standalone_master_that_never_answered_is_named_not_a_stopped_sparkcontext(monkeypatch, tmp_path):
    """``squall jar FILE --host spark --spark-master spark://HOST:PORT`` with nothing answering
    there: after 78 s the user read ``squall: error: unexpected Py4JJavaError: ... Cannot call
    methods on a stopped SparkContext`` and the JVM's stack, naming neither the master nor why."""
    from pyspark.sql import SparkSession

    from squall.cluster.spark import SparkCluster

    def stopped(self):
        raise RuntimeError(_STOPPED)  # what pyspark raised (a Py4JJavaError: its str is this text)
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", stopped)
    with pytest.raises(SquallError) as e:
        SparkCluster(master="spark://127.0.0.1:1", conf={"storm.local.dir": str(tmp_path / "storm-local"),
                                                          "nimbus.thrift.port": 0})
    said = str(e.value)
    assert "the standalone master spark://127.0.0.1:1 did not take it" in said, said
    assert "All masters are unresponsive! Giving up." in said and "Starting Spark master at" in said, said
    assert "stopped SparkContext" not in said and "java.base" not in said, said
    # another failure is left as it was: not every stopped context is a master's doing
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", stopped)
    with pytest.raises(RuntimeError, match="stopped SparkContext"):
        SparkCluster(master="local[2]", conf={"storm.local.dir": str(tmp_path / "storm-local2"), "nimbus.thrift.port": 0})


class _Captured(Exception):
    """Raised by a stand-in ``getOrCreate`` with the options the session would have had."""


@pytest.fixture
def session_options(monkeypatch):
    """The options of the SparkSession a verb asks for (none is started: no JVM)."""
    from pyspark.sql import SparkSession

    asked: list[dict[str, str]] = []

    def capture(self):
        asked.append(dict(self._options))
        raise _Captured("no session in this test")
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", capture)

    def options(argv: list[str]) -> dict[str, str]:
        from squall.cli import main
        assert main(argv) == 1  # "squall: error: unexpected _Captured: no session in this test"
        (one,) = asked
        return one
    return options


@pytest.mark.parametrize("verb", ["jar", "nimbus"])
def test_spark_settings_on_the_command_line_configure_the_session_of_a_spark_driver(session_options, tmp_path, verb):
    """``squall jar FILE --host spark --spark-master spark://... -c spark.cores.max=2`` (a
    standalone application asked to take two cores) put ``spark.cores.max`` in the topology's
    configuration, read by nobody: the application took every core of the cluster, with no word
    said (``squall trident``'s ``-c spark.*`` configured its session all along)."""
    topology = tmp_path / "topo.py"
    topology.write_text("raise SystemExit('FILE runs after the session starts')\n")
    file = [str(topology)] if verb == "jar" else []
    options = session_options([verb, *file, "--host", "spark", "--spark-master", "local[2]",
                               "-c", "spark.cores.max=2", "-c", "spark.executor.memory=1g",
                               "-c", "spark.authenticate=true", "-c", f"storm.local.dir={tmp_path / 'storm-local'}"])
    assert options["spark.master"] == "local[2]", options
    assert (options["spark.cores.max"], options["spark.executor.memory"], options["spark.authenticate"]) == \
        ("2", "1g", "true"), options
    assert options["spark.speculation"] == "false" and "storm.local.dir" not in options, options


@pytest.mark.parametrize("verb", ["jar", "nimbus", "trident"])
def test_a_master_given_with_c_spark_master_is_checked_and_may_not_contradict_spark_master(
        no_session, tmp_path, capsys, verb):
    """``-c spark.master=URL`` configures the session too (since -c spark.* does): a URL Spark
    refuses went past the check of --spark-master, and ``squall jar`` said again that Spark
    could not start its JVM, to check JAVA_HOME; given beside ``--spark-master``, it was applied
    after it and won, without a word. Neither starts a session now."""
    from squall.cli import main
    topology = tmp_path / "topo.py"
    topology.write_text("raise SystemExit('the topology file is not run for a bad master URL')\n")
    file = [str(topology)] if verb != "nimbus" else []
    local_dir = ["-c", f"storm.local.dir={tmp_path / 'storm-local'}"]
    extra = ["--checkpoint", str(tmp_path / "cp")] if verb == "trident" else []
    code = main([verb, *file, "--host", "spark", *extra, "-c", "spark.master=bogus", *local_dir])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "the Spark master 'bogus' is not a master URL Spark accepts" in err and "Java" not in err, err
    code = main([verb, *file, "--host", "spark", *extra, "--spark-master", "local[2]",
                 "-c", "spark.master=local[4]", *local_dir])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "two Spark masters given: 'local[2]' (--spark-master) and 'local[4]' (-c spark.master): give one" in err, err
