"""A topology whose user code logs with Python's `logging`, for the worker log tests."""

import logging

from squall import BasicBolt, Fields, Spout

log = logging.getLogger("user.logging_topology")


class Counter(Spout):
    """Emits 1, 2, ... ``n`` (unreliably), logging each."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = 0

    def next_tuple(self):
        if self.sent < self.n:
            self.sent += 1
            log.info("counter emits %d", self.sent)
            self.collector.emit([self.sent])


class Reporter(BasicBolt):
    """Logs every tuple it sees; reports the tuple 3 as an error."""

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        log.info("reporter saw %d", tup.values[0])
        if tup.values[0] == 3:
            collector.report_error(ValueError("the tuple 3 is bad"))
