"""A topology whose bolt reports an error when the test says so: a flag file appearing (each
flag once), for the tests of what the master keeps of a worker's errors."""

import os

from squall import BasicBolt, Fields, Spout


class Ticks(Spout):
    """Emits a tick every ``next_tuple`` (unreliably), as a clock for `FlagReporter`."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("tick"))

    def next_tuple(self):
        self.collector.emit([1])


class FlagReporter(BasicBolt):
    """Reports ``ValueError("flag NAME")`` once for each file NAME in ``directory``."""

    def __init__(self, directory):
        self.directory = str(directory)

    def prepare(self, conf, context):
        self.reported = set()

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        for name in sorted(os.listdir(self.directory)):
            if name not in self.reported:
                self.reported.add(name)
                collector.report_error(ValueError(f"flag {name}"))
