"""A spout whose every next takes a while and emits one reliable tuple (as Storm's
randomsentence.js waits 100 ms before each emit): it logs each next and each ack by number."""

import time

from handshake import handshake, read_message, send

setup = handshake()
pause, i = setup["conf"]["test.next.secs"], 0
while True:
    command = read_message()
    if command["command"] == "next":
        time.sleep(pause)
        send({"command": "emit", "id": i, "tuple": [i], "need_task_ids": False})
        send({"command": "log", "msg": f"next {i}"})
        i += 1
    elif command["command"] in ("ack", "fail"):
        send({"command": "log", "msg": f"{command['command']} {command['id']}"})
    send({"command": "sync"})
