"""Rate-limited warnings: at most N per period, and the next line says how many were held back."""

import logging

from squall._ratelimit import RateLimitedLog


def test_at_most_limit_lines_per_period_then_a_count_of_the_suppressed(caplog):
    now = [0.0]
    warn = RateLimitedLog(logging.getLogger("test-ratelimit"), limit=3, period=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test-ratelimit"):
        for i in range(1000):
            warn.warning("bad frame %d", i)
        now[0] = 61.0
        warn.warning("bad frame %d", 1000)

    assert [r.getMessage() for r in caplog.records] == [
        "bad frame 0", "bad frame 1", "bad frame 2",
        "bad frame 1000 (and 997 similar messages suppressed: at most 3 per 60 s)"]
    assert warn.rate.total_suppressed == 997
