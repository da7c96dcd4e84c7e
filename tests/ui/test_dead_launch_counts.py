"""What a worker counted and reported before it died is counted across its restart by the readers
that add up launches, `squall monitor` and the UI's history, on a real `LocalCluster`.

The explore of 2026-12-07: `squall monitor -w dead-lettered` summed 30, 25, 30, 26, 25 over five
runs that each dead-lettered exactly 30 records, a spout's worker SIGKILLed mid-run; in one, 5
dead letters written 1 to 4 s before the kill never showed. The master drops a launch's figures
when it learns of its death, and the monitor had read the launch a poll before: what the launch
counted and heartbeated between that poll and its death went with it. The master now keeps the
last heartbeat of each ended launch, and the readers take the rest of the launch from there.
"""

from __future__ import annotations

import argparse
import contextlib

import pytest

from squall import Config, Fields, LocalCluster, Spout, TopologyBuilder
from squall._failure import CountsDeadLetters
from squall.cli import _cluster

from ..conftest import wait_until

# LocalCluster's workers are threads of the test's process: the spout reads this
STAGE: dict = {"give_up": 0, "crash": False}
BEFORE, AFTER = 5, 3  # records dead-lettered by the launch that dies, then by its successor


class GivingUpSpout(Spout, CountsDeadLetters):
    """Gives up ``STAGE["give_up"]`` records to its dead letters (unreadable, as a connector
    spout's that cannot parse them), one per call, and crashes its worker when the test sets
    ``STAGE["crash"]``. Emits nothing."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.start_dead_letter_counts()

    def next_tuple(self):
        if STAGE["crash"]:
            STAGE["crash"] = False
            raise RuntimeError("test: the spout's worker crashes")
        if STAGE["give_up"] > 0:
            STAGE["give_up"] -= 1
            self.count_dead_letter(None)


def _topology():
    b = TopologyBuilder()
    b.set_spout("src", GivingUpSpout())
    return b.create_topology()


def _spout_launch(cluster) -> tuple[object, int] | None:
    """The spout task's launch id and dead-letter count, as the master last heard them."""
    stats = cluster.get_topology_info("dl")["components"]["src"]["task_stats"]
    if not stats:
        return None
    (st,) = stats.values()
    return st["launch_id"], sum(int(n) for _by, _why, n in st.get("dead_lettered") or ())


def _die_after_giving_up(cluster) -> None:
    """The spout gives up `BEFORE` records, its worker heartbeats them, then it dies; its new
    launch gives up `AFTER` and heartbeats them. No reader reads in between."""
    launch, _n = _spout_launch(cluster)
    STAGE["give_up"] = BEFORE
    assert wait_until(lambda: _spout_launch(cluster) == (launch, BEFORE), 20), _spout_launch(cluster)
    STAGE["crash"] = True
    assert wait_until(lambda: (_spout_launch(cluster) or (launch,))[0] != launch, 30), _spout_launch(cluster)
    STAGE["give_up"] = AFTER
    assert wait_until(lambda: (_spout_launch(cluster) or (None, 0))[1] == AFTER, 20), _spout_launch(cluster)


class _PolledBetween:
    """The master as `squall monitor` polls it: before its second reading the spout's worker
    dead-letters, heartbeats and dies (`_die_after_giving_up`)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.polls = 0

    def get_topology_info(self, name):
        self.polls += 1
        if self.polls == 2:
            _die_after_giving_up(self.cluster)
        return self.cluster.get_topology_info(name)


@pytest.mark.timeout(90)
def test_monitor_counts_what_a_dead_worker_reported_after_the_poll_before_its_death(monkeypatch, capsys):
    """5 dead letters heartbeated by the launch that died after monitor's last poll, 3 by its
    successor: monitor's rows sum 8 (3 before: the dead launch's 5 were dropped)."""
    STAGE.update(give_up=0, crash=False)
    with LocalCluster() as cluster:
        cluster.submit_topology("dl", Config(), _topology())
        assert wait_until(lambda: _spout_launch(cluster) is not None, 30)
        monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(_PolledBetween(cluster)))
        monkeypatch.setattr(_cluster.time, "sleep", lambda secs: None)
        args = argparse.Namespace(name="dl", component="src", stream=None, watch=_cluster.DEAD_LETTERED_WATCH,
                                  interval=0.001, count=2)
        assert _cluster.cmd_monitor(args) == 0
        rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
        assert [int(r[5]) for r in rows] == [BEFORE + AFTER, 0]
        assert rows[0][3] == "unreadable"
        cluster.kill_topology("dl", wait_secs=0)


@pytest.mark.timeout(90)
def test_the_history_counts_the_dead_letters_a_dead_worker_reported_and_serves_them():
    """The UI's history samples carry the dead letters (``deadLettered``, ``deadLetteredPerSec``),
    as docs/ui.md says it keeps the figures across a restart: the rate counts the dead launch's
    5 and its successor's 3 between two samples; the total is the current launch's 3, as the
    topology page's."""
    pytest.importorskip("starlette", reason="the UI needs the ui extra: pip install -e '.[ui]'")
    from squall.ui.link import DirectLink
    from squall.ui.pages import WebPages

    STAGE.update(give_up=0, crash=False)
    with LocalCluster() as cluster:
        cluster.submit_topology("dl", Config(), _topology())
        assert wait_until(lambda: _spout_launch(cluster) is not None, 30)
        pages = WebPages(DirectLink(cluster), {"squall.ui.history.interval.secs": 1})
        pages.sampler.sample_once()
        _die_after_giving_up(cluster)
        assert wait_until(lambda: cluster.get_topology_page("dl")["spouts"][0]["deadLettered"] == AFTER, 20)
        pages.sampler.sample_once()
        first, second = pages.sampler.samples(cluster.get_topology_info("dl")["id"])
        assert (first.to_json()["deadLettered"], second.to_json()["deadLettered"]) == (0, AFTER)
        assert second.dead_lettered_per_sec * (second.time - first.time) == pytest.approx(BEFORE + AFTER)
        assert second.to_json()["deadLetteredPerSec"] == round(second.dead_lettered_per_sec, 3)
        cluster.kill_topology("dl", wait_secs=0)


def test_counted_across_adds_each_launch_after_the_one_read_and_only_the_current_one_when_that_is_gone():
    """Two restarts between two readings: the rest of the launch read (7 - 5), the whole of the
    one in between (4) and the new one's (3). A launch read that the master no longer keeps
    (restarted master): the current one alone, as before."""
    from squall.cluster.view import LaunchCount, counted_across
    a, b, c = (LaunchCount(("h:1", n), total) for n, total in ((1, 7), (2, 4), (3, 3)))
    assert counted_across(LaunchCount(("h:1", 1), 5), [a, b, c]) == (2 + 4 + 3, c)
    assert counted_across(LaunchCount(("h:1", 3), 1), [a, b, c]) == (2, c)
    assert counted_across(LaunchCount(("h:1", 0), 9), [c]) == (3, c)
    assert counted_across(None, [a, c]) == (3, c)
    assert counted_across(c, []) == (0, c)
    assert counted_across(LaunchCount(("h:1", 3), 5), [c]) == (3, c)  # went down: a restart not otherwise known
