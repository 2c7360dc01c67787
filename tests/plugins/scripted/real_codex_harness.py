"""Real native Codex app-server -> real MMO gateway -> the scripted driver.

``ScriptedCodex`` starts a gateway on a loopback port (catalog read from the
built-in catalog, as in production), writes a ``CODEX_HOME`` whose provider
config comes from ``ScriptedRoute.provider_config`` and whose
``model_catalog_json`` comes from ``codex_model_catalog``, and runs turns
with the shared ``tests/support/real_codex.py`` driver.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from mmo_scripted.codex_catalog import codex_model_catalog
from mmo_scripted.driver import ScriptedRoute
from support.real_codex import AppServer, TurnResult, run_turn, write_config

from mmo_kernel.gateway.server import GatewayServer, GatewayThread
from mmo_kernel.gateway.sources import CatalogView

ROUTE_ID = "local_scripted"
MODEL_ID = "local_scripted__scripted"
ECHO_SERVER = Path(__file__).with_name("echo_mcp_server.py")


class ScriptedCodex:
    """One gateway plus one agent home; use as a context manager."""

    def __init__(self, root: Path, catalog_model: bool = True, echo_mcp: bool = False) -> None:
        self.home = root / "agent-home"
        self.cwd = root / "cwd"
        self.cwd.mkdir(parents=True)
        self._catalog_model = catalog_model
        self._echo_mcp = echo_mcp
        self.gateway = GatewayThread(GatewayServer())

    def __enter__(self) -> ScriptedCodex:
        self.gateway.__enter__()
        routes, models = CatalogView().current()
        route, model = routes[ROUTE_ID], models[MODEL_ID]
        config: dict[str, Any] = ScriptedRoute().provider_config(route, model, self.gateway.url)
        config["sandbox_mode"] = "workspace-write"
        # the shell snapshot is a `bash -lc` sourcing ~/.bashrc that outlives a killed server
        config["features"] = {"shell_snapshot": False}
        self.home.mkdir(parents=True)
        if self._catalog_model:
            catalog = self.home / "model_catalog.json"
            catalog.write_text(json.dumps(codex_model_catalog([model])), encoding="utf-8")
            config["model_catalog_json"] = str(catalog)
        if self._echo_mcp:
            config["mcp_servers"] = {"echo": {
                "command": sys.executable, "args": [str(ECHO_SERVER)],
                "default_tools_approval_mode": "approve"}}
        write_config(self.home, config)
        return self

    def __exit__(self, *exc: object) -> None:
        self.gateway.__exit__(*exc)

    def turn(self, prompt: str, **turn_params: Any) -> TurnResult:
        return run_turn(self.home, self.cwd, prompt, timeout=60, turn_params=turn_params or None)

    def goal(self, objective: str, token_budget: int, timeout: float = 60) -> TurnResult:
        """Set an active goal on an idle thread; Codex starts the turn by itself."""
        result = TurnResult()
        deadline = time.monotonic() + timeout
        with AppServer(self.home, self.cwd) as server:
            server.request("initialize", {"clientInfo": {"name": "mmo-tests", "version": "1"}},
                           deadline, result.messages)
            server.send({"method": "initialized"})
            thread = server.request("thread/start", {"cwd": str(self.cwd)}, deadline,
                                    result.messages)["thread"]["id"]
            server.request("thread/goal/set", {"threadId": thread, "objective": objective,
                                               "tokenBudget": token_budget},
                           deadline, result.messages)
            while not _goal_settled(result):
                message = server.next_message(deadline)
                if "method" in message:
                    result.messages.append(message)
                    server.answer(message)
                    if message["method"] == "turn/completed":
                        result.completed = message["params"]
            result.stderr = server.stderr
        return result


def _goal_settled(result: TurnResult) -> bool:
    """True once a turn completed after the goal left ``active``."""
    left_active = None
    for index, message in enumerate(result.messages):
        method = message.get("method")
        if method == "thread/goal/updated" and message["params"]["goal"]["status"] != "active":
            left_active = index
        if method == "turn/completed" and left_active is not None and index > left_active:
            return True
    return False
