"""A pystorm bolt (pystorm from PyPI, unchanged) run by squall's ShellBolt: it splits a sentence
into words, each emitted anchored to the sentence (pystorm's auto_anchor) and acks it
(auto_ack). The first word asks for the task ids it went to and checks them."""

import sys

from pystorm import Bolt


class Split(Bolt):
    def process(self, tup):
        words = tup.values[0].split()
        tasks = self.emit([words[0]], need_task_ids=True)
        if not (isinstance(tasks, list) and len(tasks) == 1 and all(isinstance(t, int) for t in tasks)):
            raise RuntimeError(f"emit returned task ids {tasks!r}")
        for w in words[1:]:
            self.emit([w])


if __name__ == "__main__":
    Split(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
