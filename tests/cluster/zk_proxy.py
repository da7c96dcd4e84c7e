"""A TCP proxy between one master and ZooKeeper, to cut that master off from ZooKeeper while
clients still reach it: `blackhole` drops every byte and keeps the connections open (a silent
partition), `cut` closes them and refuses new ones."""

from __future__ import annotations

import socket
import threading


class ZkProxy:
    """Forwards 127.0.0.1:``port`` to ZooKeeper at ``target`` until told otherwise."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.mode = "forward"
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="zk-proxy").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.mode == "cut":
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True, name="zk-proxy").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    break
                if self.mode == "forward":
                    dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            s.close()

    def blackhole(self) -> None:
        self.mode = "blackhole"

    def cut(self) -> None:
        self.mode = "cut"
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def stop(self) -> None:
        self.cut()
        self.listener.close()
