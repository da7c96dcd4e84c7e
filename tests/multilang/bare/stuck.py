"""A bolt that answers heartbeats, then blocks for good on its first tuple (a call that never
returns): it reads nothing more, not even the end of its input."""

import time

from handshake import handshake, read_message, send

handshake()
while True:
    msg = read_message()
    if isinstance(msg, dict) and msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    while True:
        time.sleep(3600)
