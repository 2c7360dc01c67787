"""Loading ``runner.toml`` (spec 12 "runner.toml and the project registry").

Every problem is one line naming the file (and the key), raised as ``ConfigError``;
``mmo runner`` exits 1 with it. The file holds the runner token, so it must not be
readable (or writable) by group or others, and the token never appears in an error.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from mmo_kernel.runner.context import Policy, RunnerConfig
from mmo_kernel.state.paths import config_dir

DEFAULT_TEAM_PROFILE = "adaptive-engineering"
"""``team_profile`` when runner.toml names none: settings.toml has no default-profile key,
so the runner uses the built-in team ``mmo demo`` uses."""
TOKEN_PREFIX = "mmo_rt_"
REQUIRED = ("server_url", "token", "client_id", "owner")


class ConfigError(ValueError):
    """A runner.toml problem: one line, naming the file."""


def _check_mode(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read runner config: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: runner config is not a regular file")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        raise ConfigError(f"{path}: runner config must not be readable by others")
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"{path}: runner config must not be writable by others")


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read runner config: {exc.strerror or exc}") from None


def _key_name(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(file)"


def _validation_line(path: Path, exc: ValidationError) -> str:
    error = exc.errors()[0]
    key = _key_name(tuple(error.get("loc") or ()))
    if error.get("type") == "extra_forbidden":
        return f"{path}: unknown key {key!r}"
    if error.get("type") == "missing":
        return f"{path}: missing required key {key!r}"
    message = str(error.get("msg") or "invalid value")
    return f"{path}: invalid value for {key!r}: {message}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_server_url(path: Path, url: str, allow_insecure: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{path}: invalid value for 'server_url': must be http(s)://host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ConfigError(f"{path}: invalid value for 'server_url': must be http(s)://host:port "
                          "(the server's url, without a path)")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise ConfigError(f"{path}: invalid value for 'server_url': bad port") from None
    if parts.scheme == "http" and not _loopback(parts.hostname) and not allow_insecure:
        raise ConfigError(f"{path}: server_url uses http:// to a non-loopback host; use https:// "
                          "or set allow_insecure_transport = true")


def _absolute_paths(path: Path, key: str, values: Any) -> list[Path]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{path}: invalid value for {key!r}: must be a list of absolute paths")
    out = []
    for value in values:
        candidate = Path(value).expanduser()
        if not candidate.is_absolute():
            raise ConfigError(f"{path}: invalid value for {key!r}: {value!r} is not absolute")
        out.append(candidate)
    return out


def _policy(path: Path, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: invalid value for 'policy': must be a table")
    policy = dict(raw)
    if "allowed_roots" in policy:
        # realpath once: a project must resolve inside one of these
        policy["allowed_roots"] = tuple(Path(os.path.realpath(p)) for p in
                                        _absolute_paths(path, "policy.allowed_roots",
                                                        policy["allowed_roots"]))
    if "allowed_executables" in policy:
        policy["allowed_executables"] = tuple(_absolute_paths(
            path, "policy.allowed_executables", policy["allowed_executables"]))
    python = policy.get("python")
    if isinstance(python, str) and not Path(python).expanduser().is_absolute():
        raise ConfigError(f"{path}: invalid value for 'policy.python': {python!r} is not an "
                          "absolute path")
    return policy


def _registry_dir(path: Path, raw: Any) -> Path:
    if raw is None:
        return config_dir() / "projects.d"
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"{path}: invalid value for 'project_registry_dir': must be a path")
    candidate = Path(raw).expanduser()
    return candidate if candidate.is_absolute() else (path.parent / candidate).absolute()


def load_config(file: str | os.PathLike[str]) -> RunnerConfig:
    """The validated runner.toml at ``file``; ``ConfigError`` (one line) otherwise."""
    path = Path(file).expanduser().absolute()
    _check_mode(path)
    data = _read(path)
    for key in REQUIRED:
        if key not in data:
            raise ConfigError(f"{path}: missing required key {key!r}")
    known = set(RunnerConfig.model_fields)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}")
    if isinstance(data.get("policy"), dict):
        extra = sorted(set(data["policy"]) - set(Policy.model_fields))
        if extra:
            raise ConfigError(f"{path}: unknown key 'policy.{extra[0]}'")
    token = data.get("token")
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) < 16:
        raise ConfigError(f"{path}: invalid value for 'token': must be a runner token "
                          f"({TOKEN_PREFIX}...)")
    values = dict(data)
    values["project_registry_dir"] = _registry_dir(path, data.get("project_registry_dir"))
    values["policy"] = _policy(path, data.get("policy"))
    if values.get("transport", "websocket") != "websocket":
        raise ConfigError(f"{path}: invalid value for 'transport': must be \"websocket\" "
                          "(the only transport)")
    try:
        config = RunnerConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_validation_line(path, exc)) from None
    _check_server_url(path, config.server_url, config.allow_insecure_transport)
    if config.team_profile is not None and not config.team_profile.strip():
        raise ConfigError(f"{path}: invalid value for 'team_profile': must name a profile")
    return config


def team_profile(config: RunnerConfig) -> str:
    """The profile worker teams (and every external session) use."""
    return config.team_profile or DEFAULT_TEAM_PROFILE


def check_team_profile(config: RunnerConfig, file: str | os.PathLike[str]) -> None:
    """Compile the team profile once at start-up (with the offline bindings), so a typo
    in ``team_profile`` stops the runner with one line instead of failing every
    ``work_on_project`` later."""
    from mmo_kernel.profiles.snapshots import compile_profile

    try:
        compile_profile(team_profile(config), bindings=team_bindings(config))
    except (ValueError, OSError, RuntimeError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()),
                     type(exc).__name__)
        raise ConfigError(f"{Path(file).expanduser().absolute()}: invalid value for "
                          f"'team_profile' ({team_profile(config)!r}): {first}") from None


def team_bindings(config: RunnerConfig) -> dict[str, str] | None:
    """``offline = true`` binds every agent to ``local_scripted``, as ``mmo run --offline``."""
    return {"*": "local_scripted"} if config.offline else None
