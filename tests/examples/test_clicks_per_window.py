"""examples/clicks_per_window.py against a real redis-server on a LocalCluster: its per-window
counts are the exact counts of the clicks put on the stream, a malformed click is dead-lettered
with the reason and counted nowhere, and its main runs. The same example after a worker is
SIGKILLed is tests/process/test_exact_windows_sigkill.py."""

from __future__ import annotations

from collections import Counter

from squall import LocalCluster

from ..conftest import wait_until

USERS = ["ann", "bob"]


def test_counts_are_exact_and_a_malformed_click_is_dead_lettered_with_the_reason(clicks_per_window, redis_server):
    ex = clicks_per_window
    client = redis_server.client()
    clicks = ex.make_clicks(300, 1_700_000_000_000, USERS, step_ms=40)
    length = ex.WINDOW.value
    expected = Counter(((c["ts"] - 1) // length * length, c["user"]) for c in clicks)
    last = clicks[-1]["ts"] + ex.LAG.value + length
    ex.put_clicks(client, clicks[:100])
    bad = client.xadd(ex.STREAM, {"click": '{"user": "ann"'})
    ex.put_clicks(client, [*clicks[100:], *({"user": u, "ts": last} for u in USERS)])
    with LocalCluster() as cluster:
        cluster.submit_topology("clicks", ex.conf, ex.build(redis_server.url))
        assert wait_until(lambda: ex.read_counts(client) == expected, 60), ex.read_counts(client)
        cluster.kill_topology("clicks", wait_secs=0)
    [(_, dead)] = client.xrange(f"{ex.STREAM}:dead")
    assert dead["id"] == bad and "not a click (JSONDecodeError" in dead["error"], dead


def test_main_puts_clicks_runs_and_prints_exact_counts(clicks_per_window, redis_server, capsys):
    clicks_per_window.main(["--url", redis_server.url, "--clicks", "500"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "exact: yes", lines
    assert sum(int(line.split(": ")[1].split()[0]) for line in lines[:-1]) == 500
