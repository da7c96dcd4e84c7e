"""W1 on Spark Structured Streaming, ``local[1]``: the corpus files as a file stream, split into
words, ``groupBy(word).count()``, the running counts written in complete mode to a memory sink.

    readStream.text(part-*.txt, maxFilesPerTrigger=FILES_PER_BATCH)
        -> explode(split(value, " "))   (``split="sql"``: Spark's own functions, in the JVM)
           or explode(udf(str.split))   (``split="udf"``: a Python UDF, rows pickled to a Python
                                         worker; ``useArrow=False``, Spark's classic UDF, whether
                                         or not pandas and pyarrow are installed)
        -> groupBy("word").count() -> writeStream.outputMode("complete").format("memory")
        trigger(availableNow=True)

What is fair, and why: the file source reads the same bytes squall's spout reads, and
``availableNow`` processes exactly the files present, then stops, so the run has an end to time.
Micro-batches of ``FILES_PER_BATCH`` files (10 x 10,000 sentences) keep it a streaming query
with state carried across batches (the state store), not one batch job over everything; each
micro-batch emits the counts so far (complete mode), as squall's count bolt emits a count per
word. ``spark.sql.shuffle.partitions`` = 1: one core, one state partition (the default 200 would
run 200 tiny stateful tasks per batch). The SparkSession (JVM start) is made before the clock
starts; the time is from ``start()`` to the end of ``awaitTermination()``, so query planning
and the JVM's warm-up within the query are counted, as squall's run counts its topology's start.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

FILES_PER_BATCH = 10


def _session():
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[1]").appName("squall-bench-peers-w1")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.streaming.schemaInference", "false")
            .getOrCreate())


def measure(directory: Path, split: str = "sql", files_per_batch: int = FILES_PER_BATCH
            ) -> tuple[float, dict[str, int], str | None]:
    """(seconds, counts, version) of one streaming query over the corpus; ``split`` "sql" or "udf";
    ``files_per_batch``: the corpus files a micro-batch reads (``maxFilesPerTrigger``)."""
    import pyspark
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StringType

    if split not in ("sql", "udf"):
        raise ValueError(f"split {split!r}: expected 'sql' or 'udf'")
    spark = _session()
    spark.sparkContext.setLogLevel("ERROR")
    checkpoint = tempfile.mkdtemp(prefix="squall-bench-peers-spark-")
    try:
        lines = (spark.readStream.format("text").option("pathGlobFilter", "part-*.txt")
                 .option("maxFilesPerTrigger", files_per_batch).load(str(directory)))
        if split == "sql":
            tokens = F.split(lines.value, " ")
        else:
            tokens = F.udf(lambda s: s.split(" "), ArrayType(StringType()), useArrow=False)(lines.value)
        counts = lines.select(F.explode(tokens).alias("word")).groupBy("word").count()
        table = f"w1_counts_{split}"
        t0 = time.perf_counter()
        query = (counts.writeStream.outputMode("complete").format("memory").queryName(table)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        wall = time.perf_counter() - t0
        if query.exception() is not None:
            raise RuntimeError(f"Spark query {table}: {query.exception()}")
        result = {row["word"]: row["count"] for row in spark.table(table).collect()}
        return wall, result, pyspark.__version__
    finally:
        spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
