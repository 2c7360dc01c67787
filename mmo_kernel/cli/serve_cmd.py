"""``mmo serve``: the project-tools server (accounts, admin API, ``/mcp``, runner hub)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmo_kernel.cli.output import RAW

DESCRIPTION = """\
Run the MMO project-tools server in the foreground (spec 12): user accounts and tokens,
the admin HTTP API, the MCP endpoint POST /mcp for external MCP hosts, and the hub that
`mmo runner` processes dial out to.

Once listening it writes DIR/server.json (url, mcp_url, runner_url, pid, started_at);
with --port 0 read the real port there. The first start writes the bootstrap admin token
to DIR/admin-token (mode 0600); later starts keep it. SIGINT/SIGTERM stop it cleanly.

MMO speaks plain HTTP: for public use put it behind a TLS-terminating reverse proxy,
keep it on loopback (or pass --allow-remote) and set --public-url https://..."""

EPILOG = """\
examples:
  mmo serve
  mmo serve --port 0 --state-dir /tmp/mmo-serve
  mmo serve --public-url https://mmo.example.com --allow-origin https://chatgpt.com"""


def run_serve(args: argparse.Namespace) -> int:
    from mmo_kernel.serve.main import ServeError, ServeOptions, UsageError, serve

    options = ServeOptions(host=args.host, port=args.port,
                           state_dir=Path(args.state_dir) if args.state_dir else None,
                           public_url=args.public_url, allow_remote=args.allow_remote,
                           allow_origins=list(args.allow_origin or []))
    try:
        return serve(options)
    except UsageError as exc:
        print(f"mmo: error: {exc}", file=sys.stderr)
        return 2
    except ServeError as exc:
        print(f"mmo: error: {exc}", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction) -> None:
    from mmo_kernel.serve.main import DEFAULT_HOST, DEFAULT_PORT

    parser = sub.add_parser("serve", help="run the project-tools server for external MCP hosts",
                            description=DESCRIPTION, epilog=EPILOG, formatter_class=RAW)
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}; a non-loopback "
                             "address needs --allow-remote)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="where users, tokens and sessions live "
                             "(default $MMO_STATE_DIR/serve, mode 0700)")
    parser.add_argument("--public-url", metavar="URL",
                        help="the URL hosts and runners reach this server at, e.g. "
                             "https://mmo.example.com behind a TLS proxy")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow listening on a non-loopback address")
    parser.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                        help="an extra browser Origin allowed to call /mcp (repeatable)")
    parser.set_defaults(func=run_serve)
