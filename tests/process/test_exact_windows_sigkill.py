"""Exact per-window results after a failure (issue 33, item 4): examples/clicks_per_window.py on
the process host, the worker doing the windowing SIGKILLed mid-run; every (window, user) count
in Redis equals the count computed from the clicks put on the stream, none missing or doubled.

Replays are never late here, by the rule docs/windows.md gives (the lag must cover how far event
time runs ahead while a tuple is out): the clicks go in batches, each spanning less event time
than the lag, and a batch is put on the stream only once every click before it is acked. So
while a click is out, no click seen is more than the lag newer than it."""

from collections import Counter

import pytest

from squall import Config

from ..conftest import wait_until
from ..examples.conftest import clicks_per_window  # noqa: F401 - the example, a fixture
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from .recovery_topology import kill_a_worker_without

redis_streams = pytest.importorskip("squall.external.redis_streams", reason="needs the redis library")

from .recorded_spout import RecordedSpout  # after the skip: it imports the redis library

USERS = ["ann", "bob", "cyd", "dee", "eve", "fay"]
BATCHES, BATCH = 5, 400
STEP_MS = 50  # a batch spans 400 x 50 ms = 20 s of event time: less than the example's lag (30 s)
KILL_IN = 2  # the batch during which the windowing worker is killed
START = 1_700_000_000_000


def acked(client, ex) -> int:
    """How many entries of the example's stream its group read and acked (0 before the spout
    created the group)."""
    return sum((g["entries-read"] or 0) - g["pending"] for g in client.xinfo_groups(ex.STREAM))


@pytest.mark.timeout(300)  # a worker's restart on a loaded machine: the waits below end it sooner
def test_per_window_counts_are_exact_after_the_windowing_worker_is_sigkilled(
        cluster, redis_server, clicks_per_window, tmp_path):  # noqa: F811 - fixtures
    with cluster.client() as m:
        cells, replays = exact_after_a_kill(m, clicks_per_window, redis_server, tmp_path)
    print(f"process host SIGKILL: {cells} (window, user) counts exact, {replays} clicks replayed")


def exact_after_a_kill(cluster, ex, redis_server, tmp_path) -> tuple[int, int]:
    """Run example ``ex`` on ``cluster`` (a master's client, or a host with the same calls),
    SIGKILL the worker without the spout during batch ``KILL_IN``, and assert that every (window,
    user) count in Redis is exact; returns how many counts, and how many clicks were replayed."""
    client = redis_server.client()
    out = tmp_path / "out"
    out.mkdir()
    conf = Config(ex.conf)
    conf.update({"test.out.dir": str(out), "topology.message.timeout.secs": 5,
                 "topology.max.spout.pending": 100, "topology.state.checkpoint.interval.ms": 300})
    spout = RecordedSpout(redis_server.url, ex.STREAM, ex.GROUP, translator=ex.parse_click,
                         output_fields=ex.CLICK_FIELDS)
    clicks = ex.make_clicks(BATCHES * BATCH, START, USERS, step_ms=STEP_MS)
    length = ex.WINDOW.value
    expected = Counter(((c["ts"] - 1) // length * length, c["user"]) for c in clicks)
    cluster.submit_topology("clicks", conf, ex.build(redis_server.url, spout))
    try:
        for k in range(BATCHES):
            ex.put_clicks(client, clicks[k * BATCH:(k + 1) * BATCH])
            if k == KILL_IN:
                assert wait_until(lambda: acked(client, ex) >= k * BATCH + BATCH // 4, 60), "the batch did not start"
                victim = kill_a_worker_without(cluster, "clicks", "clicks")
                port = int(victim["slot"].rsplit(":", 1)[1])
                components = cluster.get_topology_info("clicks")["components"]
                for c in ("per_window", "counts"):  # a window task and a sink task die
                    assert port in {st["worker"] for st in components[c]["task_stats"].values()}, \
                        f"the worker killed ran no task of {c}"
            assert wait_until(lambda: acked(client, ex) == (k + 1) * BATCH, 120), \
                f"batch {k}: {(k + 1) * BATCH - acked(client, ex)} clicks never acked"
        # a click of every user a lag and a window past the last closes the last windows
        last = clicks[-1]["ts"] + ex.LAG.value + length
        ex.put_clicks(client, [{"user": u, "ts": last} for u in USERS])
        assert wait_until(lambda: ex.read_counts(client) == expected, 60), _diff(ex.read_counts(client), expected)
    finally:
        cluster.kill_topology("clicks", wait_secs=0)
    assert client.xlen(f"{ex.STREAM}:dead") == 0, client.xrange(f"{ex.STREAM}:dead")
    emits = Counter(i for f in out.glob("emits-*.txt") for i in f.read_text().split())
    assert len(emits) == len(clicks) + len(USERS), "a click was never emitted"
    replays = sum(emits.values()) - len(emits)
    assert replays > 0, "nothing was replayed: the kill hit no click in flight"
    return len(expected), replays


def _diff(got: dict, expected: dict) -> str:
    """The (window, user) cells whose counts differ, for the assertion's message."""
    cells = sorted(set(got) | set(expected))
    wrong = [(c, got.get(c), expected.get(c)) for c in cells if got.get(c) != expected.get(c)]
    return f"{len(wrong)} of {len(expected)} cells wrong (cell, got, expected): {wrong[:20]}"
