"""The ``codex_builtin`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import RouteDriver


class CodexBuiltinRoute(RouteDriver):
    """Codex's own ChatGPT/OpenAI login: the agent's home links the user's auth.json."""

    name = "codex_builtin"
