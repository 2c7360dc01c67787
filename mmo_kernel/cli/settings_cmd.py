"""``mmo settings``: read ``settings.toml`` and change one key without losing its comments."""

from __future__ import annotations

import argparse

from mmo_kernel.cli.output import RAW, json_flag, print_json, table


def run_show(args: argparse.Namespace) -> int:
    from mmo_kernel.config.settings import SETTING_KEYS, load_settings
    from mmo_kernel.state.paths import settings_path

    settings = load_settings()
    if args.json:
        print_json({"path": str(settings_path()), "settings": settings.model_dump()})
        return 0
    table(("key", "value"), [(key, getattr(settings, key)) for key in SETTING_KEYS])
    print(f"file: {settings_path()}")
    return 0


def run_set(args: argparse.Namespace) -> int:
    from mmo_kernel.config.settings import parse_setting_value, set_setting

    settings = set_setting(args.key, parse_setting_value(args.key, args.value))
    if args.json:
        print_json({"key": args.key, "value": getattr(settings, args.key)})
    else:
        print(f"{args.key} = {getattr(settings, args.key)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from mmo_kernel.config.settings import SETTING_KEYS

    parser = sub.add_parser("settings", help="show or change settings.toml",
                            formatter_class=RAW, description=(
        "Show MMO's settings (settings.toml in the config dir, created with commented "
        "defaults on first use) or change one key. A change is validated before it is "
        "written and keeps the file's comments; a bad key or value changes nothing. "
        "Sessions pin what they need when they are created, so a change never redirects "
        "a live session."),
        epilog="examples:\n  mmo settings\n  mmo settings --json\n"
               "  mmo settings set gateway_port 8765\n"
               "  mmo settings set codex_bin /opt/codex/bin/codex")
    json_flag(parser, "print the settings as JSON")
    parser.set_defaults(func=run_show)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    change = actions.add_parser("set", help="change one key", formatter_class=RAW,
                                description="Change one key of settings.toml.",
                                epilog="keys: " + ", ".join(SETTING_KEYS))
    change.add_argument("key", metavar="KEY", help="a settings key (listed below)")
    change.add_argument("value", metavar="VALUE", help="its new value (numbers for numeric keys)")
    json_flag(change, "print the new value as JSON")
    change.set_defaults(func=run_set)
