"""The Codex ``model_catalog_json`` entry for a scripted model.

Codex gives a model slug it does not know a reduced tool set (no
``apply_patch``); listing the slug in ``model_catalog_json`` restores it
(codex-app-server.md, "What this means for MMO"). The required fields were
found against Codex 0.169.0 with ``app-server --strict-config``: a missing
one fails start-up with ``missing field `<name>```.
"""

from __future__ import annotations

from typing import Any

SCRIPTED_INSTRUCTIONS = (
    "You are the MMO offline scripted model. You follow mmo-script blocks in the "
    "conversation step by step; see docs/scripted-model.md."
)
"""Short base instructions: the scripted model reads no prompt, so Codex's 17 KB one is waste."""


def codex_model_info(model: Any) -> dict[str, Any]:
    """One ``ModelInfo`` object (Codex's catalog entry) for a catalog ``Model``."""
    modalities = ["text", "image"] if "image" in model.modalities else ["text"]
    info: dict[str, Any] = {
        "slug": model.id,
        "display_name": model.display_name or model.id,
        "description": "MMO offline scripted model (deterministic, no network)",
        "supported_reasoning_levels": [],
        "shell_type": "unified_exec",
        "apply_patch_tool_type": "freeform",
        "visibility": "list",
        "supported_in_api": True,
        "priority": 0,
        "support_verbosity": False,
        "supports_parallel_tool_calls": False,
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "experimental_supported_tools": [],
        "input_modalities": modalities,
        "base_instructions": SCRIPTED_INSTRUCTIONS,
    }
    if model.context_window:
        info["context_window"] = model.context_window
    return info


def codex_model_catalog(models: list[Any]) -> dict[str, Any]:
    """The whole ``model_catalog_json`` document: ``{"models": [ModelInfo, ...]}``."""
    return {"models": [codex_model_info(m) for m in models]}
