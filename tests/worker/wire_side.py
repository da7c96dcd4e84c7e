"""One end of a TCP wire in a process of its own, for tests/worker/test_reconnect.py (run in a
network namespace): ``b <bind>`` receives and prints ``got <n>`` for each message; ``a <bind>
<peer>`` sends ``(n,)`` to the peer for each ``send <n>`` line on its stdin, on a loop as an
engine loop with no timer runs it: a round, a flush, then asleep on its `LoopEvent` until woken
(`squall.engine.loop`); a ``stuck <secs>`` line holds the loop ``secs`` seconds after that
round's flush, neither polling nor flushing, as a bolt's ``execute`` holds its worker's only loop."""

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from doubles import STORM, PlainSerializer

from squall.worker.envelope import Origin
from squall.worker.tcp import TcpTransport


def say(*words):
    print(*words, flush=True)


def main(role, bind, peer=None):
    if role == "b":
        t = TcpTransport(bind, {}, PlainSerializer(), b"s3cret", lambda task, item: say("got", item[0]),
                         origin=Origin(STORM, "h:2", 1), encryption="false")
        event = t.loop_event()
        say("ready")
        while True:
            t.poll()
            t.flush()
            event.wait(0.05)
            event.clear()
    t = TcpTransport(bind, {7: peer}, PlainSerializer(), b"s3cret", None, origin=Origin(STORM, "h:1", 1),
                     encryption="false")
    event = t.loop_event()
    send = t.sender(7)
    todo = []

    def read():
        for line in sys.stdin:
            verb, arg = line.split()
            todo.append((verb, float(arg)))
            event.set()
    threading.Thread(target=read, daemon=True).start()
    say("ready")
    while True:
        stuck = 0.0
        while todo:
            verb, arg = todo.pop(0)
            if verb == "send":
                send((int(arg),))
            else:
                stuck += arg
        t.poll()
        t.flush()
        if stuck:
            say("stuck")
            time.sleep(stuck)  # user code: the loop neither polls nor flushes
            say("unstuck")
            continue
        event.wait(None)
        event.clear()


if __name__ == "__main__":
    main(*sys.argv[1:])
