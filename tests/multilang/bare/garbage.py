"""A bolt whose answer to its first tuple is not JSON."""

import sys

from handshake import handshake, read_message

handshake()
read_message()
sys.stdout.write("{command: emit, tuple: [1]}\nend\n")
sys.stdout.flush()
while True:
    read_message()
