"""MMO built-in plugin ``codex_builtin``.

Codex's own ChatGPT/OpenAI login: the agent's home links the user's auth.json.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import CodexBuiltinRoute


@hookimpl
def mmo_register_route_drivers(register):
    register(CodexBuiltinRoute)
