"""The environment an agent process gets (spec 03 "Agent process environment").

The caller's environment passes through (so test knobs reach the
app-server), minus credential-like variables the agent does not need, plus
the credentials its route and tool servers do need, its private
``CODEX_HOME`` and the MMO identity variables its ``mmo_mesh`` server reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from mmo_kernel.config.credentials import credential_values
from mmo_kernel.state.paths import config_dir, state_dir

_SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY|AUTH)", re.I
)


def looks_secret(name: str) -> bool:
    """Heuristic for credential-like variable names the secret filter drops."""
    return bool(_SECRET_NAME.search(name))


def filtered_environment(environ: Mapping[str, str], known_secrets: Iterable[str],
                         needed: Iterable[str]) -> dict[str, str]:
    """``environ`` without credential-like names (and known credential names) not in ``needed``."""
    needed_set = set(needed)
    known = set(known_secrets)
    def keep(name: str) -> bool:
        if name in needed_set:
            return True
        return not (name in known or looks_secret(name) or name.startswith("MMO_CALLER"))

    return {name: value for name, value in environ.items() if keep(name)}


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
    env = filtered_environment(base, known_secrets, needed)
    env.update(values)
    env.update({
        "CODEX_HOME": codex_home,
        "MMO_STATE_DIR": str(state_dir()),
        "MMO_CONFIG_DIR": str(config_dir()),
    })
    env.update(identity)
    return env
