"""A spout that, at its first ``next``, emits ``argv[1]`` tuples each asking for its task ids,
and reads the ids only after the last (as a library whose reads wait until its writes are
done would): both pipes fill, each side waiting for the other to read."""

import sys

from handshake import handshake, read_message, send

n = int(sys.argv[1])
handshake()
first = True
while True:
    command = read_message()
    if command.get("command") == "next" and first:
        first = False
        for i in range(n):
            send({"command": "emit", "id": i, "tuple": [i]})
        for _ in range(n):
            read_message()  # the task ids
    send({"command": "sync"})
