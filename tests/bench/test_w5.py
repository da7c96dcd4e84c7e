"""W5, the resilience run, short: a real redis-server, the process host, one worker SIGKILLed.
Correctness only (every event acked and written exactly once, the rate came back); its timings
are the benchmark's (``python -m bench run W5``), never asserted here."""

import pytest

from bench.__main__ import main
from bench.redis_server import redis_server_binary

pytest.importorskip("redis", reason="the redis library is not installed: pip install -e '.[redis]'")
needs_redis = pytest.mark.skipif(redis_server_binary() is None,
                                 reason="redis-server is not installed: run scripts/install-system-deps.sh")


@needs_redis
@pytest.mark.timeout(120)
def test_a_short_w5_writes_every_event_exactly_once_across_a_worker_kill(capsys):
    from bench import w5_resilience

    record = w5_resilience.run(host="process", workers=2, rate=150, kill_every=4, kills=1, timeout=10)
    out = capsys.readouterr().out
    assert "<- worker SIGKILLed" in out and "kill 1 at" in out
    assert record["fed"] > 0
    assert record["written"] == record["distinct_written"] == record["written_set"] == record["fed"]
    assert record["duplicates"] == record["missing"] == record["unexpected"] == 0
    assert record["pending_at_end"] == 0 and record["dead_lettered"] == 0
    assert len(record["per_kill"]) == 1 and record["per_kill"][0]["recovery_s"] is not None
    assert record["exactly_once"] and record["recovered"] and record["errors"] == 0 and record["correct"]


def test_the_series_and_the_plot_are_drawn_from_the_samples(tmp_path):
    from bench.recovery import Timeline
    from bench.w5_resilience import per_second, plot

    tl = Timeline([(100.0 + i * 0.1, 50 * i, 0, 0, 0) for i in range(40)])  # 500 acks/s
    lat = [(100.5, 2.0), (100.7, 4.0), (101.5, None), (102.2, 8.0)]
    series = per_second(tl, lat, 100.0, 103.0)
    assert series == [(0, 500.0, 3.0), (1, 500.0, None), (2, 500.0, 8.0)]
    plot(series, [1.5], tmp_path / "w5.png", "W5")
    assert (tmp_path / "w5.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("argv", [["run", "W5", "--host", "local"],
                                  ["run", "W5", "--host", "process", "--kill-every", "0"],
                                  ["run", "W5", "--host", "process", "--rate", "half-peak"]])
def test_w5_needs_worker_processes_a_kill_period_and_a_rate_in_events_per_second(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert "W5" in err or "--rate" in err
