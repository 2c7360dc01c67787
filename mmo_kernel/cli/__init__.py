"""The ``mmo`` command line: subcommands that map onto ``mmo_kernel.api``.

Each command module exposes ``register(subparsers)``, adding its parsers with
``func`` set to a handler ``(args) -> int``. Errors become one line on
stderr; ``--debug`` shows the traceback. ``mmo mcp`` is dispatched before
anything else is imported: agents start it for every thread.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
MCP_HELP = """usage: mmo mcp

Run the mmo_mesh MCP server on stdio: JSON-RPC, one message per line.

Agents start it themselves: MMO writes it into every agent's Codex config as
[mcp_servers.mmo_mesh], with the agent's identity and capability token in its
environment. Run by hand without them, it answers `initialize` and `ping` and
refuses everything else (`invalid MCP caller capability`). See docs/mcp.md.
"""

COMMAND_MODULES = (
    "plugins_cmd", "jobs_cmd", "sessions_cmd", "follow_cmd", "profiles_cmd", "catalog_cmd",
    "gateway_cmd", "maintenance_cmd", "settings_cmd", "demo_cmd", "doctor_cmd",
    "serve_cmd",
    "runner_cmd",
    "accept_cmd",
    "top_cmd",
    "ui_cmd",
)
COMMAND_OWNERS = {
    "plugins": "plugins_cmd", "jobs": "jobs_cmd", "job": "jobs_cmd",
    **dict.fromkeys(("run", "start", "resume", "sessions", "session", "pause", "continue",
                     "compact", "detach", "stop", "cancel"), "sessions_cmd"),
    "watch": "follow_cmd", "logs": "follow_cmd", "profiles": "profiles_cmd",
    "catalog": "catalog_cmd", "gateway": "gateway_cmd", "smoke": "maintenance_cmd",
    "clean": "maintenance_cmd", "settings": "settings_cmd", "demo": "demo_cmd",
    "doctor": "doctor_cmd", "serve": "serve_cmd", "runner": "runner_cmd", "accept": "accept_cmd",
    "top": "top_cmd", "ui": "ui_cmd",
}
"""The module that registers each command: a command line imports its own command's module
only (~20 ms of every ``mmo``); help and unknown commands build every parser."""


def build_parser(command: str | None = None):
    """The parser of every command, or with ``command`` (a key of ``COMMAND_OWNERS``) of
    that command's module only."""
    import argparse
    import importlib

    class ShowVersion(argparse.Action):
        """``--version``: the distribution metadata is read only when it is asked for."""

        def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                     default: str = argparse.SUPPRESS,
                     help: str = "show program's version number and exit") -> None:
            super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

        def __call__(self, parser, namespace, values, option_string=None):
            from mmo_kernel import package_version

            print(f"mmo {package_version()}")
            parser.exit()

    parser = argparse.ArgumentParser(
        prog="mmo",
        description=(
            "MMO runs a team of coding agents: a root Codex agent plans the work and "
            "delegates bounded tasks to workers on any model provider. Teams are TOML "
            "profiles; sessions and jobs are durable."
        ),
        epilog="Run `mmo COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action=ShowVersion)
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("mcp", help="run the mmo_mesh MCP server on stdio (started by agents)")
    owner = COMMAND_OWNERS.get(command or "")
    for name in (owner,) if owner else COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["mcp"]:
        if any(a in ("-h", "--help") for a in args_list[1:]):
            print(MCP_HELP, end="")
            return EXIT_OK
        from mmo_kernel.mcp.server import main as mesh_main

        return mesh_main(args_list[1:])
    parser = build_parser(_command_of(args_list))
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return _run(args)
    except BrokenPipeError:  # `mmo jobs | head -1`: the reader has all it wanted
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print("mmo: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI boundary: one readable line unless --debug
        if args.debug:
            import traceback

            traceback.print_exc()
        else:
            print(f"mmo: error: {_explained(str(exc))}", file=sys.stderr)
        return EXIT_FAILURE


def _command_of(args: Sequence[str]) -> str | None:
    """The command word of a command line; None when help is asked of ``mmo`` itself."""
    for arg in args:
        if arg in ("-h", "--help", "--version"):
            return None
        if not arg.startswith("-"):
            return arg
    return None


def program() -> None:
    """The ``mmo`` program: ``main``, then exit with its code.

    Exiting, the interpreter's last garbage collection would walk every object the
    imports made (pydantic's schemas, the plugins) only to free memory the exit returns
    anyway: ~60 ms of a 300 ms ``mmo jobs``, and ``mmo mcp`` starts with every agent
    thread. Freezing them first skips that walk; nothing of MMO's waits on it.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


def _run(args) -> int:
    """Run the command as the person who typed it: audit events say ``cli`` and the login."""
    from mmo_kernel.state.actor import acting_as, login_name

    with acting_as("cli", login_name()):
        return int(args.func(args) or 0)


PLAIN_WORDS = (
    ("terminal immutable session", "a finished session cannot be changed; start a new one "
                                   "with `mmo run`"),
)
"""Spec phrases kept verbatim in errors (scripts match them), each followed once by what it
means for the person reading it."""


def _explained(message: str) -> str:
    for phrase, meaning in PLAIN_WORDS:
        if phrase in message and meaning not in message:
            message = f"{message} ({meaning})"
    return message


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
