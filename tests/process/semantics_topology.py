"""Components for the process-host semantics tests. They record what they see in files under
``test.out.dir`` (the tests run in another process than the workers)."""

import json
import os
import time
from collections import Counter
from pathlib import Path

from squall import BasicBolt, Bolt, Config, Fields, SerializationError, Spout, TopologyBuilder
from tests.written import finished_lines


def _out(conf, name):
    return open(Path(conf["test.out.dir"]) / name, "a")


def records(out: Path, prefix: str) -> list[dict]:
    """The rows that components wrote to ``<prefix>-*.jsonl`` under ``out``."""
    rows = []
    for f in out.glob(f"{prefix}-*.jsonl"):
        rows += [json.loads(line) for line in finished_lines(f)]
    return rows


def task_counts(out: Path) -> list[dict]:
    """Each `Count` task's word counts, written on cleanup."""
    return [json.loads(f.read_text()) for f in out.glob("counts-*.json")]


def total(per_task: list[dict]) -> Counter:
    """The counts of all tasks together."""
    out = Counter()
    for counts in per_task:
        out.update(counts)
    return out


def topology_conf(out, workers=2, **extra) -> Config:
    """A topology's config: ``workers`` workers, the components' files under ``out``."""
    conf = Config()
    conf.set_num_workers(workers)
    conf["test.out.dir"] = str(out)
    conf.update(extra)
    return conf


def word_count(sentences):
    """Two spout tasks sharing ``sentences`` -> `Split` (shuffle) -> `Count` (fields on word)."""
    b = TopologyBuilder()
    b.set_spout("sentences", ListSpout(sentences), 2)
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    return b.create_topology()


class ListSpout(Spout):
    """Emits its items with message ids (its task's share); records acks and fails with times."""

    def __init__(self, items, field="x"):
        self.items = items
        self.field = field

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(self.field))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        tasks = context.get_component_tasks(context.get_this_component_id())
        k = context.get_this_task_index()
        self.todo = list(enumerate(self.items))[k::len(tasks)]
        self.sent = {}
        self.log = _out(conf, f"spout-{context.get_this_task_id()}.jsonl")

    def next_tuple(self):
        if self.todo:
            i, item = self.todo.pop(0)
            self.sent[i] = time.time()
            self.collector.emit([item], i)

    def ack(self, msg_id):
        self.log.write(json.dumps({"ack": msg_id}) + "\n")
        self.log.flush()

    def fail(self, msg_id):
        self.log.write(json.dumps({"fail": msg_id, "after": time.time() - self.sent[msg_id]}) + "\n")
        self.log.flush()


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for w in tup[0].split():
            collector.emit([w])


class Count(BasicBolt):
    """Counts words; writes its counts and the words it saw on cleanup."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.counts = {}

    def execute(self, tup, collector):
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1

    def cleanup(self):
        with _out(self.conf, f"counts-{self.context.get_this_task_id()}.json") as f:
            f.write(json.dumps(self.counts))


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


class FailsAll(Bolt):
    def execute(self, tup):
        self.collector.fail(tup)


class Point:
    """A user type that crosses workers through its registered serializer."""

    def __init__(self, x, y):
        self.x, self.y = x, y


class PointSerializer:
    def serialize(self, p):
        return [p.x, p.y]

    def deserialize(self, data):
        return Point(*data)


class Opaque:
    """A user type with no registration."""


class EmitsPoints(Spout):
    def __init__(self, n, kind="point"):
        self.n = n
        self.kind = kind

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("p"))

    def next_tuple(self):
        if self.n:
            self.n -= 1
            self.collector.emit([Point(self.n, -self.n) if self.kind == "point" else Opaque()])


class RecordsTypes(BasicBolt):
    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.log = _out(conf, f"types-{context.get_this_task_id()}.jsonl")

    def execute(self, tup, collector):
        p = tup[0]
        self.log.write(json.dumps({"type": f"{type(p).__module__}.{type(p).__qualname__}",
                                   "sum": p.x + p.y}) + "\n")
        self.log.flush()


class RecordsConf(BasicBolt):
    """Writes the configuration its task got, as ``conf-<task>.json`` (key -> repr of the value),
    whole at once: a test that waits for the file reads it the moment it appears."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        out = Path(conf["test.out.dir"])
        name = f"conf-{context.get_this_task_id()}.json"
        # written under another name and renamed: a test globbing conf-*.json on a loaded
        # machine read a file created but not yet written (test_secrets failed once so)
        (out / f".{name}.part").write_text(json.dumps({k: repr(v) for k, v in conf.items()}))
        os.replace(out / f".{name}.part", out / name)

    def execute(self, tup, collector):
        pass


class EmitsTooDeep(Spout):
    """Emits ``n`` values nested 5000 lists deep, catching the emit's `SerializationError`
    (raised for the tuples bound for the other worker) and writing its message down."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("p"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.log = _out(conf, f"emit-errors-{context.get_this_task_id()}.jsonl")

    def next_tuple(self):
        if not self.n:
            return
        self.n -= 1
        deep = []
        for _ in range(4999):
            deep = [deep]
        try:
            self.collector.emit([deep])
        except SerializationError as e:
            self.log.write(json.dumps({"error": str(e)}) + "\n")
            self.log.flush()


class CountsInMetric(Bolt):
    """Counts its inputs in a CountMetric read every second, and acks them."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        from squall import CountMetric
        self.count = context.register_metric("counted", CountMetric(), 1)

    def execute(self, tup):
        self.count.incr()
        self.collector.ack(tup)


class MetricsToFile:
    """A metrics consumer (IMetricsConsumer's methods) writing each data point as a row of
    ``metrics-<task>.jsonl`` in the directory its argument names."""

    def prepare(self, conf, argument, context, error_reporter):
        self.log = open(Path(argument) / f"metrics-{context.get_this_task_id()}.jsonl", "a")

    def handle_data_points(self, task_info, data_points):
        for p in data_points:
            self.log.write(json.dumps({"component": task_info.src_component_id, "task": task_info.src_task_id,
                                       "port": task_info.src_worker_port, "name": p.name, "value": p.value}) + "\n")
        self.log.flush()

    def cleanup(self):
        self.log.close()


class LogsItsStore(BasicBolt):
    """Logs where its state store is, as a user's bolt does (``topology.state.provider.config``
    as it got it, password and all), then writes ``logged-<task>`` once the line is out."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        import logging
        logging.getLogger("user.bolt").warning("state store config: %s; dsn %s",
                                               conf.get("topology.state.provider.config"), conf.get("db.dsn"))
        (Path(conf["test.out.dir"]) / f"logged-{context.get_this_task_id()}").write_text("")

    def execute(self, tup, collector):
        pass
