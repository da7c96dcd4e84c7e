"""The handshake every component here makes first (Storm's JSON wire, no library)."""

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
    sys.exit(0)  # end of input: the worker went away


def handshake():
    setup = read_message()
    open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()
    send({"pid": os.getpid()})
    return setup


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n")
    sys.stdout.flush()
