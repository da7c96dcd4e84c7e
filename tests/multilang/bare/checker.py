"""A bolt that passes on each tuple's value as a number, as Storm's storm.py BasicBolt runs one:
a value that is no number raises, and the traceback is reported (``error``) before the tuple
is failed. A value "crash" makes it write a traceback to stderr and exit with code 3;
"crash-like-node" Node.js's report of an uncaught exception, exit code 1 ("...-missing-script":
of a script it cannot find);
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
    if value == "crash-like-node-missing-script":  # Node.js's report of a script it cannot find
        sys.stderr.write("node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\n"
                         "Error: Cannot find module '/work/upper.js'\n"
                         "    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)\n"
                         "    at node:internal/main/run_main_module:28:49 {\n"
                         "  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n")
        sys.stderr.flush()
        sys.exit(1)
    if value == "crash-like-node":  # what Node.js writes of an uncaught exception, then exit 1
        sys.stderr.write("/work/upper.js:11\n  throw new Error('poison record ' + rec);\n  ^\n\n"
                         "Error: poison record POISON\n    at handle (/work/upper.js:11:9)\n"
                         "    at Socket.<anonymous> (/work/upper.js:20:5)\n\nNode.js v20.20.2\n")
        sys.stderr.flush()
        sys.exit(1)
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
