"""A topology whose user code reconfigures Python's logging in its worker, for the worker log tests."""

import logging
import logging.config

from squall import BasicBolt, Fields, Spout

log = logging.getLogger("user.logconfig_topology")


class Numbers(Spout):
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
            self.collector.emit([self.sent])


class Reconfigures(BasicBolt):
    """In prepare, configures logging its own way, as an application does: dictConfig (which
    disables every logger made before it), the root's handlers replaced, the root at CRITICAL.
    Raises on every third tuple."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context):
        logging.config.dictConfig({"version": 1, "handlers": {"h": {"class": "logging.NullHandler"}},
                                   "root": {"handlers": ["h"], "level": "CRITICAL"}})

    def execute(self, tup, collector):
        log.warning("user saw %d", tup.values[0])
        if tup.values[0] % 3 == 0:
            raise ValueError(f"the tuple {tup.values[0]} is bad")
