"""A TCP forwarder to a real server that a test can cut and restore: the database "goes away"
for the processes behind it (connections reset, new ones refused) and comes back, while the
server itself keeps running for every other test."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time

from tests.helpers import free_port


class TcpProxy:
    def __init__(self, target: tuple[str, int], port: int | None = None) -> None:
        self.target = target
        self.port = port or free_port()
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def __enter__(self) -> TcpProxy:
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def restore(self) -> None:
        """Listen again on the same port."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self._stopped.clear()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Stop listening and reset every forwarded connection."""
        self._stopped.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not close
                    conn.close()
            self._connections.clear()
        time.sleep(0.1)

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections.update({client, upstream})
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        pair = {a: b, b: a}
        try:
            while not self._stopped.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    pair[source].sendall(data)
        except OSError:
            return
        finally:
            for conn in (a, b):
                with contextlib.suppress(OSError):
                    conn.close()
            with self._lock:
                self._connections.difference_update({a, b})
