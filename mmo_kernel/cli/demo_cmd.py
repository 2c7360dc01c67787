"""``mmo demo``: a whole team fixes a failing test offline, on a throw-away git repo."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run a team offline on a throw-away repo (scripted model)",
        description=(
            "Create a throw-away git repository with a failing test, run the "
            "adaptive-engineering team on the offline scripted model and integrate the "
            "reviewed fix. Uses the real Codex CLI when it is installed (or MMO_CODEX_BIN), "
            "else the stand-in. State lives in the demo's temp folder unless --keep or "
            "MMO_STATE_DIR is given."))
    parser.add_argument("--keep", action="store_true",
                        help="record the session in your normal MMO state dir")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mmo_kernel.demo.run import run_demo

    return 0 if run_demo(keep=args.keep).ok else 1
