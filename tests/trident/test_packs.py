"""A Trident bolt sends the tuples one input (or one finish) of a batch gives a task packed into
one engine tuple on the stream's ``$pack-`` twin; the receiver unpacks them for its processors.
Checked on LocalCluster: every tuple arrives once, where the stream's grouping sends it, and the
engine carries one tuple per (batch, task) instead of one per word."""

from __future__ import annotations

import collections

from squall import Fields
from squall.trident import TridentTopology
from squall.trident.builtin import Count

from .test_trident_local import cluster, record, run  # noqa: F401 (fixture)
from .test_trident_semantics import WORDS, batch_words, cycling, settled
from .trident_ops import Split


def test_a_batchs_tuples_for_one_task_travel_as_one_pack(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    counts = topo.new_stream("spout-packs", spout).parallelism_hint(1) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).aggregate(Fields("word"), Count(), Fields("count")).parallelism_hint(2)
    record(counts, "packs")
    name = run(cluster, topo)
    seen = settled("packs", 3)
    for txid in range(1, 4):
        assert sorted(seen[txid]) == sorted([w, k] for w, k in collections.Counter(batch_words(spout, txid)).items())
    # the partial counts leave in finish_batch: at most one pack per finished batch and task (each
    # is sent before that batch's $coord reports, one per task), however many words they carry
    bolt = next(c for c, info in cluster.get_topology_info(name)["components"].items()
                if c.startswith("b-") and info["tasks"] == 1)
    out = {s["stream"]: s["emitted"] for s in cluster.get_component_page(name, bolt, sys=True)["outputStats"]}
    (data,) = [s for s in out if s.startswith("s")]
    assert 0 < out["$pack-" + data] <= out["$coord-bg0"] < out[data], out
    cluster.kill_topology(name)
