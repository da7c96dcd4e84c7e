"""Windows with acking off (``topology.acker.executors`` 0, and a spout emitting some records
without message ids): every window fires as Storm's, from the watermark or the timer, which do
not depend on acking, persistent (``with_persistence``) or not, in event or processing time,
behind a bolt of 2 tasks (`acking_off_windows`)."""

from pathlib import Path

import pytest

from squall import LocalCluster

from ..conftest import wait_until
from .acking_off_windows import (
    LAG_MS,
    LENGTH_MS,
    START_MS,
    STEP_MS,
    PacedRecords,
    ParseNeverAcks,
    PersistentWindow,
    acking_off_conf,
    as_expected,
    back,
    describe,
    event_windows,
    topology,
    window,
    windows_fired,
)

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


def test_a_bolt_that_never_acks_holds_back_no_checkpoint_with_acking_off(tmp_path):
    """With acking off nothing is tracked and a bolt need not ack, as in Storm. The checkpoint
    forwarder around such a bolt waited for it to ack every input before passing a checkpoint
    on: it kept every input, and no checkpoint passed it after the first, so the persistent
    window after it committed its windows once, at the start (txid 0 after 5 s of checkpoints
    every 100 ms), never again. Now checkpoints pass at once with acking off."""
    with LocalCluster() as cluster:
        cluster.submit_topology("windows", acking_off_conf(tmp_path),
                                topology(N, True, "event-tumbling", parse=ParseNeverAcks()))

        def window_commits():
            names = [ns for ns in cluster._state_memory.namespaces("windows")
                     if ns.startswith("window-") and ns.endswith("-window")]
            return [cluster.get_state("windows", ns).committed_txid for ns in names]
        done = wait_until(lambda: as_expected(tmp_path, N, "event-tumbling"), 20, interval=0.1)
        first = window_commits()
        committing = wait_until(lambda: window_commits()[0] >= first[0] + 5, 10, interval=0.1)
        cluster.kill_topology("windows", wait_secs=0)
    assert done, describe(tmp_path, N, "event-tumbling")
    assert committing, f"the window's state committed txid {first} and no later one"


class CrashesOnce(PersistentWindow):
    """Crashes its worker (a window's exception does) the first time a window holds id 300."""

    def execute(self, window):
        flag = Path(self.log).parent / "crashed"
        if not flag.exists() and any(t[0] == 300 for t in window.get()):
            flag.write_text("1")
            raise RuntimeError("crash on purpose")
        super().execute(window)


def test_a_persistent_window_whose_worker_restarted_fires_again_with_acking_off(tmp_path, caplog):
    """With acking off a task restarted after its worker died gets PREPAREs and never INITSTATE:
    the PREPARE it fails (with acking on, so that the checkpoint spout recovers and sends
    INITSTATE) reaches no one. It held every record it took after the restart, without a word:
    1,200 records at 200 a second, the window's worker killed by the window's exception about
    2 s in, and no window fired after the restart (3 of 13 fired, 201 records). Now it
    initializes from its last commit at that PREPARE, and says so."""
    n = 1200
    spout = PacedRecords(n, 200, resume_after=2)  # the window and the parse task of its worker
    with LocalCluster() as cluster:
        cluster.submit_topology("windows", acking_off_conf(tmp_path, workers=3),
                                topology(n, True, "event-tumbling", spout=spout,
                                         bolt=window(True, "event-tumbling", CrashesOnce)))
        last = max(event_windows(n, False))
        fired = wait_until(lambda: last in {w["end"] for w in windows_fired(tmp_path)}, 20, interval=0.1)
        workers = cluster.get_topology_info("windows")["workers"]
        cluster.kill_topology("windows", wait_secs=0)
    # the checkpoint spout (task 1) and the records (task 4) were not restarted with the window
    # (task 5), whose worker held a parse task: a restarted checkpoint spout recovers, and sends
    # INITSTATE itself
    [restarted] = [w for w in workers if [5, 5] in w["executors"]]
    assert sorted(restarted["executors"]) in ([[2, 2], [5, 5]], [[3, 3], [5, 5]]), workers
    assert back(tmp_path) == ["parse", "window"], back(tmp_path)
    assert fired, describe(tmp_path, n, "event-tumbling")
    # the records sent once the worker was back are each in their window, every window holds
    # only its own records, and none is counted twice (those sent while it was down are lost:
    # acking off is at most once). The windows starting within the lag after the first record
    # since the restart are held back (`squall.windowing.restart`: the dead worker may have
    # held a record up to the lag newer than that first one); every later one fires whole
    resumed = int((tmp_path / "resumed").read_text())
    expected, windows = event_windows(n, False), windows_fired(tmp_path)
    ids = [i for w in windows for i in w["ids"]]
    assert len(ids) == len(set(ids)) and all(set(w["ids"]) <= set(expected[w["end"]]) for w in windows)
    got = {w["end"]: sorted(w["ids"]) for w in windows}
    cut = START_MS + resumed * STEP_MS + LAG_MS
    after = {end: ids for end, ids in expected.items() if end - LENGTH_MS >= cut}
    assert after and {end: got.get(end) for end in after} == after, describe(tmp_path, n, "event-tumbling")
    assert any("initializes from its last commit now" in r.getMessage() for r in caplog.records)
