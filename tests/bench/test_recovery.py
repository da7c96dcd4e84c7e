"""RECOVERY's figures, from a made-up timeline (the run itself needs a cluster: see bench/)."""

import pytest

from bench.__main__ import main
from bench.recovery import Timeline, recovery


def _timeline(rate_of, until, step=0.05):
    """Rows every ``step`` s from 0 to ``until``, acks accumulating at ``rate_of(t)`` per second."""
    rows, acked, t = [], 0.0, 0.0
    while t <= until:
        rows.append((t, int(acked), 0, 0, 0))
        acked += rate_of(t) * step
        t = round(t + step, 6)
    return Timeline(rows)


def test_a_stall_after_the_kill_is_measured_until_the_rate_is_back():
    tl = _timeline(lambda t: 0.0 if 20 <= t < 25 else 1000.0, 40)
    f = recovery(tl, t_kill=20.0, t_end=40.0)
    assert f["rate_before"] == pytest.approx(1000, rel=0.02)
    assert 5.0 <= f["recovery_s"] == f["settled_s"] <= 6.1  # back during the first 1 s window after 25 s
    assert f["below_s"] == pytest.approx(5.0, abs=1.0) and f["min_rate"] == 0


def test_no_dip_is_recovered_at_once_and_a_rate_that_never_comes_back_is_not():
    assert recovery(_timeline(lambda t: 1000.0, 30), 20.0, 30.0)["recovery_s"] == 0.0
    never = recovery(_timeline(lambda t: 1000.0 if t < 20 else 100.0, 30), 20.0, 30.0)
    assert never["recovery_s"] is None and never["settled_s"] is None


def test_a_later_dip_delays_settling_but_not_recovery():
    f = recovery(_timeline(lambda t: 0.0 if 20 <= t < 22 or 30 <= t < 31 else 1000.0, 40), 20.0, 40.0)
    assert 2.0 <= f["recovery_s"] <= 3.1 and 11.0 <= f["settled_s"] <= 12.1


@pytest.mark.parametrize("argv", [["run", "RECOVERY", "--host", "local"],
                                  ["run", "RECOVERY", "--host", "process", "--workers", "1"],
                                  ["run", "RECOVERY", "--host", "process", "--workers", "2", "--rate", "half-peak"]])
def test_recovery_needs_a_host_of_worker_processes_and_a_rate_in_tuples_per_second(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert "RECOVERY" in err or "--rate" in err
