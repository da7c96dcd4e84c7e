"""A bolt that passes each tuple's value on and acks it, and that outlives the end of its input:
at end of input it goes on for ten minutes (as a component flushing to a slow sink would), so
that only a signal ends it. Run under a wrapper (``sh -c "python3 lingers.py; exit $?"``), it is
the wrapper's child, which PDEATHSIG does not reach. Its pid goes in a file named by it under the
topology's ``test.out.dir``, for the test to find."""

import json
import os
import sys
import time

setup = None


def read_message():
    lines = []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line == "end":
            return json.loads("\n".join(lines))
        lines.append(line)
    time.sleep(600)  # end of input: it lingers
    sys.exit(0)


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n")
    sys.stdout.flush()


setup = read_message()
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
open(os.path.join(setup["conf"]["test.out.dir"], f"lingers-{os.getpid()}"), "w").close()
send({"pid": os.getpid()})
while True:
    msg = read_message()
    if msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    send({"command": "emit", "anchors": [msg["id"]], "tuple": [msg["tuple"][0]], "need_task_ids": False})
    send({"command": "ack", "id": msg["id"]})
