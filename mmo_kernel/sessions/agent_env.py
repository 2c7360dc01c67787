"""The environment an agent process gets (spec 03 "Agent process environment").

The caller's environment passes through (so test knobs reach the
app-server), minus credential-like variables the agent does not need (names
that look secret, every credential the catalog or ``credentials.env`` names,
and anything pointing into the config dir), plus the credentials its route
and tool servers do need, its private ``CODEX_HOME`` and the MMO variables
its host and ``mmo_mesh`` server read. What the agent's *shell* sees is
narrower still: the home's ``shell_environment_policy`` drops the credentials,
``MMO_CONFIG_DIR`` and the capabilities (``sessions.homes.SHELL_EXCLUDES``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from mmo_kernel.config.credentials import credential_file_names, credential_values
from mmo_kernel.state import redaction
from mmo_kernel.state.paths import config_dir, credentials_path, state_dir

_SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY|AUTH)", re.I
)


def looks_secret(name: str) -> bool:
    """Heuristic for credential-like variable names the secret filter drops (a superset
    of the names whose values MMO redacts from its files)."""
    return bool(_SECRET_NAME.search(name)) or redaction.looks_secret(name)


def catalog_credential_names() -> set[str]:
    """Every variable the catalog names as a credential (``credential_env``, header envs)."""
    from mmo_kernel.config.catalog_load import load_catalog

    catalog = load_catalog(isolate_fragments=True)
    return {name for route in catalog.routes.values()
            for name in (route.credential_env, *route.env_http_headers.values()) if name}


def _config_roots() -> frozenset[str]:
    """The config dir and the credentials file, as absolute paths."""
    return frozenset({str(config_dir().absolute()), str(credentials_path().absolute())})


def points_into_config_dir(value: str) -> bool:
    """True if a value (or one ``:``-separated part of it) is the config dir or inside it."""
    return _points_into(value, _config_roots())


def _points_into(value: str, roots: frozenset[str]) -> bool:
    for part in value.split(os.pathsep):
        part = part.rstrip("/")
        if any(part == root or part.startswith(root + "/") for root in roots):
            return True
    return False


def filtered_environment(environ: Mapping[str, str], known_secrets: Iterable[str],
                         needed: Iterable[str]) -> dict[str, str]:
    """``environ`` without credential-like names (and known credential names) not in
    ``needed``, and without values that point into the config dir."""
    needed_set = set(needed)
    known = set(known_secrets)
    roots = _config_roots()  # once per environment, not once per variable

    def keep(name: str, value: str) -> bool:
        if name in needed_set:
            return True
        if name in known or looks_secret(name) or name.startswith("MMO_CALLER"):
            return False
        return not _points_into(value, roots)

    return {name: value for name, value in environ.items() if keep(name, value)}


def agent_environment(
    *,
    codex_home: str,
    identity: Mapping[str, str],
    needed_credentials: Iterable[str],
    known_secrets: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Build one agent process's environment.

    ``needed_credentials`` are resolved environment-first, then from
    ``credentials.env``; a value with a control character raises
    ``RuntimeError`` (``prohibited control character``) naming the variable.
    ``identity`` holds the ``MMO_*`` caller variables (root/job ids, token).
    """
    base = dict(os.environ if environ is None else environ)
    needed = list(dict.fromkeys(needed_credentials))
    values = credential_values(needed, base)
    known = {*known_secrets, *catalog_credential_names(), *credential_file_names()}
    redaction.register_names(known)
    env = filtered_environment(base, known, needed)
    env.update(values)
    env.update({
        "CODEX_HOME": codex_home,
        "MMO_STATE_DIR": str(state_dir()),
        "MMO_CONFIG_DIR": str(config_dir()),
    })
    env.update(identity)
    return env
