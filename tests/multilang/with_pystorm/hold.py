"""A pystorm bolt that splits sentences (anchored, acked), except that the first subprocess to see
a sentence starting with "hold" keeps it, unacked, and writes its pid into the file named by
``test.hold.file``: the test then kills it with SIGKILL while that tuple is in it."""

import os

from pystorm import Bolt


class Hold(Bolt):
    auto_ack = False

    def initialize(self, storm_conf, context):
        self.hold_file = storm_conf["test.hold.file"]

    def process(self, tup):
        sentence = tup.values[0]
        if sentence.startswith("hold") and not os.path.exists(self.hold_file):
            with open(self.hold_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(self.hold_file + ".tmp", self.hold_file)
            return
        for word in sentence.split():
            self.emit([word], anchors=[tup])
        self.ack(tup)


if __name__ == "__main__":
    Hold().run()
