"""What the Trident-through-DRPC tests on the process and Spark hosts share: Storm's
TridentIntegrationTest word count (``testMemoryMapState``) as a topology file for ``squall
jar``, whose FeederBatchSpout the test makes and feeds, and the exact answers it must give."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import cloudpickle

from squall.testing import shared_state_dir
from squall.trident.spout import FeederBatchSpout

from .calls import client_execute

WORDS_TOPOLOGY = '''
import sys

import cloudpickle

from squall import Config, Fields, StormSubmitter
from squall.trident import BaseFilter, BaseFunction, FailedException, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, FilterNull, MapGet, Sum


class Split(BaseFunction):
    """Each space-separated word (Storm's trident.testing Split)."""

    def execute(self, tuple, collector):
        for word in tuple[0].split(" "):
            if word:
                collector.emit([word])


class FailOnBoom(BaseFilter):
    """Fails the batch of a DRPC call whose args hold the word "boom"."""

    def is_keep(self, tuple):
        if "boom" in tuple[0].split(" "):
            raise FailedException(f"the call {tuple[0]!r} fails its batch")
        return True


if __name__ == "__main__":
    name, feeder_file, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(feeder_file, "rb") as f:
        feeder = cloudpickle.load(f)
    topology = TridentTopology()
    counts = (topology.new_stream("tester", feeder)
              .each(Fields("sentence"), Split(), Fields("word"))
              .group_by(Fields("word"))
              .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
              .parallelism_hint(4))
    (topology.new_drpc_stream("words")
     .each(Fields("args"), FailOnBoom())
     .each(Fields("args"), Split(), Fields("word"))
     .group_by(Fields("word"))
     .state_query(counts, Fields("word"), MapGet(), Fields("count"))
     .each(Fields("count"), FilterNull())
     .aggregate(Fields("count"), Sum(), Fields("sum"))
     .project(Fields("sum")))
    conf = Config()
    conf.set_num_workers(workers)
    conf["topology.trident.batch.emit.interval.millis"] = 50
    # a failed call must come back as its batch fails, not as its tuples time out
    conf["topology.message.timeout.secs"] = 300
    StormSubmitter.submit_topology(name, conf, topology.build())
'''


class FedWords:
    """A FeederBatchSpout shared with the workers through ``directory`` (saved for the topology
    file to load), and every word fed to it, to compute the answers the topology must give."""

    def __init__(self, directory: Path) -> None:
        with shared_state_dir(directory / "shared"):
            self.spout = FeederBatchSpout(["sentence"])
        self.file = directory / "feeder.pickle"
        self.file.write_bytes(cloudpickle.dumps(self.spout))
        self.counts: collections.Counter[str] = collections.Counter()

    def feed(self, sentences: list[str]) -> None:
        """One batch; returns once it committed."""
        self.spout.feed([[s] for s in sentences])
        self.counts.update(w for s in sentences for w in s.split(" ") if w)

    def answer(self, args: str) -> str:
        """Storm's JSON of the ``words`` call: the sum of its words' counts (0 for none)."""
        return json.dumps([[sum(self.counts[w] for w in args.split(" ") if w)]])


def ask(conf: dict[str, Any], args: str) -> tuple[str | None, Exception | None]:
    """(result, error) of the ``words`` call with ``args``, through a DRPCClient of its own."""
    return client_execute(conf, "words", args)
