"""chaos.py's run and checker on the Spark host (``python scripts/chaos.py --host spark --seed 1``).

The cluster: redis-server as in chaos.py; a Spark standalone master and 2 workers of 3 cores,
JVMs started with pyspark's ``spark-class`` on 127.0.0.1 (tests/spark/standalone.py, as the
suite does); squall's master as ``squall nimbus --host spark --spark-master spark://...`` in a
process of its own (the client-mode driver: 6 executors of one core, so 6 task slots for the 5
workers of the two topologies); ``squall ui`` beside it, whose REST figures the checker compares
with the master's. The topologies are submitted to the driver's master as ``squall jar`` does.

The faults (each drawn by the seeded RNG, as in chaos.py):

  kill_worker        SIGKILL a squall worker (the pid the master shows: the process the Spark
                     task's Python worker forks)
  kill_task_python   SIGKILL the Spark task's Python worker above a squall worker
  kill_executor      SIGKILL an executor JVM (CoarseGrainedExecutorBackend); its Spark worker
                     starts another
  kill_spark_worker  SIGKILL a Spark worker daemon's JVM (its executors end with it); a new
                     Spark worker is started a few s later
  kill_master        SIGKILL the driver's Python process (its JVM ends with it), and start
                     `squall nimbus --host spark` again a few s later on the same
                     storm.local.dir: it recovers both topologies and starts their workers again
  redis_pause, redis_restart  as in chaos.py
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import chaos
import yaml

from squall._private import write_private
from tests.spark.conftest import _descendants, cmdline
from tests.spark.standalone import LOOPBACK, StandaloneCluster

REPO = Path(__file__).resolve().parent.parent
KINDS = ["kill_worker", "kill_task_python", "kill_executor", "kill_spark_worker", "kill_master",
         "redis_pause", "redis_restart"]
SLOTS = 6
"""Executors of one core: the two topologies' 5 workers and a spare slot."""


def env_with_repo() -> dict[str, str]:
    """This environment with the repository first on PYTHONPATH (the driver, `squall` and the
    executors import squall from it, and the topologies' test helpers)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}


class SparkMaster(chaos.Master):
    """``squall nimbus --host spark`` in a process of its own: the Spark driver and squall's master."""

    def __init__(self, root: Path, conf: dict, standalone: StandaloneCluster) -> None:
        self.root, self.conf, self.standalone = root, conf, standalone
        self.file = root / "squall.yaml"
        write_private(self.file, yaml.safe_dump(conf))  # it holds the secret: owner-only
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        settings = {"spark.cores.max": SLOTS, "spark.executor.cores": 1, "spark.executor.instances": SLOTS,
                    "spark.executor.memory": "512m", "spark.driver.host": LOOPBACK,
                    "spark.driver.bindAddress": LOOPBACK, "spark.ui.enabled": "false",
                    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                    "spark.executorEnv.PYTHONPATH": env_with_repo()["PYTHONPATH"],
                    "spark.executorEnv.PYTHONFAULTHANDLER": "1"}
        args = [sys.executable, "-m", "squall", "nimbus", "--config", str(self.file), "--host", "spark",
                "--spark-master", self.standalone.url]
        for k, v in settings.items():
            args += ["-c", f"{k}={v}"]
        self.proc = subprocess.Popen(args, env={**self.standalone.env, **env_with_repo()},
                                     stdout=open(self.root / "master.log", "ab"),  # noqa: SIM115 (the driver's life)
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 180  # a new SparkContext and its executors: 15-30 s on 2 busy cores
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark driver exited with status {self.proc.returncode} (master.log)")
            try:
                with self.client() as m:
                    m.list_topologies()
                return
            except Exception:  # noqa: BLE001
                time.sleep(0.3)
        raise RuntimeError("the Spark driver's master did not come up (master.log)")

    def kill(self) -> None:
        """SIGKILL the driver's Python process, and wait for its JVM (pyspark's gateway, which
        ends when its parent's pipe closes) so that the next driver finds the port free."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.jvms():
            time.sleep(0.2)
        for pid in self.jvms():
            chaos.log(f"the driver's JVM {pid} outlived its Python process by 30 s: SIGKILL")
            chaos.signal_pid(pid, signal.SIGKILL)

    def jvms(self) -> list[int]:
        """The pids of this run's driver JVMs (SparkSubmit for pyspark-shell, on this run's Spark master)."""
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                c = cmdline(int(entry))
                if "org.apache.spark.deploy.SparkSubmit" in c and "pyspark-shell" in c and self.standalone.url in c:
                    out.append(int(entry))
        return out


class SparkRun(chaos.Run):
    kinds = KINDS

    def __init__(self, args) -> None:
        super().__init__(args)
        self.ui_port = chaos.free_port()
        self.ui: subprocess.Popen | None = None
        self.listed: list[str] = []

    def make_cluster(self):
        self.conf["squall.spark.stop.grace.secs"] = 3  # a worker the master gave up on is cancelled soon
        self.standalone = StandaloneCluster(self.root / "spark", workers=2, cores=3, memory="3g")
        return SparkMaster(self.root, self.conf, self.standalone), []

    def start(self) -> None:
        self.redis.start()
        self.standalone.__enter__()
        self.master.start()
        self.feeder.start()
        with self.master.client() as m:
            m.submit_topology("plain", chaos.ct.plain_conf(self.redis.url),
                              chaos.ct.plain_topology(self.redis.url, self.args.spouts))
            m.submit_topology("tri", chaos.ct.trident_conf(), chaos.ct.trident_topology(self.redis.url))
        self.stats.start()
        self.ui = subprocess.Popen(
            [sys.executable, "-m", "squall", "ui", "--config", str(self.master.file), "-c", f"ui.port={self.ui_port}",
             "-c", f"ui.host={LOOPBACK}"], env=env_with_repo(), stdin=subprocess.DEVNULL,
            stdout=open(self.root / "ui.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115 (the UI's life)

    # -- faults ----------------------------------------------------------------------------------
    def squall_workers(self) -> list[tuple[str, dict]]:
        """(topology, worker row) of every live squall worker, as the master shows them."""
        out = []
        with self.master.client() as m:
            for name in ("plain", "tri"):
                out += [(name, w) for w in m.get_topology_info(name)["workers"] if w.get("alive") and w.get("pid")]
        return sorted(out, key=lambda nw: (nw[0], nw[1]["slot"]))

    def executors(self) -> list[int]:
        return sorted(p for w in self.standalone.workers if w.alive() for p in _descendants(w.pid)
                      if "CoarseGrainedExecutorBackend" in cmdline(p))

    def fire(self, i: int, kind: str, pick: float, dur: float) -> None:
        if kind not in ("kill_worker", "kill_task_python", "kill_executor", "kill_spark_worker", "kill_master"):
            super().fire(i, kind, pick, dur)
            return
        what = ""
        if kind in ("kill_worker", "kill_task_python"):
            workers = [] if "master" in self.down else self.squall_workers()
            if not workers:
                chaos.log(f"fault {i} {kind}: no worker the master shows running")
                return
            name, w = workers[int(pick * len(workers))]
            pid = w["pid"]
            if kind == "kill_task_python":
                try:
                    pid = int(Path(f"/proc/{w['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except FileNotFoundError:  # it ended since the master's figures
                    chaos.log(f"fault {i} {kind}: worker {w['slot']} of {name} gone")
                    return
            what = f"worker {w['slot']} of {name} (launch {w.get('launch_id')}) pid {pid}"
            chaos.signal_pid(pid, signal.SIGKILL)
        elif kind == "kill_executor":
            executors = self.executors()
            if not executors:
                chaos.log(f"fault {i} {kind}: no executor")
                return
            pid = executors[int(pick * len(executors))]
            what = f"executor JVM pid {pid}"
            chaos.signal_pid(pid, signal.SIGKILL)
        elif kind == "kill_spark_worker":
            live = [w for w in self.standalone.workers if w.alive()]
            if "spark_worker" in self.down or not live:
                return
            daemon = live[int(pick * len(live))]
            self.down.add("spark_worker")
            what = f"Spark worker {daemon.name} pid {daemon.pid}"
            daemon.proc.kill()
            daemon.proc.wait(10)

            def again() -> None:
                try:
                    self.standalone.ensure_workers(2)
                finally:
                    self.down.discard("spark_worker")
            self.later(dur, again)
        elif kind == "kill_master":
            if "master" in self.down:
                return
            self.down.add("master")
            self.master.kill()

            def restart() -> None:
                try:
                    self.master.start()
                finally:
                    self.down.discard("master")
            self.later(dur, restart)
        chaos.log(f"fault {i} {kind} {what} for {dur:.1f}s")
        self.list_now(f"after fault {i}")

    # -- what a user sees -----------------------------------------------------------------------
    def list_now(self, when: str) -> None:
        """`squall list`, as a user would run it now (printed at the end)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            r = subprocess.run([sys.executable, "-m", "squall", "list", "--config", str(self.master.file)],
                               check=False, capture_output=True, text=True, timeout=30, env=env_with_repo())
            self.listed.append(f"squall list {when}:\n{r.stdout.strip()}{r.stderr.strip()[-300:]}")

    def check(self, good, nokey, badjson, expected) -> int:
        status = chaos.Run.check(self, good, nokey, badjson, expected)
        self.list_now("at the end")
        for text in self.listed:
            chaos.log(text)
        problems = []
        with self.master.client() as m:
            for name in ("plain", "tri"):
                info = m.get_topology_info(name)
                restarts = {int(w["slot"].rsplit(":", 1)[1]): w["restarts"] for w in info["workers"]}
                with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/api/v1/topology/{info['id']}",
                                            timeout=10) as r:
                    page = json.load(r)
                rest = {w["port"]: w["restarts"] for w in page["workers"]}
                spouts = {s["spoutId"]: (s["acked"], s["failed"]) for s in page["spouts"]}
                chaos.log(f"{name}: restarts per slot {restarts} (REST {rest}); REST spouts (acked, failed) {spouts}")
                if rest != restarts:
                    problems.append(f"{name}: the REST API's worker restarts {rest} are not the master's {restarts}")
        for p in problems:
            chaos.log(f"PROBLEM: {p}")
        chaos.log(f"driver started {self.master.starts} times")
        return 1 if problems else status

    def stop(self) -> None:
        if self.ui is not None and self.ui.poll() is None:
            self.ui.kill()
            self.ui.wait(10)
        try:
            super().stop()
        finally:
            self.master.kill()
            self.standalone.stop()
