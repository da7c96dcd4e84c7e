"""A bolt that passes on each tuple's value as a number, as Storm's storm.py BasicBolt runs one:
a value that is no number raises, and the traceback is reported (``error``) before the tuple
is failed. A value "crash" makes it write a traceback to stderr and exit with code 3;
"crash-loudly" two lines of 3 MB; "crash-endlessly" 2.5 MB without a newline."""

import sys
import traceback

from handshake import handshake, read_message, send

handshake()
while True:
    msg = read_message()
    if msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
        continue
    value = msg["tuple"][0]
    if value == "crash-loudly":  # one 3 MB line (a value dumped whole), then the exception
        sys.stderr.write("dumped: " + "v" * 3_000_000 + "\nValueError: " + "w" * 3_000_000 + "\n")
        sys.stderr.flush()
        sys.exit(3)
    if value == "crash-endlessly":  # one line of 2,500,000 characters that never ends, written bit by bit
        for _ in range(25):
            sys.stderr.write("e" * 100_000)
            sys.stderr.flush()
        sys.exit(3)
    if value == "crash":
        sys.stderr.write("Traceback (most recent call last):\n  File \"checker.py\", line 18, in <module>\n"
                         "ZeroDivisionError: division by zero\n")
        sys.stderr.flush()
        sys.exit(3)
    try:
        number = int(value)
    except ValueError:
        send({"command": "error", "msg": traceback.format_exc()})
        send({"command": "fail", "id": msg["id"]})
        continue
    send({"command": "emit", "anchors": [msg["id"]], "tuple": [number], "need_task_ids": False})
    send({"command": "ack", "id": msg["id"]})
