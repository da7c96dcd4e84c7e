"""Spark's Python source process (where a Trident query's spouts plan their batches, on the
driver) SIGKILLed twice while a word count runs under ``squall trident``'s loop: the query is
started again from its checkpoint each time, saying why, and a transactional and an opaque
`RedisMapState` (a real redis-server) hold every word's exact count.

Before, the query stopped for good at the first kill with Spark's ``[STREAM_FAILED] ...
terminated with exception: SQLSTATE: XXKST (no cause message)``, naming neither the process nor
what happened to it (the ``java.io.EOFException`` in ``PythonStreamingSourceRunner`` was only in
the cause's Java stack trace), and ``squall trident`` exited 1 with the counts stopped part way."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from squall import Fields
from squall.trident import TridentTopology
from squall.trident.builtin import Count

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 (its fixture: a redis-server on loopback)
from ..trident.exactly_once import counted, sentences
from .conftest import is_spark_python_worker
from .ops import SourceHeldAt, Split

pytestmark = pytest.mark.timeout(300)  # the package's first test pays the cold SparkSession

SENTENCES, BATCH, KILLED_AT = 400, 20, (4, 11)


def test_a_sigkilled_source_process_is_started_again_and_every_word_counts_once(spark, tmp_path, redis_server,  # noqa: F811
                                                                                capsys):
    from squall.cli._trident import _run_until_stopped
    from squall.external.trident_redis import Options, RedisMapState
    from squall.trident.spark import start
    from squall.trident.spark.stopping import StopRequest

    text = sentences(SENTENCES)
    expected = counted(text)
    gate = tmp_path / "gate"
    gate.mkdir()
    topology = TridentTopology()
    words = topology.new_stream("sentences", SourceHeldAt(str(gate), KILLED_AT, Fields(["sentence"]), BATCH,
                                                          *[[s] for s in text])) \
        .each(Fields("sentence"), Split(), Fields("word"))
    for kind, factory in (("tx", RedisMapState.transactional), ("op", RedisMapState.opaque)):
        words.group_by(Fields("word")).persistent_aggregate(
            factory(redis_server.url, Options(data_type="hash", hash_key=kind)), Count(), Fields("count"))
    store = redis_server.client()

    def stored(kind: str) -> dict[str, int]:
        return {w: json.loads(v)[1] for w, v in store.hgetall(kind).items()}

    stop, killed, at_kill = StopRequest(), [], []

    def kill_then_stop() -> None:
        try:
            for txid in KILLED_AT:
                held = gate / f"source-{txid}"
                if not wait_until(held.exists, 120, 0.05):
                    return
                pid = int(held.read_text())
                assert is_spark_python_worker(pid)
                at_kill.append((stored("tx").get("the", 0), stored("op").get("the", 0)))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            wait_until(lambda: stored("tx") == expected and stored("op") == expected, 120, 0.1)
        finally:
            stop.set()

    killer = threading.Thread(target=kill_then_stop, daemon=True)
    killer.start()
    code = _run_until_stopped(lambda: start(topology, spark, str(tmp_path / "checkpoint"), query_name="wc"),
                              name="wc", stop=stop)
    killer.join(30)
    err = capsys.readouterr().err
    assert code == 0 and len(killed) == 2, (code, killed, err[-3000:])
    restarts = [line for line in err.splitlines() if "Python source process" in line]
    assert len(restarts) == 2 and all(
        line.startswith("squall trident: query 'wc': Spark's Python source process, which plans the spouts' "
                        "batches on the driver, ended while the query ran (java.io.EOFException in "
                        "PythonStreamingSourceRunner.") for line in restarts), err[-3000:]
    # each kill landed mid-run: the counts stood at the whole batches before the held txid
    assert at_kill == [((txid - 1) * BATCH, (txid - 1) * BATCH) for txid in KILLED_AT], at_kill
    assert stored("tx") == expected and stored("op") == expected
    print(f"source process SIGKILLed at txids {KILLED_AT} (words 'the' stored then {at_kill}): "
          f"{sum(expected.values())} words sent, {sum(stored('tx').values())} in the transactional map, "
          f"{sum(stored('op').values())} in the opaque one")
