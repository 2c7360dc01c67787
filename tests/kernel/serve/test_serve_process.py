"""The real ``mmo serve`` process (spec 12, "Processes", "Security rules"): server.json,
the admin token, loopback refusal, restarts, graceful signals and no plaintext tokens on
disk."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.serve import (
    RunnerLink,
    admin_token,
    api,
    mmo_command,
    serve_process,
    start_serve_process,
)
from support.waiting import Background, wait_until

from mmo_kernel.cli import main as cli_main

REFUSAL = "refusing to listen on a non-loopback address without --allow-remote"


@pytest.fixture(autouse=True)
def _isolated(mmo_env):
    yield


def _mmo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mmo_command(), *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_server_json_admin_token_and_state_dir_modes(tmp_path: Path) -> None:
    state = tmp_path / "serve"
    with serve_process(state) as server:
        info = server.info
        assert set(info) == {"url", "mcp_url", "runner_url", "pid", "started_at"}
        port = urlsplit(info["url"]).port
        assert info["url"] == f"http://127.0.0.1:{port}" and port not in (0, 8765)
        assert info["mcp_url"] == info["url"] + "/mcp"
        assert info["runner_url"] == f"ws://127.0.0.1:{port}/api/runners/ws"
        assert info["pid"] == server.process.pid
        token = (state / "admin-token").read_text(encoding="utf-8")
        assert token.startswith("mmo_adm_") and token.count("\n") == 1
        assert stat.S_IMODE((state / "admin-token").stat().st_mode) == 0o600
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert api(server.url, token.strip(), "/api/runners", method="GET").status_code == 200
        assert "admin-token" in server.stderr()


def test_state_dir_defaults_to_mmo_state_dir_serve(mmo_env, tmp_path: Path) -> None:
    state = mmo_env.state_dir / "serve"
    process = subprocess.Popen([*mmo_command(), "serve", "--port", "0"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        info = wait_until(lambda: _read_json(state / "server.json"), timeout=60,
                          what="server.json in $MMO_STATE_DIR/serve")
        assert info["pid"] == process.pid
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_a_non_loopback_host_needs_allow_remote(tmp_path: Path) -> None:
    state = tmp_path / "serve"
    result = _mmo("serve", "--host", "0.0.0.0", "--port", "0", "--state-dir", str(state))
    assert result.returncode == 2
    assert result.stderr.strip() == f"mmo: error: {REFUSAL}"
    assert not state.exists()


@pytest.mark.parametrize("host", ["192.0.2.10", "example.com", "::", "10.0.0.1"])
def test_every_non_loopback_address_is_refused(tmp_path: Path, capsys, host: str) -> None:
    state = tmp_path / "serve"
    assert cli_main(["serve", "--host", host, "--port", "0", "--state-dir", str(state)]) == 2
    assert capsys.readouterr().err.strip() == f"mmo: error: {REFUSAL}"
    assert not state.exists()


@pytest.mark.parametrize(("args", "flag"), [
    (["--public-url", "ftp://x"], "--public-url"),
    (["--public-url", "https://u:p@x"], "--public-url"),
    (["--allow-origin", "https://a.example/path"], "--allow-origin"),
    (["--port", "70000"], "--port"),
])
def test_bad_flags_exit_2_with_one_line_naming_the_flag(tmp_path: Path, capsys, args,
                                                        flag) -> None:
    state = tmp_path / "serve"
    assert cli_main(["serve", "--state-dir", str(state), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mmo: error: ") and flag in err
    assert not state.exists()


def test_public_url_shapes_every_issued_url(tmp_path: Path) -> None:
    with serve_process(tmp_path / "serve", "--public-url", "https://mmo.example.com/") as server:
        assert server.info["url"] == "https://mmo.example.com"
        assert server.info["mcp_url"] == "https://mmo.example.com/mcp"
        assert server.info["runner_url"] == "wss://mmo.example.com/api/runners/ws"


def test_restart_keeps_admin_token_users_tokens_and_revocations(tmp_path: Path) -> None:
    state = tmp_path / "serve"
    with serve_process(state) as first:
        admin = admin_token(state)
        assert api(first.url, admin, "/api/users/create", {"username": "alice"}).status_code == 200
        kept = api(first.url, admin, "/api/tokens/create",
                   {"username": "alice", "name": "ops", "scopes": ["admin"]}).json()
        gone = api(first.url, admin, "/api/tokens/create",
                   {"username": "alice", "name": "old", "scopes": ["admin"]}).json()
        api(first.url, admin, "/api/tokens/revoke", {"token_id": gone["token_id"]})
        first_port = urlsplit(first.url).port
    assert first.process.returncode == 0
    assert not (state / "server.json").exists()

    with serve_process(state) as second:
        assert admin_token(state) == admin
        assert "admin-token" not in second.stderr().split("listening")[-1]
        assert api(second.url, admin, "/api/runners", method="GET").status_code == 200
        assert api(second.url, kept["token"], "/api/runners", method="GET").status_code == 200
        assert api(second.url, gone["token"], "/api/runners", method="GET").status_code == 401
        reply = api(second.url, kept["token"], "/api/users/create", {"username": "alice"})
        assert (reply.status_code, reply.json()["error"]) == (409, "already exists")
        assert isinstance(first_port, int)


def test_one_server_per_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "serve"
    with serve_process(state) as server:
        result = _mmo("serve", "--port", "0", "--state-dir", str(state))
        assert result.returncode == 1
        assert result.stderr.strip() == (f"mmo: error: another mmo serve is using state dir "
                                         f"{state} (pid {server.process.pid})")
        assert _read_json(state / "server.json")["pid"] == server.process.pid


def _refusing(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=5).close()
    except OSError:
        return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_accepting_answers_the_in_flight_request_and_exits_0(
        tmp_path: Path, sig: int) -> None:
    state = tmp_path / "serve"
    server = start_serve_process(state)
    try:
        admin = admin_token(state)
        parts = urlsplit(server.url)
        body = json.dumps({"username": "inflight"}).encode()
        conn = socket.create_connection((parts.hostname, parts.port), timeout=60)
        with conn:
            # "Expect: 100-continue": the server answers "100 Continue" once the endpoint
            # reads the body, so the request is in flight before the signal is sent.
            conn.sendall(b"POST /api/users/create HTTP/1.1\r\nHost: x\r\n"
                         + f"Authorization: Bearer {admin}\r\n".encode()
                         + b"Expect: 100-continue\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode())
            interim = b""
            while b"\r\n\r\n" not in interim:
                chunk = conn.recv(1)
                assert chunk, "the server closed the connection"
                interim += chunk
            assert interim.startswith(b"HTTP/1.1 100 "), interim
            server.process.send_signal(sig)
            wait_until(lambda: _refusing(server.url), timeout=60,
                       what="the server to stop accepting connections")
            assert server.process.poll() is None  # still finishing the request in flight
            conn.sendall(body)
            reply = b""
            while not reply.endswith(b"}"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
        assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["user"]["username"] == "inflight"
        assert server.process.wait(timeout=60) == 0
        assert not (state / "server.json").exists()
    finally:
        server.stop()
    accounts = json.loads((state / "accounts.json").read_text(encoding="utf-8"))
    assert "inflight" in accounts["users"]


def test_no_file_the_server_writes_holds_a_plaintext_token(tmp_path: Path) -> None:
    """Users, PATs and runner tokens are on disk as sha256 only; the admin token only in
    admin-token; the log holds none (checked after use, revocation and a restart)."""
    state = tmp_path / "serve"
    issued: list[str] = []
    with serve_process(state) as server:
        admin = admin_token(state)
        api(server.url, admin, "/api/users/create", {"username": "alice"})
        for scopes in (["read", "write"], ["admin"]):
            issued.append(api(server.url, admin, "/api/tokens/create",
                              {"username": "alice", "name": "t", "scopes": scopes}).json()["token"])
        runner = api(server.url, admin, "/api/runner-tokens/create",
                     {"username": "alice", "client_id": "laptop", "name": "t"}).json()
        issued.append(runner["token"])
        api(server.url, issued[1], "/api/runners", method="GET")
        api(server.url, issued[0], "/api/tools/call", {"tool": "list_projects", "params": {}})
        api(server.url, admin, "/api/tokens/revoke", {"token_id": runner["token_id"]})
    with serve_process(state) as again:
        api(again.url, issued[1], "/api/runners", method="GET")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".stderr.log") for p in written)
    assert {"accounts.json", "admin-token"} <= {p.name for p in written}
    for path in written:
        data = path.read_bytes()
        for token in issued:
            assert token.encode() not in data, f"{token[:8]}... in {path}"
        if path.name != "admin-token":
            assert admin.encode() not in data, f"admin token in {path}"
    for path in state.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_serve_help_names_every_flag() -> None:
    result = _mmo("serve", "--help")
    assert result.returncode == 0
    for flag in ("--host", "--port", "--state-dir", "--public-url", "--allow-remote",
                 "--allow-origin"):
        assert flag in result.stdout
    assert os.linesep in result.stdout


def test_sigterm_lets_a_call_forwarded_to_a_runner_get_its_reply(tmp_path: Path) -> None:
    """A tool call waiting on its runner when SIGTERM arrives still gets the runner's reply
    (the runner links stay open until forwarded calls are answered), then the exit is 0."""
    state = tmp_path / "serve"
    server = start_serve_process(state)
    try:
        admin = admin_token(state)
        api(server.url, admin, "/api/users/create", {"username": "alice"})
        pat = api(server.url, admin, "/api/tokens/create",
                  {"username": "alice", "name": "t", "scopes": ["read"]}).json()["token"]
        runner = api(server.url, admin, "/api/runner-tokens/create",
                     {"username": "alice", "client_id": "laptop", "name": "t"}).json()["token"]
        project = {"id": "code", "name": "code", "description": "", "vcs": "none"}
        with RunnerLink(server.info["runner_url"], runner, "laptop", "alice", [project]) as link:
            pending = Background(api, server.url, pat, "/api/tools/call", {
                "tool": "read_files",
                "params": {"project": "runner:laptop:code", "items": [{"path": "a.txt"}]}})
            call = link.receive("call")
            assert (call["tool"], call["arguments"]["project"]) == ("read_files", "code")
            server.process.send_signal(signal.SIGTERM)
            wait_until(lambda: _refusing(server.url), timeout=60,
                       what="the server to stop accepting connections")
            text = "hello\n"
            link.reply(call, {"success": True, "output": {"items": [{"path": "a.txt", "output": {
                "text": text, "read_revision": "sha256:" + "0" * 64, "has_more": False,
                "start_line": 1, "end_line": 1, "total_lines": 1, "file_bytes": len(text)}}]}})
            reply = pending.join()
        assert reply.status_code == 200, reply.text
        envelope = reply.json()
        assert envelope["success"] is True, envelope
        assert envelope["output"]["items"][0]["output"]["text"] == text
        assert server.process.wait(timeout=60) == 0
    finally:
        server.stop()


def test_a_taken_port_fails_with_one_line_and_creates_no_account_files(tmp_path: Path,
                                                                      capsys) -> None:
    state = tmp_path / "serve"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli_main(["serve", "--port", str(port), "--state-dir", str(state)])
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        f"mmo: error: cannot listen on 127.0.0.1:{port}: Address already in use")
    assert not (state / "admin-token").exists() and not (state / "server.json").exists()
