"""What reaches an agent's process: no stray secrets, exactly the credentials it needs."""

from __future__ import annotations

import pytest

from mmo_kernel.sessions.agent_env import agent_environment


def build(environ, needed=(), known=()):
    return agent_environment(codex_home="/h/agent", identity={"MMO_CALLER_AGENT": "lead"},
                             needed_credentials=needed, known_secrets=known, environ=environ)


def test_unneeded_secrets_are_filtered_and_test_knobs_pass_through(mmo_env):
    env = build({"PATH": "/bin", "OPENROUTER_API_KEY": "sk-x", "GITHUB_TOKEN": "g",
                 "FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY": "0.2", "CUSTOM_CRED": "c"},
                known=["CUSTOM_CRED"])
    assert env["PATH"] == "/bin" and env["FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY"] == "0.2"
    for secret in ("OPENROUTER_API_KEY", "GITHUB_TOKEN", "CUSTOM_CRED"):
        assert secret not in env
    assert env["CODEX_HOME"] == "/h/agent" and env["MMO_CALLER_AGENT"] == "lead"
    assert env["MMO_STATE_DIR"] == str(mmo_env.state_dir)


def test_needed_credentials_come_from_env_first_then_credentials_file(mmo_env):
    (mmo_env.config_dir / "credentials.env").write_text("OPENCODE_API_KEY=from-file\nZAI=z\n")
    (mmo_env.config_dir / "credentials.env").chmod(0o600)
    env = build({"OPENCODE_API_KEY": "", "ZAI": "from-env"}, needed=["OPENCODE_API_KEY", "ZAI"])
    assert env["OPENCODE_API_KEY"] == "from-file"
    assert env["ZAI"] == "from-env"


def test_control_characters_in_a_credential_are_refused_without_echoing_it(mmo_env):
    with pytest.raises(RuntimeError, match="prohibited control character") as err:
        build({"OPENCODE_API_KEY": "abc\ndef"}, needed=["OPENCODE_API_KEY"])
    assert "OPENCODE_API_KEY" in str(err.value) and "abc" not in str(err.value)


def test_a_callers_own_mmo_token_never_leaks_into_an_agent(mmo_env):
    env = build({"MMO_CALLER_TOKEN": "parent-token"})
    assert "MMO_CALLER_TOKEN" not in env
