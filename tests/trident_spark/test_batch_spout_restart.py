"""A user's own IBatchSpout and ITridentSpout over a source that grows, through driver restarts,
at the reader level (no query: the driver's planning, a task's re-emit from a pickled copy, and
Spark's write-ahead log and commit log played here, so each restart point is exact and the test
takes a second). What a restart loses is the driver's memory of the txids it planned empty (an
empty plan is no micro-batch, so Spark's checkpoint never holds it): the new driver asks the spout
for them again. Every record is counted once either way; a spout that keeps its batches by txid
gives each such txid empty again, one trigger each, before it reads what came meanwhile
(docs/trident.md, "Limits")."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from squall import Fields
from squall.trident.spout import BatchCoordinator, Emitter, IBatchSpout, ITridentSpout

pytest.importorskip("pyspark.sql.datasource")

from squall.trident.spark.rows import loads
from squall.trident.spark.source import BatchSpoutReader, SpoutSpec


class _DirectorySpout(IBatchSpout):
    """Batch N: the files first claimed for N (at most 3), named in a manifest file per N so any
    process replays it; ``keep``: manifests outlive the ack (a spout whose every txid, empty
    ones too, stays replayable), else the ack removes it (Storm's usual pattern)."""

    def __init__(self, root: Path, keep: bool):
        self.root, self.keep = root, keep

    def open(self, conf, context):
        pass

    def emit_batch(self, batch_id, collector):
        manifest = self.root / "manifest" / f"{batch_id}.json"
        if manifest.exists():
            files = json.loads(manifest.read_text())
        else:
            files = sorted(f.name for f in (self.root / "in").iterdir()
                           if not (self.root / "claimed" / f.name).exists())[:3]
            for name in files:
                (self.root / "claimed" / name).touch()
            manifest.write_text(json.dumps(files))
        for name in files:
            for word in (self.root / "in" / name).read_text().split():
                collector.emit([word])

    def ack(self, batch_id):
        with (self.root / "acks").open("a") as acks:
            acks.write(f"{batch_id}\n")
        if not self.keep:  # idempotent: a restarted driver acks the last committed txid again
            (self.root / "manifest" / f"{batch_id}.json").unlink(missing_ok=True)

    def get_output_fields(self):
        return Fields("word")


class _LogCoordinator(BatchCoordinator):
    """Batch metadata: the line range of an append-only log, from the previous batch's end to
    the log's end now."""

    def __init__(self, log: Path):
        self.log = log

    def initialize_transaction(self, txid, prev_metadata, curr_metadata):
        return {"start": prev_metadata["end"] if prev_metadata else 0,
                "end": len(self.log.read_text().splitlines())}

    def success(self, txid):
        pass

    def is_ready(self, txid):
        return True

    def close(self):
        pass


class _LogEmitter(Emitter):
    def __init__(self, log: Path):
        self.log = log

    def emit_batch(self, tx, coordinator_meta, collector):
        for line in self.log.read_text().splitlines()[coordinator_meta["start"]:coordinator_meta["end"]]:
            collector.emit([line])

    def success(self, tx):
        pass

    def close(self):
        pass


class _LogSpout(ITridentSpout):
    def __init__(self, log: Path):
        self.log = log

    def get_coordinator(self, txid_key, conf, context):
        return _LogCoordinator(self.log)

    def get_emitter(self, txid_key, conf, context):
        return _LogEmitter(self.log)

    def get_output_fields(self):
        return Fields("word")


class _Query:
    """Spark's side: the committed offset, the write-ahead log's uncommitted one, and a
    transactional map of word -> (txid, count) the driver writes at ``txid = batchId + 1``."""

    def __init__(self, spec: SpoutSpec):
        self.spec, self.committed, self.logged = spec, {"txid": 0}, None
        self.batch_id, self.counts, self.empty_plans = 0, {}, 0
        self.restart()

    def restart(self) -> None:
        """A new driver: a reader of the spec as the checkpoint's query unpickles it."""
        self.reader = BatchSpoutReader(pickle.loads(pickle.dumps(self.spec)))

    def trigger(self, kill: str = "") -> bool:
        """One trigger: plan (unless the log holds a batch), run, commit; ``kill``: the driver dies
        after its plan and before the log (``planned``), or after the state's commit and before
        Spark's (``stored``). True when a micro-batch ran."""
        if self.logged is None:
            end = self.reader.latestOffset(self.committed, None)
            if end == self.committed:
                self.empty_plans += 1
                return False
            if kill == "planned":
                self.restart()
                return True
            self.logged = end
        task = pickle.loads(pickle.dumps(self.reader))  # a Spark task's copy
        words = [loads(row)[0] for p in task.partitions(self.committed, self.logged)
                 for rb in task.read(p) for row in rb.column(0).to_pylist()]
        txid = self.batch_id + 1
        for word in words:
            last, count = self.counts.get(word, (0, 0))
            if last != txid:
                self.counts[word] = (txid, count + 1)
        if kill == "stored":
            self.restart()
            return True
        self.reader.commit(self.logged)
        self.committed, self.logged, self.batch_id = self.logged, None, self.batch_id + 1
        return True

    def triggers_until(self, word: str) -> int:
        """Triggers until ``word`` is counted (at most 100)."""
        for n in range(1, 101):
            self.trigger()
            if word in self.counts:
                return n
        raise AssertionError(f"{word} not counted after 100 triggers")


@pytest.mark.parametrize("kind", ["keeps its batches", "drops them at ack", "coordinator metadata"])
def test_every_record_counts_once_through_driver_restarts_after_empty_batches(tmp_path, kind):
    for d in ("in", "manifest", "claimed"):
        (tmp_path / d).mkdir()
    log = tmp_path / "log.txt"
    log.write_text("")
    spout = _LogSpout(log) if kind == "coordinator metadata" else \
        _DirectorySpout(tmp_path, keep=kind == "keeps its batches")
    query = _Query(SpoutSpec("user", spout, {}, fields=("word",)))
    sent: list[str] = []

    def arrive(n: int) -> str:
        words = [f"w{len(sent) + i}" for i in range(n)]
        sent.extend(words)
        if isinstance(spout, _LogSpout):
            with log.open("a") as f:
                f.write("".join(f"{w}\n" for w in words))
        else:
            (tmp_path / "in" / f"f{len(sent):04d}").write_text(" ".join(words))
        return words[-1]

    quiet = 10
    # the empty txids a new driver asks for again, a trigger each, before the records: a spout
    # that keeps its batches replays them empty; one that drops them at ack fills the first with
    # what arrived, unless its records are held by a txid planned after them (killed before the log)
    restarted = quiet if kind == "keeps its batches" else 0
    unlogged = 0 if kind == "coordinator metadata" else quiet
    assert query.triggers_until(arrive(2)) == 1
    for _ in range(quiet):
        assert not query.trigger()                     # the spout's last batches were empty
    last = arrive(2)
    query.restart()                                    # records arrived, the driver restarted
    assert query.triggers_until(last) == restarted + 1
    for _ in range(quiet):
        query.trigger()
    last = arrive(2)
    assert query.trigger(kill="planned")               # planned, killed before Spark's log
    assert query.triggers_until(last) == unlogged + 1
    for _ in range(quiet):
        query.trigger()
    last = arrive(2)
    assert query.trigger(kill="stored")                # in the state, killed before Spark's commit
    assert query.triggers_until(last) == 1             # Spark re-runs the logged batch: the same txid
    assert sorted(query.counts) == sorted(sent) and {c for _, c in query.counts.values()} == {1}
    assert query.empty_plans == 3 * quiet + restarted + unlogged  # no other trigger wasted
    if isinstance(spout, _DirectorySpout):  # the restarts' txids acked a second time: ack must accept it
        acks = (tmp_path / "acks").read_text().split()
        assert len(acks) > len(set(acks)) and set(map(int, acks)) == set(range(1, max(map(int, acks)) + 1))
