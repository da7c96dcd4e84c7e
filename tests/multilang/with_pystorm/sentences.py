"""A pystorm spout (pystorm from PyPI, unchanged) run by squall's ShellSpout: it emits
``test.sentences`` sentences with ids 0..n-1, emits a failed one again, and appends the id of
every acked one to the file named by ``test.acks.file`` (the configuration the handshake gave)."""

import json
import sys
import time

from pystorm import Spout


class Sentences(Spout):
    def initialize(self, storm_conf, context):
        self.total = int(storm_conf["test.sentences"])
        self.acks = open(storm_conf["test.acks.file"], "a", buffering=1)  # noqa: SIM115 (open while the spout runs)
        self.todo = list(range(self.total))
        self.component = context["componentid"]
        # storm.py's default: each emit waits for its task ids (pystorm's is not to)
        self.need_task_ids = bool(storm_conf.get("test.need.task.ids"))
        if "test.conf.file" in storm_conf:  # what the handshake carried, for a test to check
            with open(storm_conf["test.conf.file"], "w") as f:
                json.dump(storm_conf, f)

    def next_tuple(self):
        if not self.todo:
            time.sleep(0.005)  # nothing to emit: Storm's advice, sleep a little before the sync
            return
        i = self.todo.pop(0)
        self.emit([f"the quick {i} fox jumps"], tup_id=str(i), need_task_ids=self.need_task_ids)

    def ack(self, tup_id):
        self.acks.write(f"{tup_id}\n")

    def fail(self, tup_id):
        self.todo.append(int(tup_id))


if __name__ == "__main__":
    Sentences(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
