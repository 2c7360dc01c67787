"""credentials.env parsing, permissions and the environment-first lookup."""

import os
import stat

import pytest

from mmo_kernel.config.credentials import (
    credential_value,
    credential_values,
    ensure_credentials_file,
    parse_credentials,
)

SECRET = "s3cr3t-VALUE"


def write_creds(mmo_env, text, mode=0o600):
    path = mmo_env.config_dir / "credentials.env"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def test_parser_grammar(mmo_env):
    write_creds(mmo_env, (
        "# comment\n\n"
        "PLAIN=abc\n"
        "export EXPORTED=def\n"
        "  SPACED = ghi  \n"
        "DOUBLE=\"with spaces # not a comment\"\n"
        "SINGLE='x=y'\n"
        "EQUALS=a=b=c\n"
        "EMPTY=\n"
        "CRLF=value\r\n"
    ))
    assert parse_credentials() == {
        "PLAIN": "abc", "EXPORTED": "def", "SPACED": "ghi",
        "DOUBLE": "with spaces # not a comment", "SINGLE": "x=y", "EQUALS": "a=b=c",
        "EMPTY": "", "CRLF": "value",
    }


@pytest.mark.parametrize("line,message", [
    (f"just-a-{SECRET}", "line 3: malformed line; expected KEY=value"),
    (f"1BAD={SECRET}", "line 3: malformed line"),
    (f"BAD KEY={SECRET}", "line 3: malformed line"),
    (f"QUOTED=\"{SECRET}", "line 3: QUOTED has an unbalanced quote"),
    (f"QUOTED='{SECRET}\"", "line 3: QUOTED has an unbalanced quote"),
    (f"OK={SECRET}", "line 3: duplicate OK \\(first set on line 2\\)"),
])
def test_malformed_lines_name_file_and_line_never_the_value(mmo_env, line, message):
    path = write_creds(mmo_env, f"# header\nOK=1\n{line}\n")
    with pytest.raises(ValueError, match=message) as caught:
        parse_credentials()
    assert str(caught.value).startswith(f"{path}: ")
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602])
def test_loose_permissions_are_refused_with_a_hint(mmo_env, mode):
    path = write_creds(mmo_env, f"KEY={SECRET}\n", mode=mode)
    with pytest.raises(PermissionError, match=rf"run `chmod 600 {path}`") as caught:
        parse_credentials()
    assert f"mode {mode:04o}" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_missing_file_has_no_credentials(mmo_env):
    assert parse_credentials() == {}
    assert credential_value("ANY_KEY", environ={}) is None


def test_environment_wins_and_empty_falls_back(mmo_env):
    write_creds(mmo_env, "A_KEY=from-file\nB_KEY=file-b\n")
    env = {"A_KEY": "from-env", "B_KEY": ""}
    assert credential_value("A_KEY", env) == "from-env"
    assert credential_value("B_KEY", env) == "file-b"
    assert credential_values(["A_KEY", "B_KEY", "C_KEY"], env) == {
        "A_KEY": "from-env", "B_KEY": "file-b"}


def test_default_environment_is_the_process_environment(mmo_env, monkeypatch):
    monkeypatch.setenv("MMO_TEST_CRED", "from-process")
    assert credential_value("MMO_TEST_CRED") == "from-process"


def test_the_file_is_not_read_when_the_environment_has_everything(mmo_env):
    write_creds(mmo_env, "A_KEY=x\n", mode=0o644)
    assert credential_values(["A_KEY"], {"A_KEY": "env"}) == {"A_KEY": "env"}
    with pytest.raises(PermissionError):
        credential_values(["A_KEY", "B_KEY"], {"A_KEY": "env"})


@pytest.mark.parametrize("bad", ["a\nb", "a\x00b", "a\tb", "a\x1bb", "a\x7fb", "a\rb"])
def test_control_characters_in_the_environment_are_prohibited(mmo_env, bad):
    with pytest.raises(RuntimeError, match="credential BAD_KEY contains a prohibited control "
                                           "character") as caught:
        credential_value("BAD_KEY", {"BAD_KEY": bad})
    assert bad not in str(caught.value)


def test_control_characters_in_the_file_are_prohibited(mmo_env):
    write_creds(mmo_env, f"FILE_KEY={SECRET}\x1b[0m\n")
    with pytest.raises(RuntimeError, match="FILE_KEY contains a prohibited control") as caught:
        credential_values(["FILE_KEY"], {})
    assert SECRET not in str(caught.value)


def test_invalid_names_are_refused(mmo_env):
    with pytest.raises(ValueError, match="invalid credential name 'BAD-NAME'"):
        credential_value("BAD-NAME", {})


def test_mmo_creates_a_private_credentials_file(mmo_env, tmp_path, monkeypatch):
    monkeypatch.setenv("MMO_CONFIG_DIR", str(tmp_path / "new-config"))
    path = ensure_credentials_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert parse_credentials() == {}
    path.write_text("KEPT=1\n", encoding="utf-8")
    assert ensure_credentials_file() == path
    assert parse_credentials() == {"KEPT": "1"}
