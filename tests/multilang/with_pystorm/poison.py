"""A pystorm bolt (as streamparse runs one with --multilang) that passes on each tuple's last
value as a number and dies on a poison record, each time it sees it: "raise" raises, which
pystorm's run() reports, fails the tuple with, and exits on (exit_on_exception, its default);
"exit" leaves with os._exit(7) after a line to stderr, failing nothing."""

import os
import sys

from pystorm import Bolt


class Poisoned(Bolt):
    def process(self, tup):
        value = tup.values[-1]
        if value == "raise":
            raise ValueError("poison record 'raise'")
        if value == "exit":
            sys.stderr.write("poison.py: cannot go on after record 'exit'\n")
            sys.stderr.flush()
            os._exit(7)
        self.emit([int(value)])


if __name__ == "__main__":
    Poisoned().run()
