"""A bolt that acks what it gets and, at the end of its input, reports an error and exits, as
Storm's storm.py does (its readMsg raises "Read EOF from stdin", which BasicBolt.run reports)."""

import json
import os
import sys


def read_message():
    lines = []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line == "end":
            return json.loads("\n".join(lines))
        lines.append(line)
    return None


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n")
    sys.stdout.flush()


setup = read_message()
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
while True:
    tup = read_message()
    if tup is None:
        send({"command": "error", "msg": "Traceback ...\nException: Read EOF from stdin"})
        sys.exit(0)
    if tup["stream"] == "__heartbeat":
        send({"command": "sync"})
    else:
        send({"command": "ack", "id": tup["id"]})
