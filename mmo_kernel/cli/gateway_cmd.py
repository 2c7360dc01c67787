"""``mmo gateway status|start|stop``: the one local model gateway shared by every session."""

from __future__ import annotations

import argparse
from typing import Any

from mmo_kernel.cli.output import RAW, fields, json_flag, print_json


def _show(record: dict[str, Any]) -> None:
    fields((("running", "yes" if record.get("running") else "no"),
            ("healthy", "yes" if record.get("healthy") else "no"),
            ("pid", record.get("pid")), ("url", record.get("url")),
            ("version", record.get("package_version"))))


def run_status(args: argparse.Namespace) -> int:
    from mmo_kernel.gateway.process import gateway_status

    status = gateway_status()
    if args.json:
        print_json(status)
    else:
        _show(status)
    return 0


def run_start(args: argparse.Namespace) -> int:
    from mmo_kernel.gateway.process import ensure_gateway

    record = ensure_gateway()
    if args.json:
        print_json(record)
        return 0
    verb = "already running" if record.get("reused") else "started"
    print(f"gateway {verb}: {record['url']} (pid {record['pid']})")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from mmo_kernel.gateway.process import stop_gateway

    out = stop_gateway()
    if args.json:
        print_json(out)
        return 0
    print(f"gateway stopped (pid {out['pid']})" if out["stopped"] else "gateway was not running")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    gateway = sub.add_parser("gateway", help="the local model gateway", description=(
        "One local HTTP gateway serves every session's agents (it starts on demand with the "
        "first session). Inspect, start or stop it here."))
    commands = gateway.add_subparsers(dest="gateway_command", metavar="COMMAND", required=True)
    for name, func, text, example in (
            ("status", run_status, "is it running and healthy, on which url", "mmo gateway status"),
            ("start", run_start, "start it (or report the running one)", "mmo gateway start"),
            ("stop", run_stop, "stop it (sessions start it again when needed)",
             "mmo gateway stop")):
        parser = commands.add_parser(name, help=text, formatter_class=RAW,
                                     description=f"Gateway {name}: {text}.",
                                     epilog=f"examples:\n  {example}\n  {example} --json")
        json_flag(parser)
        parser.set_defaults(func=func)
