"""A spout that raises on its first next: Python's traceback goes to stderr, and it exits."""

from handshake import handshake, read_message, send

handshake()
while True:
    command = read_message()["command"]
    if command == "next":
        raise ValueError("the source is gone")
    send({"command": "sync"})
