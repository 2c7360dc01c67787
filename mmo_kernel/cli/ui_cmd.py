"""``mmo ui``: every team of this state dir in a browser, served on loopback only.

The web view needs the optional extra (``mmo[ui]``: sse-starlette for the live updates);
without it the command says in one line how to get it and exits 2.
"""

from __future__ import annotations

import argparse
import sys

from mmo_kernel.cli.output import RAW

HINT = "mmo ui: the web view needs the ui extra: pip install 'mmo[ui]' (`make setup` installs it)"
LOOPBACK = "127.0.0.1"

DESCRIPTION = """\
Serve a web view of every team in this state dir on 127.0.0.1: the sessions (filter,
pages), each session's agent tree, timeline, tool calls, audit log and route figures, and
each job's result, patch, trace and prompt, all updated live. From the page you can read,
accept, reject and integrate a job's result and pause, continue, stop or cancel a
session; each action is audited with actor `ui`.

It prints one URL with a fresh random token and opens it in your browser (--no-browser:
only print it). The token is exchanged for a cookie on first use; requests without it,
for another Host, or cross-origin posts are refused (403). Nothing is written to disk."""

EPILOG = """\
examples:
  mmo ui
  mmo ui --port 8787 --no-browser"""


def _has_extra() -> bool:
    try:
        import sse_starlette  # noqa: F401
    except ImportError:
        return False
    return True


def _keepalive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.2 <= value <= 300:
        raise argparse.ArgumentTypeError("--keepalive must be between 0.2 and 300 seconds")
    return value


def run_ui(args: argparse.Namespace) -> int:
    if args.host != LOOPBACK:
        print(f"mmo: error: --host must be {LOOPBACK}: `mmo ui` serves loopback only "
              f"(got {args.host!r})", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"mmo: error: --port must be between 0 and 65535 (got {args.port})",
              file=sys.stderr)
        return 2
    if not _has_extra():
        print(HINT, file=sys.stderr)
        return 2
    from mmo_kernel.webui.server import UIError, serve

    try:
        return serve(args.port, open_browser=not args.no_browser,
                     debug=getattr(args, "debug", False),
                     keepalive=args.keepalive)
    except UIError as exc:
        print(f"mmo: error: {exc}", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ui", help="watch and steer every team in a browser (loopback)",
                            description=DESCRIPTION, epilog=EPILOG, formatter_class=RAW)
    parser.add_argument("--port", type=int, default=8787,
                        help="port on 127.0.0.1 (default 8787; 0 picks a free one)")
    parser.add_argument("--host", default=LOOPBACK,
                        help=f"only {LOOPBACK} is accepted (the view is never served further)")
    parser.add_argument("--no-browser", action="store_true",
                        help="print the URL without opening a browser")
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="log requests' errors with tracebacks on stderr")
    parser.add_argument("--keepalive", type=_keepalive, default=15.0, help=argparse.SUPPRESS)
    parser.set_defaults(func=run_ui)
