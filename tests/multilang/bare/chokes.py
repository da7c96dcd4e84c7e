"""A bolt that reads its input in chunks and dies (exit code 9) once the message it is reading
passes 1 MB, as a subprocess under a memory limit dies reading a large tuple: it never reads
the whole of it. Smaller tuples it passes on as numbers, and acks; it answers heartbeats."""

import json
import os
import sys

LIMIT = 1 << 20


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n")
    sys.stdout.flush()


def messages():
    """Each message as it is read, from os.read chunks."""
    lines, partial = [], b""
    while True:
        data = os.read(0, 1 << 16)
        if not data:
            sys.exit(0)
        *complete, partial = (partial + data).split(b"\n")
        for line in complete:
            if line == b"end":
                yield json.loads(b"\n".join(lines))
                lines = []
            else:
                lines.append(line)
        if len(partial) + sum(map(len, lines)) > LIMIT:
            sys.stderr.write("chokes.py: out of memory reading a message over 1 MB\n")
            sys.stderr.flush()
            os._exit(9)


reading = messages()
setup = next(reading)
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
for msg in reading:
    if isinstance(msg, list):
        continue
    if msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    send({"command": "emit", "anchors": [msg["id"]], "tuple": [int(msg["tuple"][0])], "need_task_ids": False})
    send({"command": "ack", "id": msg["id"]})
