"""``mmo runner --config FILE``: serve this machine's projects to an ``mmo serve`` (spec 12)."""

from __future__ import annotations

import argparse


def run_runner(args: argparse.Namespace) -> int:
    from mmo_kernel.runner.main import main

    return main(args.config)


def register(sub: argparse._SubParsersAction) -> None:
    runner = sub.add_parser(
        "runner", help="serve this machine's projects to an MMO server (project tools)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Dial out to an `mmo serve` server over WebSocket, register the projects of the "
            "project registry (projects.d/*.toml) and execute every project-tool call on "
            "them. Runs in the foreground, logs to stderr, reconnects forever; SIGINT or "
            "SIGTERM stops its process jobs and exits 0. The config holds the runner token: "
            "it must not be readable by group or others (chmod 600)."),
        epilog="example:\n  mmo runner --config ~/.config/mmo/runner.toml")
    runner.add_argument("--config", required=True, metavar="FILE",
                        help="the runner.toml (server_url, token, client_id, owner, [policy])")
    runner.set_defaults(func=run_runner)
