"""Storm's WordCountTopology (Java with a Python ShellBolt) as a squall topology file:
run it with `squall local word_count_topology.py`, submit it with `squall jar`."""

import sys
from pathlib import Path

from words import SentenceSpout, WordCount

from squall import Config, Fields, ShellBolt, TopologyBuilder

HERE = Path(__file__).resolve().parent
SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
             "four score and seven years ago", "snow white and the seven dwarfs"]


def build():
    builder = TopologyBuilder()
    builder.set_spout("spout", SentenceSpout(SENTENCES), 1)
    # Java: new ShellBolt("python", "splitsentence.py"), its script in the jar's resources/
    split = ShellBolt([sys.executable, "splitsentence.py"], ["word"], resources=HERE / "multilang")
    builder.set_bolt("split", split, 2).shuffle_grouping("spout")
    builder.set_bolt("count", WordCount(), 3).fields_grouping("split", Fields("word"))
    return builder.create_topology()


conf = Config()
conf.set_num_workers(2)
conf.set_max_spout_pending(100)
