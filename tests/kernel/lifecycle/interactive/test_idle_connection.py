"""An idle WebSocket connection to a listening app-server is not a lost transport."""

from __future__ import annotations

import socket
import threading
import time

from mmo_kernel.hosts.websocket import OP_TEXT, UnixWebSocket, accept_key, encode_frame


def test_a_silent_server_is_not_taken_for_a_closed_one(tmp_path):
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        key = [line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
               if line.lower().startswith(b"sec-websocket-key")][0]
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: "
                     + accept_key(key).encode() + b"\r\n\r\n")
        time.sleep(1.5)  # longer than the connect timeout below
        conn.sendall(encode_frame(OP_TEXT, b'{"late": true}', mask=False))
        time.sleep(0.2)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = UnixWebSocket(path, timeout=0.5)
    try:
        assert client.receive_text() == b'{"late": true}'
    finally:
        client.close()
        server.close()
        thread.join(5)
