"""RedisStreamSpout with acking off (``topology.acker.executors`` 0): at most once. Each entry is
XACKed before it goes out, so a restart, which replays the consumer's pending entries first,
never emits again an entry its worker emitted.

The spout task is driven directly, as the spout executor drives it with acking off: ``ack`` is
called inside ``emit`` (docs/concepts.md, "Acking off"). A crash is the task dropped without
``close`` (`drop`), as a SIGKILL would leave it."""

from __future__ import annotations

import threading
from collections import Counter

from squall import Config
from squall.external.redis_streams import RedisStreamSpout

from .test_redis_stream_deaths import drop
from .test_redis_streams import Context, pump

STREAM, GROUP = "events", "g"
ACKING_OFF = {Config.TOPOLOGY_ACKER_EXECUTORS: 0}


class AckingOff:
    """The spout executor's collector with acking off: a message id is acked inside ``emit``."""

    def __init__(self) -> None:
        self.spout: RedisStreamSpout | None = None
        self.emitted: list[str] = []
        self.woken = threading.Event()

    def wake(self) -> None:
        self.woken.set()

    def emit(self, values, stream="default", msg_id=None, anchors=None):
        self.emitted.append(values[1])
        if msg_id is not None:
            assert self.spout is not None
            self.spout.ack(msg_id)
        return [1]

    def report_error(self, error):
        raise AssertionError(error)


def started(url: str) -> tuple[RedisStreamSpout, AckingOff]:
    spout = RedisStreamSpout(url, STREAM, GROUP, ["value"])
    out = AckingOff()
    out.spout = spout
    spout.open(dict(ACKING_OFF), Context(0), out)
    return spout, out


def test_with_acking_off_a_redis_stream_spout_restarted_after_a_crash_emits_no_entry_twice(redis_server):
    """30 entries out or more, then the worker dies. Before, the last one's XACK waited for the
    next next_tuple, so the restart read it again from the consumer's pending entries and
    emitted it a second time; now each batch is acked before it goes out, in the same
    next_tuple. The entries read and not emitted are pending, and the restart emits them: with
    no entry twice, none is lost either."""
    r = redis_server.client()
    values = [str(i) for i in range(200)]
    for v in values:
        r.xadd(STREAM, {"value": v})
    first, out1 = started(redis_server.url)
    pump(first, out1, 30)   # in batches: each next_tuple XACKs up to batch_size, then emits them
    assert 30 <= len(out1.emitted) < len(values)
    drop(first)   # the crash
    second, out2 = started(redis_server.url)
    try:
        pump(second, out2, len(values) - len(out1.emitted))
    finally:
        second.close()
    seen = Counter(out1.emitted + out2.emitted)
    twice = sorted((v for v, n in seen.items() if n > 1), key=int)
    assert twice == [], f"emitted twice: {twice}"
    assert sorted(seen, key=int) == values
    assert r.xpending(STREAM, GROUP)["pending"] == 0
