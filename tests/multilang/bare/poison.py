"""A bolt that passes on each tuple's last value as a number, and dies on a poison record, each
time it sees it: "exit" makes it write a line to stderr and leave with os._exit(7), "segv" kill
itself with SIGSEGV (as a crash in a native library does), "raise" raise an exception it does
not catch (its traceback on stderr, exit code 1)."""

import os
import signal
import sys

from handshake import handshake, read_message, send

handshake()
while True:
    msg = read_message()
    if msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    value = msg["tuple"][-1]
    if value == "exit":
        sys.stderr.write("poison.py: cannot go on after record 'exit'\n")
        sys.stderr.flush()
        os._exit(7)
    if value == "segv":
        sys.stderr.write("poison.py: a native call crashed on record 'segv'\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    if value == "raise":
        raise RuntimeError("poison record 'raise'")
    send({"command": "emit", "anchors": [msg["id"]], "tuple": [int(value)], "need_task_ids": False})
    send({"command": "ack", "id": msg["id"]})
