"""The runner hub against a real runner link (spec 12, "Runner link").

A real uvicorn server (in a thread) serves the hub's WebSocket route with a real
``ServerStore``; the runner side is the real ``LinkClient`` (or, where a misbehaving
runner is needed, a raw ``websockets`` client). Nothing is mocked: a dropped link is a
socket shut down under the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from support.waiting import wait_until
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from mmo_kernel.project_tools.envelope import failure, success
from mmo_kernel.project_tools.link import CHUNK_THRESHOLD_BYTES, MAX_FRAME_BYTES
from mmo_kernel.runner.link_client import LinkClient
from mmo_kernel.serve.hub import RunnerHub
from mmo_kernel.serve.store import ServerStore

PROJECT = {"id": "code", "name": "Code", "description": "a repo", "vcs": "git"}


class HubServer:
    """A hub-only app on a real loopback port; ``restart`` reuses the port."""

    def __init__(self, state_dir: Path, heartbeat_secs: float = 15.0) -> None:
        self.state_dir = state_dir
        self.heartbeat_secs = heartbeat_secs
        self.store = ServerStore(state_dir)
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/api/runners/ws"

    def start(self) -> None:
        self.hub = RunnerHub(self.store, heartbeat_secs=self.heartbeat_secs)
        loop_ready = threading.Event()

        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette):
            self.loop = asyncio.get_running_loop()
            await self.hub.start()
            loop_ready.set()
            yield
            await self.hub.stop()

        app = Starlette(routes=[self.hub.websocket_route], lifespan=lifespan)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=5)
        self._server = server = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
        self._thread.start()
        wait_until(lambda: server.started and loop_ready.is_set(), what="the hub server")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(60)
            assert not self._thread.is_alive(), "the hub server did not stop"
            self._server = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def restart(self) -> None:
        self.stop()
        self.store = ServerStore(self.state_dir)
        self.start()

    def call_soon(self, client_id: str, tool: str, arguments: dict[str, Any], *,
                  user: str = "alice", session: str | None = None,
                  deadline_secs: float = 60.0) -> Future:
        deadline = int((time.time() + deadline_secs) * 1000)
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(
            self.hub.call(client_id, tool, arguments, user, session, deadline), self.loop)

    def call(self, client_id: str, tool: str, arguments: dict[str, Any],
             **kwargs: Any) -> dict[str, Any]:
        return self.call_soon(client_id, tool, arguments, **kwargs).result(90)

    def in_loop(self, function: Any) -> Any:
        """Run ``function()`` in the server's loop (the hub is single-threaded)."""
        assert self.loop is not None

        async def run() -> Any:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def online(self, client_id: str) -> bool:
        return self.in_loop(lambda: self.hub.online(client_id))

    def runner(self, client_id: str) -> dict[str, Any] | None:
        return self.in_loop(lambda: self.hub.runner(client_id))


class FakeTools:
    """The runner's ``handle_call``: records every call; a few tools with known behaviour."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.slow_started = threading.Event()
        self.slow_finished = threading.Event()
        self._lock = threading.Lock()

    def count(self, tool: str) -> int:
        with self._lock:
            return sum(1 for call in self.calls if call["tool"] == tool)

    def __call__(self, call: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls.append(call)
        tool, arguments = call["tool"], call["arguments"]
        if tool == "echo":
            return success({"arguments": arguments, "user": call["user"],
                            "session": call["session"],
                            "deadline_unix_ms": call["deadline_unix_ms"]})
        if tool == "big":
            return success({"data": arguments["data"] * arguments["times"]})
        if tool == "slow":
            self.slow_started.set()
            self.gate.wait(60)
            self.slow_finished.set()
            return success({"slow": "done", "pad": "x" * arguments.get("pad", 0)})
        return failure("unknown_tool", f"unknown tool: {tool}")


@pytest.fixture
def server(mmo_env, tmp_path: Path) -> Iterator[HubServer]:
    hub_server = HubServer(tmp_path / "serve")
    hub_server.store.create_user("alice")
    hub_server.start()
    yield hub_server
    hub_server.stop()


@pytest.fixture
def clients() -> Iterator[list[LinkClient]]:
    started: list[LinkClient] = []
    yield started
    for client in started:
        client.stop()


def enroll(server: HubServer, client_id: str = "laptop", user: str = "alice") -> dict[str, Any]:
    return server.store.create_runner_token(user, client_id, "test runner")


def runner(server: HubServer, clients: list[LinkClient], tools: FakeTools, token: str, *,
           client_id: str = "laptop", owner: str = "alice", start: bool = True,
           **kwargs: Any) -> LinkClient:
    kwargs.setdefault("projects", lambda: [PROJECT])
    client = LinkClient(server.url, token, client_id, owner, handle_call=tools,
                        backoff_initial=0.05, backoff_max=0.2, **kwargs)
    clients.append(client)
    if start:
        client.start()
    return client


def online_runner(server, clients, tools, token, **kwargs) -> LinkClient:
    client = runner(server, clients, tools, token, **kwargs)
    client_id = kwargs.get("client_id", "laptop")
    wait_until(lambda: server.online(client_id) and client.connected.is_set(),
               what="the runner online")
    return client


def test_a_call_reaches_the_runner_and_its_envelope_comes_back(server, clients):
    tools = FakeTools()
    online_runner(server, clients, tools, enroll(server)["token"],
                  live_job_ids=lambda: ["mmo_pjob_aa"])

    envelope = server.call("laptop", "echo", {"project": "code", "n": 1}, session="sess-1")

    assert envelope["success"] is True
    assert envelope["output"]["arguments"] == {"project": "code", "n": 1}
    assert envelope["output"]["user"] == "alice"
    assert envelope["output"]["session"] == "sess-1"
    assert envelope["output"]["deadline_unix_ms"] > 0
    assert tools.count("echo") == 1
    known = server.in_loop(server.hub.known_runners)
    assert [(r["client_id"], r["owner"], r["online"]) for r in known] == [("laptop", "alice", True)]
    assert known[0]["projects"] == [PROJECT]
    assert known[0]["live_job_ids"] == ["mmo_pjob_aa"]
    assert known[0]["last_seen_at"]
    persisted = server.store.runner_registry()["laptop"]
    assert persisted["owner"] == "alice" and persisted["projects"] == [PROJECT]
    assert persisted["live_job_ids"] == ["mmo_pjob_aa"]


def test_a_2_mib_reply_and_a_2_mib_call_travel_chunked_and_byte_exact(server, clients):
    tools = FakeTools()
    online_runner(server, clients, tools, enroll(server)["token"])
    piece = secrets.token_hex(512) + "é\u2603\n\"\\"  # non-ASCII and JSON escapes included
    times = (2 * 1024 * 1024) // len(piece) + 1

    envelope = server.call("laptop", "big", {"data": piece, "times": times})

    assert envelope["success"] is True, envelope
    assert envelope["output"]["data"] == piece * times
    assert len(envelope["output"]["data"].encode()) > 2 * MAX_FRAME_BYTES

    payload = secrets.token_hex(1024 * 1024)  # 2 MiB of arguments: the call is chunked too
    echoed = server.call("laptop", "echo", {"payload": payload})
    assert echoed["output"]["arguments"]["payload"] == payload
    assert len(payload) > CHUNK_THRESHOLD_BYTES
    assert server.online("laptop")


def test_a_bad_token_gets_http_401_before_any_upgrade(server, clients, caplog):
    enroll(server)
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addHandler(caplog.handler)
    try:
        with pytest.raises(InvalidStatus) as raised:
            connect(server.ws_url, additional_headers={"Authorization": "Bearer mmo_rt_wrong"},
                    open_timeout=30)
        wait_until(lambda: not server._server.server_state.tasks, what="the request to end")
    finally:
        uvicorn_log.removeHandler(caplog.handler)
    assert raised.value.response.status_code == 401
    assert raised.value.response.headers["WWW-Authenticate"] == 'Bearer realm="mmo"'
    assert json.loads(raised.value.response.body) == {"success": False, "error": "unauthorized"}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # a 401 is no app error
    with pytest.raises(InvalidStatus) as missing:
        connect(server.ws_url, open_timeout=30)
    assert missing.value.response.status_code == 401

    client = runner(server, clients, FakeTools(), "mmo_rt_wrong")
    wait_until(lambda: client.fatal is not None, what="the runner to give up")
    assert client.fatal.status == 401
    assert client.links_opened == 0
    assert server.in_loop(server.hub.known_runners) == []


def test_a_revoked_runner_token_is_refused_with_401(server, clients):
    grant = enroll(server)
    server.store.revoke_token(grant["token_id"])
    client = runner(server, clients, FakeTools(), grant["token"])
    wait_until(lambda: client.fatal is not None, what="the runner to give up")
    assert client.fatal.status == 401


def test_revoking_the_token_of_a_linked_runner_drops_its_link(server, clients):
    grant = enroll(server)
    client = online_runner(server, clients, FakeTools(), grant["token"])

    server.store.revoke_token(grant["token_id"])

    wait_until(lambda: client.fatal is not None, what="the runner to be dropped")
    assert client.fatal.close_code == 4401
    wait_until(lambda: not server.online("laptop"), what="the runner offline")
    assert server.call("laptop", "echo", {})["output"]["error_kind"] == "runner_unavailable"


@pytest.mark.parametrize("client_id, owner", [("desktop", "alice"), ("laptop", "bob")])
def test_a_hello_naming_another_client_or_owner_is_closed_4403(server, clients, client_id, owner):
    server.store.create_user("bob")
    server.store.create_runner_token("alice", "desktop", "other runner")
    token = enroll(server)["token"]

    client = runner(server, clients, FakeTools(), token, client_id=client_id, owner=owner)

    wait_until(lambda: client.fatal is not None, what="the runner to be refused")
    assert client.fatal.close_code == 4403
    assert server.in_loop(server.hub.known_runners) == []
    assert server.store.runner_registry() == {}


def test_a_second_link_for_the_client_id_replaces_the_first_with_4409(server, clients):
    token = enroll(server)["token"]
    first_tools, second_tools = FakeTools(), FakeTools()
    first = online_runner(server, clients, first_tools, token)

    second = runner(server, clients, second_tools, token)

    wait_until(lambda: first.fatal is not None, what="the first link to be replaced")
    assert first.fatal.close_code == 4409
    wait_until(lambda: second.connected.is_set() and server.online("laptop"),
               what="the second link online")
    assert server.call("laptop", "echo", {})["success"] is True
    assert (first_tools.count("echo"), second_tools.count("echo")) == (0, 1)
    assert first.stopped and first.links_opened == 1  # the replaced runner does not fight back


def test_a_call_to_an_offline_runner_fails_runner_unavailable(server, clients):
    enroll(server)
    envelope = server.call("laptop", "echo", {})
    assert envelope == {"success": False, "error": "runner laptop is offline",
                        "output": {"error_kind": "runner_unavailable", "state_changed": False}}

    client = online_runner(server, clients, FakeTools(), enroll(server, "desktop")["token"],
                           client_id="desktop")
    client.stop()
    wait_until(lambda: not server.online("desktop"), what="the runner offline")
    envelope = server.call("desktop", "echo", {})
    assert envelope["output"] == {"error_kind": "runner_unavailable", "state_changed": False}
    assert server.runner("desktop")["online"] is False


def test_a_link_lost_mid_call_fails_runner_disconnected_and_the_call_is_never_resent(
        server, clients):
    tools = FakeTools()
    client = online_runner(server, clients, tools, enroll(server)["token"])
    pending = server.call_soon("laptop", "slow", {})
    assert tools.slow_started.wait(30)

    client._link.ws.socket.shutdown(socket.SHUT_RDWR)  # fault: the network drops the link

    envelope = pending.result(60)
    assert envelope["success"] is False
    assert envelope["output"] == {"error_kind": "runner_disconnected", "state_changed": "unknown"}
    wait_until(lambda: client.links_opened == 2 and server.online("laptop"),
               what="the runner to reconnect")
    tools.gate.set()
    assert tools.slow_finished.wait(30)
    assert server.call("laptop", "echo", {})["success"] is True  # the new link works
    assert tools.count("slow") == 1


def test_a_slow_call_blocks_neither_other_calls_nor_the_heartbeat(mmo_env, tmp_path, clients):
    server = HubServer(tmp_path / "serve", heartbeat_secs=0.3)
    server.store.create_user("alice")
    server.start()
    try:
        tools = FakeTools()
        client = online_runner(server, clients, tools, enroll(server)["token"])
        slow = server.call_soon("laptop", "slow", {})
        assert tools.slow_started.wait(30)
        for n in range(3):
            assert server.call("laptop", "echo", {"n": n})["output"]["arguments"] == {"n": n}
        time.sleep(2.0)  # well over 3 heartbeat intervals while the slow call runs
        assert not slow.done()
        assert server.online("laptop") and client.links_opened == 1
        tools.gate.set()
        assert slow.result(30) == {"success": True, "output": {"slow": "done", "pad": ""}}
    finally:
        server.stop()


def test_a_call_past_its_deadline_fails_timeout_with_unknown_state(server, clients):
    tools = FakeTools()
    runner_client = online_runner(server, clients, tools, enroll(server)["token"])

    envelope = server.call("laptop", "slow", {"pad": 3 * 1024 * 1024}, deadline_secs=0.3)

    assert envelope["success"] is False
    assert envelope["output"] == {"error_kind": "timeout", "state_changed": "unknown"}
    assert "deadline" in envelope["error"]
    tools.gate.set()
    assert tools.slow_finished.wait(30)
    assert server.call("laptop", "echo", {})["success"] is True  # the late reply is dropped
    assert tools.count("slow") == 1
    assert runner_client.links_opened == 1  # the late (chunked) reply did not break the link


def test_the_runner_reconnects_after_a_server_restart_and_re_announces_live_jobs(
        server, clients):
    live = ["mmo_pjob_01"]
    client = online_runner(server, clients, FakeTools(), enroll(server)["token"],
                           live_job_ids=lambda: list(live))
    assert server.runner("laptop")["live_job_ids"] == ["mmo_pjob_01"]
    port = server.port
    live.append("mmo_pjob_02")

    server.restart()

    assert server.port == port
    wait_until(lambda: server.online("laptop") and client.links_opened == 2,
               what="the runner to reconnect to the restarted server")
    assert server.runner("laptop")["live_job_ids"] == ["mmo_pjob_01", "mmo_pjob_02"]
    assert server.call("laptop", "echo", {})["success"] is True


def test_a_restarted_server_knows_its_runners_as_offline(server, clients):
    client = online_runner(server, clients, FakeTools(), enroll(server)["token"])
    client.stop()
    server.restart()
    record = server.runner("laptop")
    assert record["online"] is False and record["owner"] == "alice"
    assert record["projects"] == [PROJECT]


def test_a_silent_link_is_dropped_after_three_heartbeats(mmo_env, tmp_path, clients):
    server = HubServer(tmp_path / "serve", heartbeat_secs=0.2)
    server.store.create_user("alice")
    server.start()
    try:
        token = enroll(server)["token"]
        hello = {"type": "hello", "protocol": 1, "client_id": "laptop", "owner": "alice",
                 "version": "test", "projects": [PROJECT], "live_job_ids": []}
        with connect(server.ws_url, additional_headers={"Authorization": f"Bearer {token}"},
                     open_timeout=30) as ws:
            ws.send(json.dumps(hello))
            assert json.loads(ws.recv(timeout=30)) == {"type": "welcome", "heartbeat_secs": 0.2}
            assert server.online("laptop")
            frames = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:  # never answer: the server pings, then gives up
                    frames.append(json.loads(ws.recv(timeout=60)))
        assert closed.value.rcvd.code == 4408
        assert {"type": "ping"} in frames
        wait_until(lambda: not server.online("laptop"), what="the silent runner offline")
        assert server.call("laptop", "echo", {})["output"]["error_kind"] == "runner_unavailable"
    finally:
        server.stop()


def test_projects_and_job_event_frames_update_the_registry_and_reach_callbacks(server, clients):
    client = online_runner(server, clients, FakeTools(), enroll(server)["token"])
    seen_projects: list[tuple] = []
    seen_events: list[tuple] = []
    server.in_loop(lambda: server.hub.on_projects(
        lambda client_id, owner, projects: seen_projects.append((client_id, owner, projects))))

    async def on_event(client_id: str, event: dict) -> None:  # async callbacks are awaited
        seen_events.append((client_id, event))

    server.in_loop(lambda: server.hub.on_job_event(on_event))
    data = {"id": "data", "name": "data", "description": "", "vcs": "none"}

    assert client.send_projects([PROJECT, data])
    assert client.send_job_event({"job_id": "mmo_pjob_01", "status": "completed", "exit_code": 0})

    wait_until(lambda: seen_projects and seen_events, what="the callbacks")
    assert seen_projects == [("laptop", "alice", [PROJECT, data])]
    assert seen_events == [("laptop", {"type": "job_event", "job_id": "mmo_pjob_01",
                                       "status": "completed", "exit_code": 0})]
    assert server.runner("laptop")["projects"] == [PROJECT, data]
    assert server.store.runner_registry()["laptop"]["projects"] == [PROJECT, data]


def test_a_malformed_frame_closes_the_link_as_a_protocol_error(server, clients):
    token = enroll(server)["token"]
    hello = {"type": "hello", "protocol": 1, "client_id": "laptop", "owner": "alice",
             "version": "test", "projects": [], "live_job_ids": []}
    with connect(server.ws_url, additional_headers={"Authorization": f"Bearer {token}"},
                 open_timeout=30) as ws:
        ws.send(json.dumps(hello))
        assert json.loads(ws.recv(timeout=30)) == {"type": "welcome", "heartbeat_secs": 15}
        ws.send(json.dumps({"type": "reply", "call_id": "x", "envelope": {"bogus": 1}}))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=60)
    assert closed.value.rcvd.code == 1002
    assert "invalid reply frame" in closed.value.rcvd.reason


def test_the_real_server_app_serves_the_runner_link(mmo_env, tmp_path, clients):
    from support.serve import running_server

    with running_server(tmp_path / "serve") as (base_url, app):
        app.state.store.create_user("alice")
        token = app.state.store.create_runner_token("alice", "laptop", "test")["token"]
        ws_url = base_url.replace("http://", "ws://") + "/api/runners/ws"
        with pytest.raises(InvalidStatus) as raised:
            connect(ws_url, additional_headers={"Authorization": "Bearer mmo_rt_bad"},
                    open_timeout=30)
        assert raised.value.response.status_code == 401
        client = LinkClient(base_url, token, "laptop", "alice", handle_call=FakeTools(),
                            projects=lambda: [PROJECT])
        clients.append(client)
        client.start()
        wait_until(lambda: app.state.hub.online("laptop"), what="the runner online")
        assert app.state.hub.runner("laptop")["projects"] == [PROJECT]
        client.stop()


def test_a_loopback_server_is_dialled_directly_whatever_proxy_the_environment_names(
        server, clients, monkeypatch):
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy",
                 "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    online_runner(server, clients, FakeTools(), enroll(server)["token"])
