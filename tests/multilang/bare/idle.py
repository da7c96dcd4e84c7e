"""A bolt that answers its heartbeats and acks any tuple. After its second heartbeat (its first
sync long read) it names itself with a file ``idle-<pid>`` in the directory its argument
gives, for the test to kill it."""

import os
import sys

from handshake import handshake, read_message, send

handshake()
heartbeats = 0
while True:
    message = read_message()
    if message.get("stream") == "__heartbeat":
        send({"command": "sync"})
        heartbeats += 1
        if heartbeats == 2:
            open(os.path.join(sys.argv[1], f"idle-{os.getpid()}"), "w").close()
    else:
        send({"command": "ack", "id": message["id"]})
