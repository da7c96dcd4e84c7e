"""A spout that emits the numbers 0..n-1 (n from the handshake's "test.numbers"), each reliably
with its number as id, asking for the task ids each went to and sending them back in a log line;
acked and failed ids are logged too."""

import time

from handshake import handshake, read_message, send

setup = handshake()
n, i = setup["conf"]["test.numbers"], 0
while True:
    command = read_message()
    if command["command"] == "next":
        if i < n:
            send({"command": "emit", "id": i, "tuple": [i]})
            tasks = read_message()
            send({"command": "log", "msg": f"emitted {i} to {tasks}"})
            i += 1
        else:
            time.sleep(0.005)
    elif command["command"] in ("ack", "fail"):
        send({"command": "log", "msg": f"{command['command']} {command['id']}"})
    send({"command": "sync"})
