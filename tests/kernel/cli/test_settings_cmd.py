"""``mmo settings``: show the settings, change one key, refuse bad ones without a change."""

from __future__ import annotations

from .conftest import mmo, mmo_json, one_line_error


def test_settings_show_set_and_refuse(mmo_env):
    shown = mmo_json("settings")
    assert shown["settings"]["gateway_port"] == 0
    path = mmo_env.config_dir / "settings.toml"
    assert shown["path"] == str(path)
    table = mmo("settings").stdout.splitlines()
    assert table[0].split() == ["KEY", "VALUE"]
    assert any(line.split() == ["auth_link_mode", "shared"] for line in table)

    assert mmo_json("settings", "set", "gateway_port", "8765") == {
        "key": "gateway_port", "value": 8765}
    text = path.read_text()
    assert "gateway_port = 8765" in text and "# Gateway port; 0 picks a free one." in text

    one_line_error(mmo("settings", "set", "gateway_port", "soon"), "must be an integer")
    one_line_error(mmo("settings", "set", "colour", "red"), "unknown setting 'colour'")
    one_line_error(mmo("settings", "set", "auth_link_mode", "borrow"), "'shared' or 'copy'")
    assert path.read_text() == text  # nothing changed by the refusals
    assert mmo_json("settings")["settings"]["auth_link_mode"] == "shared"
