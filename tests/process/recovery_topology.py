"""Components for the process-host recovery tests (shipped to the workers by value)."""

import os
import signal
from pathlib import Path

from squall import BasicBolt, Fields, Spout, TopologyBuilder


STOP = "stop"
"""The file under ``test.out.dir`` whose creation tells the endless spouts here to stop (`stop_spouts`)."""


class DurableSpout(Spout):
    """Emits ids 0..n-1 reliably, like a replayable source: a failed id is emitted again, and an
    acked id is recorded in ``acked-<task>.txt`` under ``test.out.dir`` and never emitted again,
    even by a restarted instance (a source that commits its offsets).

    ``n`` None: an endless source, for tests in which tuples must still flow when something
    happens, however fast the machine: ids 0, 1, 2, ... until the test creates `STOP` under
    ``test.out.dir`` (`stop_spouts`); then the spout writes how many ids it emitted to
    ``stopped-<task>.txt`` (`stopped_at`) and only replays what fails. One task only (its ids are
    not split between tasks)."""

    def __init__(self, n=None):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        self.file = self.dir / f"acked-{context.get_this_task_id()}.txt"
        self.count_file = self.dir / f"stopped-{context.get_this_task_id()}.txt"
        done = acked(self.dir)
        if self.n is None:  # a restarted instance goes on after the last id acked (or stays stopped)
            self.limit = int(self.count_file.read_text()) if self.count_file.exists() else None
            self.next = max(done, default=-1) + 1 if self.limit is None else self.limit
        else:
            self.limit = self.next = self.n
        self.todo = [i for i in range(self.next) if i not in done]
        self.out = open(self.file, "a")

    def next_tuple(self):
        i = self.next_id()
        if i is not None:
            self.collector.emit([i], i)

    def next_id(self):
        """The id to emit now (one that failed first), or None: none."""
        if self.todo:
            return self.todo.pop()
        if self.limit is None and not self._told_to_stop():
            self.next += 1
            return self.next - 1
        return None

    def _told_to_stop(self):
        if not (self.dir / STOP).exists():
            return False
        self.limit = self.next
        if self.count_file.exists():
            # another instance of this task stopped first: a stale one on a machine that hung
            # and resumed (its executors moved meanwhile) knows fewer ids, and must not lower
            # the count its replacement wrote
            self.limit = max(self.limit, int(self.count_file.read_text()))
        tmp = self.count_file.with_suffix(".tmp")
        tmp.write_text(str(self.limit))
        tmp.replace(self.count_file)  # whole or absent: the test reads it as soon as it exists
        return True

    def ack(self, msg_id):
        self.out.write(f"{msg_id}\n")
        self.out.flush()

    def fail(self, msg_id):
        self.todo.append(msg_id)


def stop_spouts(out: Path) -> None:
    """Tell the endless spouts writing under ``out`` (`DurableSpout` without ``n``, `Flood`) to stop."""
    (out / STOP).write_text("")


def stopped_at(out: Path) -> int | None:
    """How many ids the endless `DurableSpout` under ``out`` emitted before it stopped (None
    while it has not stopped): it emitted ids 0 to that number less one."""
    files = list(out.glob("stopped-*.txt"))
    return int(files[0].read_text()) if files else None


def stop_and_wait(out: Path, resume: int = 0, done=None, timeout: float = 90, why=lambda: "") -> int:
    """The end of a test with the endless `DurableSpout` writing under ``out``: wait until
    ``resume`` more ids are acked than now (tuples flow again after what the test did), stop the
    spout (`stop_spouts`), and wait until ``done()`` (default: the ids acked) holds every id it
    emitted. Returns how many it emitted; an assertion names what did not happen, with ``why()``."""
    from ..conftest import wait_until  # the test's side only (the workers get the components by value)
    done = done or (lambda: acked(out))
    before = len(acked(out))
    assert wait_until(lambda: len(acked(out)) >= before + resume, 60), f"acks did not resume\n{why()}"
    stop_spouts(out)
    assert wait_until(lambda: stopped_at(out) is not None, 30), f"the spout did not stop\n{why()}"
    n = stopped_at(out)
    assert wait_until(lambda: done() >= set(range(n)), timeout), \
        f"{len(set(range(n)) - done())} of {n} ids missing, e.g. {sorted(set(range(n)) - done())[:20]}\n{why()}"
    return n


def wait_started(out: Path, timeout: float = 30, why=lambda: "") -> None:
    """Wait until the topology of `recovery_topology` writing under ``out`` runs: its 4 bolt
    tasks prepared (`opened`, which a restarted task does not count again) and over 100 ids
    acked. Measured at load 10-15 on 2 cores, that takes 1.5-3 s from the submit; ``timeout``
    is for a machine far busier. An assertion says how far it got, and ``why()`` (the cluster's
    logs, the topology's errors: a worker that could not start says why there)."""
    from ..conftest import wait_until  # the test's side only (the workers get the components by value)
    assert wait_until(lambda: len(acked(out)) > 100 and opened(out) == 4, timeout), \
        f"the topology did not start: {len(acked(out))} ids acked, {opened(out)} of 4 bolt tasks prepared\n{why()}"


def _record_opened(conf, context):
    """Note under ``test.out.dir`` (if set) that this bolt task was prepared: its worker heard
    that the topology is active, which it learns only from the master (`opened`)."""
    if conf.get("test.out.dir"):
        (Path(conf["test.out.dir"]) / f"opened-{context.get_this_task_id()}").write_text("")


def opened(out: Path) -> int:
    """How many `Slowish` and `Sink` tasks writing under ``out`` were prepared."""
    return len(list(out.glob("opened-*")))


class Slowish(BasicBolt):
    """Passes ids on, a little slowly, so a run lasts long enough to kill things under it."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        _record_opened(conf, context)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup, collector):
        for _ in range(2000):
            pass
        collector.emit([tup[0]])


class Sink(BasicBolt):
    """Consumes."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        _record_opened(conf, context)

    def execute(self, tup, collector):
        pass


class UnimportableOnWorkers(BasicBolt):
    """Imports, in ``prepare``, a module the workers do not have."""

    def prepare(self, conf, context):
        import not_installed_anywhere  # noqa: F401


def pid_exists(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class Flood(Spout):
    """Emits unanchored tuples as fast as it may, numbered 0, 1, 2, ...; with ``test.out.dir``
    set, until the test creates `STOP` there (`stop_spouts`), looked for every 1,024 tuples."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.stop = Path(conf["test.out.dir"]) / STOP if conf.get("test.out.dir") else None
        self.sent = 0
        self.stopped = False

    def next_tuple(self):
        if self.stopped:
            return
        if self.sent % 1024 == 0 and self.stop is not None and self.stop.exists():
            self.stopped = True
            return
        self.collector.emit([self.sent])
        self.sent += 1


OPEN = "open"
"""The file under ``test.out.dir`` whose creation lets `Gated` run (`open_gate`)."""


class Gated(BasicBolt):
    """A bolt that cannot keep up, at all: it holds its first tuple until the test creates
    `OPEN` under ``test.out.dir`` (`open_gate`), then consumes at full speed. While it holds,
    its inbox only fills, so what reaches it is exactly what its spout emitted."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.gate = Path(conf["test.out.dir"]) / OPEN
        self.open = False

    def execute(self, tup, collector):
        import time
        while not self.open:
            self.open = self.gate.exists()
            if not self.open:
                time.sleep(0.01)


def open_gate(out: Path) -> None:
    """Let the `Gated` bolts writing under ``out`` run."""
    (out / OPEN).write_text("")


def acked(out: Path) -> set[int]:
    """The ids `DurableSpout` recorded as acked under ``out``."""
    ids = set()
    for f in out.glob("acked-*.txt"):
        ids |= {int(x) for x in f.read_text().split()}
    return ids


def recovery_topology(n=None, tables=None):
    """`DurableSpout` of ids 0..n-1 (None: endless) -> 2 `Slowish` (shuffle) -> 2 `Sink` (fields on id);
    with ``tables`` (a directory), also 2 ``ParquetSinkBolt`` and 2 ``DeltaSinkBolt`` tasks (fields on
    id) writing there (`written_ids` reads them)."""
    b = TopologyBuilder()
    b.set_spout("source", DurableSpout(n), 1)
    b.set_bolt("work", Slowish(), 2).shuffle_grouping("source")
    b.set_bolt("sink", Sink(), 2).fields_grouping("work", ["id"])
    if tables is not None:
        import pyarrow as pa

        from squall.external.delta import DeltaSinkBolt
        from squall.external.parquet import ParquetSinkBolt

        schema = [("id", pa.int64())]
        b.set_bolt("parquet", ParquetSinkBolt(Path(tables) / "parquet", schema, "id"), 2).fields_grouping("work", ["id"])
        b.set_bolt("delta", DeltaSinkBolt(Path(tables) / "delta", schema, "id"), 2).fields_grouping("work", ["id"])
    return b.create_topology()


def written_ids(tables: Path) -> dict[str, list[int]]:
    """The ids in the Parquet directory and the Delta table of `recovery_topology` ``tables``,
    sorted, repeats included: ``{"parquet": [...], "delta": [...]}``."""
    import deltalake
    import pyarrow.parquet as pq

    files = sorted((tables / "parquet").glob("part-*.parquet"))
    return {"parquet": sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist()),
            "delta": sorted(deltalake.DeltaTable(str(tables / "delta")).to_pyarrow_table().column("id").to_pylist())}


RECOVERY_CONF = {"topology.message.timeout.secs": 3, "topology.max.spout.pending": 100}
"""What the recovery topology runs with: a short timeout, so lost tuples replay quickly."""


class Chatty(Spout):
    """Prints ``lines`` lines of 100 bytes to stdout (as user code does), then idles."""

    def __init__(self, lines):
        self.lines = lines

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.printed = 0

    def next_tuple(self):
        for _ in range(min(100, self.lines - self.printed)):  # many a call: an idle spout is called slowly
            self.printed += 1
            print(f"chatty line {self.printed:08d} ".ljust(99, "."), flush=True)


def kill_a_worker_without(client, name, component):
    """SIGKILL the Python process of a worker of topology ``name`` that runs no task of
    ``component`` (so the spout stays, and waits on what was lost); return its ``info`` entry."""
    info = client.get_topology_info(name)
    ports = {st["worker"] for st in info["components"][component]["task_stats"].values()}
    victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) not in ports)
    os.kill(victim["pid"], signal.SIGKILL)
    return victim


class CrashesOnceLeavingAThread(BasicBolt):
    """A bolt whose ``prepare`` leaves a call that never returns in a ``ThreadPoolExecutor``
    (whose threads the interpreter joins at exit), and which crashes its worker once, on id
    ``crash_on`` (the first time only: a file under ``test.out.dir`` remembers it). Run with
    ``topology.bolt.fail.fast``."""

    def __init__(self, crash_on):
        self.crash_on = crash_on

    def prepare(self, conf, context):
        import concurrent.futures
        import threading
        super().prepare(conf, context)
        self.marker = Path(conf["test.out.dir"]) / "crashed"
        self.pool = concurrent.futures.ThreadPoolExecutor(1)
        self.pool.submit(threading.Event().wait)  # a call that never returns (a hung request, say)

    def execute(self, tup, collector):
        if tup[0] == self.crash_on and not self.marker.exists():
            # written whole, then named: the test reads the pid as soon as the name exists (a
            # write_text in place was read empty once, at load 9)
            written = self.marker.with_suffix(".tmp")
            written.write_text(str(os.getpid()))
            os.replace(written, self.marker)
            raise RuntimeError(f"crashing on {tup[0]}")


def acked_lines(out: Path) -> list[int]:
    """Every ack `DurableSpout` recorded under ``out``, repeats included."""
    return [int(line) for f in out.glob("acked-*.txt") for line in f.read_text().split()]


class Wanderer(BasicBolt):
    """Changes its worker's working directory in ``prepare`` (to ``elsewhere`` under
    ``test.out.dir``), as some libraries and scripts do; consumes."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        elsewhere = Path(conf["test.out.dir"]) / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        os.chdir(elsewhere)

    def execute(self, tup, collector):
        pass


class HogsTheInterpreterOnce(BasicBolt):
    """On id ``hog_on``, the first time only (a file under ``test.out.dir`` remembers it), calls
    into C for ever without letting go of the GIL (a regular expression that backtracks without
    end): no thread of its worker runs Python again, heartbeats included."""

    def __init__(self, hog_on):
        self.hog_on = hog_on

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.marker = Path(conf["test.out.dir"]) / "hogged"

    def execute(self, tup, collector):
        if tup[0] == self.hog_on and not self.marker.exists():
            import re
            self.marker.write_text(str(os.getpid()))
            re.match(r"(a+)+$", "a" * 64 + "b")


class LeaksUntilRestarted(BasicBolt):
    """Keeps ``mb`` MB (written, so resident) of each tuple it gets, for ever, and takes
    ``secs`` over each: a slow leak. Only in its first worker: a file under ``test.out.dir``
    (``leaking``: that worker's pid, port and resident size after ``prepare``) remembers it, so
    that the restarted worker leaks no more and the run can end."""

    def __init__(self, mb=5, secs=0.05):
        self.mb, self.secs = mb, secs

    def prepare(self, conf, context):
        super().prepare(conf, context)
        marker = Path(conf["test.out.dir"]) / "leaking"
        self.kept = []
        self.leaks = not marker.exists()
        if self.leaks:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(f"{os.getpid()} {context.get_this_worker_port()} {rss}")
            tmp.replace(marker)

    def execute(self, tup, collector):
        if self.leaks:
            import time
            self.kept.append(b"x" * (self.mb << 20))
            time.sleep(self.secs)
