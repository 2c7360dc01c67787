"""``mmo-codex-standin``: the console entry point (app-server, resume, --version)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mmo_codex_standin.interactive import record_resume
from mmo_codex_standin.server import Server
from mmo_codex_standin.shapes import CLI_VERSION
from mmo_codex_standin.transport import serve_stdio, serve_unix
from mmo_kernel.gateway import user_codex_home

USAGE = (
    "usage: mmo-codex-standin app-server [--listen stdio://|unix://PATH] [-c key=value]...\n"
    "       mmo-codex-standin [--remote ENDPOINT] [resume THREAD_ID]\n"
    "       mmo-codex-standin --version"
)
_VALUE_FLAGS = {"-c", "--config", "--enable", "--disable"}


def _listen_target(args: list[str]) -> str:
    listen = "stdio://"
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--listen" and index + 1 < len(args):
            listen = args[index + 1]
            index += 2
        elif arg.startswith("--listen="):
            listen = arg.split("=", 1)[1]
            index += 1
        elif arg in _VALUE_FLAGS:
            index += 2  # accepted and ignored, like unknown config keys without --strict-config
        elif arg.startswith("-"):
            index += 1
        else:
            raise SystemExit(f"mmo-codex-standin: unsupported app-server command {arg!r}\n{USAGE}")
    return listen


def app_server(args: list[str]) -> int:
    listen = _listen_target(args)
    home = user_codex_home()
    home.mkdir(parents=True, exist_ok=True)
    server = Server(home, Path(os.getcwd()))
    if listen == "stdio://":
        asyncio.run(serve_stdio(server))
    elif listen.startswith("unix://"):
        asyncio.run(serve_unix(server, Path(listen[len("unix://") :])))
    else:
        print(
            f"mmo-codex-standin: unsupported --listen {listen!r} (use stdio:// or unix://PATH)",
            file=sys.stderr,
        )
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("--version", "-V"):
        print(f"codex-cli {CLI_VERSION} (mmo stand-in)")
        return 0
    rest = args
    while rest and rest[0] in _VALUE_FLAGS:
        rest = rest[2:]
    if rest and rest[0] == "app-server":
        return app_server(rest[1:])
    if "resume" in args or "--remote" in args:  # the TUI, resuming or starting a thread
        return record_resume(args)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
