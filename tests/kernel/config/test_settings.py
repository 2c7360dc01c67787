"""settings.toml: created with defaults, strict reading, comment-preserving edits."""

import os
import stat
from pathlib import Path

import pytest
import tomlkit

from mmo_kernel.config.settings import (
    Settings,
    configured_codex_bin,
    load_settings,
    parse_setting_value,
    resolve_codex_binary,
    set_setting,
)


def settings_file(mmo_env):
    return mmo_env.config_dir / "settings.toml"


def test_first_use_creates_commented_defaults(mmo_env, tmp_path, monkeypatch):
    config = tmp_path / "fresh-config"
    monkeypatch.setenv("MMO_CONFIG_DIR", str(config))
    settings = load_settings()
    assert settings == Settings()
    assert settings.codex_bin == "codex" and settings.auth_link_mode == "shared"
    assert (settings.gateway_host, settings.gateway_port) == ("127.0.0.1", 0)
    assert settings.app_server_lifecycle_timeout_seconds == 1200
    assert settings.wall_timeout_seconds == 3600
    path = config / "settings.toml"
    text = path.read_text(encoding="utf-8")
    assert "# Codex executable" in text and 'codex_bin = "codex"' in text
    assert "schema_version = 1" in text
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_unknown_key_names_file_and_key(mmo_env):
    path = settings_file(mmo_env)
    path.write_text("schema_version = 1\ncodex_binary = \"x\"\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_settings()
    assert str(caught.value) == f"{path}: codex_binary: unknown key"


@pytest.mark.parametrize("line,key", [
    ("gateway_port = \"8080\"", "gateway_port"),
    ("gateway_port = 70000", "gateway_port"),
    ("gateway_port = true", "gateway_port"),
    ("auth_link_mode = \"hardlink\"", "auth_link_mode"),
    ("wall_timeout_seconds = 0", "wall_timeout_seconds"),
    ("codex_bin = \"\"", "codex_bin"),
    ("job_retention_days = 1.5", "job_retention_days"),
])
def test_bad_values_name_file_and_key(mmo_env, line, key):
    path = settings_file(mmo_env)
    path.write_text(f"schema_version = 1\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}: {key}: "):
        load_settings()


@pytest.mark.parametrize("header", ["schema_version = true", "schema_version = 2",
                                    "schema_version = \"1\"", ""])
def test_schema_version_is_strict(mmo_env, header):
    settings_file(mmo_env).write_text(f"{header}\ncodex_bin = \"codex\"\n", encoding="utf-8")
    with pytest.raises(ValueError, match="schema_version: unsupported schema"):
        load_settings()


def test_invalid_toml_names_the_file(mmo_env):
    path = settings_file(mmo_env)
    path.write_text("schema_version = = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}: \(document\): invalid TOML"):
        load_settings()


def test_set_setting_keeps_comments_and_order(mmo_env):
    path = settings_file(mmo_env)
    path.write_text(
        "# my settings\nschema_version = 1\n\n# port chosen by me\ngateway_port = 0  # inline\n"
        "codex_bin = \"codex\"\n",
        encoding="utf-8",
    )
    result = set_setting("gateway_port", 8123)
    assert result.gateway_port == 8123
    assert path.read_text(encoding="utf-8") == (
        "# my settings\nschema_version = 1\n\n# port chosen by me\ngateway_port = 8123  # inline\n"
        "codex_bin = \"codex\"\n"
    )
    set_setting("auth_link_mode", "copy")
    assert path.read_text(encoding="utf-8").endswith('auth_link_mode = "copy"\n')
    assert load_settings().auth_link_mode == "copy"


@pytest.mark.parametrize("key,value,message", [
    ("gateway_port", -1, "gateway_port: Input should be greater than or equal to 0"),
    ("gateway_port", True, "gateway_port: Input should be a valid integer"),
    ("auth_link_mode", "link", "auth_link_mode: Input should be 'shared' or 'copy'"),
    ("codex_bin", None, "codex_bin: cannot store a NoneType value"),
    ("schema_version", 2, "unknown setting 'schema_version'"),
    ("no_such_key", 1, "unknown setting 'no_such_key'; known settings: codex_bin"),
])
def test_bad_edits_change_nothing(mmo_env, key, value, message):
    load_settings()
    path = settings_file(mmo_env)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=message):
        set_setting(key, value)
    assert path.read_bytes() == before


def test_set_setting_refuses_to_edit_an_invalid_file(mmo_env):
    path = settings_file(mmo_env)
    path.write_text("schema_version = 1\nbogus = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bogus: unknown key"):
        set_setting("gateway_port", 1)
    assert path.read_text(encoding="utf-8") == "schema_version = 1\nbogus = 1\n"


def test_parse_setting_value_converts_command_line_text():
    assert parse_setting_value("gateway_port", " 8080 ") == 8080
    assert parse_setting_value("codex_bin", "/opt/codex") == "/opt/codex"
    with pytest.raises(ValueError, match="gateway_port must be an integer, got 'eighty'"):
        parse_setting_value("gateway_port", "eighty")
    with pytest.raises(ValueError, match="unknown setting"):
        parse_setting_value("nope", "1")


def test_codex_bin_env_overrides_settings_without_touching_config(mmo_env, monkeypatch):
    monkeypatch.setenv("MMO_CODEX_BIN", "/from/env/codex")
    assert configured_codex_bin() == "/from/env/codex"
    assert not settings_file(mmo_env).exists()


def test_empty_codex_bin_env_falls_back_to_settings(mmo_env, monkeypatch):
    load_settings()
    set_setting("codex_bin", "/from/settings/codex")
    monkeypatch.setenv("MMO_CODEX_BIN", "")
    assert configured_codex_bin() == "/from/settings/codex"


def test_resolve_codex_binary_returns_an_absolute_executable(mmo_env, tmp_path, monkeypatch):
    tool = tmp_path / "bin" / "my-codex"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    os.chmod(tool, 0o755)
    load_settings()
    set_setting("codex_bin", "my-codex")
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert resolve_codex_binary() == tool.resolve()
    monkeypatch.setenv("MMO_CODEX_BIN", str(tmp_path / "missing-codex"))
    with pytest.raises(FileNotFoundError, match="missing-codex"):
        resolve_codex_binary()


def test_every_setting_is_documented_with_its_default():
    docs = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text(
        encoding="utf-8")
    defaults = Settings()
    for key in Settings.model_fields:
        value = tomlkit.item(getattr(defaults, key)).as_string()
        assert f"| `{key}` |" in docs and f"`{value}`" in docs, key
