"""Operations and a file-gated state for the Trident-on-Spark tests (importable by Spark's Python
workers: the tests put the repository on their PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from squall.trident import BaseFunction
from squall.trident.operation import BaseFilter
from squall.trident.spout import FixedBatchSpout
from squall.trident.state import State, StateFactory
from squall.trident.state.api import BaseStateUpdater


class Split(BaseFunction):
    """A sentence's words; a sentence ``hold:<dir>`` first writes this worker's pid to
    ``<dir>/pid`` and waits for ``<dir>/go`` (once per directory: a retried task passes)."""

    def execute(self, tuple, collector):
        sentence = tuple[0]
        if sentence.startswith("hold:"):
            gate = Path(sentence.split(":", 1)[1])
            if not (gate / "pid").exists():
                (gate / "pid.tmp").write_text(str(os.getpid()))
                os.replace(gate / "pid.tmp", gate / "pid")
                while not (gate / "go").exists():
                    time.sleep(0.05)
            return
        for word in sentence.split():
            collector.emit([word])


class _GatedState(State):
    """A state that, at commit of txid ``hold_txid``, after the inner state committed, records
    it in ``<gate>/committed`` and waits for ``<gate>/go`` (then the driver is killed there:
    the state has the batch, Spark's commit log does not)."""

    def __init__(self, inner, gate: str, hold_txid: int) -> None:
        self.inner, self.gate, self.hold_txid = inner, Path(gate), hold_txid

    def begin_commit(self, txid):
        self.inner.begin_commit(txid)

    def commit(self, txid):
        self.inner.commit(txid)
        if txid == self.hold_txid and not (self.gate / "go").exists():
            (self.gate / "committed").write_text(str(txid))
            while not (self.gate / "go").exists():
                time.sleep(0.05)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class GatedStateFactory(StateFactory):
    """``factory``'s states, held after committing txid ``hold_txid`` (see `_GatedState`)."""

    def __init__(self, factory, gate: str, hold_txid: int) -> None:
        self.factory, self.gate, self.hold_txid = factory, gate, hold_txid

    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _GatedState(self.factory.make_state(conf, metrics, partition_index, num_partitions),
                           self.gate, self.hold_txid)


def word_count(directory: str, factory, max_batch_records: int = 3, split=None):
    """Storm's word count over the lines of ``directory``'s files, counted into ``factory``'s map
    (``split``: the function making the words, default `Split`)."""
    from squall import Fields
    from squall.external.trident_files import FileTridentSpout
    from squall.trident import TridentTopology
    from squall.trident.builtin import Count

    topology = TridentTopology()
    topology.new_stream("lines", FileTridentSpout(directory, ["sentence"], max_batch_records=max_batch_records)) \
        .each(Fields("sentence"), split if split is not None else Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(factory, Count(), Fields("count"))
    return topology


def gated_word_count(directory: str, table: str, gate: str, split=None):
    """test_driver_kill's word count: 4 lines a file a batch into the transactional Delta map at
    ``table``, held after committing txid 2 until ``<gate>/go`` exists (see `_GatedState`)."""
    return word_count(directory, GatedStateFactory(delta_counts_factory(table), gate, 2), max_batch_records=4,
                      split=split)


def delta_counts_factory(table: str, app_id: str = "wc"):
    """A transactional Delta map state of word -> count at ``table``."""
    import pyarrow as pa

    from squall.external.trident_delta import DeltaMapState

    return DeltaMapState.transactional(table, pa.schema([("word", pa.string())]), pa.int64(), app_id=app_id)


def plain_spout():
    """A plain (at-least-once) `Spout` of one field, ``sentence``."""
    from squall import Spout

    class SentenceSpout(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(["sentence"])

        def next_tuple(self):
            pass

    return SentenceSpout()


class KeepAll(BaseFilter):
    """Keeps every tuple: a Python operation (not Spark SQL) before a repartition."""

    def is_keep(self, tuple):
        return True


class Pair(BaseFunction):
    """``'a'`` -> ``[a, a]`` (one str object twice: pickle writes the second as a reference to
    the first); ``'a b'`` -> ``[a, b]``."""

    def execute(self, tuple, collector):
        parts = tuple[0].split()
        collector.emit([parts[0], parts[0] if len(parts) == 1 else parts[1]])


class Tag(BaseFunction):
    """Appends a fixed tag: several operations' rows told apart in one recorder."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def execute(self, tuple, collector):
        collector.emit([self.tag])


class PartIndex(BaseFunction):
    """The index of the partition that ran it (what its context says)."""

    def prepare(self, conf, context):
        self.index = context.get_partition_index()

    def execute(self, tuple, collector):
        collector.emit([self.index])


RECORDS: dict[str, list] = {}
"""Per recorder name, each ``(txid, values)`` a `RecordFactory` state was given (on the driver)."""


class _RecordState(State):
    def __init__(self, name: str) -> None:
        self.name = name
        self.txid = None

    def begin_commit(self, txid):
        self.txid = txid

    def commit(self, txid):
        pass


class RecordFactory(StateFactory):
    """A state that records every tuple ``partition_persist`` gives it, with its txid, in `RECORDS`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _RecordState(self.name)


class RecordUpdater(BaseStateUpdater):
    """Appends each tuple's values to its `RecordFactory` state's list in `RECORDS`."""

    def update_state(self, state, tuples, collector):
        RECORDS.setdefault(state.name, []).extend((state.txid, list(t.values)) for t in tuples)


def line_number(line: bytes) -> list:
    """A `FileTridentSpout` translator: a line holding a number -> ``[number]``."""
    return [int(line)]


class _FailsOnce(State):
    """The inner state; at ``begin_commit`` of ``txid``, once (``<marker>`` absent), it raises
    before the inner state sees the batch: the query fails after the bolts before it took the
    batch, and Spark runs that batch again when the query is started again."""

    def __init__(self, inner, marker: str, txid: int) -> None:
        # not ``txid``: a `_RecordState`'s own, which the updater reads through this wrapper
        self.inner, self.marker, self.fail_txid = inner, Path(marker), txid

    def begin_commit(self, txid):
        if txid == self.fail_txid and not self.marker.exists():
            self.marker.write_text(str(txid))
            raise RuntimeError(f"the state fails at the begin_commit of txid {txid}")
        self.inner.begin_commit(txid)

    def commit(self, txid):
        self.inner.commit(txid)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class FailsOnceFactory(StateFactory):
    """``factory``'s states, failing the query once at the begin_commit of ``txid`` (`_FailsOnce`)."""

    def __init__(self, factory, marker: str, txid: int) -> None:
        self.factory, self.marker, self.txid = factory, marker, txid

    def make_state(self, conf, metrics, partition_index, num_partitions):
        return _FailsOnce(self.factory.make_state(conf, metrics, partition_index, num_partitions), self.marker,
                          self.txid)


class ParseKey(BaseFunction):
    """The last digit of a record's number; raises on a record that is no number."""

    def execute(self, tuple, collector):
        collector.emit([int(tuple.get_value_by_field("text")) % 10])


class ParseKeyOrSkip(ParseKey):
    """`ParseKey` fixed: a record that is no number gives nothing."""

    def execute(self, tuple, collector):
        if tuple.get_value_by_field("text").isdigit():
            super().execute(tuple, collector)


def refuse_bad(line: bytes) -> list:
    """A `FileTridentSpout` translator that refuses (a dead letter) a line starting ``bad``."""
    text = line.decode().rstrip("\n")
    if text.startswith("bad"):
        raise ValueError(f"refused {text!r}")
    return [text]


def skip_comments(line: bytes) -> list | None:
    """A `FileTridentSpout` translator that skips (None: no tuple, no dead letter) a line starting
    ``#`` and refuses (a dead letter) one starting ``bad``."""
    text = line.decode().rstrip("\n")
    if text.startswith("#"):
        return None
    if text.startswith("bad"):
        raise ValueError(f"refused {text!r}")
    return [text]


def skip_comment_records(record) -> list | None:
    """A `KafkaSpoutConfig` translator: `skip_comments` of the record's value."""
    return skip_comments(record.value + b"\n")


class SourceHeldAt(FixedBatchSpout):
    """A `FixedBatchSpout` whose planning of each txid of ``hold_txids``, in Spark's Python source
    process (where no Spark task runs), writes that process's pid to ``<gate>/source-<txid>`` and
    waits there (up to a minute) for the test to kill it; once per txid, so the plan of that txid
    in the next source process goes on."""

    def __init__(self, gate: str, hold_txids: tuple[int, ...], fields, max_batch_size: int, *values_lists) -> None:
        super().__init__(fields, max_batch_size, *values_lists)
        self.gate, self.hold_txids = gate, tuple(hold_txids)

    def emit_batch(self, batch_id, collector):
        from pyspark import TaskContext

        held = Path(self.gate) / f"source-{batch_id}"
        if batch_id in self.hold_txids and TaskContext.get() is None and not held.exists():
            (Path(self.gate) / f".source-{batch_id}").write_text(str(os.getpid()))
            os.replace(Path(self.gate) / f".source-{batch_id}", held)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # killed here
                time.sleep(0.05)
        super().emit_batch(batch_id, collector)
