"""Credential values are redacted from every file MMO writes, and JSON stays JSON (issue 13, 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import wait_until

import mmo_kernel.config.credentials  # noqa: F401 - registers credentials.env, as in every MMO process
from mmo_kernel.state import redaction
from mmo_kernel.state.audit import append_audit, append_jsonl, read_jsonl
from mmo_kernel.state.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from mmo_kernel.state.processes import process_matches, spawn_detached

TOKEN = "tok-3f9a1c77e2b04d5e"
KEY = "sk-or-v1-a8c1d2e3f4"


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    """Names and values registered by earlier tests of this process do not count here."""
    monkeypatch.setattr(redaction, "_names", set())
    monkeypatch.setattr(redaction, "_values", {})
    monkeypatch.setattr(redaction, "_cache", None)


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)  # a non-standard name: the heuristic finds it
    return TOKEN


def write_credentials(config_dir: Path, text: str) -> Path:
    path = config_dir / "credentials.env"
    path.write_text(text)
    os.chmod(path, 0o600)
    return path


def test_a_secret_named_variable_is_redacted_from_text_json_and_logs(tmp_path, secret_env):
    atomic_write_text(tmp_path / "result.md", f"the agent printed {TOKEN}\n")
    atomic_write_json(tmp_path / "record.json", {"note": f"x{TOKEN}y", TOKEN: [TOKEN, 3]})
    append_jsonl(tmp_path / "events.jsonl", {"message": {"text": f"echo {TOKEN}"}})
    append_audit(tmp_path / "audit.jsonl", "said", "run-1", text=TOKEN)
    marker = "[redacted:MY_SERVICE_TOKEN]"
    assert (tmp_path / "result.md").read_text() == f"the agent printed {marker}\n"
    assert json.loads((tmp_path / "record.json").read_text()) == {
        "note": f"x{marker}y", marker: [marker, 3]}
    assert read_jsonl(tmp_path / "events.jsonl") == [{"message": {"text": f"echo {marker}"}}]
    assert read_jsonl(tmp_path / "audit.jsonl")[0]["text"] == marker
    for name in ("result.md", "record.json", "events.jsonl", "audit.jsonl"):
        assert TOKEN not in (tmp_path / name).read_text()


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "acme_api_key", "DB_PASSWORD", "X_SECRET_Y",
                                  "SVC_PASSWD", "VENDOR_CREDENTIAL"])
def test_every_secret_looking_name_counts_whatever_its_case(tmp_path, monkeypatch, name):
    monkeypatch.setenv(name, "value-of-" + name)
    atomic_write_text(tmp_path / "out.txt", f"value-of-{name}")
    assert (tmp_path / "out.txt").read_text() == f"[redacted:{name}]"


def test_credentials_env_values_are_redacted_whatever_their_names(mmo_env, tmp_path):
    write_credentials(mmo_env.config_dir,
                      'export ACME_WIDGET_PASS="widget-pass-77"\nOPENROUTER_API_KEY=' + KEY + "\n"
                      "BROKEN LINE\n")  # a malformed line does not hide the others
    atomic_write_text(tmp_path / "out.txt", f"{KEY} / widget-pass-77")
    assert (tmp_path / "out.txt").read_text() == (
        "[redacted:OPENROUTER_API_KEY] / [redacted:ACME_WIDGET_PASS]")
    # an edited file is read again
    write_credentials(mmo_env.config_dir, "ROTATED=rotated-value-1\n")
    atomic_write_text(tmp_path / "out.txt", "rotated-value-1")
    assert (tmp_path / "out.txt").read_text() == "[redacted:ROTATED]"


def test_a_catalog_credential_name_is_redacted_though_it_looks_harmless(mmo_env, tmp_path,
                                                                        monkeypatch):
    from mmo_kernel.config.catalog_load import load_catalog

    folder = mmo_env.config_dir / "catalog.d"
    folder.mkdir()
    (folder / "10-acme.toml").write_text(
        'schema_version = 1\n[routes.acme_widget]\nname = "Acme"\ndriver = "codex_custom"\n'
        'api_operator = "acme"\naccess_product = "acme_api"\nwire_protocol = "openai_chat"\n'
        'base_url = "https://example.invalid/v1"\ncredential_env = "ACME_WIDGET_PASSPHRASE"\n'
        'env_http_headers = { "X-Acme" = "ACME_HEADER_PASS" }\n')
    monkeypatch.setenv("ACME_WIDGET_PASSPHRASE", "passphrase-xyz-1")
    monkeypatch.setenv("ACME_HEADER_PASS", "header-pass-xyz-2")
    atomic_write_text(tmp_path / "before.txt", "passphrase-xyz-1 header-pass-xyz-2")
    assert "passphrase-xyz-1" in (tmp_path / "before.txt").read_text()  # nobody named them yet
    load_catalog(isolate_fragments=True)
    atomic_write_text(tmp_path / "after.txt", "passphrase-xyz-1 header-pass-xyz-2")
    assert (tmp_path / "after.txt").read_text() == (
        "[redacted:ACME_WIDGET_PASSPHRASE] [redacted:ACME_HEADER_PASS]")


def test_short_values_paths_and_mmo_capabilities_are_left_alone(tmp_path, monkeypatch,
                                                                 secret_env):
    monkeypatch.setenv("SHORT_TOKEN", "1234567")  # under MIN_SECRET_LENGTH
    monkeypatch.setenv("SOME_KEY_DIR", str(tmp_path))  # an existing path
    monkeypatch.setenv("MMO_CALLER_TOKEN", "capability-token-abcdef")  # read back by MMO
    kept = f"1234567 {tmp_path}/x capability-token-abcdef"
    atomic_write_text(tmp_path / "out.txt", f"{kept} {TOKEN}")
    assert (tmp_path / "out.txt").read_text() == f"{kept} [redacted:MY_SERVICE_TOKEN]"


def test_json_text_stays_valid_whatever_the_secret_holds(tmp_path, monkeypatch):
    tricky = 'p"q\\r/ü-é,]}{'
    monkeypatch.setenv("TRICKY_PASSWORD", tricky)
    monkeypatch.setenv("DIGITS_TOKEN", "nabcdefgh")  # could follow a backslash: "\n" + "abcdefgh"
    value = {"a": f"<{tricky}>", "n": 12345678, "nl": "x\nabcdefgh", "list": [tricky]}
    for ensure_ascii in (True, False):
        text = json.dumps(value, ensure_ascii=ensure_ascii, indent=1)
        atomic_write_text(tmp_path / "doc.json", text)
        written = (tmp_path / "doc.json").read_text()
        assert json.loads(written) == {"a": "<[redacted:TRICKY_PASSWORD]>", "n": 12345678,
                                       "nl": "x\nabcdefgh", "list": ["[redacted:TRICKY_PASSWORD]"]}
        assert written.startswith('{\n "a"')  # the layout is kept
    lines = "".join(json.dumps({"i": i, "t": tricky}) + "\n" for i in range(3))
    atomic_write_text(tmp_path / "log.jsonl", lines)
    assert [json.loads(line)["t"] for line in (tmp_path / "log.jsonl").read_text().splitlines()
            ] == ["[redacted:TRICKY_PASSWORD]"] * 3


def test_a_multi_line_secret_is_redacted_whole_and_line_by_line(tmp_path, monkeypatch):
    pem = ("-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n"
           "-----END KEY-----")
    monkeypatch.setenv("DEPLOY_PRIVATE_KEY", pem)
    atomic_write_text(tmp_path / "whole.txt", f"[{pem}]")
    atomic_write_text(tmp_path / "line.txt", "got AQEFAASCBKcwggSjAgEAAoIB only")
    assert (tmp_path / "whole.txt").read_text() == "[[redacted:DEPLOY_PRIVATE_KEY]]"
    assert (tmp_path / "line.txt").read_text() == "got [redacted:DEPLOY_PRIVATE_KEY] only"


def test_user_content_and_binary_data_are_written_verbatim(tmp_path, secret_env):
    binary = b"\xff\xfe" + TOKEN.encode()
    atomic_write_bytes(tmp_path / "blob.bin", binary)
    atomic_write_bytes(tmp_path / "text.bin", b"utf-8 " + TOKEN.encode())
    atomic_write_text(tmp_path / "patch.diff", f"+API = '{TOKEN}'\n", redact=False)
    atomic_write_json(tmp_path / "patch.json", {"diff": TOKEN}, redact=False)
    assert (tmp_path / "blob.bin").read_bytes() == binary
    assert (tmp_path / "text.bin").read_bytes() == b"utf-8 [redacted:MY_SERVICE_TOKEN]"
    assert TOKEN in (tmp_path / "patch.diff").read_text()
    assert json.loads((tmp_path / "patch.json").read_text()) == {"diff": TOKEN}


def test_redacting_twice_changes_nothing(tmp_path, secret_env):
    once = redaction.redact_document(f'{{"t": "{TOKEN}"}}')
    assert redaction.redact_document(once) == once == '{"t": "[redacted:MY_SERVICE_TOKEN]"}'


def test_the_gateway_request_log_redacts_every_known_credential(tmp_path, secret_env):
    from mmo_kernel.gateway.request_log import RequestLog

    log = RequestLog(tmp_path / "requests.jsonl")
    log.write({"route": "r", "error": f"upstream said {TOKEN} and hdr-value-1"}, ["hdr-value-1"])
    log.close()
    [line] = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert json.loads(line)["error"] == "upstream said [redacted:MY_SERVICE_TOKEN] and [redacted]"


def test_a_detached_python_process_logs_redacted(tmp_path, secret_env):
    """spawn_detached runs ``python -m`` modules with redacted stdio: their logs hold no value."""
    (tmp_path / "chatty.py").write_text(
        "import os, sys\nprint('out', os.environ['MY_SERVICE_TOKEN'])\n"
        "sys.stderr.write('err ' + os.environ['MY_SERVICE_TOKEN'])\n"  # no newline: at exit
        "raise SystemExit(3)\n")
    log = tmp_path / "chatty.log"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    pid, token = spawn_detached([sys.executable, "-m", "chatty"], cwd=tmp_path, env=env,
                                stdout=log, stderr=log)
    wait_until(lambda: not process_matches(pid, token), what="the process to exit")
    text = log.read_text()
    assert "out [redacted:MY_SERVICE_TOKEN]\n" in text and "err [redacted:MY_SERVICE_TOKEN]" in text
    assert TOKEN not in text


def test_a_child_stderr_pumped_to_a_log_is_redacted(tmp_path, secret_env):
    """The pump an app-server's (or tool server's) stderr goes through."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, sys\nfor i in range(3): "
         "sys.stderr.write(f'{i} ' + os.environ['MY_SERVICE_TOKEN'] + chr(10))"],
        stderr=subprocess.PIPE)
    assert child.stderr is not None
    pump = redaction.pump_redacted(child.stderr, tmp_path / "stderr.log")
    child.wait()
    pump.join(timeout=30)
    assert (tmp_path / "stderr.log").read_text() == "".join(
        f"{i} [redacted:MY_SERVICE_TOKEN]\n" for i in range(3))


def test_looking_up_secrets_is_cheap_enough_for_every_event_line(tmp_path, secret_env):
    """Not a wall-clock bound: the redactor is rebuilt only when what it knows changes."""
    first = redaction.redactor()
    assert redaction.redactor() is first
    os.environ["ANOTHER_TOKEN"] = "another-token-1"
    try:
        assert redaction.redactor() is not first
    finally:
        del os.environ["ANOTHER_TOKEN"]
