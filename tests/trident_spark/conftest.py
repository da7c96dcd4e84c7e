"""Trident on Spark's engine: one SparkSession per module (a cold start costs seconds), Spark's
Python workers given the repository on their path (they import tests.trident_spark.ops)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pandas")
pytest.importorskip("deltalake")

REPO = Path(__file__).resolve().parents[2]


def spark_session(master: str):
    """A SparkSession on ``master`` for one module; stopped after it."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("trident-spark-tests")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def write_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` (through a hidden file first when it is new, so a spout
    listing the directory never sees half of it)."""
    text = "".join(line + "\n" for line in lines)
    if path.exists():
        with path.open("a") as f:
            f.write(text)
        return
    tmp = path.with_name("." + path.name)
    tmp.write_text(text)
    os.replace(tmp, path)


def expected_counts(lines: list[str]) -> dict[str, int]:
    """Every word of ``lines`` counted (the gate lines of ops.Split count nothing)."""
    return dict(Counter(w for line in lines if not line.startswith("hold:") for w in line.split()))


def delta_counts(table: Path) -> dict[str, int]:
    """word -> count as the Delta table holds it now."""
    from deltalake import DeltaTable

    if not (table / "_delta_log").exists():
        return {}
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return {r["word"]: r["value"] for r in rows}


def sentences(n: int, seed: int) -> list[str]:
    """``n`` sentences of a few words each, the same for the same seed."""
    import random

    rnd = random.Random(seed)
    words = ["the", "cow", "jumped", "over", "moon", "to", "be", "or", "not", "storm", "spark", "trident"]
    return [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 6))) for _ in range(n)]
