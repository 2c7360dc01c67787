"""A scripted JSON-RPC peer on stdio, for faults real Codex cannot produce on demand.

It speaks the app-server line protocol. Each ``peer/*`` method triggers one
behaviour: server requests whose ids collide with the client's, noise on
stdout, floods, a crash with a request pending, an orphaned grandchild,
ignoring SIGTERM, and notifications that race ahead of a response.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def ask(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a server request and return the client's answer (a message without method)."""
    send({"id": request_id, "method": method, "params": params})
    while True:
        message = read()
        if message is None:
            sys.exit(0)
        if "method" not in message and message.get("id") == request_id:
            return message


def turn_notifications(thread_id: str, turn_id: str, text: str) -> list[dict[str, Any]]:
    item = {"type": "agentMessage", "id": "msg-1", "text": text}
    usage = {"total": {"totalTokens": 9, "inputTokens": 7, "outputTokens": 2},
             "last": {"totalTokens": 9, "inputTokens": 7, "outputTokens": 2},
             "modelContextWindow": 1000}
    turn = {"id": turn_id, "status": "completed", "error": None, "items": [item]}
    return [
        {"method": "turn/started", "params": {"threadId": thread_id, "turn": {"id": turn_id}}},
        {"method": "item/agentMessage/delta",
         "params": {"threadId": thread_id, "turnId": turn_id, "itemId": "msg-1", "delta": text}},
        {"method": "item/completed", "params": {"threadId": thread_id, "turnId": turn_id,
                                                "item": item}},
        {"method": "thread/tokenUsage/updated",
         "params": {"threadId": thread_id, "turnId": turn_id, "tokenUsage": usage}},
        {"method": "thread/goal/updated", "params": {"threadId": thread_id, "turnId": turn_id,
                                                     "goal": {"status": "complete"}}},
        {"method": "turn/completed", "params": {"threadId": thread_id, "turn": turn}},
    ]


def handle(message: dict[str, Any]) -> None:
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if rid is None:
        return
    if method == "initialize":
        send({"id": rid, "result": {"userAgent": "peer", "platformFamily": "unix"}})
    elif method == "peer/echo":
        send({"id": rid, "result": {"params": params}})
    elif method == "peer/collide":
        answer = ask(rid, params["method"], params.get("params") or {})
        send({"id": rid, "result": {"answer": answer}})
    elif method == "peer/ask":
        send({"id": 0, "method": params["method"], "params": params.get("params") or {}})
        send({"id": rid, "result": {"asked": True}})
    elif method == "peer/noise":
        sys.stdout.write("this is not json\n[1, 2, 3]\n\n")
        send({"method": "peer/noted", "params": {"n": 1}})
        send({"id": rid, "result": {"after": "noise"}})
    elif method == "peer/flood":
        chunk = "x" * 1024 + "\n"
        for _ in range(int(params["stderr_kib"])):
            sys.stderr.write(chunk)
        sys.stderr.flush()
        for n in range(int(params["notifications"])):
            send({"method": "peer/tick", "params": {"n": n, "pad": "y" * 200}})
        send({"id": rid, "result": {"flooded": True}})
    elif method == "peer/error":
        send({"id": rid, "error": {"code": -32600, "message": "bad thing", "data": {"x": 1}}})
    elif method == "peer/die":
        os._exit(int(params.get("status", 3)))
    elif method == "peer/orphan":
        sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]  # close() kills it first
        child = subprocess.Popen(sleeper)
        escaped = subprocess.Popen(sleeper, start_new_session=True)  # as Codex runs commands
        send({"id": rid, "result": {"orphan_pid": child.pid, "escaped_pid": escaped.pid}})
    elif method == "peer/ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        STUBBORN.append(True)  # and outlive stdin's EOF too: only SIGKILL ends it
        send({"id": rid, "result": {"ignoring": True}})
    elif method == "turn/start":
        turn_id = params.get("turnIdForTest", "turn-1")
        for note in turn_notifications(params["threadId"], turn_id, "FAKE_CODEX_OK early"):
            send(note)
        send({"id": rid, "result": {"turn": {"id": turn_id, "status": "inProgress"}}})
    else:
        send({"id": rid, "error": {"code": -32600, "message": f"unknown method {method}"}})


STUBBORN: list[bool] = []


def main() -> None:
    while True:
        message = read()
        if message is None:
            if STUBBORN:
                time.sleep(120)
            return
        handle(message)


if __name__ == "__main__":
    main()
