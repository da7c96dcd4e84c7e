"""The dead letters in every live view, on a LocalCluster: a `FileSpout` reads 120 good lines, 7
poison lines that the bolt ``check`` fails (dead-lettered at their first failure, failed by
``check``) and 5 lines its translator refuses (dead-lettered as read, failed by no component).
Every line is counted where it went (the output, the dead-letter file), and the REST API's
topology and component pages, ``get_topology_info``, Prometheus's ``/metrics``, ``squall
local``'s live line and summary and ``squall monitor -w dead-lettered``'s counts all say 12
dead letters at the spout, 7 of them failed by ``check``, with the reasons."""

from __future__ import annotations

import contextlib
import io
import time

import pytest

from squall import LocalCluster
from squall.cli import _cluster as cli_cluster
from squall.cli import _local as cli_local
from squall.worker.stats_history import WINDOW_NAMES

from ..conftest import wait_until
from ..external import poison_figures as p
from .conftest import BASE

pytest.importorskip("starlette")
parser = pytest.importorskip("prometheus_client.parser")

from starlette.testclient import TestClient

from squall.ui.server import local_app

BATCH = p.Batch("a", good=120, poison=7, unreadable=5)
DEAD = BATCH.poison + BATCH.unreadable


@pytest.mark.timeout(90)
def test_every_live_view_counts_the_dead_letters_by_spout_failing_bolt_and_reason(tmp_path):
    src, local, notes = tmp_path / "in", tmp_path / "local", tmp_path / "notes"
    for d in (src, local, notes):
        d.mkdir()
    BATCH.write(src)
    with LocalCluster() as cluster, TestClient(local_app(cluster), base_url=BASE) as api:
        cluster.submit_topology("dl", p.conf(), p.topology(src, local, notes))
        assert wait_until(lambda: p.done(src, local, notes, BATCH), 60)
        # the figures reach the views with the workers' heartbeats
        assert wait_until(lambda: cluster.get_topology_page("dl")["spouts"][0]["deadLettered"] == DEAD, 30), \
            cluster.get_topology_page("dl")["spouts"]
        p.check_outcome(local, notes, BATCH)  # 120 out, 12 in the dead-letter file

        storm_id = cluster.get_topology_info("dl")["id"]
        page = api.get(f"/api/v1/topology/{storm_id}").json()
        assert [s["deadLettered"] for s in page["topologyStats"]] == [DEAD] * len(WINDOW_NAMES)
        assert [(s["spoutId"], s["deadLettered"], s["acked"]) for s in page["spouts"]] == [("lines", DEAD, 120)]
        assert [(b["boltId"], b["deadLettered"]) for b in page["bolts"]] == [("check", BATCH.poison)]

        spout = api.get(f"/api/v1/topology/{storm_id}/component/lines").json()
        assert [s["deadLettered"] for s in spout["spoutSummary"]] == [DEAD] * len(WINDOW_NAMES)
        assert sum(e["deadLettered"] for e in spout["executorStats"]) == DEAD
        assert spout["deadLetterStats"] == [
            {"spout": "lines", "failedBy": "", "reason": "unreadable", "deadLettered": BATCH.unreadable},
            {"spout": "lines", "failedBy": "check", "reason": "fail", "deadLettered": BATCH.poison}]
        assert "unreadable" not in {s["stream"] for s in spout["outputStats"]}  # a reason is no stream
        bolt = api.get(f"/api/v1/topology/{storm_id}/component/check?window=600").json()
        assert [s["deadLettered"] for s in bolt["boltStats"]] == [BATCH.poison] * len(WINDOW_NAMES)
        assert bolt["deadLetterStats"] == [
            {"spout": "lines", "failedBy": "check", "reason": "fail", "deadLettered": BATCH.poison}]

        info = cluster.get_topology_info("dl")
        assert (info["components"]["lines"]["dead_lettered"], info["components"]["check"]["dead_lettered"]) == (
            DEAD, BATCH.poison)

        metrics = {f.name: f for f in parser.text_string_to_metric_families(api.get("/metrics").text)}
        samples = {(s.labels["component"], s.labels["source"], s.labels["stream"]): s.value
                   for s in metrics["squall_dead_lettered"].samples}
        assert samples == {("lines", "", "unreadable"): BATCH.unreadable, ("lines", "check", "fail"): BATCH.poison}

        # squall monitor -w dead-lettered: a spout's own, a bolt's the ones it failed, reasons named
        reasons: dict[str, set[str]] = {"lines": set(), "check": set()}
        counted = {cid: sum(c[-1].total for c in cli_cluster._dead_letter_counts(info, cid, None, reasons[cid]).values())
                   for cid in reasons}
        assert counted == {"lines": DEAD, "check": BATCH.poison}
        assert reasons == {"lines": {"unreadable", "fail"}, "check": {"fail"}}
        assert sum(c[-1].total for c in cli_cluster._dead_letter_counts(info, "lines", "fail", set()).values()) == 7

        # squall local: the live line and the summary
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            last: dict = {}
            cli_local._PlainView().show(cli_local._Sampler(time.monotonic()).sample(cluster, ["dl"], last))
            cli_local._print_summary(last, "stopped", False)
        text = out.getvalue()
        assert f"lines (spout): emitted={BATCH.good + BATCH.poison}" in text, text
        assert f"dead-lettered={DEAD}" in text and f"dead-lettered={BATCH.poison}" in text, text
        assert f"{DEAD} dead-lettered" in text, text
        cluster.kill_topology("dl", wait_secs=0)
