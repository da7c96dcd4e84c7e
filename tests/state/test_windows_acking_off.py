"""Windows with acking off (``topology.acker.executors`` 0, and a spout emitting some records
without message ids): every window fires as Storm's, from the watermark or the timer, which do
not depend on acking, persistent (``with_persistence``) or not, in event or processing time,
behind a bolt of 2 tasks (`acking_off_windows`)."""

import pytest

from squall import LocalCluster

from ..conftest import wait_until
from .acking_off_windows import acking_off_conf, as_expected, describe, topology, windows_fired

N = 1200


@pytest.mark.parametrize("time", ["event-tumbling", "event-sliding", "processing"])
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "plain"])
def test_windows_behind_a_bolt_of_two_tasks_fire_every_record_with_acking_off(tmp_path, persistent, time):
    """With acking off the checkpoint spout's steps are acked as it emits them, so it sent
    INITSTATE, PREPARE and COMMIT at once, and one parse task passed all three on before the
    other passed INITSTATE. The persistent window counted each checkpoint by each input task's
    last one: INITSTATE never completed, the window was never initialized and held every
    record for good, with no error and no warning (sent 1,200, 0 windows fired, on LocalCluster
    and on the process host). Storm's fires them; so does squall now."""
    with LocalCluster() as cluster:
        cluster.submit_topology("windows", acking_off_conf(tmp_path), topology(N, persistent, time))
        done = wait_until(lambda: as_expected(tmp_path, N, time), 20, interval=0.1)
        cluster.kill_topology("windows", wait_secs=0)
    assert done, describe(tmp_path, N, time)
    if time != "processing":  # the closing records are in no window that fired
        assert not any(i >= N for w in windows_fired(tmp_path) for i in w["ids"]), describe(tmp_path, N, time)
