"""A TCP proxy between a client and a server that loses one reply (or
`times` replies): it forwards every byte both ways, except that the first
chunk the client sends containing `trigger` (a command's name) is
forwarded, the server's reply to it read, and both connections closed
instead of delivering it. The command
ran; the client never hears of it: a reply lost in flight."""

from __future__ import annotations

import selectors
import socket
import threading
from typing import List, Optional

#: How long the proxy waits for the swallowed command's reply (a BLOCK
#: call's comes when it is served).
REPLY_TIMEOUT = 30.0


class DropReplyProxy:
    def __init__(self, server_port: int, trigger: bytes, times: int = 1) -> None:
        self.server_port = server_port
        self.trigger = trigger
        #: The replies the proxy read and did not deliver, in order.
        self.swallowed: List[bytes] = []
        #: How many more replies to a command containing `trigger` to lose.
        self._armed = times
        self._guard = threading.Lock()
        self._sockets: List[socket.socket] = []
        self._closed = False
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        # accept() wakes up this often to see whether the proxy closed.
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True, name="drop-reply-proxy")
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                with self._guard:
                    if self._closed:
                        return
                continue
            except OSError:
                return  # closed
            client.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            with self._guard:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _take_trigger(self, data: bytes) -> bool:
        with self._guard:
            if self._armed and self.trigger in data:
                self._armed -= 1
                return True
            return False

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in selector.select(timeout=0.5):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is upstream:
                        client.sendall(data)
                    elif self._take_trigger(data):
                        upstream.sendall(data)
                        upstream.settimeout(REPLY_TIMEOUT)
                        reply = upstream.recv(65536)
                        with self._guard:
                            self.swallowed.append(reply)
                        return  # both closed below: the reply is lost
                    else:
                        upstream.sendall(data)
                with self._guard:
                    if self._closed:
                        return
        except OSError:
            return
        finally:
            selector.close()
            # The server's side first, so the server has seen the close
            # before the client can reconnect.
            for sock in (upstream, client):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def rearm(self, trigger: Optional[bytes] = None) -> None:
        """Loses the next reply to a command containing `trigger` (the same
        one by default)."""
        with self._guard:
            self.trigger = trigger or self.trigger
            self._armed = 1

    def close(self) -> None:
        with self._guard:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            try:
                sock.close()
            except OSError:
                pass
        self._thread.join(5)


class CountingProxy:
    """Forwards every byte both ways and counts **round trips**: a chunk the
    client sends after the server last answered on that connection (or as
    its first) starts one; the rest of a pipeline, sent before any reply
    came, is part of it. `turns` is the sum over the proxy's connections."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.turns = 0
        self._guard = threading.Lock()
        self._sockets: List[socket.socket] = []
        self._closed = False
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True, name="counting-proxy")
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                with self._guard:
                    if self._closed:
                        return
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            with self._guard:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)
        answered = True  # the next chunk from the client starts a round trip
        try:
            while True:
                for key, _ in selector.select(timeout=0.5):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is upstream:
                        answered = True
                        client.sendall(data)
                    else:
                        if answered:
                            with self._guard:
                                self.turns += 1
                            answered = False
                        upstream.sendall(data)
                with self._guard:
                    if self._closed:
                        return
        except OSError:
            return
        finally:
            selector.close()
            for sock in (upstream, client):
                sock.close()

    def close(self) -> None:
        with self._guard:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            try:
                sock.close()
            except OSError:
                pass
        self._thread.join(5)
