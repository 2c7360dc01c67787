"""``mmo plugins``: installed plugins and the drivers they register per concern."""

from __future__ import annotations

import argparse

from mmo_kernel.cli.output import json_flag, print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plugins",
        help="list installed plugins and their drivers",
        description=(
            "List every plugin registered under the `mmo.plugins` entry-point group "
            "(built-in and third-party alike), with its distribution, version and the "
            "drivers it provides for each concern."
        ),
    )
    json_flag(p)
    p.set_defaults(func=run)


def plugins_report() -> dict:
    from mmo_kernel.plugin.drivers import CONCERNS
    from mmo_kernel.plugin.manager import plugin_system

    system = plugin_system()
    return {
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "drivers": info.drivers,
            }
            for info in system.plugins()
        ],
        "drivers": {concern: system.registry.names(concern) for concern in CONCERNS},
    }


def run(args: argparse.Namespace) -> int:
    report = plugins_report()
    if args.json:
        print_json(report)
        return 0
    rows = []
    for plugin in report["plugins"]:
        drivers = "; ".join(
            f"{concern}: {', '.join(names)}" for concern, names in plugin["drivers"].items()
        )
        rows.append((plugin["name"], plugin["distribution"], plugin["version"], drivers))
    table(("plugin", "distribution", "version", "drivers"), rows)
    return 0
