"""Run ``mmo ui``: bind 127.0.0.1, print the one URL that carries the token, serve.

The socket is bound before anything is printed, so ``--port 0`` prints the real port and
a taken port is one clear error. uvicorn's access log is off: it would record the URL, and
the token must never reach a log or a file (it is printed once, to the terminal).
"""

from __future__ import annotations

import errno
import socket
import sys
import webbrowser
from typing import TextIO

import uvicorn

from mmo_kernel.webui.app import KEEPALIVE_SECONDS, UI
from mmo_kernel.webui.security import LOOPBACK, Secrets


class UIError(RuntimeError):
    """A one-line reason ``mmo ui`` cannot start."""


def bind(port: int) -> socket.socket:
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on accepted sockets only then, and without
    # it a response's second write waits ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UIError(f"port {port} on {LOOPBACK} is taken; pick another with --port N "
                          "(0: any free port)") from None
        raise UIError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(port: int, open_browser: bool = True, debug: bool = False,
          keepalive: float = KEEPALIVE_SECONDS, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    sock = bind(port)
    real_port = sock.getsockname()[1]
    keys = Secrets()
    ui = UI(keys, keepalive=keepalive, debug=debug)
    url = f"http://{LOOPBACK}:{real_port}/?token={keys.token}"
    config = uvicorn.Config(ui.app(real_port), log_level="info" if debug else "warning",
                            access_log=False, lifespan="on", timeout_graceful_shutdown=2,
                            server_header=False, date_header=False, proxy_headers=False)
    server = uvicorn.Server(config)
    print(f"mmo ui: {url}", file=out, flush=True)
    print("(the token in this URL is your key: keep it to yourself; Ctrl-C stops the server)",
          file=out, flush=True)
    if open_browser:
        try:
            webbrowser.open(url, new=2)
        except webbrowser.Error:
            print("mmo ui: could not open a browser; open the URL above", file=out, flush=True)
    server.run(sockets=[sock])
    return 0


__all__ = ["UIError", "bind", "serve"]
