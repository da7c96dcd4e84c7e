"""A persistent window's results joined with a reliable spout's stream before a sink that writes
in the background (`tests/state/window_lineage.py`), on LocalCluster: the sink fails its first
writes (its server down).

The join anchors each result's child to the result (in no spout's tree) and to a pulse of a
reliable spout, so the child has a root. Before, a checkpoint passed the sink at once for it and
its failure failed no PREPARE: the commit recorded the window as fired, the pulse replayed, and
the window's result never came again (600 ids acked, 400 never written, in 2 runs of 2). Now the child
inherits the result's lineage: the checkpoint waits for its write, the failure fails the
PREPARE, and the window fires again."""

import pytest

from squall import Config, LocalCluster

from ..conftest import wait_until
from .counting import acked
from .window_lineage import lineage_topology, written


@pytest.mark.parametrize("anchors_as", ["list", "set", "generator"])
def test_a_window_result_joined_with_a_spout_tuple_and_failed_at_the_sink_is_written_after_all(tmp_path, anchors_as):
    """(Anchors passed as a set or a generator, which the engine takes as it takes a list, went
    unmarked until 2026-12-07: the wrapper marked only a list or a tuple of anchors, and 400 of
    600 ids acked were never written, as before the mark.)"""
    n = 600
    conf = Config()
    conf["test.out.dir"] = str(tmp_path)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    conf.set_message_timeout_secs(5)
    conf.set_max_spout_pending(100)
    with LocalCluster() as cluster:
        cluster.submit_topology("lineage", conf, lineage_topology(n, window_ms=200, delay=0.3, fail_first=3,
                                                                anchors_as=anchors_as))
        assert wait_until(lambda: acked(tmp_path) >= set(range(n)), 30), f"{len(acked(tmp_path))} of {n} acked"
        complete = wait_until(lambda: written(tmp_path) >= set(range(n)), 15, interval=0.1)
    lost = sorted(set(range(n)) - written(tmp_path))
    print(f"LocalCluster, 3 results failed at the sink, anchors as a {anchors_as}: {n} ids acked, {len(lost)} never written")
    assert complete and not lost, f"{len(lost)} of {n} ids acked (their windows committed) never written: {lost[:20]}"
