"""stdio and unix-socket (WebSocket) transports feeding one :class:`Server`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from mmo_codex_standin.connection import Connection
from mmo_codex_standin.server import Server
from mmo_codex_standin.websocket import WebSocketClosed, read_message, server_handshake
from mmo_kernel.hosts import OP_TEXT, encode_frame


def _decode(line: bytes | str):
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # real Codex ignores a line that is not JSON


async def serve_stdio(server: Server) -> None:
    """One JSON object per line on stdin/stdout; EOF on stdin ends the process."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data + b"\n")
        out.flush()

    conn = Connection(write, "stdio")
    while True:
        line = await reader.readline()
        if not line:
            break
        if line.strip():
            await server.handle(conn, _decode(line))
    server.drop(conn)


async def serve_unix(server: Server, path: Path) -> None:
    """``--listen unix://PATH``: WebSocket over a unix socket, like real Codex; until SIGTERM."""
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    counter = iter(range(1, 1 << 30))

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await server_handshake(reader, writer)
        except (
            WebSocketClosed,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
        ):
            writer.close()
            return
        conn = Connection(
            lambda data: writer.write(encode_frame(OP_TEXT, data, mask=False)),
            f"unix-{next(counter)}",
        )
        try:
            while True:
                await server.handle(conn, _decode(await read_message(reader, writer)))
        except (WebSocketClosed, ConnectionError):
            pass
        finally:
            server.drop(conn)
            writer.close()

    unix_server = await asyncio.start_unix_server(client, path=str(path), limit=64 * 1024 * 1024)
    os.chmod(path, 0o600)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with unix_server:
        await stop.wait()
    path.unlink(missing_ok=True)
