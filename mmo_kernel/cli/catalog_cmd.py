"""``mmo catalog routes|models``: the merged catalog and which routes work right now."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mmo_kernel.cli.output import RAW, json_flag, print_json, table


def route_rows(catalog: Any) -> list[dict[str, Any]]:
    """Each route with its availability now (credentials, login) as its driver judges it.

    Routes an isolated load left out are rows too (``disabled``, with the reason).
    """
    from mmo_kernel.sessions.create import route_availability

    availability = route_availability(catalog.routes, {})
    rows = [{"id": rid, "driver": r.driver, "wire_protocol": r.wire_protocol,
             "api_operator": r.api_operator, "credential_env": r.credential_env,
             "models": len(catalog.models_of(rid)), "disabled": False, **availability[rid]}
            for rid, r in catalog.routes.items()]
    rows += [{"id": rid, "driver": None, "wire_protocol": None, "api_operator": None,
              "credential_env": None, "models": 0, "disabled": True, "available": False,
              "reason": reason} for rid, reason in catalog.disabled.items()]
    return sorted(rows, key=lambda row: row["id"])


def _catalog() -> Any:
    """The catalog as runs see it (broken fragments left out), its problems on stderr."""
    from mmo_kernel.config.catalog_load import load_catalog

    catalog = load_catalog(isolate_fragments=True)
    if catalog.problems:
        print("mmo: some catalog entries are disabled until these problems are fixed:",
              file=sys.stderr)
        for found in catalog.problems:
            print(f"  {found}", file=sys.stderr)
    return catalog


def _available(row: dict[str, Any]) -> str:
    if row["available"]:
        return "yes"
    reason = row.get("reason") or "unavailable"
    return f"no: disabled: {reason}" if row["disabled"] else f"no: {reason}"


def run_routes(args: argparse.Namespace) -> int:
    catalog = _catalog()
    rows = route_rows(catalog)
    if args.json:
        print_json({"routes": rows, "problems": list(catalog.problems)})
        return 0
    table(("route", "driver", "wire protocol", "operator", "credential env", "models",
           "available"),
          [(r["id"], r["driver"] or "-", r["wire_protocol"] or "-", r["api_operator"] or "-",
            r["credential_env"] or "-", r["models"], _available(r))
           for r in rows])
    return 0


def _reasoning(model: Any) -> str:
    if not model.reasoning_levels:
        return "none"
    return ", ".join(f"{lvl}*" if lvl == model.default_reasoning else lvl
                     for lvl in model.reasoning_levels)


def run_models(args: argparse.Namespace) -> int:
    catalog = _catalog()
    models = [m for _, m in sorted(catalog.models.items())]
    if args.route:
        catalog.route(args.route)  # an unknown route is an error, not an empty table
        models = [m for m in models if m.route == args.route]
    if args.json:
        print_json({"models": [m.model_dump(mode="json") for m in models]})
        return 0
    table(("model", "route", "upstream id", "maker", "modalities", "reasoning"),
          [(m.id, m.route, m.upstream_id, m.maker, "+".join(m.modalities), _reasoning(m))
           for m in models])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    catalog = sub.add_parser("catalog", help="routes and models MMO knows", description=(
        "The catalog: the built-in routes and models merged with your "
        "<config dir>/catalog.d/*.toml fragments."))
    commands = catalog.add_subparsers(dest="catalog_command", metavar="COMMAND", required=True)

    routes = commands.add_parser("routes", help="routes, their drivers and availability now",
                                 formatter_class=RAW, description=(
        "List routes (ways to reach a provider): driver, wire protocol, operator, the "
        "credential variable they read and whether they are available right now."),
        epilog="examples:\n  mmo catalog routes\n  mmo catalog routes --json")
    json_flag(routes)
    routes.set_defaults(func=run_routes)

    models = commands.add_parser("models", help="models and the routes that serve them",
                                 formatter_class=RAW, description=(
        "List models by key (<route>__<slug>, what a profile's `model` names): route, "
        "upstream id, maker, modalities and reasoning levels (* marks the default)."),
        epilog="examples:\n  mmo catalog models\n  mmo catalog models --route local_scripted")
    models.add_argument("--route", metavar="ROUTE", help="only the models of this route")
    json_flag(models)
    models.set_defaults(func=run_models)
