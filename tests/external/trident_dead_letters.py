"""Shared by the tests of a Trident topology's dead letters in the live figures
(tests/external/test_trident_dead_letter_figures.py on a LocalCluster,
tests/process/test_trident_dead_letter_figures.py on the process host): files of good lines and
lines the `FileTridentSpout`'s translator refuses (one raising, one giving two values for its one
field), a Redis stream of good entries and entries without the field the
`RedisStreamTridentSpout` reads; a topology that counts every good record in a transactional
`RedisMapState` (one key per record: each stored count is 1 when the record was counted exactly
once), with the first attempt of every third txid failed after the spouts emitted it, so the
batches holding bad records are given up again in their replays; and the checks of what came
out, every record counted."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import redis

from squall import Config, Fields
from squall.external.trident_files import FileTridentSpout
from squall.external.trident_redis import RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import BaseAggregator, FailedException

FILE_SPOUT, STREAM_SPOUT = "spout-lines", "spout-entries"  # the emitter bolts of txids lines, entries
STREAMS = ("s0", "s1")


class Input(NamedTuple):
    """What goes in: ``files`` files of ``good_lines`` good lines and ``bad_lines`` refused ones
    each, ``good_entries`` and ``bad_entries`` over the streams."""

    files: int = 3
    good_lines: int = 40
    bad_lines: int = 4
    good_entries: int = 50
    bad_entries: int = 6

    @property
    def good(self) -> set[str]:
        """Every good record's value (its key in the state)."""
        return ({f"good-f{f}-{i}" for f in range(self.files) for i in range(self.good_lines)}
                | {f"good-e{i}" for i in range(self.good_entries)})

    def write(self, directory: Path, url: str) -> None:
        """The files, each moved in complete, and the stream entries, bad ones among the good."""
        for f in range(self.files):
            good = [f"good-f{f}-{i}" for i in range(self.good_lines)]
            bad = [f"bad-f{f}-{i}" if i % 2 else f"pair-f{f}-{i}" for i in range(self.bad_lines)]
            tmp = directory / f".f{f}.txt"
            tmp.write_text("".join(f"{v}\n" for v in spread(good, bad)))
            tmp.rename(directory / f"f{f}.txt")
        client = redis.Redis.from_url(url, decode_responses=True)
        good = [{"value": f"good-e{i}"} for i in range(self.good_entries)]
        bad = [{"other": f"bad-e{i}"} for i in range(self.bad_entries)]  # no "value": MalformedEntry
        for i, fields in enumerate(spread(good, bad)):
            client.xadd(STREAMS[i % len(STREAMS)], fields)


def spread(good: list, bad: list) -> list:
    """``good`` with ``bad`` spread among them."""
    out = list(good)
    for k, value in enumerate(bad):
        out.insert((k + 1) * len(out) // (len(bad) + 1), value)
    return out


def translate(record: bytes) -> list:
    """The file spout's translator: a ``bad-`` line raises, a ``pair-`` line gives two values for
    the one field (both dead letters, ``unreadable``)."""
    text = record.decode().rstrip("\n")
    if text.startswith("bad-"):
        raise ValueError(f"unreadable test line {text!r}")
    return [text, "extra"] if text.startswith("pair-") else [text]


class FailFirstAttempt(BaseAggregator):
    """Passes every tuple on, and fails the first attempt of every ``every``-th txid (in each
    task), so those batches are replayed with the same txid, their bad records given up again."""

    def __init__(self, every: int = 3) -> None:
        self.every = every

    def init(self, batch_id, collector):
        if batch_id.txid % self.every == 0 and batch_id.attempt_id == 0:
            raise FailedException(f"induced failure of txid {batch_id.txid}")

    def aggregate(self, state, tuple, collector) -> None:
        collector.emit(list(tuple.values))

    def complete(self, state, collector) -> None:
        pass


def topology(directory: Path, url: str):
    """Both spouts into one transactional Redis map state counting each record by its value."""
    topo = TridentTopology()
    factory = RedisMapState.transactional(url)
    lines = topo.new_stream("lines", FileTridentSpout(directory, ["value"], translator=translate,
                                                      max_batch_records=7))
    entries = topo.new_stream("entries", RedisStreamTridentSpout(url, list(STREAMS), ["value"], id_field=None,
                                                                 max_batch_entries=9))
    (topo.merge(lines, entries)
        .partition_aggregate(Fields("value"), FailFirstAttempt(), Fields("value"))
        .group_by(Fields("value"))
        .persistent_aggregate(factory, Count(), Fields("count")))
    return topo.build()


def conf() -> Config:
    c = Config()
    c["topology.max.spout.pending"] = 3
    c["topology.stats.sample.rate"] = 1.0
    return c


def stored(url: str, kind: str = "transactional") -> dict[str, int]:
    """The state's count per record value (a ``transactional`` or ``opaque`` `RedisMapState`)."""
    client = redis.Redis.from_url(url)
    keys = sorted(k.decode() for k in client.keys("good-*") + client.keys("bad-*") + client.keys("pair-*"))
    serializer = getattr(RedisMapState, kind)(url).serializer
    values = [serializer.deserialize(v) for v in client.mget(keys)] if keys else []
    return {k: (v.val if kind == "transactional" else v.curr) for k, v in zip(keys, values) if v is not None}


KAFKA_SPOUT = "spout-events"  # the emitter bolt of txid events


def kafka_values(good: int, bad: int) -> list[str]:
    """``good`` good record values and ``bad`` the Kafka translator refuses, spread among them."""
    return spread([f"good-k{i}" for i in range(good)], [f"bad-k{i}" for i in range(bad)])


def kafka_translate(record) -> list:
    """The Kafka spouts' translator: the value as text; a ``bad-`` value raises (a dead letter)."""
    text = record.value.decode()
    if text.startswith("bad-"):
        raise ValueError(f"unreadable test record {text!r}")
    return [text]


def kafka_topology(bootstrap: str, topic: str, url: str, kind: str):
    """A ``kind`` (transactional or opaque) Kafka Trident spout into a `RedisMapState` of the same
    kind counting each record by its value, every txid's first attempt failed (a poll may bring
    every record in one batch)."""
    from squall.external.kafka import KafkaSpoutConfig
    from squall.external.trident_kafka import KafkaTridentSpoutOpaque, KafkaTridentSpoutTransactional

    from ..kafka_broker import QUIET

    config = KafkaSpoutConfig(bootstrap, [topic], f"group-{topic}", poll_timeout_ms=50, translator=kafka_translate,
                              output_fields=["value"], props={**QUIET, "fetch.wait.max.ms": 20})
    spout = (KafkaTridentSpoutTransactional if kind == "transactional" else KafkaTridentSpoutOpaque)(config)
    topo = TridentTopology()
    (topo.new_stream("events", spout)
        .partition_aggregate(Fields("value"), FailFirstAttempt(every=1), Fields("value"))
        .group_by(Fields("value"))
        .persistent_aggregate(getattr(RedisMapState, kind)(url), Count(), Fields("count")))
    return topo.build()


def expected_dead(inp: Input) -> dict[tuple[str, str, str], int]:
    """(component that gave them up, failed by, reason) -> the dead letters every view must say."""
    return {(FILE_SPOUT, "", "unreadable"): inp.files * inp.bad_lines,
            (STREAM_SPOUT, "", "unreadable"): inp.bad_entries}


def figures(info: dict) -> dict[tuple[str, str, str], int]:
    """(component, failed by, reason) -> count, from every task's ``dead_lettered`` rows of
    ``get_topology_info``."""
    out: dict[tuple[str, str, str], int] = {}
    for cid, c in info["components"].items():
        for st in c["task_stats"].values():
            for by, why, n in st.get("dead_lettered") or ():
                out[(cid, by, why)] = out.get((cid, by, why), 0) + int(n)
    return out
