"""The TUI entry ``codex [--remote ENDPOINT] resume THREAD_ID`` as a recording stub."""

from __future__ import annotations

import json
import sys

from mmo_kernel.gateway import user_codex_home

INVOCATIONS = "fake-interactive-invocations.jsonl"


def record_resume(args: list[str]) -> int:
    """Append ``{"args", "thread_id"}`` to ``<CODEX_HOME>/fake-interactive-invocations.jsonl``."""
    positional = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in (
            "--remote",
            "-c",
            "--config",
            "--enable",
            "--disable",
            "-m",
            "--model",
            "-C",
            "--cd",
        ):
            skip = True
            continue
        if not arg.startswith("-"):
            positional.append(arg)
    if len(positional) < 2 or positional[0] != "resume":
        print("usage: mmo-codex-standin [--remote ENDPOINT] resume THREAD_ID", file=sys.stderr)
        return 2
    home = user_codex_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / INVOCATIONS, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"args": args, "thread_id": positional[1]}) + "\n")
    return 0
