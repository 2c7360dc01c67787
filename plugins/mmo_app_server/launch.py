"""How an app-server process is started: argv, and a spawn that leads its own group.

The app-server must lead its own process group (``start_new_session``) so
retiring it can signal every child a tool left behind. Its stderr is piped to
a thread of the host that appends it, line by line and with every known
credential value redacted, to the log file; the thread drains the pipe all the
time, so a chatty server never blocks on it. A stdio app-server dies with its
host anyway (its stdin closes), so it never writes to a pipe nobody reads.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from mmo_kernel.host_api import pump_redacted


def app_server_argv(codex_binary: str | os.PathLike[str], *,
                    config_overrides: Mapping[str, str] | None = None,
                    listen: str | None = None) -> list[str]:
    """``<codex> app-server [--listen URL] [-c key=value ...]`` (values are TOML literals)."""
    argv = [os.fspath(codex_binary), "app-server"]
    if listen is not None:
        argv += ["--listen", listen]
    for key, value in (config_overrides or {}).items():
        if not key or "=" in key:
            raise ValueError(f"config override key {key!r} must be a non-empty dotted key")
        argv += ["-c", f"{key}={value}"]
    return argv


def spawn_app_server(argv: Sequence[str], *, cwd: str | os.PathLike[str],
                     env: Mapping[str, str],
                     stderr_path: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` with piped stdin/stdout as a new process-group leader (``pgid == pid``)."""
    if not argv or not all(isinstance(part, str) and part for part in argv):
        raise ValueError("app-server argv must be a non-empty list of non-empty strings")
    if not Path(cwd).is_dir():
        raise FileNotFoundError(f"app-server working directory {os.fspath(cwd)!r} does not exist")
    argv = list(argv)
    if os.sep in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = os.path.abspath(argv[0])  # relative to the caller, not to the child's cwd
    if stderr_path is not None:  # refuse a symlinked log before anything starts
        os.close(os.open(stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                         0o600))
    popen = subprocess.Popen(  # noqa: S603 - argv comes from MMO, never a shell
        argv, cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stderr_path is None else subprocess.PIPE,
        start_new_session=True, close_fds=True,
    )
    if stderr_path is not None:
        assert popen.stderr is not None
        pump_redacted(popen.stderr, stderr_path, name=f"app-server-stderr-{popen.pid}")
    return popen


__all__ = ["app_server_argv", "spawn_app_server"]
