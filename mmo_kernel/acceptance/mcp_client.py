"""A plain HTTP MCP client in the 2026-07-28 stateless form that records every tools/call.

The acceptance run talks to `mmo serve` exactly as an external host does: one JSON-RPC body
per POST, the headers ``MCP-Protocol-Version``/``MCP-Method``/``MCP-Name`` and the per-request
``_meta`` keys; no session id. Every ``tools/call`` is measured (actual body bytes, wall time)
and its result checked against the spec's tool-result form before a case sees it. Nothing
here records a header or a token.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2

PROTOCOL_VERSION = "2026-07-28"
UI_MIME = "text/html;profile=mcp-app"
DISPATCHER = "call_project_tool"
DIRECT_TOOLS = frozenset({
    "list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
    "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
    "finish_coding_task", "get_work_result_state",
})
"""Tools listed in tools/list for a UI-capable client (spec 12, MCP endpoint); every other
tool goes through the dispatcher."""
ERROR_KINDS = frozenset("""
invalid_arguments unknown_tool insufficient_scope invalid_project_selector project_not_found
session_not_found session_terminal runner_unavailable runner_disconnected path_outside_project
not_a_regular_file file_not_found not_a_text_file stale_file_revision file_exists
edit_text_not_found edit_text_not_unique destination_exists policy_denied nonzero_exit timeout
job_limit_reached job_not_found job_not_running job_input_conflict job_stdin_closed
not_a_git_project goal_not_found goal_idempotency_conflict goal_revision_changed
invalid_goal_plan goal_terminal goal_steps_incomplete team_unavailable admission_refused
permission_denied""".split())
SENTINEL = "MMO-ACCEPT-SENTINEL-d3c0de"
"""Printed by the log-pressure script (built from pieces there, so a request never holds it)."""


class CaseFailure(Exception):
    """A check of the spec failed; the message is the case's one-line ``failure``."""


def check(condition: Any, message: str) -> None:
    if not condition:
        raise CaseFailure(message)


def one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass
class CallRecord:
    """One ``tools/call`` as the report lists it."""

    case: str
    tool: str
    surface: str
    request_bytes: int
    response_bytes: int
    wall_seconds: float
    success: bool
    content_types: list[str]
    response_sha256: str
    sentinel_occurrences: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class McpClient:
    """POSTs JSON-RPC requests to ``mcp_url`` with a PAT; ``forbidden`` are strings (tokens,
    the runner machine's absolute temp paths) that must never appear in a response."""

    mcp_url: str
    token: str
    forbidden: Iterable[str] = ()
    client_name: str = "mmo-accept"
    client_version: str = "0"
    records: list[CallRecord] = field(default_factory=list)
    case: str = "setup"

    def __post_init__(self) -> None:
        self._http = httpx2.Client(trust_env=False, timeout=httpx2.Timeout(90.0))
        self._next_id = 0
        self._forbidden = [s.encode() for s in self.forbidden if s]

    def close(self) -> None:
        self._http.close()

    def _meta(self) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [UI_MIME]}}},
            "io.modelcontextprotocol/clientInfo": {"name": self.client_name,
                                                   "version": self.client_version},
        }

    def _post(self, method: str, params: dict[str, Any],
              name: str | None = None) -> tuple[bytes, httpx2.Response, float, int]:
        self._next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": method,
                           "params": {**params, "_meta": self._meta()}},
                          separators=(",", ":")).encode()
        headers = {"Authorization": f"Bearer {self.token}",
                   "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL_VERSION, "MCP-Method": method}
        if name is not None:
            headers["MCP-Name"] = name
        started = time.monotonic()
        try:
            response = self._http.post(self.mcp_url, content=body, headers=headers)
        except httpx2.HTTPError as exc:
            raise CaseFailure(one_line(f"{method} {name or ''}: HTTP request failed: {exc}")) \
                from None
        return body, response, time.monotonic() - started, self._next_id

    def _rpc_result(self, method: str, what: str, response: httpx2.Response,
                    request_id: int) -> dict[str, Any]:
        check(response.status_code == 200,
              f"{what}: HTTP {response.status_code}, expected 200: {response.text[:200]}")
        ctype = response.headers.get("content-type", "")
        check(ctype.startswith("application/json"),
              f"{what}: Content-Type {ctype!r}, expected application/json (never SSE)")
        check("mcp-session-id" not in response.headers,
              f"{what}: the stateless server issued an Mcp-Session-Id")
        try:
            reply = response.json()
        except ValueError:
            raise CaseFailure(f"{what}: the response body is not JSON") from None
        check(isinstance(reply, dict) and reply.get("jsonrpc") == "2.0"
              and reply.get("id") == request_id, f"{what}: not a JSON-RPC response to our id")
        if "error" in reply:
            err = reply["error"] or {}
            raise CaseFailure(one_line(f"{what}: JSON-RPC error {err.get('code')} "
                                       f"{err.get('message')}"))
        check(isinstance(reply.get("result"), dict), f"{what}: JSON-RPC reply has no result")
        return reply["result"]

    def list_tools(self) -> list[dict[str, Any]]:
        _, response, _, request_id = self._post("tools/list", {})
        result = self._rpc_result("tools/list", "tools/list", response, request_id)
        return list(result.get("tools") or [])

    def call(self, tool: str, arguments: dict[str, Any], *,
             mmo: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call ``tool`` directly when it is a direct tool, else through the dispatcher;
        return its envelope after checking the result form."""
        if tool in DIRECT_TOOLS:
            surface, args = tool, ({**arguments, "_mmo": mmo} if mmo else dict(arguments))
        else:
            surface = DISPATCHER
            args = {"tool": tool, "arguments": arguments, **({"_mmo": mmo} if mmo else {})}
        body, response, wall, request_id = self._post("tools/call",
                                                      {"name": surface, "arguments": args},
                                                      name=surface)
        raw = response.content
        record = CallRecord(
            case=self.case, tool=tool, surface=surface, request_bytes=len(body),
            response_bytes=len(raw), wall_seconds=round(wall, 4), success=False,
            content_types=[], response_sha256=hashlib.sha256(raw).hexdigest(),
            sentinel_occurrences=raw.count(SENTINEL.encode()))
        self.records.append(record)
        what = f"{tool}" if surface == tool else f"{DISPATCHER}({tool})"
        for secret in self._forbidden:
            check(secret not in raw, f"{what}: the response contains a token or an absolute "
                                     "path of the runner's machine")
        result = self._rpc_result("tools/call", what, response, request_id)
        content = result.get("content")
        if isinstance(content, list):
            record.content_types = [str(c.get("type")) for c in content if isinstance(c, dict)]
        structured = result.get("structuredContent")
        check(isinstance(structured, dict) and isinstance(structured.get("success"), bool)
              and isinstance(structured.get("output"), dict),
              f"{what}: structuredContent is not an envelope {{success, output}}")
        envelope: dict[str, Any] = structured  # type: ignore[assignment]
        record.success = envelope["success"]
        check(record.content_types == ["text"],
              f"{what}: content types {record.content_types}, expected one text item")
        try:
            mirrored = json.loads(content[0].get("text") or "")  # type: ignore[index]
        except ValueError:
            mirrored = None
        check(mirrored == envelope, f"{what}: the text content is not the envelope's JSON")
        check(result.get("isError") is (not envelope["success"]),
              f"{what}: isError is not the negation of success")
        if not envelope["success"]:
            _check_failure_form(what, envelope)
        return envelope


def _check_failure_form(what: str, envelope: dict[str, Any]) -> None:
    output, error = envelope["output"], envelope.get("error")
    check(isinstance(error, str) and error and "\n" not in error,
          f"{what}: a failure needs a one-line error, got {error!r}")
    check(output.get("error_kind") in ERROR_KINDS,
          f"{what}: error_kind {output.get('error_kind')!r} is not a spec error kind")
    check("state_changed" in output, f"{what}: a failure must report state_changed")
