"""A bolt that sends each tuple's value to every task of component "sink" by direct emits (the
tasks read from its handshake's context), anchored, then acks the tuple."""

from handshake import handshake, read_message, send

context = handshake()["context"]
sinks = sorted(int(t) for t, c in context["task->component"].items() if c == "sink")
while True:
    tup = read_message()
    if isinstance(tup, list):
        continue  # task ids of a regular emit: this bolt makes none
    if tup["stream"] == "__heartbeat":
        send({"command": "sync"})
        continue
    for task in sinks:
        send({"command": "emit", "anchors": [tup["id"]], "task": task, "stream": "direct", "tuple": tup["tuple"]})
    send({"command": "ack", "id": tup["id"]})
