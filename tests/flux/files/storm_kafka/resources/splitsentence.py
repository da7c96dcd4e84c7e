"""A bolt in Storm's multilang protocol, written out (no library): splits each sentence into
words, emits each anchored to its input, and acks it; the subprocess of a FluxShellBolt."""

import json
import os
import sys


def read():
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        if line.rstrip("\n") == "end":
            return json.loads("".join(lines))
        lines.append(line)


def send(message):
    sys.stdout.write(json.dumps(message) + "\nend\n")
    sys.stdout.flush()


setup = read()
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
send({"pid": os.getpid()})
while True:
    message = read()
    if isinstance(message, list):
        continue  # task ids of an emit (need_task_ids is false below: none come)
    if message.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    for word in message["tuple"][0].split():
        send({"command": "emit", "anchors": [message["id"]], "tuple": [word], "need_task_ids": False})
    send({"command": "ack", "id": message["id"]})
