"""The runner's link client against a scripted WebSocket server (spec 12, "Runner link").

The server here is a real ``websockets`` server on a loopback socket whose handler plays
the server's side frame by frame, so the tests can make it silent, ping it, or bring it
up only after the runner started dialling. The real hub is exercised in
tests/kernel/serve/test_hub.py.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.waiting import wait_until
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from mmo_kernel.project_tools.envelope import success
from mmo_kernel.runner.link_client import (
    Backoff,
    InsecureTransportError,
    LinkClient,
    LinkWatch,
    runner_ws_url,
)

PROJECT = {"id": "code", "name": "Code", "description": "", "vcs": "git"}
TOKEN = "mmo_rt_test-token"


class ScriptedServer:
    """A WebSocket server on a reserved loopback port; ``behave(ws, hello)`` plays each link.

    The socket is bound first and listens only on :meth:`start`, so a runner dialling
    before then is refused (connection refused), exactly like a server not yet up.
    """

    def __init__(self, behave: Callable[[ServerConnection, dict[str, Any]], None]) -> None:
        self.behave = behave
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hellos: queue.Queue[dict[str, Any]] = queue.Queue()
        self.headers: list[str | None] = []
        self.closes: queue.Queue[int | None] = queue.Queue()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self, ws: ServerConnection) -> None:
        self.headers.append(ws.request.headers.get("Authorization"))
        hello = json.loads(ws.recv(timeout=30))
        self.hellos.put(hello)
        try:
            self.behave(ws, hello)
        except ConnectionClosed as exc:
            self.closes.put(exc.rcvd.code if exc.rcvd is not None else None)

    def start(self) -> None:
        self.sock.listen(16)
        self._server = serve(self._handler, sock=self.sock)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            assert self._thread is not None
            self._thread.join(30)
        self.sock.close()


def welcome(ws: ServerConnection, heartbeat: float = 15.0) -> None:
    ws.send(json.dumps({"type": "welcome", "heartbeat_secs": heartbeat}))


def frames_until_closed(ws: ServerConnection, sink: list[dict[str, Any]]) -> None:
    while True:
        sink.append(json.loads(ws.recv(timeout=60)))


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    made: list[ScriptedServer] = []
    yield made
    for server in made:
        server.stop()


@pytest.fixture
def clients() -> Iterator[list[LinkClient]]:
    made: list[LinkClient] = []
    yield made
    for client in made:
        client.stop()


def make_client(clients: list[LinkClient], url: str, handle_call: Any = None,
                **kwargs: Any) -> LinkClient:
    kwargs.setdefault("projects", lambda: [PROJECT])
    client = LinkClient(url, TOKEN, "laptop", "alice",
                        handle_call=handle_call or (lambda call: success({})),
                        backoff_initial=0.05, backoff_max=0.2, **kwargs)
    clients.append(client)
    return client


def test_the_runner_dials_with_its_token_and_says_hello(servers, clients):
    server = ScriptedServer(lambda ws, hello: (welcome(ws), frames_until_closed(ws, [])))
    servers.append(server)
    server.start()
    client = make_client(clients, server.url, live_job_ids=lambda: ["mmo_pjob_7"],
                         version="9.9")
    client.start()

    hello = server.hellos.get(timeout=30)

    assert hello == {"type": "hello", "protocol": 1, "client_id": "laptop", "owner": "alice",
                     "version": "9.9", "projects": [PROJECT], "live_job_ids": ["mmo_pjob_7"]}
    assert server.headers == [f"Bearer {TOKEN}"]
    wait_until(client.connected.is_set, what="the welcome")
    assert client.heartbeat_secs == 15.0


def test_a_runner_started_before_the_server_keeps_dialling_until_it_is_up(servers, clients):
    server = ScriptedServer(lambda ws, hello: (welcome(ws), frames_until_closed(ws, [])))
    servers.append(server)
    client = make_client(clients, server.url)
    client.start()
    wait_until(lambda: client.last_error is not None, what="a refused dial")
    assert "Connection" in client.last_error or "refused" in client.last_error.lower()
    assert not client.connected.is_set()

    server.start()

    wait_until(client.connected.is_set, what="the runner to reach the late server")
    assert client.links_opened == 1 and client.fatal is None


def test_the_runner_pings_and_answers_pings(servers, clients):
    seen: list[dict[str, Any]] = []

    def behave(ws: ServerConnection, hello: dict[str, Any]) -> None:
        welcome(ws, heartbeat=0.25)
        ws.send(json.dumps({"type": "ping"}))
        while True:
            frame = json.loads(ws.recv(timeout=60))
            seen.append(frame)
            if frame == {"type": "ping"}:
                ws.send(json.dumps({"type": "pong"}))

    server = ScriptedServer(behave)
    servers.append(server)
    server.start()
    client = make_client(clients, server.url)
    client.start()

    wait_until(lambda: {"type": "pong"} in seen and seen.count({"type": "ping"}) >= 5,
               what="the runner's pong and its own pings")
    assert client.links_opened == 1  # a pinging, answering server keeps the link


def test_a_silent_server_is_dropped_after_three_heartbeats_and_redialled(servers, clients):
    links: list[list[dict[str, Any]]] = []

    def behave(ws: ServerConnection, hello: dict[str, Any]) -> None:
        welcome(ws, heartbeat=0.1)
        links.append([])
        frames_until_closed(ws, links[-1])  # read everything, never answer

    server = ScriptedServer(behave)
    servers.append(server)
    server.start()
    client = make_client(clients, server.url)
    client.start()

    server.hellos.get(timeout=30)
    assert server.closes.get(timeout=60) == 4408
    assert {"type": "ping"} in links[0]  # it pinged before giving up
    server.hellos.get(timeout=30)  # and dialled again with a new hello


def test_each_call_runs_in_a_worker_and_its_envelope_is_sent_back(servers, clients):
    replies: queue.Queue[dict[str, Any]] = queue.Queue()
    gate = threading.Event()

    def handle_call(call: dict[str, Any]) -> dict[str, Any]:
        if call["tool"] == "slow":
            gate.wait(60)
        if call["tool"] == "broken":
            raise RuntimeError("boom /home/secret/path")
        return success({"tool": call["tool"], "arguments": call["arguments"]})

    def behave(ws: ServerConnection, hello: dict[str, Any]) -> None:
        welcome(ws)
        for n, tool in enumerate(["slow", "fast", "broken"]):
            ws.send(json.dumps({"type": "call", "call_id": f"c{n}", "tool": tool,
                                "arguments": {"n": n}, "user": "alice", "session": None,
                                "deadline_unix_ms": 0}))
        while True:
            frame = json.loads(ws.recv(timeout=60))
            if frame["type"] == "reply":
                replies.put(frame)

    server = ScriptedServer(behave)
    servers.append(server)
    server.start()
    client = make_client(clients, server.url, handle_call=handle_call)
    client.start()

    first = replies.get(timeout=30)
    second = replies.get(timeout=30)
    assert {first["call_id"], second["call_id"]} == {"c1", "c2"}  # the slow one still runs
    fast = first if first["call_id"] == "c1" else second
    broken = second if fast is first else first
    assert fast["envelope"] == {"success": True,
                                "output": {"tool": "fast", "arguments": {"n": 1}}}
    assert broken["envelope"]["success"] is False
    assert broken["envelope"]["output"]["state_changed"] == "unknown"
    assert broken["envelope"]["error"] == "broken failed on the runner: RuntimeError"
    gate.set()
    assert replies.get(timeout=30) == {"type": "reply", "call_id": "c0", "envelope": {
        "success": True, "output": {"tool": "slow", "arguments": {"n": 0}}}}


def test_stop_closes_the_link_and_dials_no_more(servers, clients):
    server = ScriptedServer(lambda ws, hello: (welcome(ws), frames_until_closed(ws, [])))
    servers.append(server)
    server.start()
    client = make_client(clients, server.url)
    client.start()
    wait_until(client.connected.is_set, what="the link")

    client.stop()

    assert server.closes.get(timeout=30) == 1000
    assert client.stopped and not client.connected.is_set()
    assert server.hellos.qsize() == 1
    assert client.send_job_event({"job_id": "mmo_pjob_1", "status": "running"}) is False


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:8765", "ws://127.0.0.1:8765/api/runners/ws"),
    ("http://localhost:8765/", "ws://localhost:8765/api/runners/ws"),
    ("http://[::1]:9", "ws://[::1]:9/api/runners/ws"),
    ("https://mmo.example.com", "wss://mmo.example.com/api/runners/ws"),
    ("https://example.com/mmo/", "wss://example.com/mmo/api/runners/ws"),
])
def test_the_link_url_is_the_ws_form_of_server_url(url, expected):
    assert runner_ws_url(url) == expected


def test_plain_http_to_a_remote_host_is_refused_unless_allowed():
    with pytest.raises(InsecureTransportError, match="allow_insecure_transport"):
        runner_ws_url("http://mmo.example.com:8765")
    with pytest.raises(InsecureTransportError):
        LinkClient("http://10.0.0.5:8765", TOKEN, "laptop", "alice",
                   handle_call=lambda call: success({}))
    assert runner_ws_url("http://mmo.example.com:8765", allow_insecure_transport=True) == \
        "ws://mmo.example.com:8765/api/runners/ws"
    with pytest.raises(InsecureTransportError, match="server_url must be"):
        runner_ws_url("ftp://example.com")


def test_backoff_doubles_to_30_seconds_with_jitter_and_resets():
    backoff = Backoff()
    bases = [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    waits = [backoff.next() for _ in bases]
    for wait, base in zip(waits, bases, strict=True):
        assert base / 2 <= wait <= base
    assert len({round(w, 6) for w in waits[-3:]}) > 1  # jittered, not lockstep
    backoff.reset()
    assert backoff.next() <= 0.5


def test_a_link_that_drops_between_two_looks_still_reads_as_a_drop(servers, clients):
    """The runner suspends its sessions on every drop, even one shorter than its poll."""

    def behave(ws: ServerConnection, hello: dict[str, Any]) -> None:
        welcome(ws)
        if len(server.headers) == 1:  # the first link ends before anyone looks
            ws.close(1012, "service restart")
            return
        frames_until_closed(ws, [])

    server = ScriptedServer(behave)
    servers.append(server)
    server.start()
    client = make_client(clients, server.url)
    watch = LinkWatch(client)
    client.start()
    wait_until(lambda: client.links_opened == 2 and client.connected.is_set(),
               what="the re-dialled link")

    assert watch.changes() == [False, True]
    assert watch.changes() == []

    client.stop()
    wait_until(lambda: client.links_closed == 2, what="the stopped link to count as ended")
    assert watch.changes() == [False]
