"""Trident on Spark's own engine: a `TridentTopology` as one Structured Streaming query.

`start(topology, spark, checkpoint_location)` compiles the topology (``compiler.py``), reads each
transactional spout through the ``squall_trident`` Python Data Source (``source.py``: the spout's
batch metadata is the offset) and runs every micro-batch as Trident batch ``txid = batchId + 1``
in ``foreachBatch`` (``runner.py``): ``project``/``FilterNull``/``Equals`` over typed columns
in Spark SQL, the other stateless operations in Spark tasks through ``mapInArrow``, the states on the driver with the same ``begin_commit``/``commit`` calls as on
squall's engine. Needs pyspark 4.2 or later (the extra ``trident-spark``). See docs/trident.md,
"On Spark's engine".
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compiler import SparkBolt, SparkPlan, SparkSpout, compile_topology
    from .runner import BatchRunner
    from .source import SOURCE_NAME, SpoutSpec, TridentSpoutSource, check_spout

log = logging.getLogger("squall.trident.spark")

# imported when first asked for, not with the package: `python -m squall.trident.spark.daemon`
# runs this file before its own, and must reorder sys.path before anything imports pyspark
_LAZY = {"SparkBolt": "compiler", "SparkPlan": "compiler", "SparkSpout": "compiler", "compile_topology": "compiler",
         "BatchRunner": "runner", "SOURCE_NAME": "source", "SpoutSpec": "source", "TridentSpoutSource": "source",
         "check_spout": "source"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = ["SOURCE_NAME", "WARM_JOB_GROUP", "BatchRunner", "SparkBolt", "SparkPlan", "SparkSpout", "SpoutSpec", "TridentSpoutSource",
           "check_spout", "compile_topology", "start"]


def start(topology: Any, spark: Any, checkpoint_location: str, *, trigger: Any = None,
          query_name: str | None = None, conf: Mapping[str, Any] | None = None,
          field_types: Mapping[str, Mapping[str, type]] | None = None, clock: Any = None) -> Any:
    """Run ``topology`` (a `TridentTopology`) on ``spark`` (a SparkSession); return the `StreamingQuery`.

    ``checkpoint_location`` keeps the offsets (each batch's spout metadata) and commits; a query
    started again on it resumes after the last committed batch, and re-runs a batch that was
    planned but not committed with the same txid and tuples. ``trigger``: as
    ``DataStreamWriter.trigger`` takes it, a dict (``{"processingTime": "2 seconds"}``,
    ``{"availableNow": True}``) or a processing-time string (default: Spark's, a batch as soon as
    the previous one ended and a spout has more). ``conf``: the topology configuration the
    operations and spouts see in ``prepare``/``open``. ``field_types``: per spout (its txid key),
    ``{field: type}`` for the fields that travel in typed columns, each type one of str, int,
    float, bool, bytes (default: what the spout's ``field_types()`` declares, if it has one);
    ``project``, ``FilterNull`` and ``Equals`` over such fields run in Spark SQL. ``clock``: where
    the windows, which run on the driver, read the time (``clock.wall()`` in seconds, as
    `LocalCluster`'s ``clock``: a ``squall.engine.clock.SimulatedClock`` in tests; default the
    wall clock).

    Raises:
        ValueError: something the topology holds cannot run on Spark's engine (a DRPC stream, a
            non-transactional spout, a broadcast or custom repartition, a window of several tasks
            after an identity or custom partitioning), named with the reason.
        CheckpointDamaged: (a ValueError) the latest ``offsets/`` or ``commits/`` file of a local
            ``checkpoint_location`` is not one Spark can read, named with what to do.
    """
    from dataclasses import replace

    from pyspark import cloudpickle

    from ..._config import Config, setting
    from .checkpoint import check_checkpoint
    from .compiler import compile_topology
    from .rows import to_option
    from .runner import BatchRunner, quiet_call_sites, source_frame, union
    from .source import SOURCE_NAME, SourceHead, SpoutSpec, TridentSpoutSource

    if not isinstance(checkpoint_location, str) or not checkpoint_location:
        raise ValueError(f"start: checkpoint_location must be a non-empty path or URI, got {checkpoint_location!r}")
    # a damaged offsets/commits file failed the query inside Spark's JSON decoder, naming no file
    check_checkpoint(checkpoint_location)
    settings = dict(conf or {})
    plan = compile_topology(topology, field_types,
                            in_sources=bool(setting(settings, Config.TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE,
                                                    where="start: conf")))
    if not plan.spouts:
        raise ValueError("start: the topology has no spout (new_stream), so nothing to run")
    tasks = int(spark.sparkContext.defaultParallelism)
    _warm_python_workers(spark, tasks)  # first: what follows starts Python processes for seconds
    spark.dataSource.register(TridentSpoutSource)
    frames = []
    with quiet_call_sites():
        for s in plan.spouts:
            spec = SpoutSpec(s.txid, s.spout, settings, s.fields, s.typed, plan.source_tasks(s, tasks), keys=s.keys)
            head = plan.source_head(s.txid)
            if head is not None:
                spec = replace(spec, head=SourceHead(
                    head.component, cloudpickle.dumps(head.body), head.inputs, spec.tasks, plan.keys,
                    {o: plan.combines[o].value for o in head.outputs if o in plan.combines}))
            frames.append(source_frame(spark.readStream.format(SOURCE_NAME).option("spout", to_option(spec)).load(), s,
                                       head, plan.key_columns))
        rows = union(frames)
    writer = rows.writeStream.foreachBatch(BatchRunner(plan, settings, clock)).option("checkpointLocation", checkpoint_location)
    if trigger is not None:
        writer = writer.trigger(**trigger) if isinstance(trigger, Mapping) else writer.trigger(processingTime=trigger)
    if query_name is not None:
        writer = writer.queryName(query_name)
    return writer.start()


WARM_JOB_GROUP = "squall-trident-spark-warm"
"""The Spark job group of the job `start` runs to start the Python workers early."""


def _passing(batches: Any) -> Any:
    """What the warm-up tasks run: their Arrow batches (a row each) back."""
    yield from batches


def _warm_python_workers(spark: Any, tasks: int) -> Any:
    """Start Spark's Python workers while the query starts, not in its first batch: one job of
    ``tasks`` empty ``mapInArrow`` tasks, on a thread of its own (an RDD's Python tasks would
    start another daemon: Spark keeps one per set of environment variables, and SQL's Python
    runners set their own). Registering and loading the source and
    starting the query run Spark's Data Source processes one after another for seconds (each a
    Python process importing pyspark and squall; 15 s of `start` at load 8); the workers' daemon
    (importing pyspark, squall, pyarrow and pandas) would otherwise start only when the first
    batch's tasks need it. The batches reuse its workers (``spark.python.worker.reuse``).
    Returns the thread."""
    import threading

    def run() -> None:
        try:
            spark.sparkContext.setJobGroup(WARM_JOB_GROUP, "squall.trident.spark: start the Python workers")
            spark.range(0, tasks, 1, tasks).mapInArrow(_passing, "id BIGINT").write.format("noop").mode("overwrite").save()
        except Exception as e:  # noqa: BLE001 (a head start only: the query's own tasks start them otherwise)
            log.debug("starting Spark's Python workers early failed: %s", e)

    thread = threading.Thread(target=run, name="squall-trident-spark-warm", daemon=True)
    thread.start()
    return thread
