"""A TCP proxy that delays every reply from the server by a fixed time.

Models a slow network: requests reach Redis at once (so the lock is granted
and its ttl starts), but the client hears back only after ``delay`` seconds.
"""

from __future__ import annotations

import heapq
import socket
import threading
import time
from typing import List, Tuple


class DelayProxy:
    """Listens on 127.0.0.1 (``.url``) and forwards to ``upstream_port``."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.delay = delay
        self._upstream = ("127.0.0.1", upstream_port)
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = self._server.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}"
        self._closed = False
        self._sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream)
            except OSError:
                client.close()  # the node is gone: the client sees a closed connection
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(
                target=self._pipe, args=(upstream, client, self.delay), daemon=True
            ).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay: float) -> None:
        pending: List[Tuple[float, int, bytes]] = []
        cond = threading.Condition()
        seq = 0
        done = False

        def writer() -> None:
            while True:
                with cond:
                    while not pending and not done:
                        cond.wait()
                    if not pending and done:
                        return
                    due, _, data = pending[0]
                    now = time.monotonic()
                    if due > now:
                        cond.wait(due - now)
                        continue
                    heapq.heappop(pending)
                try:
                    dst.sendall(data)
                except OSError:
                    return

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            with cond:
                if not data:
                    done = True
                    cond.notify()
                    break
                seq += 1
                heapq.heappush(pending, (time.monotonic() + delay, seq, data))
                cond.notify()
        t.join()
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self._closed = True
        self._server.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
