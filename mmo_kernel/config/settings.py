"""``settings.toml`` in the config dir: user settings (spec 02).

Created with commented defaults on first use. ``set_setting`` edits the file
with tomlkit so the user's comments and key order survive, and validates the
whole result first: a bad value changes nothing. Problems are reported as
``<file>: <key>: <message>``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mmo_kernel.state.files import MMO_SCHEMA_VERSION, atomic_write_text
from mmo_kernel.state.paths import ensure_private_dir, settings_path
from mmo_kernel.state.records import is_exact_int

CODEX_BIN_ENV = "MMO_CODEX_BIN"
AUTO_CODEX_BIN = "codex"
"""``codex_bin``'s default: find Codex (the checkout's pinned CLI, else ``codex`` on PATH)."""
SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The checkout MMO runs from (for a pip install, site-packages, which has no ``.codex-cli``)."""


class Settings(BaseModel):
    """Every key ``settings.toml`` may hold; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: int = Field(default=MMO_SCHEMA_VERSION, description="Format of this file.")
    codex_bin: str = Field(
        default=AUTO_CODEX_BIN,
        description='Codex executable: a name on PATH or a path; "codex" finds the pinned '
        "CLI of an MMO checkout, else codex on PATH. MMO_CODEX_BIN overrides it. Resolved "
        "and pinned per session when the session is created.",
    )
    auth_link_mode: Literal["shared", "copy"] = Field(
        default="shared",
        description='How agent homes get auth.json for codex_builtin routes: "shared" '
        '(symlink to your CODEX_HOME/auth.json) or "copy" (a private 0600 copy).',
    )
    gateway_host: str = Field(
        default="127.0.0.1", description="Address the local model gateway binds."
    )
    gateway_port: int = Field(
        default=0, ge=0, le=65535, description="Gateway port; 0 picks a free one."
    )
    gateway_idle_exit_seconds: int = Field(
        default=600, ge=0,
        description="The gateway exits after this many seconds without a request and without "
        "a live session (one whose host runs); the next session starts it again. 0: never.",
    )
    app_server_lifecycle_timeout_seconds: int = Field(
        default=1200, gt=0,
        description="Longest wait, in seconds, for one app-server lifecycle step.",
    )
    wall_timeout_seconds: int = Field(
        default=3600, gt=0,
        description="Default wall-clock limit, in seconds, of a non-interactive root run.",
    )
    job_retention_days: int = Field(
        default=14, ge=1, description="`mmo clean` removes terminal jobs older than this many days."
    )
    session_retention_days: int = Field(
        default=30, ge=1,
        description="`mmo clean` removes terminal sessions older than this many days.",
    )
    resource_pools: dict[str, Annotated[int, Field(gt=0)]] = Field(
        default_factory=dict,
        description='Units per shared pool (resource_lock_key), e.g. { "opencode-go" = 2 }; '
        "an unlisted pool holds the admitting profile's max_active_agents.",
    )

    @field_validator("schema_version")
    @classmethod
    def _schema(cls, value: int) -> int:
        if value != MMO_SCHEMA_VERSION:
            raise ValueError(f"unsupported schema version {value} (expected {MMO_SCHEMA_VERSION})")
        return value

    @field_validator("codex_bin", "gateway_host")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        if not value.strip() or value != value.strip():
            raise ValueError("must be a non-empty value without surrounding spaces")
        return value


SETTING_KEYS: tuple[str, ...] = tuple(k for k in Settings.model_fields if k != "schema_version")
"""The keys ``set_setting`` accepts, in file order."""


def _problem(path: Path, key: str, message: str) -> str:
    return f"{path}: {key or '(document)'}: {message}"


def _validate(data: dict[str, Any], path: Path) -> Settings:
    problems = []
    if "schema_version" not in data:
        problems.append(_problem(path, "schema_version",
                                 f"unsupported schema: required key is missing "
                                 f"(use {MMO_SCHEMA_VERSION})"))
    elif not is_exact_int(data["schema_version"]):
        problems.append(_problem(path, "schema_version",
                                 f"unsupported schema version {data['schema_version']!r} "
                                 f"(expected the int {MMO_SCHEMA_VERSION})"))
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if key == "schema_version" and problems:
                continue
            message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(_problem(path, key, message.removeprefix("Value error, ")))
    if problems:
        raise ValueError("\n".join(problems))
    return settings


def default_settings_text() -> str:
    """The commented ``settings.toml`` written on first use."""
    lines = [
        "# MMO settings. Edit by hand or with `mmo settings set KEY VALUE`.",
        "# Every key is optional except schema_version; unknown keys are errors.",
        "",
        f"schema_version = {MMO_SCHEMA_VERSION}",
    ]
    defaults = Settings()
    for key in SETTING_KEYS:
        field = Settings.model_fields[key]
        value = _toml_item(getattr(defaults, key)).as_string()
        lines += ["", f"# {field.description}", f"{key} = {value}"]
    return "\n".join(lines) + "\n"


def _toml_item(value: Any) -> Any:
    """A TOML item for ``value``; tables inline, so they stay one ``key = ...`` line."""
    import tomlkit  # only writing needs it; every `mmo` command's parser imports this module

    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update(value)
        return table
    return tomlkit.item(value)


def _read_text(path: Path) -> str:
    if not path.exists():
        ensure_private_dir(path.parent)
        atomic_write_text(path, default_settings_text(), mode=0o600)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(_problem(path, "", f"not UTF-8 text ({exc.reason})")) from None


def load_settings() -> Settings:
    """The validated settings; creates ``settings.toml`` with defaults on first use."""
    path = settings_path()
    text = _read_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(_problem(path, "", f"invalid TOML: {exc}")) from None
    return _validate(data, path)


def parse_setting_value(key: str, text: str) -> Any:
    """Convert a command-line string to the type ``key`` holds (ints for numeric keys)."""
    _check_key(key)
    if Settings.model_fields[key].annotation is int:
        try:
            return int(text.strip())
        except ValueError:
            raise ValueError(f"setting {key} must be an integer, got {text!r}") from None
    return text


def _check_key(key: str) -> None:
    if key not in SETTING_KEYS:
        raise ValueError(f"unknown setting {key!r}; known settings: {', '.join(SETTING_KEYS)}")


def set_setting(key: str, value: Any) -> Settings:
    """Change one setting in ``settings.toml``, keeping comments and order.

    The edited document is validated before it is written; an unknown key
    or a bad value raises ``ValueError`` and leaves the file unchanged.
    """
    import tomlkit

    _check_key(key)
    load_settings()  # creates the file, and refuses to edit a file that is already invalid
    path = settings_path()
    document = tomlkit.parse(path.read_text(encoding="utf-8"))
    try:
        document[key] = _toml_item(value)
    except (TypeError, ValueError):
        raise ValueError(
            _problem(path, key, f"cannot store a {type(value).__name__} value in TOML")
        ) from None
    settings = _validate(document.unwrap(), path)
    atomic_write_text(path, tomlkit.dumps(document), mode=0o600)
    return settings


def configured_codex_bin() -> str:
    """The Codex executable: ``MMO_CODEX_BIN`` if set, else ``settings.toml``'s ``codex_bin``."""
    explicit = os.environ.get(CODEX_BIN_ENV, "")
    return explicit if explicit else load_settings().codex_bin


def resolve_codex_binary(project_root: Path | None = None) -> Path:
    """The native Codex executable every command uses, found one way for all of them.

    In order: ``MMO_CODEX_BIN``; ``settings.toml``'s ``codex_bin`` when set to
    anything but its default ``codex``; the pinned CLI of this source checkout
    (``.codex-cli/``, what ``make setup`` installs); ``codex`` on ``PATH``. An npm
    launcher resolves to the native binary it wraps. Sessions pin the result.
    """
    from mmo_kernel.hosts.codex_cli import project_codex

    explicit = os.environ.get(CODEX_BIN_ENV, "")
    if explicit:
        return _native(explicit, CODEX_BIN_ENV)
    configured = load_settings().codex_bin
    if configured != AUTO_CODEX_BIN:
        return _native(configured, "settings.toml codex_bin")
    pinned = project_codex(project_root or SOURCE_ROOT)
    return pinned if pinned is not None else _native(AUTO_CODEX_BIN, "PATH")


def _native(executable: str, origin: str) -> Path:
    from mmo_kernel.hosts.codex_cli import PINNED_CODEX_VERSION, resolve_native

    try:
        return resolve_native(executable)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"codex executable {executable!r} ({origin}) was not found; set {CODEX_BIN_ENV} to "
            f"a Codex executable, run `mmo settings set codex_bin PATH`, or install Codex "
            f"{PINNED_CODEX_VERSION} (`npm install -g @openai/codex@{PINNED_CODEX_VERSION}`; "
            "in an MMO checkout `make setup` installs it into .codex-cli/)") from None
