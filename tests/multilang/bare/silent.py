"""A bolt that makes the handshake and then answers nothing, heartbeats included."""

from handshake import handshake, read_message

handshake()
while True:
    read_message()
