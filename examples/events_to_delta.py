"""Client events from files into a Delta table, then read back with PySpark.

    events (FileSpout, JSON lines) --shuffle--> parse --fields("user_id")--> delta (DeltaSinkBolt)

``parse`` turns each JSON line into ``[event_id, user_id, kind, ts]`` (a line that is not an
event fails its tuple: the spout retries it, then writes it to its dead-letter file). The sink
appends batches to the Delta table, acking tuples only once their batch is committed, each
``event_id`` once. Spark then reads the table's files.

Run it (a temporary directory unless ``--dir``)::

    python examples/events_to_delta.py                  # 200 events, prints what Spark reads
    python examples/events_to_delta.py --events 5000 --dir /tmp/events-demo
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from squall import (
    BasicBolt,
    Config,
    Fields,
    LocalCluster,
    StormTopology,
    TopologyBuilder,
)
from squall.external.delta import DeltaSinkBolt
from squall.external.files import FileSpout

SCHEMA = [("event_id", "string"), ("user_id", "int64"), ("kind", "string"), ("ts", "int64")]
KINDS = ("click", "view", "buy")


def make_events(n: int) -> list[dict]:
    """``n`` client events, deterministic."""
    return [{"event_id": f"ev-{i:06d}", "user_id": i % 17, "kind": KINDS[i % 3], "ts": 1_700_000_000 + i}
            for i in range(n)]


def write_event_files(directory: str, events: list[dict], per_file: int = 100) -> None:
    """The events as JSON-lines files, each moved in complete (the spout reads whole files)."""
    os.makedirs(directory, exist_ok=True)
    for k in range(0, len(events), per_file):
        tmp = os.path.join(directory, f"events-{k:06d}.jsonl.ignore")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events[k:k + per_file])
        os.replace(tmp, tmp.removesuffix(".ignore"))


class ParseEvent(BasicBolt):
    """A JSON line -> ``[event_id, user_id, kind, ts]`` (a bad line raises: its tuple fails)."""

    def execute(self, tup, collector) -> None:
        e = json.loads(tup.values[0])
        collector.emit([str(e["event_id"]), int(e["user_id"]), str(e["kind"]), int(e["ts"])])

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields([name for name, _ in SCHEMA]))


def build(events_dir: str, table: str, local_dir: str) -> StormTopology:
    """The topology: files in ``events_dir`` into the Delta table at ``table``."""
    import pyarrow as pa
    schema = pa.schema([(n, pa.string() if t == "string" else pa.int64()) for n, t in SCHEMA])
    builder = TopologyBuilder()
    # every file is moved in whole (write_event_files): none is still being written, none to wait quiet for
    builder.set_spout("events", FileSpout(events_dir, quiet_secs=0, poll_secs=0.1, progress_dir=local_dir))
    builder.set_bolt("parse", ParseEvent(), 2).shuffle_grouping("events")
    builder.set_bolt("delta", DeltaSinkBolt(table, schema, "event_id", batch_size=100, tick_secs=1), 2) \
        .fields_grouping("parse", Fields(["user_id"]))
    return builder.create_topology()


conf = Config()
conf.set_max_spout_pending(1000)


def table_rows(table: str) -> int:
    """How many rows the Delta table holds (0 if it does not exist yet)."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(table):
        return 0
    return DeltaTable(table).to_pyarrow_table().num_rows


def read_with_spark(table: str) -> list[dict]:
    """The table's rows as Spark reads them (its active Parquet files: no delta-spark jar needed)."""
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").appName("events-to-delta")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        return [r.asDict() for r in spark.read.parquet(*DeltaTable(table).file_uris()).orderBy("event_id").collect()]
    finally:
        spark.stop()


def run(directory: str, n: int, timeout: float = 60.0) -> list[dict]:
    """Write ``n`` events under ``directory``, run the topology until the table holds them all,
    and return the rows Spark reads back."""
    events_dir, table = os.path.join(directory, "events"), os.path.join(directory, "table")
    write_event_files(events_dir, make_events(n))
    with LocalCluster() as cluster:
        cluster.submit_topology("events-to-delta", conf, build(events_dir, table, os.path.join(directory, "local")))
        deadline = time.monotonic() + timeout
        while table_rows(table) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster.kill_topology("events-to-delta", wait_secs=0)
    return read_with_spark(table)


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run, print the rows Spark read and a count per kind."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200, help="how many events to write")
    p.add_argument("--dir", help="where the events, the table and the progress go (default: a temp dir)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="squall-events-") as tmp:
        rows = run(args.dir or tmp, args.events)
    for r in rows[:5]:
        print(r)
    kinds = {k: sum(r["kind"] == k for r in rows) for k in KINDS}
    print(f"Spark read {len(rows)} rows from the Delta table;", ", ".join(f"{k}={v}" for k, v in kinds.items()))


if __name__ == "__main__":
    main()
