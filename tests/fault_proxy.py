"""A TCP proxy on 127.0.0.1 in front of a real tracking server, to put a fault at one exact MLflow
call: the first request whose bytes hold `trigger` (b"/runs/set-tag") is held, never forwarded,
and `reached` is set; the test then acts (kills the client, stops the server) while the client
waits on it. `cut()` closes every connection and the listening port, as a server that went away."""

from __future__ import annotations

import contextlib
import socket
import threading


class FaultProxy:
    def __init__(self, target_port: int, trigger: bytes):
        self.target, self.trigger = ("127.0.0.1", target_port), trigger
        self.reached = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # cut
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        seen = b""
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                seen = seen[-len(self.trigger) :] + data  # a trigger split across two reads
                if requests and not self.reached.is_set() and self.trigger in seen:
                    self.reached.set()
                    return  # held: the client waits for an answer that never comes
                sink.sendall(data)

    def cut(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
