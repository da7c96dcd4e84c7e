"""A seeded chaos run on the process host, with a checker that counts every record.

    python scripts/chaos.py --seed 7        # from the repository's root; about 4 minutes

Needs Linux (the "machines" are 127.0.0.2-4, and /proc is read), redis-server
(scripts/install-system-deps.sh) and the redis extra. docs/resilience.md says what it found.

Sets up, in a temporary directory: a redis-server (appendonly, fsync always), a master
(supervise=False) and 3 supervisors ("machines" on 127.0.0.2-4, 2 slots each), and submits two
topologies over one Redis stream (chaos_topology.py): the plain pipeline (3 workers) and a Trident
count (2 workers). A feeder adds records at a steady rate, a few malformed. Every few seconds a
seeded RNG picks a fault:

  kill_worker      SIGKILL a worker
  kill_supervisor  SIGKILL a supervisor (its workers die with it); restarted a few s later
  kill_master      SIGKILL the master; restarted a few s later
  zombie           SIGSTOP a worker longer than the message timeout, then SIGCONT
  freeze_machine   SIGSTOP a supervisor and its workers past nimbus.task.timeout.secs, then SIGCONT
  redis_restart    SIGKILL redis-server and start it again on its data (AOF)
  redis_pause      SIGSTOP redis-server a few seconds, then SIGCONT

After the fault phase everything is resumed and the run waits for quiescence, then checks:
the stateful bolt's committed counts and the Trident counts equal the good records' counts per
key; the sink wrote every good record; each malformed record is dead-lettered exactly once, as
documented; no good record is dead-lettered; the spout's figures add up. Exit status 1 on any
violation (the seed and schedule are printed). To shrink a failing run, replay some of its
faults with --only (the schedule's indexes; the first of them then fires after the warm-up):

    python scripts/chaos.py --seed 9 --every 3 --only 38

With --host spark (chaos_spark.py) the same topologies and checker run on the Spark host: a
standalone cluster (pyspark's spark-class master and 2 workers on loopback) and the master as
`squall nimbus --host spark`, a client-mode driver; its faults are Spark's (see chaos_spark.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import redis
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository: its tests' helpers

import chaos_topology as ct

from squall._config import cluster_conf
from squall._private import write_private
from squall.cluster.client import MasterClient
from squall.external.trident_redis import RedisMapState
from tests.conftest import processes_mentioning

SECRET = "chaos-run-secret-0123456789abcdef"
TASK_TIMEOUT = 10     # nimbus.task.timeout.secs
MSG_TIMEOUT = 8       # topology.message.timeout.secs
KINDS = ["kill_worker", "kill_supervisor", "kill_master", "zombie", "freeze_machine", "redis_restart", "redis_pause"]


def free_port(host: str = "127.0.0.1") -> int:
    import socket
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class RedisProc:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "yes"],
            stdout=open(self.dir / "redis.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115 (open for the server's life)
        c = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if c.ping():
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not come up")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            signal_pid(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url.rsplit("/", 1)[0] + f"/{db}", decode_responses=True, socket_timeout=10)


class Master:
    def __init__(self, root: Path, conf: dict) -> None:
        self.root = root
        self.conf = conf
        self.file = root / "squall.yaml"
        write_private(self.file, yaml.safe_dump(conf))  # it holds the secret: owner-only
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        code = ("import logging, sys; logging.basicConfig(level=logging.INFO);"
                "from squall._config import cluster_conf; from squall.cluster.process import run_nimbus;"
                f"sys.exit(run_nimbus(cluster_conf(None, {str(self.file)!r}), supervise=False))")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                     stderr=open(self.root / "master.log", "ab"))  # noqa: SIM115 (the master's life)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with self.client() as m:
                    m.list_topologies()
                return
            except Exception:  # noqa: BLE001
                time.sleep(0.1)
        raise RuntimeError("master did not come up")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self) -> MasterClient:
        return MasterClient(cluster_conf(self.conf))


class Machine:
    def __init__(self, root: Path, conf: dict, name: str, address: str, slots: list[int]) -> None:
        self.name, self.address = name, address
        self.dir = root / "machines" / name
        self.dir.mkdir(parents=True)
        self.conf = {**conf, "storm.local.dir": str(self.dir), "storm.local.hostname": address,
                     "supervisor.slots.ports": slots}
        self.file = self.dir.parent / f"{name}.yaml"
        write_private(self.file, yaml.safe_dump(self.conf))  # it holds the secret: owner-only
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(self.file),
             "--log", str(self.dir.parent / f"{self.name}.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            signal_pid(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def workers(self) -> dict[int, str]:
        return {p: c for p, c in processes_mentioning(str(self.dir)).items() if "squall.worker" in c}

    def freeze(self, sig: int) -> list[int]:
        pids = [self.proc.pid] if self.alive() else []
        if pids:
            signal_pid(pids[0], sig)
        for pid in self.workers():
            signal_pid(pid, sig)
            pids.append(pid)
        return pids


class Feeder(threading.Thread):
    """Adds records 0.. at ``rate`` a second with ids ``<i+1>-1`` (so a retried XADD after a lost
    reply is told apart: Redis refuses an id not above the last). ``kinds[i]``: good, nokey,
    badjson."""

    def __init__(self, r: RedisProc, rng: random.Random, rate: float) -> None:
        super().__init__(daemon=True)
        self.r, self.rng, self.rate = r, rng, rate
        self.kinds: list[str] = []
        self.stop_at: float | None = None
        self.stopped = threading.Event()

    def record(self, i: int) -> tuple[str, dict[str, str]]:
        x = self.rng.random()
        kind = "nokey" if x < 0.004 else "badjson" if x < 0.008 else "good"
        payload = "{not json" if kind == "badjson" else json.dumps({"n": i})
        fields = {"payload": payload} if kind == "nokey" else {"key": f"k{i % ct.KEYS}", "payload": payload}
        return kind, fields

    def run(self) -> None:
        c = self.r.client()
        c.xgroup_create(ct.STREAM, ct.GROUP, id="0", mkstream=True)
        i, start = 0, time.monotonic()
        while self.stop_at is None or time.monotonic() < self.stop_at:
            due = start + i / self.rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            kind, fields = self.record(i)
            entry = f"{i + 1}-1"
            while True:
                try:
                    c.xadd(ct.STREAM, fields, id=entry)
                    break
                except redis.ResponseError as e:
                    if "equal or smaller" in str(e) and c.xrange(ct.STREAM, entry, entry):
                        break  # added before its reply was lost
                    raise
                except (redis.ConnectionError, redis.TimeoutError):
                    time.sleep(0.2)
            self.kinds.append(kind)
            i += 1
        self.stopped.set()


class Stats(threading.Thread):
    """Polls the master's figures of both topologies; keeps the last seen per (topology, component,
    task, worker launch)."""

    def __init__(self, master: Master, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.master, self.names = master, names
        self.seen: dict[tuple, dict] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            self.poll()

    def poll(self) -> None:
        with contextlib.suppress(Exception), self.master.client() as m:  # the master may be down
            for name in self.names:
                info = m.get_topology_info(name)
                for cid, comp in info["components"].items():
                    for task, st in comp["task_stats"].items():
                        key = (name, cid, int(task), st.get("slot"), st.get("launch_id"))
                        runs = self.seen.setdefault(key, [])
                        total = sum(st["emitted"].values()) + st["acked"] + st["failed"]
                        if not runs or total < runs[-1][0]:
                            runs.append([total, st])  # a restart under the same launch counts from zero
                        runs[-1] = [total, st]


class Run:
    def __init__(self, args) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.root = Path(tempfile.mkdtemp(prefix=f"chaos-{args.seed}-", dir=args.dir))
        self.redis = RedisProc(self.root)
        master_port = free_port()
        self.conf = {"storm.local.dir": str(self.root / "master"), "nimbus.thrift.port": master_port,
                     "nimbus.host": "127.0.0.1", "squall.secret": SECRET,
                     "nimbus.task.timeout.secs": TASK_TIMEOUT, "supervisor.monitor.frequency.secs": 0.5,
                     "nimbus.monitor.freq.secs": 0.5, "squall.worker.crash.backoff.secs": 0.2}
        (self.root / "master").mkdir()
        self.master, self.machines = self.make_cluster()
        self.feeder = Feeder(self.redis, random.Random(args.seed * 7919 + 1), args.rate)
        self.stats = Stats(self.master, ["plain", "tri"])
        self.schedule = self.make_schedule()
        self.timers: list[threading.Timer] = []
        self.down: set[str] = set()   # what a fault took down and is to come back

    kinds = KINDS
    """The faults this host's schedule draws from (chaos_spark.SparkRun has its own)."""

    def make_cluster(self) -> tuple[Master, list[Machine]]:
        """The master and the supervisors' "machines" (chaos_spark.SparkRun: a Spark driver, none)."""
        return Master(self.root, self.conf), [
            Machine(self.root, self.conf, f"m{i}", f"127.0.0.{i + 2}", [free_port(f"127.0.0.{i + 2}") for _ in range(2)])
            for i in range(3)]

    def make_schedule(self) -> list[tuple[float, str, float, float]]:
        """(time from the start, kind, a number in [0, 1) to pick the target, a duration)."""
        rng, out, t = self.rng, [], self.args.warmup
        kinds = self.args.kinds.split(",") if self.args.kinds else self.kinds
        while t < self.args.secs:
            kind = rng.choice(kinds)
            pick = rng.random()
            if kind == "zombie":
                dur = rng.uniform(MSG_TIMEOUT + 1, MSG_TIMEOUT + 8)
            elif kind == "freeze_machine":
                dur = rng.uniform(TASK_TIMEOUT + 2, TASK_TIMEOUT + 8)
            elif kind == "redis_pause":  # past the clients' 5 s socket timeouts at times
                dur = rng.uniform(1, 10)
            else:
                dur = rng.uniform(0.5, 8)
            out.append((t, kind, pick, dur))
            t += rng.uniform(self.args.every * 0.5, self.args.every * 1.5)
        if self.args.only is not None:  # shrinking: those faults alone, the first at the warm-up's end
            keep = {int(x) for x in self.args.only.split(",") if x != ""}
            out = [f for i, f in enumerate(out) if i in keep]
            shift = out[0][0] - self.args.warmup if out else 0.0
            out = [(t - shift, kind, pick, dur) for t, kind, pick, dur in out]
            self.args.secs = max((t + dur + 10 for t, _, _, dur in out), default=self.args.warmup + 10)
        return out

    # -- faults ---------------------------------------------------------------------------------
    def all_workers(self) -> list[tuple[Machine, int, str]]:
        out = []
        for mc in self.machines:
            for pid, cmd in sorted(mc.workers().items(), key=lambda pc: pc[1]):
                out.append((mc, pid, cmd))
        return out

    def later(self, secs: float, fn) -> None:
        t = threading.Timer(secs, fn)
        t.daemon = True
        t.start()
        self.timers.append(t)

    def fire(self, i: int, kind: str, pick: float, dur: float) -> None:
        what = ""
        if kind in ("kill_worker", "zombie"):
            workers = self.all_workers()
            if not workers:
                log(f"fault {i} {kind}: no worker running")
                return
            mc, pid, cmd = workers[int(pick * len(workers))]
            slot = cmd.split("--slot ")[1].split()[0]
            storm = cmd.split("--storm-id ")[1].split()[0]
            what = f"worker {slot} of {storm} pid {pid}"
            if kind == "kill_worker":
                signal_pid(pid, signal.SIGKILL)
            else:
                signal_pid(pid, signal.SIGSTOP)
                self.later(dur, lambda: signal_pid(pid, signal.SIGCONT))
        elif kind in ("kill_supervisor", "freeze_machine"):
            live = [mc for mc in self.machines if mc.alive() and mc.name not in self.down]
            if not live:
                log(f"fault {i} {kind}: no machine up")
                return
            mc = live[int(pick * len(live))]
            what = f"machine {mc.name} ({mc.address})"
            self.down.add(mc.name)
            if kind == "kill_supervisor":
                mc.kill()
                self.later(dur, lambda: (mc.start(), self.down.discard(mc.name)))
            else:
                pids = mc.freeze(signal.SIGSTOP)
                what += f" pids {pids}"

                def thaw():
                    for p in pids:
                        signal_pid(p, signal.SIGCONT)
                    self.down.discard(mc.name)
                self.later(dur, thaw)
        elif kind == "kill_master":
            if "master" in self.down:
                return
            self.down.add("master")
            self.master.kill()
            self.later(dur, lambda: (self.master.start(), self.down.discard("master")))
        elif kind == "redis_restart":
            if "redis" in self.down:
                return
            self.down.add("redis")
            self.redis.kill()
            self.later(dur, lambda: (self.redis.start(), self.down.discard("redis")))
        elif kind == "redis_pause":
            if "redis" in self.down:
                return
            self.down.add("redis")
            signal_pid(self.redis.proc.pid, signal.SIGSTOP)
            self.later(dur, lambda: (signal_pid(self.redis.proc.pid, signal.SIGCONT), self.down.discard("redis")))
        log(f"fault {i} {kind} {what} for {dur:.1f}s")

    # -- the run ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.redis.start()
        self.master.start()
        for mc in self.machines:
            mc.start()
        with self.master.client() as m:
            deadline = time.monotonic() + 60
            while len(m.nimbus.supervisors()) < 3:
                if time.monotonic() > deadline:
                    raise RuntimeError("supervisors did not register")
                time.sleep(0.2)
        self.feeder.start()
        with self.master.client() as m:
            m.submit_topology("plain", ct.plain_conf(self.redis.url), ct.plain_topology(self.redis.url, self.args.spouts))
            m.submit_topology("tri", ct.trident_conf(), ct.trident_topology(self.redis.url))
        self.stats.start()

    def run(self) -> int:
        log(f"seed {self.args.seed}: {len(self.schedule)} faults over {self.args.secs}s in {self.root}")
        for i, (t, kind, pick, dur) in enumerate(self.schedule):
            log(f"  schedule {i}: t={t:.1f} {kind} pick={pick:.3f} dur={dur:.1f}")
        self.start()
        t0 = time.monotonic()
        for i, (t, kind, pick, dur) in enumerate(self.schedule):
            wait = t0 + t - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                self.fire(i, kind, pick, dur)
            except Exception as e:  # noqa: BLE001
                log(f"fault {i} {kind} raised {type(e).__name__}: {e}")
        wait = t0 + self.args.secs - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.feeder.stop_at = time.monotonic()
        self.feeder.stopped.wait(60)
        log(f"fault phase over; {len(self.feeder.kinds)} records fed; resuming everything")
        for t in self.timers:
            t.join(60)
        return self.settle_and_check()

    # -- the checker --------------------------------------------------------------------------------
    def truth(self):
        kinds = self.feeder.kinds
        ids = [f"{i + 1}-1" for i in range(len(kinds))]
        good = {ids[i] for i, k in enumerate(kinds) if k == "good"}
        nokey = {ids[i] for i, k in enumerate(kinds) if k == "nokey"}
        badjson = {ids[i] for i, k in enumerate(kinds) if k == "badjson"}
        counts = Counter(f"k{i % ct.KEYS}" for i, k in enumerate(kinds) if k == "good")
        return good, nokey, badjson, dict(counts)

    def committed_counts(self) -> tuple[dict, set]:
        from squall.state import StateHome, get_state, state_key

        class Reader:
            state_home = StateHome(key=state_key(SECRET.encode()))

            def get_this_component_id(self):
                return "(checker)"

            def get_this_task_id(self):
                return -1

        entries: dict = {}
        c = self.redis.client()
        conf = {**ct.plain_conf(self.redis.url), "topology.name": "plain"}
        for key in c.keys("plain/count-*"):
            if "$" not in key:
                entries.update(dict(get_state(key[len("plain/"):], conf, Reader()).committed()))
        counts = {k[1]: v for k, v in entries.items() if k[0] == "count"}
        seen = {k[1] for k in entries if k[0] == "seen"}
        return counts, seen

    def trident_counts(self) -> dict:
        c = redis.Redis.from_url(ct.trident_state_url(self.redis.url))
        keys = sorted(k.decode() for k in c.keys("k*"))
        ser = RedisMapState.transactional(ct.trident_state_url(self.redis.url)).serializer
        return {k: ser.deserialize(v).val for k, v in zip(keys, c.mget(keys)) if v is not None} if keys else {}

    def dead_letters(self) -> list[dict]:
        return [d for _, d in self.redis.client().xrange(f"{ct.STREAM}:dead")]

    def settle_and_check(self) -> int:
        good, nokey, badjson, expected = self.truth()
        c = self.redis.client()
        deadline = time.monotonic() + self.args.settle
        state = {}
        while time.monotonic() < deadline:
            try:
                pending = c.xpending(ct.STREAM, ct.GROUP)["pending"]
                written = len(c.keys("out:*"))
                dead = c.xlen(f"{ct.STREAM}:dead")
                tri = self.trident_counts()
                counts, _ = self.committed_counts()
                state = {"pending": pending, "written": written, "dead": dead,
                         "tri": sum(tri.values()), "counted": sum(counts.values())}
                if (pending == 0 and written >= len(good) and dead >= len(nokey) + len(badjson)
                        and tri == expected and counts == expected):
                    break
            except redis.RedisError as e:
                state = {"redis": repr(e)}
            time.sleep(2)
        log(f"settled: {state} (good {len(good)}, nokey {len(nokey)}, badjson {len(badjson)})")
        time.sleep(3)  # the figures of the last heartbeats
        self.stats.poll()
        return self.check(good, nokey, badjson, expected)

    def check(self, good, nokey, badjson, expected) -> int:
        problems: list[str] = []
        counts, seen = self.committed_counts()
        if counts != expected:
            diff = {k: (counts.get(k), expected.get(k)) for k in sorted(set(counts) | set(expected))
                    if counts.get(k) != expected.get(k)}
            problems.append(f"stateful counts (got, want): {diff}")
        if seen != good:
            problems.append(f"stateful seen: {len(good - seen)} good ids missing {sorted(good - seen)[:10]}, "
                            f"{len(seen - good)} not good {sorted(seen - good)[:10]}")
        tri = self.trident_counts()
        if tri != expected:
            diff = {k: (tri.get(k), expected.get(k)) for k in sorted(set(tri) | set(expected))
                    if tri.get(k) != expected.get(k)}
            problems.append(f"trident counts (got, want): {diff}")
        c = self.redis.client()
        out = {k.split(":", 1)[1] for k in c.keys("out:*")}
        if good - out:
            problems.append(f"sink: {len(good - out)} good records never written: {sorted(good - out)[:10]}")
        if out - good:
            problems.append(f"sink: {len(out - good)} records written that are not good: {sorted(out - good)[:10]}")
        dead = self.dead_letters()
        per_id = Counter(d["id"] for d in dead)
        twice = {i: n for i, n in per_id.items() if n > 1}
        if twice:
            problems.append(f"dead letters: {len(twice)} ids dead-lettered more than once: {dict(list(twice.items())[:10])}")
        if set(per_id) & good:
            bad_good = sorted(set(per_id) & good)
            errs = [next(d["error"] for d in dead if d["id"] == i) for i in bad_good[:3]]
            problems.append(f"dead letters: {len(bad_good)} good records dead-lettered: {bad_good[:10]} {errs}")
        for i in nokey | badjson:
            if i not in per_id:
                problems.append(f"dead letters: malformed {i} never dead-lettered")
        for d in dead:
            if d["id"] in nokey and "missing field 'key'" not in d["error"]:
                problems.append(f"dead letter of {d['id']} (no key) says: {d['error']}")
            if d["id"] in badjson:
                cause = json.loads(d.get("cause", "null") or "null")
                if not (d["error"].startswith("failed 4 times (max_retries 3); last: exception in [parse] task")
                        and cause and cause.get("kind") == "exception" and cause.get("component") == "parse"):
                    problems.append(f"dead letter of {d['id']} (bad JSON) says: {d['error']} cause {cause}")
        # the spout figures: every launch's last figures, and the live launch's must add up
        live: set = set()
        with contextlib.suppress(Exception), self.master.client() as m:
            live = {(t, st["slot"], st["launch_id"]) for t, st in
                    m.get_topology_info("plain")["components"]["events"]["task_stats"].items()}
            live = {(int(t), s, l) for t, s, l in live}
        dead_figures: Counter = Counter()
        for k, runs in sorted(self.stats.seen.items(), key=lambda r: str(r[0])):
            if k[:2] not in (("plain", "events"), ("tri", "spout-tev")):
                continue
            for n, (_, st) in enumerate(runs):
                emitted = st["emitted"].get("default", 0)
                log(f"figures {k} run {n}: emitted {emitted} acked {st['acked']} failed {st['failed']} "
                    f"dead {st.get('dead_lettered')}")
            for _, st in runs:
                for by, why, n in st.get("dead_lettered") or ():
                    dead_figures[(k[0], by, why)] += int(n)
            st = runs[-1][1]
            if (k[:2] == ("plain", "events") and (k[2], k[3], k[4]) in live
                    and st["emitted"].get("default", 0) != st["acked"] + st["failed"]):
                problems.append(f"spout task {k[2]} ({k[3]}, launch {k[4]}): emitted {st['emitted']} "
                                f"!= acked {st['acked']} + failed {st['failed']}")
        # each launch's figures may be short (what it counted after its last heartbeat is lost
        # with it), never over
        log(f"dead-letter figures over every launch: {dict(dead_figures)}")
        for (topo, by, why), n in dead_figures.items():
            limit = len(nokey) if why == "unreadable" else len(badjson) if (by, why) == ("parse", "exception") else 0
            if n > limit:
                problems.append(f"{topo}: {n} dead letters counted as ({by!r}, {why!r}), more than the {limit} records")
        with contextlib.suppress(Exception), self.master.client() as m:
            for name in ("plain", "tri"):
                errors = m.get_topology_info(name)["errors"]
                shapes = Counter(" ".join(e["error"].split()[:14]) for e in errors)
                for e in errors:  # no fault sends these: a crash of the process's own
                    if any(sig in e["error"] for sig in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL")):
                        problems.append(f"{name}: {e['error'][:300]}")
                for shape, n in shapes.most_common():
                    log(f"error of {name} (x{n}): {shape}")
        for mc in self.machines:  # what the supervisors saw: an exit by a signal no fault sends
            path = mc.dir.parent / f"{mc.name}.log"
            for line in path.read_text(errors="replace").splitlines() if path.exists() else ():
                if "has run no Python" in line:  # nothing here holds the interpreter: a pause taken for a stall
                    problems.append(f"{mc.name}: {line.strip()[:300]}")
                if "exited with status -" in line and "status -9" not in line and "status -15" not in line:
                    problems.append(f"{mc.name}: {line.strip()[:300]}")
        for path in sorted(self.root.glob("machines/*/supervisor/worker-*.log*")):
            dumps = path.read_text(errors="replace").count("Timeout (0:")
            if dumps:  # faulthandler's wall-clock watch fired: nothing here holds the interpreter
                problems.append(f"{path.name} of {path.parent.parent.name}: {dumps} stack dumps of a worker "
                                f"taken for stalled (a pause, not a stall)")
        self.problems = problems
        for p in problems:
            log(f"PROBLEM: {p}")
        log(f"seed {self.args.seed}: {'FAILED' if problems else 'passed'}; good {len(good)}, nokey {len(nokey)}, "
            f"badjson {len(badjson)}, dead letters {len(dead)}, written {len(out)}")
        return 1 if problems else 0

    def stop(self) -> None:
        self.stats.done.set()
        for t in self.timers:
            t.cancel()
        for mc in self.machines:
            mc.freeze(signal.SIGCONT)
        if self.redis.proc:
            signal_pid(self.redis.proc.pid, signal.SIGCONT)
        if self.master.alive():
            with contextlib.suppress(Exception), self.master.client() as m:
                for name in ("plain", "tri"):
                    with contextlib.suppress(Exception):
                        m.kill_topology(name, 0)
            self.master.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.master.proc.wait(15)
        for mc in self.machines:
            if mc.alive():
                mc.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    mc.proc.wait(15)
        self.master.kill()
        for mc in self.machines:
            mc.kill()
        for pid in processes_mentioning(str(self.root)):
            signal_pid(pid, signal.SIGKILL)
        self.redis.kill()


def main() -> int:
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")  # a worker that crashes in native code leaves its stacks in its log
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", choices=("process", "spark"), default="process",
                   help="spark: a standalone Spark cluster and `squall nimbus --host spark` (chaos_spark.py)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--secs", type=float, default=150, help="length of the fault phase")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds before the first fault (default 15; 40 on Spark, whose workers take longer to start)")
    p.add_argument("--every", type=float, default=None,
                   help="mean seconds between faults (default 7; 12 on Spark, whose driver takes 15-30 s to start again)")
    p.add_argument("--rate", type=float, default=25, help="records a second")
    p.add_argument("--settle", type=float, default=300, help="seconds to wait for quiescence")
    p.add_argument("--spouts", type=int, default=2, help="tasks of the plain topology's spout (over 3: several in a worker)")
    p.add_argument("--kinds", default=None, help="comma-separated fault kinds to draw from (default: all)")
    p.add_argument("--only", default=None, help="comma-separated indexes of the schedule to fire (shrinking)")
    p.add_argument("--dir", default=None, help="where to make the run's directory")
    p.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = p.parse_args()
    spark = args.host == "spark"
    args.warmup = args.warmup if args.warmup is not None else 40 if spark else 15
    args.every = args.every if args.every is not None else 12 if spark else 7
    if args.host == "spark":
        from chaos_spark import SparkRun
        run: Run = SparkRun(args)
    else:
        run = Run(args)
    status = 2
    try:
        status = run.run()
    finally:
        run.stop()
        if status == 0 and not args.keep:
            shutil.rmtree(run.root, ignore_errors=True)
        else:
            log(f"kept {run.root}")
    return status


if __name__ == "__main__":
    sys.exit(main())
