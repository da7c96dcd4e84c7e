"""`RecordedSpout`: a `RedisStreamSpout` that writes the entry id of each emit (a replay again)
to ``emits-<task>.txt`` under the topology's ``test.out.dir``, so that a test can count how often
each entry went out through the kills it makes."""

from __future__ import annotations

from pathlib import Path

from squall.external.redis_streams import RedisStreamSpout


class RecordedSpout(RedisStreamSpout):
    """`RedisStreamSpout` that also writes the entry id of each emit to ``emits-<task>.txt``."""

    def open(self, conf, context, collector):
        emits = open(Path(conf["test.out.dir"]) / f"emits-{context.get_this_task_id()}.txt", "a")
        super().open(conf, context, _Recording(collector, emits))


class _Recording:
    """A spout collector that writes the message id of each emit to ``file``."""

    def __init__(self, collector, file):
        self._collector = collector
        self._file = file

    def emit(self, values, msg_id=None, **kwargs):
        self._file.write(f"{msg_id}\n")
        self._file.flush()
        return self._collector.emit(values, msg_id=msg_id, **kwargs)

    def __getattr__(self, name):
        return getattr(self._collector, name)
