"""The ``mmo`` command line: subcommands that map onto ``mmo_kernel.api``.

Each command module exposes ``register(subparsers)``, adding its parsers with
``func`` set to a handler ``(args) -> int``. Errors become one line on
stderr; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from .. import package_version
from . import plugins_cmd

COMMAND_MODULES = (plugins_cmd,)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mmo",
        description=(
            "MMO runs a team of coding agents: a root Codex agent plans the work and "
            "delegates bounded tasks to workers on any model provider. Teams are TOML "
            "profiles; sessions and jobs are durable."
        ),
        epilog="Run `mmo COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"mmo {package_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("mmo: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI boundary: one readable line unless --debug
        if args.debug:
            traceback.print_exc()
        else:
            print(f"mmo: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
