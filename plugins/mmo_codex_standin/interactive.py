"""The TUI entry ``codex [--remote ENDPOINT] [resume THREAD_ID]`` as a recording stub.

With ``resume`` it only records the call. Without it (real Codex's TUI then
starts a thread of its own) it connects to the ``--remote`` app-server, starts
a thread there exactly as the TUI does (so the server announces it to every
client), records the call with that thread's id, and exits.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mmo_kernel.gateway import user_codex_home

INVOCATIONS = "fake-interactive-invocations.jsonl"
_VALUE_FLAGS = ("--remote", "-c", "--config", "--enable", "--disable", "-m", "--model", "-C",
                "--cd")


def _positional(args: list[str]) -> list[str]:
    positional = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in _VALUE_FLAGS:
            skip = True
            continue
        if not arg.startswith("-"):
            positional.append(arg)
    return positional


def _remote(args: list[str]) -> str | None:
    return args[args.index("--remote") + 1] if "--remote" in args[:-1] else None


def _record(entry: dict[str, Any]) -> None:
    home = user_codex_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / INVOCATIONS, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def _call(socket: Any, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    socket.send_text(json.dumps({"id": request_id, "method": method,
                                 "params": params}).encode())
    while True:
        raw = socket.receive_text()
        if raw is None:
            raise SystemExit(f"mmo-codex-standin: the app-server closed during {method}")
        message = json.loads(raw)
        if message.get("id") == request_id and "method" not in message:
            if "error" in message:
                raise SystemExit(f"Error: {method} failed: {message['error'].get('message')}")
            return message["result"]


def start_thread_remotely(endpoint: str) -> str:
    """``initialize`` + ``thread/start`` on the remote app-server; the new thread's id."""
    from mmo_kernel.hosts import UnixWebSocket

    socket = UnixWebSocket(Path(endpoint.removeprefix("unix://")))
    try:
        _call(socket, 0, "initialize", {"clientInfo": {"name": "codex-tui", "version": "0"}})
        socket.send_text(json.dumps({"method": "initialized"}).encode())
        return str(_call(socket, 1, "thread/start", {"cwd": os.getcwd()})["thread"]["id"])
    finally:
        socket.close()


def record_resume(args: list[str]) -> int:
    """Append ``{"args", "thread_id"}`` to ``<CODEX_HOME>/fake-interactive-invocations.jsonl``."""
    positional = _positional(args)
    if positional[:1] == ["resume"] and len(positional) >= 2:
        _record({"args": args, "thread_id": positional[1]})
        return 0
    endpoint = _remote(args)
    if not positional and endpoint:
        _record({"args": args, "thread_id": start_thread_remotely(endpoint), "started": True})
        return 0
    print("usage: mmo-codex-standin [--remote ENDPOINT] [resume THREAD_ID]", file=sys.stderr)
    return 2
