"""A Trident DRPC stream answers each call with its own results only: the return step hands a
batch's results to every call in that batch, so no batch may ever hold two calls, whatever the
spout's parallelism or the topology's configuration says."""

from __future__ import annotations

import json

from squall import Config, Fields, LocalCluster
from squall.trident import BaseFunction, LocalDRPC, TridentTopology

from .calls import concurrent_answers


class Echo(BaseFunction):
    """The call's args, as its one result."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        collector.emit([tuple[0]])


def _answers(topo_conf: dict, spout_hint: int) -> dict[str, str]:
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        topo = TridentTopology()
        topo.new_drpc_stream("echo", drpc).parallelism_hint(spout_hint) \
            .each(Fields("args"), Echo(), Fields("echo")).project(Fields("echo"))
        cluster.submit_topology("trident-drpc-callers", Config(topo_conf), topo.build())
        return concurrent_answers(lambda: drpc.execute, "echo", threads=6, n=15)


def test_each_caller_gets_its_own_result_with_a_parallel_drpc_spout():
    answers = _answers({"topology.max.spout.pending": 4}, spout_hint=3)
    assert len(answers) == 6 * 15
    wrong = {args: got for args, got in answers.items() if json.loads(got) != [[args]]}
    assert not wrong, f"{len(wrong)} of {len(answers)} calls got another call's results: {dict(list(wrong.items())[:3])}"


def test_each_caller_gets_its_own_result_whatever_the_batch_size_setting():
    answers = _answers({"topology.max.spout.pending": 4, "topology.spout.max.batch.size": 50}, spout_hint=1)
    assert len(answers) == 6 * 15
    wrong = {args: got for args, got in answers.items() if json.loads(got) != [[args]]}
    assert not wrong, f"{len(wrong)} of {len(answers)} calls got another call's results: {dict(list(wrong.items())[:3])}"
