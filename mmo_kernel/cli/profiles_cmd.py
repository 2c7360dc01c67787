"""``mmo profiles list|show|validate|compile|clone``: teams as TOML profiles."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mmo_kernel.cli.output import RAW, fields, print_json, table
from mmo_kernel.cli.output import json_flag as _json

OFFLINE_BINDINGS = {"*": "local_scripted"}


def run_list(args: argparse.Namespace) -> int:
    from mmo_kernel.profiles.loading import list_profiles

    profiles = list_profiles()
    if args.json:
        print_json({"profiles": profiles})
        return 0
    table(("id", "origin", "description"),
          [(p["id"], p["origin"], f"ERROR: {p['error']}" if p.get("error") else p["description"])
           for p in profiles])
    return 0


def _route_of(model: str, catalog: Any) -> str:
    if model in catalog.models:
        return catalog.models[model].route
    return model if model in catalog.routes else ""


def agent_rows(doc: Any, catalog: Any) -> list[dict[str, Any]]:
    """The team as plain data: one dict per agent, root first."""
    order = [doc.root_agent] + [a for a in doc.agents if a != doc.root_agent]
    rows = []
    for aid in order:
        spec = doc.agents[aid]
        rows.append({"agent": aid, "root": aid == doc.root_agent, "model": spec.model,
                     "route": _route_of(spec.model, catalog), "reasoning": spec.reasoning,
                     "permissions": spec.permissions, "mode": spec.execution_mode,
                     "can_spawn": list(spec.can_spawn), "contract": spec.output_contract})
    return rows


def run_show(args: argparse.Namespace) -> int:
    from mmo_kernel.config.catalog_load import load_catalog
    from mmo_kernel.profiles.loading import load_profile

    loaded = load_profile(args.profile)
    doc = loaded.profile
    agents = agent_rows(doc, load_catalog(isolate_fragments=True))
    if args.json:
        print_json({"id": doc.id, "origin": loaded.origin, "path": str(loaded.folder),
                    "description": doc.description, "root_agent": doc.root_agent,
                    "agents": agents})
        return 0
    fields((("profile", doc.id), ("origin", loaded.origin), ("path", str(loaded.folder)),
            ("description", doc.description), ("root agent", doc.root_agent)))
    print()
    table(("agent", "model", "route", "permissions", "mode", "can spawn", "contract"),
          [(a["agent"] + (" (root)" if a["root"] else ""), a["model"], a["route"],
            a["permissions"], a["mode"], ", ".join(a["can_spawn"]) or "-",
            a["contract"] or "-") for a in agents])
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from mmo_kernel.profiles.loading import validate_profile

    problems = validate_profile(args.profile)
    if args.json:
        print_json({"profile": args.profile, "valid": not problems, "problems": problems})
    elif problems:
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s) in profile {args.profile}", file=sys.stderr)
    else:
        print(f"profile {args.profile} is valid")
    return 1 if problems else 0


def run_compile(args: argparse.Namespace) -> int:
    from mmo_kernel.profiles.snapshots import compile_profile

    compiled = compile_profile(args.profile, bindings=OFFLINE_BINDINGS if args.offline else None)
    manifest = compiled["manifest"]
    if args.json:
        print_json({"snapshot_hash": manifest["snapshot_hash"],
                    "directory": str(compiled["directory"]), "manifest": manifest})
        return 0
    print(f"snapshot  {manifest['snapshot_hash']}")
    print(f"directory {compiled['directory']}")
    return 0


def run_clone(args: argparse.Namespace) -> int:
    from mmo_kernel.profiles.loading import clone_profile

    path = clone_profile(args.source, args.new_id)
    if args.json:
        print_json({"id": args.new_id, "path": str(path)})
        return 0
    print(path)
    return 0


def _profile_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="ID|PATH",
                        help="a profile id or a path to a profile folder (contains a '/')")



def register(sub: argparse._SubParsersAction) -> None:
    profiles = sub.add_parser("profiles", help="list, show, validate, compile and clone teams",
                              description=(
        "Teams are TOML profiles: built-in ones ship with MMO, yours live in "
        "<config dir>/profiles/<id>/. Clone a built-in one to start your own."))
    commands = profiles.add_subparsers(dest="profiles_command", metavar="COMMAND", required=True)

    listing = commands.add_parser(
        "list", help="every profile with its origin", formatter_class=RAW,
        description="List built-in and user profiles.",
        epilog="examples:\n  mmo profiles list\n  mmo profiles list --json")
    _json(listing)
    listing.set_defaults(func=run_list)

    show = commands.add_parser("show", help="the team: agents, models, routes, permissions",
                               formatter_class=RAW, description=(
        "Show a profile's team: each agent's model and route, permissions, execution mode, "
        "whom it can spawn and its result contract."),
        epilog="examples:\n  mmo profiles show adaptive-engineering\n  mmo profiles show ./my-team")
    _profile_arg(show)
    _json(show)
    show.set_defaults(func=run_show)

    validate = commands.add_parser("validate", help="check a profile; exit 1 on problems",
                                   formatter_class=RAW, description=(
        "Check a profile against the schema, the catalog and the installed drivers. Each "
        "problem is printed as `file: key: message`; the exit code is 1 when there are any."),
        epilog="examples:\n  mmo profiles validate my-team\n"
               "  mmo profiles validate ./profiles/my-team")
    _profile_arg(validate)
    _json(validate)
    validate.set_defaults(func=run_validate)

    compile_ = commands.add_parser("compile", help="write the profile's immutable snapshot",
                                   formatter_class=RAW, description=(
        "Compile a profile (and the catalog entries it uses) into a content-addressed "
        "snapshot and print its hash and directory. Unchanged inputs give the same hash."),
        epilog="examples:\n  mmo profiles compile adaptive-engineering\n"
               "  mmo profiles compile my-team --offline")
    _profile_arg(compile_)
    compile_.add_argument("--offline", action="store_true",
                          help="bind every agent to the local scripted model first")
    _json(compile_)
    compile_.set_defaults(func=run_compile)

    clone = commands.add_parser("clone", help="copy a profile under a new id", formatter_class=RAW,
                                description=(
        "Copy a profile into <config dir>/profiles/NEW_ID with its id rewritten (comments "
        "kept) and print the new folder."),
        epilog="example:\n  mmo profiles clone adaptive-engineering my-team")
    clone.add_argument("source", metavar="SOURCE", help="the profile id or folder to copy")
    clone.add_argument("new_id", metavar="NEW_ID", help="the new profile's id")
    _json(clone)
    clone.set_defaults(func=run_clone)
