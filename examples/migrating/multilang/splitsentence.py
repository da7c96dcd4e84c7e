"""Storm's splitsentence.py with the multilang protocol written out (no library): split each
sentence into words, emit each anchored to its input, ack the input."""

import json
import os
import sys


def read():
    """One message: JSON lines up to a line holding `end`."""
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)  # the worker closed our input: the task ended
        if line.rstrip("\n") == "end":
            return json.loads("".join(lines))
        lines.append(line)


def send(message):
    """One message, then `end`."""
    sys.stdout.write(json.dumps(message) + "\nend\n")
    sys.stdout.flush()


setup = read()  # the handshake: conf, context, pidDir
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
while True:
    tup = read()
    if tup.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    for word in tup["tuple"][0].split():
        send({"command": "emit", "anchors": [tup["id"]], "tuple": [word], "need_task_ids": False})
    send({"command": "ack", "id": tup["id"]})
