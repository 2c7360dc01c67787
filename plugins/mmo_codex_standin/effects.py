"""Turn side effects driven by markers: server requests, file writes, children."""

from __future__ import annotations

import asyncio
import difflib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mmo_codex_standin import shapes
from mmo_codex_standin.markers import FileWrite, McpCall, ToolCall
from mmo_codex_standin.protocol import now_ms, uuid7
from mmo_codex_standin.threads import ActiveTurn, ThreadState

APPROVAL_PREFIX = "fake-approval-"
FAKE_COMMAND = "echo FAKE_COMMAND_OK"
QUESTION_ID = "fake_question"


class TurnCancelled(Exception):
    """The turn must end ``interrupted`` (interrupt, or an approval answered ``cancel``)."""


def _call_id() -> str:
    return "call_" + uuid7().replace("-", "")[-24:]


def _started(server, thread: ThreadState, active: ActiveTurn, item: dict[str, Any]) -> None:
    server.emit(thread, "item/started", shapes.item_started(thread.id, active.record["id"], item))


def completed(server, thread: ThreadState, active: ActiveTurn, item: dict[str, Any]) -> None:
    """Record a finished item in the turn and the rollout, then notify."""
    active.record["items"].append(item)
    thread.persist(
        "event_msg", {"type": "item_completed", "turn_id": active.record["id"], "item": item}
    )
    server.emit(
        thread, "item/completed", shapes.item_completed(thread.id, active.record["id"], item)
    )


def _set_waiting(server, thread: ThreadState, flags: list[str]) -> None:
    thread.waiting_flags = flags
    server.emit(thread, "thread/status/changed", {"threadId": thread.id, "status": thread.status()})


async def _ask(
    server,
    thread: ThreadState,
    active: ActiveTurn,
    flag: str,
    method: str,
    body: dict[str, Any],
    prefix: str | None = None,
) -> dict[str, Any]:
    """A server request that an interrupt can abandon."""
    _set_waiting(server, thread, [flag])
    ask = asyncio.ensure_future(server.ask(thread, method, body, prefix))
    stop = asyncio.ensure_future(active.stop.wait())
    try:
        await asyncio.wait({ask, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not ask.done():
            ask.cancel()
            await asyncio.gather(ask, return_exceptions=True)
        _set_waiting(server, thread, [])
    if active.interrupted or ask.cancelled():
        raise TurnCancelled()
    return ask.result()


async def request_user_input(server, thread: ThreadState, active: ActiveTurn) -> str:
    body = {
        "threadId": thread.id,
        "turnId": active.record["id"],
        "itemId": _call_id(),
        "isBlocking": True,
        "questions": [
            {
                "id": QUESTION_ID,
                "header": "Operator input",
                "question": "FAKE_REQUEST_USER_INPUT: how should the agent continue?",
                "isOther": True,
                "isSecret": False,
                "options": [{"label": "continue", "description": "Continue the task as planned"}],
            }
        ],
    }
    answer = await _ask(
        server, thread, active, "waitingOnUserInput", "item/tool/requestUserInput", body
    )
    answers = (answer.get("answers") or {}).get(QUESTION_ID, {}).get("answers") or []
    return "; ".join(str(a) for a in answers)


async def request_command_approval(server, thread: ThreadState, active: ActiveTurn) -> str:
    """Ask to run a command; ``decline`` lets the turn go on, ``cancel`` ends it."""
    item_id = _call_id()
    item = shapes.command_execution(item_id, FAKE_COMMAND, thread.cwd, "inProgress")
    _started(server, thread, active, item)
    body = {
        "threadId": thread.id,
        "turnId": active.record["id"],
        "itemId": item_id,
        "startedAtMs": now_ms(),
        "command": FAKE_COMMAND,
        "cwd": thread.cwd,
        "commandActions": item["commandActions"],
        "reason": "FAKE_REQUEST_COMMAND_APPROVAL asks to run a command",
        "approvalId": None,
    }
    try:
        answer = await _ask(
            server,
            thread,
            active,
            "waitingOnApproval",
            "item/commandExecution/requestApproval",
            body,
            prefix=APPROVAL_PREFIX,
        )
    except TurnCancelled:
        completed(server, thread, active, dict(item, status="declined"))
        raise
    decision = answer.get("decision")
    if decision == "cancel":
        completed(server, thread, active, dict(item, status="declined"))
        raise TurnCancelled()
    if decision in ("accept", "acceptForSession") or isinstance(decision, dict):
        completed(
            server,
            thread,
            active,
            dict(item, status="completed", aggregatedOutput="FAKE_COMMAND_OK\n", exitCode=0),
        )
        return "accepted"
    completed(server, thread, active, dict(item, status="declined"))
    return "declined"


async def dynamic_tool_call(server, thread: ThreadState, active: ActiveTurn, call: ToolCall) -> str:
    names = {t.get("name") for t in thread.dynamic_tools}
    if call.name not in names:
        return f"unsupported call: {call.name}"
    item_id = _call_id()
    item = shapes.dynamic_tool_call(item_id, call.name, call.arguments, "inProgress")
    _started(server, thread, active, item)
    body = {
        "threadId": thread.id,
        "turnId": active.record["id"],
        "callId": item_id,
        "namespace": None,
        "tool": call.name,
        "arguments": call.arguments,
    }
    answer = await _ask(server, thread, active, "waitingOnApproval", "item/tool/call", body)
    success = bool(answer.get("success", False))
    content = answer.get("contentItems") or []
    completed(
        server,
        thread,
        active,
        dict(
            item, status="completed" if success else "failed", contentItems=content, success=success
        ),
    )
    texts = [c.get("text", "") for c in content if isinstance(c, dict)]
    return " ".join(texts)


def _mcp_arguments(call: McpCall, results: list) -> dict[str, Any]:
    import json

    from mmo_codex_standin.mcp_calls import McpCallError, substitute

    try:
        raw = json.loads(call.arguments_text)
    except json.JSONDecodeError as exc:
        raise McpCallError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise McpCallError("arguments must be a JSON object")
    return substitute(raw, results)


async def mcp_tool_calls(
    server, thread: ThreadState, active: ActiveTurn, calls: tuple[McpCall, ...]
) -> list[str]:
    """FAKE_MCP_CALL: each call in order, as an ``mcpToolCall`` item; returns message notes."""
    import time

    from mmo_codex_standin.mcp_calls import McpCallError, Session, item_for, summary
    from mmo_kernel.gateway import user_codex_home

    session = Session(user_codex_home(), dict(os.environ), thread.approval_policy)
    results: list[dict[str, Any] | None] = []
    notes = []
    try:
        for call in calls:
            item_id, started = _call_id(), time.monotonic()
            outcome, error, arguments = None, None, None
            try:
                arguments = _mcp_arguments(call, results)
            except McpCallError as exc:
                error = str(exc)
            item = item_for(item_id, call.server, call.tool, arguments, None, None, -1)
            _started(server, thread, active, dict(item, status="inProgress", durationMs=None))
            if error is None:
                try:
                    outcome = await asyncio.to_thread(
                        session.call, call.server, call.tool, arguments or {}
                    )
                except McpCallError as exc:
                    error = str(exc)
            item = item_for(item_id, call.server, call.tool, arguments, outcome, error, started)
            completed(server, thread, active, item)
            results.append((outcome or {}).get("structuredContent") if error is None else None)
            notes.append(summary(item))
    finally:
        await asyncio.to_thread(session.close)
    return notes


def _allowed(thread: ThreadState, target: Path) -> bool:
    kind = thread.sandbox.get("type")
    if kind in ("dangerFullAccess", "externalSandbox"):
        return True
    if kind != "workspaceWrite":
        return False
    roots = [Path(thread.cwd).resolve()] + [
        Path(r).resolve() for r in thread.sandbox.get("writableRoots", [])
    ]
    return any(target == root or root in target.parents for root in roots)


def write_files(
    server, thread: ThreadState, active: ActiveTurn, writes: tuple[FileWrite, ...]
) -> None:
    """FAKE_WRITE: write ``content`` + newline, record a fileChange item; honour the sandbox."""
    for write in writes:
        target = (Path(thread.cwd) / write.path).resolve()
        before = target.read_text(encoding="utf-8") if target.is_file() else None
        after = write.content + "\n"
        diff = "".join(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile="/dev/null" if before is None else f"a/{write.path}",
                tofile=f"b/{write.path}",
            )
        )
        kind = {"type": "add"} if before is None else {"type": "update", "move_path": None}
        item = shapes.file_change(
            _call_id(), [{"path": str(target), "kind": kind, "diff": diff}], "inProgress"
        )
        _started(server, thread, active, item)
        status = "completed"
        if _allowed(thread, target):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(after, encoding="utf-8")
        else:
            status = "failed"
        completed(server, thread, active, dict(item, status=status))


def spawn_orphan(thread: ThreadState) -> int:
    """FAKE_ORPHAN_CHILD: a long-lived child left in the app-server's process group."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=thread.cwd if os.path.isdir(thread.cwd) else None,
        close_fds=True,
    )
    pid_file = Path(thread.cwd) / "fake-orphan.pid"
    pid_file.write_text(f"{child.pid}\n", encoding="utf-8")
    return child.pid
