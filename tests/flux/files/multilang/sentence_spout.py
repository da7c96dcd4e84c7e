"""A spout in Storm's multilang protocol, written out (no library): emits each sentence given on
its command line once, its index as the tuple id; the subprocess of a FluxShellSpout."""

import json
import os
import sys

SENTENCES = sys.argv[1:]


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
sent = 0
while True:
    message = read()
    if isinstance(message, list):
        continue
    if message.get("command") == "next" and sent < len(SENTENCES):
        send({"command": "emit", "id": sent, "tuple": [SENTENCES[sent]], "need_task_ids": False})
        sent += 1
    send({"command": "sync"})
