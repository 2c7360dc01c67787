"""The host kit: everything an execution host imports to drive an agent (spec 03, 04).

An execution host (``ExecutionHost`` from :mod:`mmo_kernel.plugin`; records, audit and
state helpers from :mod:`mmo_kernel.host_api`) owns an agent's turn loop. This package
is its public surface:

- controls: :class:`ControlServer` serves a host's control socket at
  :func:`app_server_socket_path` (:func:`root_app_server_socket_path` for a root's
  agent server); :func:`send_control_request` is the client side, failing with
  :class:`ControlNotDelivered`, :class:`ControlRequestRejected` or
  :class:`ControlDeliveryUnknown`; ``JOB_CONTROL_ACTIONS`` / ``GRANTABLE_ACTIONS``
  are the actions of spec 04;
- turns: :func:`normalize_turn_failure` (a failed turn as MMO's typed failure),
  :func:`goal_prompt` / :func:`cap_objective` (the goal harness),
  :func:`final_message` / :func:`partial_text` / :func:`write_partial` (result evidence);
- transports: :class:`UnixWebSocket` (:class:`WebSocketError`) for an agent server
  listening on a unix socket, and its framing (``OP_*`` opcodes, :func:`encode_frame`,
  :func:`unmask`, :func:`accept_key`) for a peer that serves one;
- the Codex CLI: :func:`resolve_native` / :func:`project_codex`, ``PINNED_CODEX_VERSION``
  and :func:`thread_persisted` (whether a thread can be resumed at all).

Only the bare control-action tuples load with the package; every other name loads its
module on first use, because the mesh and the profile schema import ``control_actions``
on every ``mmo mcp`` call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports
from mmo_kernel.hosts.control_actions import GRANTABLE_ACTIONS, JOB_CONTROL_ACTIONS

if TYPE_CHECKING:
    from mmo_kernel.hosts.codex_cli import (
        PINNED_CODEX_VERSION,
        project_codex,
        resolve_native,
        thread_persisted,
    )
    from mmo_kernel.hosts.control_socket import (
        ControlDeliveryUnknown,
        ControlNotDelivered,
        ControlRequestRejected,
        ControlServer,
        app_server_socket_path,
        send_control_request,
    )
    from mmo_kernel.hosts.evidence import final_message, partial_text, write_partial
    from mmo_kernel.hosts.goals import MAX_GOAL_OBJECTIVE_CHARS, cap_objective, goal_prompt
    from mmo_kernel.hosts.root_socket import root_app_server_socket_path
    from mmo_kernel.hosts.turn_failures import normalize_turn_failure
    from mmo_kernel.hosts.websocket import (
        OP_BINARY,
        OP_CLOSE,
        OP_CONT,
        OP_PING,
        OP_PONG,
        OP_TEXT,
        UnixWebSocket,
        WebSocketError,
        accept_key,
        encode_frame,
        unmask,
    )

__all__ = [
    "GRANTABLE_ACTIONS", "JOB_CONTROL_ACTIONS", "MAX_GOAL_OBJECTIVE_CHARS", "OP_BINARY",
    "OP_CLOSE", "OP_CONT", "OP_PING", "OP_PONG", "OP_TEXT",
    "PINNED_CODEX_VERSION", "ControlDeliveryUnknown", "ControlNotDelivered",
    "ControlRequestRejected", "ControlServer", "UnixWebSocket", "WebSocketError",
    "accept_key", "app_server_socket_path", "cap_objective", "encode_frame", "final_message",
    "goal_prompt", "normalize_turn_failure", "partial_text", "project_codex", "resolve_native",
    "root_app_server_socket_path", "send_control_request", "thread_persisted", "unmask",
    "write_partial",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel.hosts.codex_cli": ("PINNED_CODEX_VERSION", "project_codex", "resolve_native",
                                   "thread_persisted"),
    "mmo_kernel.hosts.control_socket": (
        "ControlDeliveryUnknown", "ControlNotDelivered", "ControlRequestRejected",
        "ControlServer", "app_server_socket_path", "send_control_request",
    ),
    "mmo_kernel.hosts.evidence": ("final_message", "partial_text", "write_partial"),
    "mmo_kernel.hosts.goals": ("MAX_GOAL_OBJECTIVE_CHARS", "cap_objective", "goal_prompt"),
    "mmo_kernel.hosts.root_socket": ("root_app_server_socket_path",),
    "mmo_kernel.hosts.turn_failures": ("normalize_turn_failure",),
    "mmo_kernel.hosts.websocket": (
        "OP_BINARY", "OP_CLOSE", "OP_CONT", "OP_PING", "OP_PONG", "OP_TEXT", "UnixWebSocket",
        "WebSocketError", "accept_key", "encode_frame", "unmask",
    ),
})
