"""No credential value in evidence: real Codex runs a root and a worker that hunt for secrets,
then every file under the state and config dirs is scanned (issue 13, item 8).

Planted: ``OPENROUTER_API_KEY`` (a standard name) and ``ACME_WIDGET_PASSPHRASE`` (a
non-standard name a catalog route names) in ``credentials.env``; ``ACME_HEADER_PASS`` (a
non-standard header credential of that route) and ``MY_SERVICE_TOKEN`` in the environment
of the process that starts MMO.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from mmo_kernel.api import run_root_exec
from mmo_kernel.jobs.records import read_job_record

from .conftest import JOB_LAB, OFFLINE, completed_items, mesh_step, script

pytestmark = pytest.mark.real_codex
IN_FILE = ("OPENROUTER_API_KEY", "ACME_WIDGET_PASSPHRASE")
IN_ENV = ("ACME_HEADER_PASS", "MY_SERVICE_TOKEN")
ACME_ROUTE = """schema_version = 1

[routes.acme_widget]
name = "Acme widget"
driver = "codex_custom"
api_operator = "acme"
access_product = "acme_api"
wire_protocol = "openai_chat"
base_url = "https://example.invalid/v1"
credential_env = "ACME_WIDGET_PASSPHRASE"
env_http_headers = { "X-Acme" = "ACME_HEADER_PASS" }

[models.acme_widget__w1]
route = "acme_widget"
upstream_id = "w1"
maker = "acme"
modalities = ["text"]
reasoning_levels = []
"""


@pytest.fixture
def planted(mmo_env, monkeypatch, tmp_path) -> dict[str, str]:
    values = {name: f"pl4nted-{name.lower()}-{secrets.token_hex(10)}" for name in IN_FILE + IN_ENV}
    credentials = mmo_env.config_dir / "credentials.env"
    credentials.write_text("".join(f"{name}={values[name]}\n" for name in IN_FILE))
    os.chmod(credentials, 0o600)
    for name in IN_ENV:
        monkeypatch.setenv(name, values[name])
    (mmo_env.config_dir / "catalog.d").mkdir()
    (mmo_env.config_dir / "catalog.d" / "10-acme.toml").write_text(ACME_ROUTE)
    # a project note an agent may read, holding the environment's secrets
    (tmp_path / "notes.txt").write_text(" ".join(values[name] for name in IN_ENV) + "\n")
    return values


def commands(events_path: str | Path) -> list[dict]:
    return completed_items(events_path, "commandExecution")


def output_of(events_path: str | Path, needle: str) -> str:
    [item] = [c for c in commands(events_path) if needle in c.get("command", "")]
    return item.get("aggregatedOutput") or ""


def leaks(roots: list[Path], values: dict[str, str], skip: set[Path]) -> list[str]:
    """``file: NAME`` for every file under ``roots`` (not in ``skip``) holding a value."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path in skip or path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            found += [f"{path}: {name}" for name, value in values.items()
                      if value.encode() in data]
    return found


def codex_own_files(session: dict) -> set[Path]:
    """Files Codex itself wrote in the agents' homes (MMO writes only what the record names)."""
    own = set()
    for home in session["homes"].values():
        written = {Path(home[key]) for key in ("config_toml", "agents_md", "orchestration_skill",
                                                "model_catalog_json")}
        written |= {Path(p) for p in home.get("native_agent_files", {}).values()}
        own |= {p for p in Path(home["home"]).rglob("*") if p.is_file() and p not in written}
    return own


def assert_shell_env_is_clean(env_text: str, config_dir: Path) -> None:
    variables = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    assert variables.get("PATH") and variables.get("MMO_ROOT_SESSION_ID")  # a real env dump
    assert "MMO_CONFIG_DIR" not in variables
    assert not [name for name, value in variables.items() if str(config_dir) in value]
    assert not [name for name in variables if name.startswith("MMO_CALLER_TOKEN")]


def test_agent_shells_hold_no_credential_and_no_path_to_the_config_dir(
        mmo_env, workspace, planted):
    worker = script("shell env | sort", "say worker looked", intro="Look around.")
    prompt = script(
        "shell env | sort",
        'try shell cat "$MMO_CONFIG_DIR/credentials.env"',
        "try shell tr '\\0' '\\n' < /proc/$PPID/environ",
        'shell echo "[$OPENROUTER_API_KEY][$ACME_WIDGET_PASSPHRASE][$ACME_HEADER_PASS]'
        '[$MY_SERVICE_TOKEN]"',
        mesh_step("spawn", "agent_spawn", {"agent": "plain", "task": worker}),
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        'result: mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        'say {"job": "{{spawn.job_id}}", "worker": "{{result.content}}"}',
        intro="Look for credentials.")
    out = run_root_exec(JOB_LAB, workspace, prompt, 120, bindings=OFFLINE)
    assert out["status"] == "completed", out["result"]
    said = json.loads(out["result"])
    assert said["worker"] == "worker looked"  # the mesh still works: spawn, wait, result
    job = read_job_record(said["job"])
    assert job["status"] == "completed"

    assert_shell_env_is_clean(output_of(out["events_path"], "env | sort"), mmo_env.config_dir)
    assert_shell_env_is_clean(output_of(job["events_path"], "env | sort"), mmo_env.config_dir)
    assert "No such file" in output_of(out["events_path"], "credentials.env")
    assert output_of(out["events_path"], "echo").strip() == "[][][][]"
    assert "MMO_CONFIG_DIR=" not in output_of(out["events_path"], "/proc/")  # nor its parent's
    # the mesh server found the real config dir (it never fell back to a default one)
    for default in (Path(os.environ["XDG_CONFIG_HOME"]) / "mmo",
                    Path(os.environ["HOME"]) / ".config" / "mmo"):
        assert not default.exists()
    # nothing anywhere holds a value: not even the files Codex writes itself
    skip = {mmo_env.config_dir / "credentials.env"}
    assert leaks([mmo_env.state_dir, mmo_env.config_dir], planted, skip) == []


def test_credentials_an_agent_prints_are_redacted_from_every_file_mmo_writes(
        mmo_env, workspace, planted, tmp_path):
    credentials = mmo_env.config_dir / "credentials.env"
    notes = tmp_path / "notes.txt"
    worker = script(f"shell cat {credentials}", "say worker read: {{!step1}}", intro="Read.")
    prompt = script(
        f"shell cat {credentials} {notes}",
        mesh_step("spawn", "agent_spawn", {"agent": "plain", "task": worker}),
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        'result: mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        "say job {{spawn.job_id}} read {{step1}} worker {{result.content}}",
        intro="Read the credentials by their absolute path.")
    out = run_root_exec(JOB_LAB, workspace, prompt, 120, bindings=OFFLINE)
    assert out["status"] == "completed", out["result"]
    said = out["result"]
    job = read_job_record(said.split()[1])
    assert job["status"] == "completed"
    # the agents did print the values (through redaction, what MMO kept says so)...
    printed = output_of(out["events_path"], "cat ")
    for name in planted:
        assert f"[redacted:{name}]" in printed
    assert "worker worker read: OPENROUTER_API_KEY=[redacted:OPENROUTER_API_KEY]" in said
    assert "[redacted:ACME_WIDGET_PASSPHRASE]" in output_of(job["events_path"], "cat ")
    # ...yet no file MMO wrote holds one, and every JSON file is still JSON
    session = out["session"]
    skip = {credentials} | codex_own_files(session)
    assert leaks([mmo_env.state_dir, mmo_env.config_dir], planted, skip) == []
    for path in mmo_env.state_dir.rglob("*.json"):
        if path not in skip and path.is_file():
            json.loads(path.read_text())
    for path in mmo_env.state_dir.rglob("*.jsonl"):
        if path not in skip:
            for line in path.read_text().splitlines():
                json.loads(line)


def test_a_patch_is_the_users_code_and_is_integrated_verbatim(mmo_env, workspace, planted):
    """Redaction never edits a writer's patch: a file the agent copies a secret into arrives."""
    credentials = mmo_env.config_dir / "credentials.env"
    worker = script("shell mkdir -p src", f"shell cp {credentials} src/creds.txt",
                    "shell cat src/creds.txt", "goal_complete", "say copied",
                    intro="Copy the credentials.")
    prompt = script(
        mesh_step("spawn", "agent_spawn", {
            "agent": "implementation_specialist", "task_kind": "implement",
            "mode": "workspace-write", "write_scopes": ["src/"], "task": worker}),
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        'mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        'mcp mmo_mesh.agent_result_accept {"job_id": "{{spawn.job_id}}", "reason": "ok"}',
        'mcp mmo_mesh.agent_patch_integrate {"job_id": "{{spawn.job_id}}", "reason": "ok"}',
        "goal_complete", "say {{spawn.job_id}}", intro="Get the credentials copied.")
    out = run_root_exec("adaptive-engineering", workspace, prompt, 120, bindings=OFFLINE)
    assert out["status"] == "completed", out["result"]
    job = read_job_record(out["result"].strip())
    assert job["result_state"] == "integrated"
    assert (workspace / "src" / "creds.txt").read_text() == credentials.read_text()
    from mmo_kernel.jobs.records import job_file

    patch_files = {job_file(job["job_id"], "patch.diff"), job_file(job["job_id"], "patch.json")}
    for path in patch_files:
        assert all(planted[name] in path.read_text() for name in IN_FILE)
    # everything else MMO wrote is redacted, the worker's output of the file included
    assert "[redacted:OPENROUTER_API_KEY]" in output_of(job["events_path"], "cat src/creds.txt")
    skip = {credentials} | codex_own_files(out["session"]) | patch_files
    assert leaks([mmo_env.state_dir, mmo_env.config_dir], planted, skip) == []
