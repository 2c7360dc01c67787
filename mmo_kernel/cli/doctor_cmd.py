"""``mmo doctor``: is this machine ready to run a team? One line per check.

Each check returns ``ok``, ``warn`` (a run can start, something may bite
later) or ``fail`` (a run would be refused or break); ``mmo doctor`` exits 1
when any check fails. Nothing is started or changed (a probe file is created
and removed in the state and config dirs when they exist), except that
``--reindex`` rebuilds the listing index from the records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from mmo_kernel.cli.output import RAW, json_flag, print_json, table

Status = Literal["ok", "warn", "fail"]


class Check(BaseModel):
    """One line of ``mmo doctor``; ``--json`` prints these."""

    name: str
    status: Status
    detail: str


def check_codex() -> Check:
    from mmo_kernel.config.settings import resolve_codex_binary
    from mmo_kernel.hosts.codex_cli import PINNED_CODEX_VERSION

    try:
        path = resolve_codex_binary()
    except FileNotFoundError as exc:
        return Check(name="codex", status="fail", detail=str(exc))
    if path.name == "mmo-codex-standin":
        return Check(name="codex", status="ok", detail=f"{path} (the offline stand-in)")
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=20)
        version = (done.stdout.strip().split() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name="codex", status="fail", detail=f"{path} does not run: {exc}")
    if version == PINNED_CODEX_VERSION:
        return Check(name="codex", status="ok", detail=f"{path} ({version}, the pinned version)")
    return Check(name="codex", status="warn",
                 detail=f"{path} ({version}); MMO is tested on {PINNED_CODEX_VERSION}")


def check_git() -> Check:
    git = shutil.which("git")
    if git is None:
        return Check(name="git", status="fail",
                     detail="git is not on PATH (writers work in git worktrees)")
    missing = [key for key in ("user.name", "user.email")
               if subprocess.run([git, "config", key], capture_output=True,
                                 stdin=subprocess.DEVNULL, timeout=20).returncode != 0]
    if missing:
        return Check(name="git", status="warn",
                     detail=f"no git {' and '.join(missing)}: integrated patches cannot be "
                            f"committed (git config --global {missing[0]} ...)")
    return Check(name="git", status="ok", detail="git and an identity are set")


def check_sandbox() -> Check:
    """Codex's workspace-write sandbox: bubblewrap (bundled) needs user namespaces on Linux."""
    if sys.platform == "darwin":
        found = Path("/usr/bin/sandbox-exec").exists()
        return Check(name="sandbox", status="ok" if found else "warn",
                     detail="sandbox-exec " + ("is present" if found else "is missing"))
    limit = Path("/proc/sys/user/max_user_namespaces")
    try:
        allowed = int(limit.read_text().strip()) > 0
    except (OSError, ValueError):
        return Check(name="sandbox", status="warn", detail=f"cannot read {limit}")
    if allowed:
        return Check(name="sandbox", status="ok", detail="user namespaces are available")
    return Check(name="sandbox", status="warn",
                 detail="user namespaces are disabled: Codex's workspace-write sandbox "
                        "cannot start (sysctl user.max_user_namespaces)")


def _writable(name: str, directory: Path) -> Check:
    """A probe file in ``directory``; a dir that does not exist yet needs a writable parent."""
    if not directory.exists():
        parent = next((p for p in directory.parents if p.exists()), Path("/"))
        if parent.is_dir() and os.access(parent, os.W_OK):
            return Check(name=name, status="ok", detail=f"{directory} will be created")
        return Check(name=name, status="fail",
                     detail=f"{directory} cannot be created: {parent} is not a writable dir")
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".mmo-doctor-"):
            pass
    except OSError as exc:
        return Check(name=name, status="fail",
                     detail=f"{directory} is not writable: {exc.strerror or exc}")
    return Check(name=name, status="ok", detail=f"{directory} is writable")


def check_state_dir() -> Check:
    from mmo_kernel.state.paths import state_dir

    return _writable("state dir", state_dir())


def check_config_dir() -> Check:
    from mmo_kernel.state.paths import config_dir

    return _writable("config dir", config_dir())


def check_gateway_port() -> Check:
    from mmo_kernel.config.settings import load_settings
    from mmo_kernel.gateway import gateway_status

    settings = load_settings()
    where = f"{settings.gateway_host}:{settings.gateway_port}"
    status = gateway_status()
    if settings.gateway_port == 0:
        return Check(name="gateway port", status="ok",
                     detail=f"gateway_port = 0: the gateway takes a free port on "
                            f"{settings.gateway_host}")
    if status.get("running"):
        return Check(name="gateway port", status="ok",
                     detail=f"{where} is MMO's gateway (pid {status.get('pid')})")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((settings.gateway_host, settings.gateway_port))
        except OSError as exc:
            return Check(name="gateway port", status="fail",
                         detail=f"{where} is taken by another program ({exc.strerror}); "
                                "mmo settings set gateway_port PORT")
    return Check(name="gateway port", status="ok", detail=f"{where} is free")


def check_catalog() -> Check:
    """A broken fragment disables only its own routes (a warning); no catalog at all fails."""
    from mmo_kernel.config.catalog_load import fragment_paths, load_catalog

    try:
        catalog = load_catalog(isolate_fragments=True)
    except (ValueError, RuntimeError) as exc:
        return Check(name="catalog", status="fail", detail=str(exc))
    detail = (f"{len(catalog.routes)} routes, {len(catalog.models)} models, "
              f"{len(fragment_paths())} fragment(s)")
    if catalog.problems:
        return Check(name="catalog", status="warn",
                     detail=f"{detail}; left out: {'; '.join(catalog.problems)}")
    return Check(name="catalog", status="ok", detail=detail)


def check_routes() -> Check:
    from mmo_kernel.cli.catalog_cmd import route_rows
    from mmo_kernel.config.catalog_load import load_catalog

    try:
        rows = route_rows(load_catalog(isolate_fragments=True))
    except (ValueError, RuntimeError) as exc:
        return Check(name="routes", status="fail", detail=str(exc))
    ready = [r["id"] for r in rows if r["available"]]
    missing = [f"{r['id']} ({r.get('reason') or 'unavailable'})" for r in rows
               if not r["available"]]
    detail = f"available: {', '.join(ready) or 'none'}"
    if missing:
        detail += f"; not available: {', '.join(missing)}"
    return Check(name="routes", status="ok" if ready else "fail", detail=detail)


CHECKS: tuple[Callable[[], Check], ...] = (
    check_codex, check_git, check_sandbox, check_state_dir, check_config_dir,
    check_gateway_port, check_catalog, check_routes,
)


def _run(check: Callable[[], Check]) -> Check:
    """A check that breaks is a failed check, never a doctor that stops."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - reported as that check's failure
        name = check.__name__.removeprefix("check_").replace("_", " ")
        return Check(name=name, status="fail", detail=str(exc))


def reindex() -> tuple[Check, dict[str, int] | None]:
    """``--reindex``: rebuild the listing index from the records (the one change doctor makes)."""
    from mmo_kernel.jobs.indexed import rebuild_index

    try:
        counts = rebuild_index()
    except Exception as exc:  # noqa: BLE001 - reported as the index check's failure
        return Check(name="index", status="fail", detail=f"cannot rebuild: {exc}"), None
    detail = (f"rebuilt from {counts['sessions']} session and {counts['jobs']} job records"
              + (f"; {counts['unreadable']} unreadable (listed as such)"
                 if counts["unreadable"] else ""))
    return Check(name="index", status="warn" if counts["unreadable"] else "ok",
                 detail=detail), counts


def run_doctor(args: argparse.Namespace) -> int:
    rebuilt, counts = reindex() if args.reindex else (None, None)
    checks = [_run(check) for check in CHECKS]
    if rebuilt is not None:
        checks.insert(0, rebuilt)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print_json({"ok": not failed, "checks": [c.model_dump() for c in checks],
                    **({"reindex": counts} if args.reindex else {})})
    else:
        table(("check", "status", "detail"), [(c.name, c.status, c.detail) for c in checks])
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check that this machine can run a team",
                            formatter_class=RAW, description=(
        "Check what a run needs: the Codex CLI (found, version, pinned or not), git and "
        "its identity, the sandbox the platform needs, writable state and config dirs, "
        "a free gateway port, a valid catalog and which routes have credentials. One "
        "line per check: ok, warn or fail; exits 1 when a check fails. --reindex also "
        "rebuilds the listing index from the records."),
        epilog="examples:\n  mmo doctor\n  mmo doctor --json\n  mmo doctor --reindex")
    doctor.add_argument("--reindex", action="store_true",
                        help="rebuild the listing index (<state>/index.sqlite3) from the "
                             "session and job records first, and report the counts")
    json_flag(doctor)
    doctor.set_defaults(func=run_doctor)


__all__ = ["CHECKS", "Check", "register", "run_doctor"]
