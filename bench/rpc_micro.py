"""Micro benchmark of the control channel (`squall._wire`): µs per call to a real `Master`
on loopback, with the session authenticated only (``squall.encryption: false``, HMAC per frame)
and encrypted (``true``, ChaCha20-Poly1305 per frame).

- ``list``: ``squall list``'s call, small frames (one topology on the master);
- ``get_assignment``: a starting worker's call, whose reply carries the pickled plan.

Prints one line per (call, mode): best of ``--repeat`` runs of ``--n`` calls.

    python -m bench.rpc_micro [--n 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time

import cloudpickle

from squall import TopologyBuilder
from squall._config import cluster_conf
from squall._nimbus import SupervisorSync
from squall.cluster.master import Master
from squall.cluster.server import MasterServer
from squall.testing import FeederSpout, TupleCaptureBolt
from squall._wire import Client, RpcSettings


def _master(local_dir: str, encryption: str) -> tuple[Master, threading.Thread, asyncio.AbstractEventLoop]:
    m = Master(cluster_conf({"storm.local.dir": local_dir, "nimbus.thrift.port": 0, "squall.encryption": encryption}))
    server = MasterServer(m)
    # Through the server's keeper, as a client's verbs go: each outcome's changes are kept.
    server.keeper.keep(m.handle("supervisor_sync", {"sync": SupervisorSync("s", "127.0.0.1", [7000])}))
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["word"]), 2)
    b.set_bolt("count", TupleCaptureBolt(), 4).fields_grouping("feed", ["word"])
    server.keeper.keep(m.handle("submit", {"name": "bench", "conf": {},
                                           "topology": cloudpickle.dumps(b.create_topology())}))
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        ev = asyncio.Event()
        task = loop.create_task(server.serve(ev))
        loop.create_task(_set_when(ev, ready))
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(10)
    return m, t, loop


async def _set_when(ev: asyncio.Event, ready: threading.Event) -> None:
    await ev.wait()
    ready.set()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.rpc_micro")
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    for mode in ("false", "true"):
        with tempfile.TemporaryDirectory() as d:
            m, t, loop = _master(d, mode)
            topo = m.topologies["bench"]
            slot = next(iter(topo.assignment))
            with Client("127.0.0.1", m.port, m.secret, settings=RpcSettings(encryption=mode)) as c:
                assert c.encrypted == (mode == "true")
                for op, n, kwargs in (("list", args.n, {}),
                                      ("get_assignment", max(1, args.n // 10),
                                       {"storm_id": topo.plan.storm_id, "slot": slot})):
                    size = len(cloudpickle.dumps(c.call(op, **kwargs)))
                    best = float("inf")
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        for _ in range(n):
                            c.call(op, **kwargs)
                        best = min(best, time.perf_counter() - t0)
                    print(f"{op:15s} encryption={mode:5s} {1e6 * best / n:7.1f} µs/call  "
                          f"(reply ~{size} bytes, {n} calls)", flush=True)
            loop.call_soon_threadsafe(lambda: [task.cancel() for task in asyncio.all_tasks(loop)])
            t.join(5)


if __name__ == "__main__":
    main()
